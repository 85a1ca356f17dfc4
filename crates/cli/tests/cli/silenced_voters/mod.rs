//! Issue 33's attacks, run as real processes: `gnomon serve` on loopback,
//! the liars' clocks shifted by libfaketime, and an on-path attacker (a
//! UDP forwarder per server, `gnomon_testkit::Forwarder`) that drops the
//! answers of the honest servers it chooses.
//!
//! A rule that counts whoever answers lets that attacker choose who votes:
//! silence three honest servers of five and the two liars left are a
//! majority of those answering. The rule these tests hold gnomon to counts
//! the list's n voters and assumes at most f of them lie (sync's and
//! query's default f = max(1, ⌊(n − 1)/3⌋), relay's and verify-proof's
//! ⌊(n − 1)/2⌋ of the pinned keys): a consensus needs at least 2f + 1
//! distinct voters answering, and identities sharing an address, a key or
//! an operator are one voter. So:
//!
//! * three honest servers of five silenced: no consensus, no step, no
//!   floor raised, and the output says what it assumed;
//! * the same five with every answer delivered: the true time, the two
//!   liars named and nobody honest;
//! * one liar of four: named, and no step;
//! * one lying machine listed twice (an Ed25519 and an ML-DSA-44 identity
//!   on one port): one voter, so the two honest machines hold the time;
//! * a relayed proof from two liars and one honest server, two honest
//!   ones silenced: the device is not given the liars' time.
//!
//! The servers answer from an unsynchronized kernel clock, whose own error
//! estimate (±16 s here) is their radius: liars are placed far enough away
//! that their intervals miss every honest one (`+70`, `+40`), except in
//! the proof, where overlapping is the point. The forwarders pass UDP
//! only, so every list that names one names UDP addresses only.
//!
//! Here the commands, what their output says and the forwarders, shared;
//! the tests by case: `sync_and_query` (five with three silenced, the same
//! five heard, one liar of four), `one_machine` (two identities, one voter)
//! and `relayed_proof` (a proof from two liars and one honest server).

use crate::sync_support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Output;

use gnomon_testkit::forwarder::Counts;
use gnomon_testkit::Forwarder;
use serde_json::Value;
use sync_support::{dry_run_step, Servers};

mod one_machine;
mod relayed_proof;
mod sync_and_query;

/// An honest consensus of these servers (±16 s) may be used.
const MAX_RADIUS: &str = "20s";

/// Short waits: the answering servers are on loopback and answer within
/// milliseconds, and each silenced one costs 0.3 + 0.45 s per ask, asked
/// twice per run.
const QUICK: [&str; 4] = ["--timeout", "300ms", "--retries", "2"];

/// How far from true time a "small" offset may be: a few round trips of a
/// loaded machine, far below the liars' offsets.
const SMALL_US: i64 = 5_000_000;

fn gnomon(args: &[&str]) -> Output {
    gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(out)))
}

fn names(v: &Value) -> Vec<String> {
    let mut n: Vec<String> = v
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| {
            x.as_str()
                .unwrap_or_else(|| panic!("not a name: {x}"))
                .to_string()
        })
        .collect();
    n.sort_unstable();
    n
}

/// The names `query --json` flags.
fn flagged(j: &Value) -> Vec<String> {
    let mut n: Vec<String> = j["flagged"]
        .as_array()
        .unwrap_or_else(|| panic!("no flagged in {j}"))
        .iter()
        .map(|f| f["server"].as_str().unwrap().to_string())
        .collect();
    n.sort_unstable();
    n
}

/// Whether a consensus (`offset_low_us` ..= `offset_high_us`) holds
/// offset 0, the true time (this machine's clock is the real one).
fn holds_zero(c: &Value) -> bool {
    match (c["offset_low_us"].as_i64(), c["offset_high_us"].as_i64()) {
        (Some(lo), Some(hi)) => lo <= 0 && 0 <= hi,
        _ => false,
    }
}

/// Whether a consensus holds the true time and its midpoint is within
/// [`SMALL_US`] of it.
fn centred_on_zero(c: &Value) -> bool {
    match (c["offset_low_us"].as_i64(), c["offset_high_us"].as_i64()) {
        (Some(lo), Some(hi)) => lo <= 0 && 0 <= hi && ((lo + hi) / 2).abs() < SMALL_US,
        _ => false,
    }
}

/// `gnomon sync --once --set-clock --dry-run --json --max-radius 20s`
/// over `list` with its state in `state`, and `extra` flags.
fn plan(list: &Path, state: &Path, extra: &[&str]) -> (i32, Value, String) {
    dry_run_step(list, state, MAX_RADIUS, &[&QUICK[..], extra].concat())
}

/// `gnomon query --servers LIST --all [--json]`, and `extra` flags.
fn query(list: &Path, json: bool, extra: &[&str]) -> Output {
    let mut a = vec!["query", "--servers", list.to_str().unwrap(), "--all"];
    if json {
        a.push("--json");
    }
    a.extend_from_slice(&QUICK);
    a.extend_from_slice(extra);
    gnomon(&a)
}

/// Each of `servers` (named by `spec`) behind a forwarder of its own, the
/// ones `silenced` says silenced from the start, and the list `file`
/// naming the forwarders (so every address in it is a forwarder's).
fn behind_forwarders(
    servers: &Servers,
    spec: &[(&'static str, Option<&str>, &str)],
    silenced: impl Fn(usize) -> bool,
    file: &str,
) -> (Vec<Forwarder>, PathBuf) {
    let forwarders: Vec<Forwarder> = servers
        .addrs
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let upstream: SocketAddr = a.parse().unwrap();
            if silenced(i) {
                Forwarder::silenced(upstream)
            } else {
                Forwarder::start(upstream)
            }
        })
        .collect();
    let entries: Vec<(&str, usize, SocketAddr)> = spec
        .iter()
        .enumerate()
        .map(|(i, s)| (s.0, i, forwarders[i].addr()))
        .collect();
    let list = servers.list_via(file, &entries);
    (forwarders, list)
}

/// Every forwarder in `silenced` (by index) dropped what came and passed
/// nothing; every other one passed answers and dropped nothing. This is
/// the harness working, whatever the rule.
fn forwarders_did(forwarders: &[Forwarder], silenced: &[usize]) {
    for (i, f) in forwarders.iter().enumerate() {
        let c: Counts = f.counts();
        if silenced.contains(&i) {
            assert!(
                c.forwarded() == 0 && c.dropped_requests > 0,
                "forwarder {i} was to drop everything: {c:?}"
            );
        } else {
            assert!(
                c.requests > 0 && c.replies > 0 && c.dropped() == 0,
                "forwarder {i} was to pass everything: {c:?}"
            );
        }
    }
}

/// Panics listing every broken expectation, so one run against a rule
/// that fails shows all the ways it fails.
fn verdict(test: &str, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{test}: {} expectation(s) broken:\n- {}",
        failures.len(),
        failures.join("\n- ")
    );
}
