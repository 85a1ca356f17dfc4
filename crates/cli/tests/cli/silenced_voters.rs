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

use crate::serve_support;
use crate::sync_support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Instant;

use gnomon_testkit::forwarder::Counts;
use gnomon_testkit::{Forwarder, Reaped};
use serde_json::Value;
use sync_support::{
    dry_run_step, have_faketime, list_entry, real_now_us, shift_clock, start_servers_with,
    write_list, Servers,
};

/// An honest consensus of these servers (±16 s) may be used.
const MAX_RADIUS: &str = "20s";

/// Short waits: the answering servers are on loopback and answer within
/// milliseconds, and each silenced one costs 0.3 + 0.45 s per ask, asked
/// twice per run.
const QUICK: [&str; 4] = ["--timeout", "300ms", "--retries", "2"];

/// How far from true time a "small" offset may be: a few round trips of a
/// loaded machine, far below the liars' offsets.
const SMALL_US: i64 = 5_000_000;

/// Three honest servers and two liars an hour fast.
const FIVE: [(&str, Option<&str>, &str); 5] = [
    ("honest-1", None, "3s"),
    ("honest-2", None, "3s"),
    ("honest-3", None, "3s"),
    ("liar-1", Some("+3600"), "3s"),
    ("liar-2", Some("+3600"), "3s"),
];

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

/// The five servers of [`FIVE`] behind forwarders, the honest ones
/// silenced from the start when `silence_honest`.
fn five_behind_forwarders(test: &str, silence_honest: bool) -> (Servers, Vec<Forwarder>, PathBuf) {
    let servers = start_servers_with(test, &FIVE, None);
    let silenced = |i: usize| silence_honest && FIVE[i].1.is_none();
    let (forwarders, list) = behind_forwarders(&servers, &FIVE, silenced, "forwarded.json");
    (servers, forwarders, list)
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

#[test]
fn three_honest_of_five_silenced_leave_two_liars_without_a_consensus() {
    let test = "silenced_three_of_five";
    if !have_faketime(test) {
        return;
    }
    let (servers, forwarders, list) = five_behind_forwarders(test, true);
    let mut failures = Vec::new();

    // sync: nothing planned, and the floor stays at or below true time.
    let state = servers.dir.join("state");
    let (code, j, stderr) = plan(&list, &state, &[]);
    let action = j["step"]["action"].as_str();
    if !matches!(action, None | Some("refused")) {
        failures.push(format!(
            "sync planned {action:?} (exit {code}): step {} consensus {}\n{stderr}",
            j["step"], j["consensus"]
        ));
    }
    if code == 0 {
        failures.push("sync --set-clock --dry-run exited 0".into());
    }
    let floor = std::fs::read_to_string(state.join("sync-state.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|s| s["floor_us"].as_i64());
    if let Some(f) = floor {
        let now = real_now_us();
        if f > now + SMALL_US {
            failures.push(format!(
                "the floor was raised {:.1} s past true time",
                (f - now) as f64 / 1e6
            ));
        }
    }

    // query: no consensus, and it says what it assumed.
    let out = query(&list, true, &[]);
    let q = json_of(&out);
    if !q["consensus"].is_null() {
        failures.push(format!("query reported a consensus: {}", q["consensus"]));
    }
    if out.status.code() == Some(0) {
        failures.push("query --servers exited 0".into());
    }
    match &q["max_liars"] {
        Value::Null => failures.push(format!(
            "query --json has no max_liars; its members: {:?}",
            q.as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>())
                .unwrap_or_default()
        )),
        v if v.is_u64() && v.as_u64() != Some(1) => failures.push(format!(
            "query assumed max_liars {v}; the default for 5 is 1"
        )),
        _ => {}
    }
    // The text form, stdout or stderr; the table of answers left out of
    // the message.
    let out = query(&list, false, &[]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match said.lines().find(|l| l.contains("assumes at most")) {
        None => failures.push(format!(
            "query does not say \"assumes at most\":\n{}",
            said.lines()
                .skip_while(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("\n")
        )),
        Some(l) if !l.contains('5') => failures.push(format!(
            "query's assumption does not name the 5 listed: {l}"
        )),
        Some(_) => {}
    }

    forwarders_did(&forwarders, &[0, 1, 2]);
    verdict(test, &failures);
}

#[test]
fn the_same_five_with_every_answer_delivered_hold_true_time_and_name_both_liars() {
    // Two liars of five are more than the default assumes (one): the
    // operator of such a list says two, and then all five must answer.
    let test = "silenced_none_of_five";
    if !have_faketime(test) {
        return;
    }
    let (servers, forwarders, list) = five_behind_forwarders(test, false);
    let mut failures = Vec::new();

    let out = query(&list, true, &["--max-liars", "2"]);
    let q = json_of(&out);
    if !holds_zero(&q["consensus"]) {
        failures.push(format!(
            "query's consensus misses true time: {}",
            q["consensus"]
        ));
    }
    if flagged(&q) != ["liar-1", "liar-2"] {
        failures.push(format!("query flagged {:?}", flagged(&q)));
    }

    let (code, j, stderr) = plan(&list, &servers.dir.join("state"), &["--max-liars", "2"]);
    if (code, j["step"]["action"].as_str()) != (0, Some("none")) {
        failures.push(format!(
            "sync: exit {code}, step {} (the clock is real)\n{stderr}",
            j["step"]
        ));
    }
    if names(&j["outside"]) != ["liar-1", "liar-2"] {
        failures.push(format!("sync put outside {:?}", names(&j["outside"])));
    }
    if !holds_zero(&j["consensus"]) {
        failures.push(format!(
            "sync's consensus misses true time: {}",
            j["consensus"]
        ));
    }

    forwarders_did(&forwarders, &[]);
    verdict(test, &failures);
}

#[test]
fn one_liar_of_four_is_named_and_plans_no_step() {
    let test = "silenced_one_of_four";
    if !have_faketime(test) {
        return;
    }
    // 70 s: past both ±16 s intervals, so the liar's misses every honest one.
    let spec = [
        ("honest-1", None, "3s"),
        ("honest-2", None, "3s"),
        ("honest-3", None, "3s"),
        ("liar", Some("+70"), "3s"),
    ];
    let servers = start_servers_with(test, &spec, None);
    let mut failures = Vec::new();

    let (code, j, stderr) = plan(&servers.list, &servers.dir.join("state"), &[]);
    if (code, j["step"]["action"].as_str()) != (0, Some("none")) {
        failures.push(format!(
            "sync: exit {code}, step {} (the clock is inside the consensus)\n{stderr}",
            j["step"]
        ));
    }
    if names(&j["outside"]) != ["liar"] {
        failures.push(format!("sync put outside {:?}", names(&j["outside"])));
    }
    if !holds_zero(&j["consensus"]) {
        failures.push(format!(
            "sync's consensus misses true time: {}",
            j["consensus"]
        ));
    }

    let out = query(&servers.list, true, &[]);
    let q = json_of(&out);
    if flagged(&q) != ["liar"] {
        failures.push(format!("query flagged {:?}", flagged(&q)));
    }
    if !holds_zero(&q["consensus"]) {
        failures.push(format!(
            "query's consensus misses true time: {}",
            q["consensus"]
        ));
    }
    verdict(test, &failures);
}

/// A `gnomon serve` with an Ed25519 and an ML-DSA-44 identity on one port,
/// its clock shifted by `offset`: the process, its UDP and TCP addresses
/// and both public keys (base64).
fn two_identities(dir: &Path, offset: &str) -> (Reaped, SocketAddr, SocketAddr, String, String) {
    let (ed_key, ed_public) = serve_support::keygen(dir);
    let pq_key = dir.join("pq.key");
    let pq_public = serve_support::gnomon_ok(&[
        "keygen",
        "--scheme",
        "ml-dsa-44",
        "--out",
        pq_key.to_str().unwrap(),
    ])
    .trim()
    .to_string();
    let mut started = serve_support::start_serve(
        &[
            "--key-file",
            ed_key.to_str().unwrap(),
            "--key-file",
            pq_key.to_str().unwrap(),
            "--workers",
            "1",
            "--clock-unsynchronized",
            "answer-with-radius",
            "--clock-unsynchronized-radius",
            "3s",
            "--clock-radius-floor",
            "3s",
        ],
        |c| shift_clock(c, offset),
    );
    assert_eq!(
        started.public, ed_public,
        "the Ed25519 identity comes first"
    );
    let udp = started.addr;
    let tcp = started.tcp_addr();
    let mut stderr = started.stderr;
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (
        started.child,
        udp,
        tcp,
        gnomon_testkit::base64(&ed_public),
        pq_public,
    )
}

/// Whether `v` (a list of lists of names) holds exactly `group`.
fn has_group(v: &Value, group: &[&str]) -> bool {
    v.as_array().is_some_and(|groups| {
        groups.iter().any(|g| {
            g.as_array().is_some_and(|g| {
                let mut n: Vec<&str> = g.iter().filter_map(Value::as_str).collect();
                n.sort_unstable();
                n == group
            })
        })
    })
}

#[test]
fn one_machine_with_two_identities_is_one_voter() {
    let test = "silenced_one_machine_two_identities";
    if !have_faketime(test) {
        return;
    }
    let honest = start_servers_with(
        test,
        &[("honest-1", None, "3s"), ("honest-2", None, "3s")],
        None,
    );
    // 40 s: past both ±16 s intervals, so no honest interval meets it.
    let (_liar, udp, tcp, ed, pq) = two_identities(&honest.dir, "+40");
    let (udp, tcp) = (udp.to_string(), tcp.to_string());
    let mut entries: Vec<String> = (0..2)
        .map(|i| {
            let a = honest.addrs[i].as_str();
            list_entry(
                &honest.names[i],
                "ed25519",
                &honest.keys[i],
                1,
                Some(a),
                Some(a),
            )
        })
        .collect();
    entries.push(list_entry(
        "liar-ed",
        "ed25519",
        &ed,
        1,
        Some(&udp),
        Some(&tcp),
    ));
    entries.push(list_entry(
        "liar-pq",
        "ml-dsa-44",
        &pq,
        0x9000_0001,
        None,
        Some(&tcp),
    ));
    let list = honest.dir.join("two-identities.json");
    write_list(&list, &entries);
    let group = ["liar-ed", "liar-pq"];
    let mut failures = Vec::new();

    let (code, j, stderr) = plan(&list, &honest.dir.join("state"), &[]);
    let c = &j["consensus"];
    if !centred_on_zero(c) {
        failures.push(format!(
            "sync's consensus is not the true time (exit {code}): {c}\n{stderr}"
        ));
    }
    if j["step"]["action"].as_str() != Some("none") {
        failures.push(format!("sync: step {} (the clock is real)", j["step"]));
    }
    if !has_group(&j["grouped"], &group) && !has_group(&j["shared_keys"], &group) {
        failures.push(format!(
            "sync does not name liar-ed and liar-pq as one voter: grouped {} shared_keys {}",
            j["grouped"], j["shared_keys"]
        ));
    }
    let outside = names(&j["outside"]);
    if outside.iter().any(|n| n.starts_with("honest")) {
        failures.push(format!("sync put an honest server outside: {outside:?}"));
    }

    let out = query(&list, true, &[]);
    let q = json_of(&out);
    // The harness: both of the machine's identities answered, the
    // ML-DSA-44 one over TCP, and both honest servers.
    for (name, scheme) in [
        ("liar-ed", "ed25519"),
        ("liar-pq", "ml-dsa-44"),
        ("honest-1", "ed25519"),
        ("honest-2", "ed25519"),
    ] {
        let answered = q["entries"].as_array().is_some_and(|e| {
            e.iter()
                .any(|e| e["server"] == name && e["error"].is_null() && e["scheme"] == scheme)
        });
        assert!(
            answered,
            "{name} did not answer in {scheme}: {}",
            text(&out)
        );
    }
    let qc = &q["consensus"];
    if !centred_on_zero(qc) {
        failures.push(format!("query's consensus is not the true time: {qc}"));
    }
    if !has_group(&q["grouped"], &group) && !has_group(&q["shared_keys"], &group) {
        failures.push(format!(
            "query does not name liar-ed and liar-pq as one voter: grouped {} shared_keys {}",
            q["grouped"], q["shared_keys"]
        ));
    }
    let f = flagged(&q);
    if f.iter().any(|n| n.starts_with("honest")) {
        failures.push(format!("query flagged an honest server: {f:?}"));
    }
    verdict(test, &failures);
}

/// A device value: 16 bytes, hex (32 digits).
fn device_value() -> String {
    gnomon_testkit::noise(u64::from(std::process::id()) << 8 | 33, 16)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The interval a `verify-proof --json` or `relay --json` object proves,
/// if it shows one: its own, or the `majority` it still offers.
fn intervals(v: &Value) -> Vec<(i64, i64)> {
    [v, &v["majority"], &v["device_would_accept"]]
        .iter()
        .filter_map(|x| {
            Some((
                x["earliest_unix_us"].as_i64()?,
                x["latest_unix_us"].as_i64()?,
            ))
        })
        .collect()
}

#[test]
fn a_relayed_proof_from_two_liars_and_one_honest_server_proves_nothing() {
    let test = "silenced_relayed_proof";
    if !have_faketime(test) {
        return;
    }
    // 30 s fast, ±16 s: the liars' intervals overlap the honest one's top,
    // so none of the three is provably outside the others.
    let spec = [
        ("honest-1", None, "3s"),
        ("honest-2", None, "3s"),
        ("honest-3", None, "3s"),
        ("liar-1", Some("+30"), "3s"),
        ("liar-2", Some("+30"), "3s"),
    ];
    let servers = start_servers_with(test, &spec, None);
    // honest-2 and honest-3 silenced; the others reached through open
    // forwarders.
    let (forwarders, list) =
        behind_forwarders(&servers, &spec, |i| i == 1 || i == 2, "pinned.json");
    let device = device_value();
    let proof = servers.dir.join("proof.bin");
    let mut failures = Vec::new();

    let made = Instant::now();
    let before = real_now_us();
    // The radius limit is lifted (5 minutes, as relay_proof.rs does for
    // these ±16 s servers): what must refuse here is the count of voters,
    // not the width.
    let a = [
        "relay",
        "--servers",
        list.to_str().unwrap(),
        "--device-nonce",
        &device,
        "--out",
        proof.to_str().unwrap(),
        "--all",
        "--json",
        "--timeout",
        "300ms",
        "--max-radius",
        "5m",
    ];
    let out = gnomon(&a);
    let relayed = json_of(&out);
    let mut shown: Vec<(&str, (i64, i64))> = Vec::new();
    shown.extend(intervals(&relayed).into_iter().map(|i| ("relay", i)));
    if out.status.code() == Some(0) {
        failures.push(format!(
            "relay says the device will accept it: {}",
            relayed["device_would_accept"]
        ));
    }
    if proof.exists() {
        let elapsed = format!("{}ms", made.elapsed().as_millis() + 1000);
        let out = gnomon(&[
            "verify-proof",
            proof.to_str().unwrap(),
            "--device-nonce",
            &device,
            "--keys",
            list.to_str().unwrap(),
            "--elapsed",
            &elapsed,
            "--max-radius",
            "5m",
            "--json",
        ]);
        let v = json_of(&out);
        if out.status.code() == Some(0) {
            failures.push(format!("verify-proof exited 0: {v}"));
        }
        shown.extend(intervals(&v).into_iter().map(|i| ("verify-proof", i)));
    }
    let after = real_now_us();
    for (who, (lo, hi)) in shown {
        if !(lo <= after && before <= hi) {
            failures.push(format!(
                "{who} shows an interval that misses true time: {:+.1} s .. {:+.1} s",
                (lo - before) as f64 / 1e6,
                (hi - after) as f64 / 1e6
            ));
        }
    }

    forwarders_did(&forwarders, &[1, 2]);
    verdict(test, &failures);
}
