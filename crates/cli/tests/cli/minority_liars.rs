//! Issue 21's attacks, run as real processes: `gnomon serve` on loopback,
//! the liars' clocks shifted by libfaketime, honest servers answering with
//! wide and narrow radii, and `gnomon sync`, `gnomon query --servers`,
//! `gnomon watch` and a real chronyd judging them.
//!
//! Before the majority rule, one liar of three beside a wide honest server
//! planned a step of about −57 s, sent chrony −57 s, and got the narrow
//! honest server excluded and accused; two liars of five planned +56 s;
//! one slow key listed three times planned −70 s. Now each plans no step,
//! sends chrony nothing and accuses nobody honest, while a lone narrow
//! liar among narrow honest servers is still named.
//!
//! `--max-radius 20s` throughout: an honest consensus of these servers
//! (±16 s) may be used, so a refusal here comes from the disagreement and
//! not from the honest radii.

use crate::sync_support;
use crate::watch_support;

use std::time::Duration;

use gnomon_testkit::chrony::Chronyd;
use serde_json::{json, Value};
use sync_support::{
    dry_run_step, have_faketime, start_servers_with, sync, tempdir, Servers, Service, FAST,
};

const MAX_RADIUS: &str = "20s";

/// One liar of three: honest ±16 s and ±60 s, the liar 70 s slow, ±16 s.
const ONE_OF_THREE: [(&str, Option<&str>, &str); 3] = [
    ("narrow", None, "16s"),
    ("wide", None, "60s"),
    ("liar", Some("-70"), "16s"),
];

/// Two liars of five: honest ±16, ±60, ±60 s; two liars 70 s fast.
const TWO_OF_FIVE: [(&str, Option<&str>, &str); 5] = [
    ("narrow", None, "16s"),
    ("wide-1", None, "60s"),
    ("wide-2", None, "60s"),
    ("liar-1", Some("+70"), "16s"),
    ("liar-2", Some("+70"), "16s"),
];

/// `gnomon sync --once --set-clock --dry-run --json` over `list`, with
/// `extra` flags.
fn plan(servers: &Servers, list: &std::path::Path, extra: &[&str]) -> (i32, Value, String) {
    let state = servers.dir.join("state");
    dry_run_step(list, &state, MAX_RADIUS, &[&FAST[..], extra].concat())
}

fn names(v: &Value) -> Vec<String> {
    let mut n: Vec<String> = v
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect();
    n.sort_unstable();
    n
}

/// Nothing planned, nobody outside, nobody marked in the state, and the
/// output says the servers disagree. The chain proves that the narrow
/// honest server and a liar contradict each other: the report carries
/// that proof and names nobody, and the output names the pair, not a liar.
fn refused_and_nobody_accused(servers: &Servers, extra: &[&str]) {
    let (code, j, stderr) = plan(servers, &servers.list, extra);
    assert_eq!(j["step"]["action"], "refused", "{j}\n{stderr}");
    assert_eq!(j["step"]["reason"], "too_wide", "{j}");
    assert_ne!(code, 0, "{j}");
    assert!(names(&j["outside"]).is_empty(), "{j}");
    for pair in j["contradictions"].as_array().unwrap() {
        assert!(names(pair).contains(&"narrow".to_string()), "{j}");
    }
    let report = j["report_file"].as_str().unwrap_or_else(|| panic!("{j}"));
    let v = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(["verify-report", report])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&v.stdout);
    assert_eq!(v.status.code(), Some(3), "{text}");
    assert!(text.contains("does not say which"), "{text}");
    let why = j["disagreement"].as_str().unwrap_or_else(|| panic!("{j}"));
    assert!(why.contains("disagree"), "{why}");
    let state = sync_support::state(&servers.dir.join("state"));
    assert_eq!(state["excluded"], serde_json::json!([]), "{state}");
}

#[test]
fn one_liar_beside_a_wide_honest_server_plans_no_step_and_accuses_nobody() {
    let test = "minority_one_of_three";
    if !have_faketime(test) {
        return;
    }
    let servers = start_servers_with(test, &ONE_OF_THREE, None);
    refused_and_nobody_accused(&servers, &[]);

    // --check: inside a consensus the liar made wide proves nothing about
    // the clock, so there is no verdict (exit 1), not "inside".
    let state = servers.dir.join("check-state");
    let mut a = vec![
        "--servers",
        servers.list.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "--check",
        "--json",
        "--max-radius",
        MAX_RADIUS,
    ];
    a.extend_from_slice(&FAST);
    let r = sync(&a, None);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.json()["inside"].is_null(), "{}", r.stdout);

    // query --servers: nobody flagged or suspected; the contradiction is
    // named as a pair, one of whom lied.
    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(["query", "--servers"])
        .arg(&servers.list)
        .args(["--all", "--json", "--timeout", "500ms"])
        .output()
        .unwrap();
    let j: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert!(names(&j["suspects"]).is_empty(), "{j}");
    assert_eq!(j["flagged"], serde_json::json!([]), "{j}");
    assert!(j["disagreement"].is_string(), "{j}");
    let c = &j["consensus"];
    assert!(
        c["offset_low_us"].as_i64().unwrap() <= -54_000_000
            && c["offset_high_us"].as_i64().unwrap() >= 0,
        "the consensus spans both majority regions: {c}"
    );
}

#[test]
fn two_liars_of_five_plan_no_step_and_accuse_nobody() {
    let test = "minority_two_of_five";
    if !have_faketime(test) {
        return;
    }
    let servers = start_servers_with(test, &TWO_OF_FIVE, None);
    // Two liars of five are more than the default assumes (max(1, 4/3) =
    // 1: one liar and one silenced server survived); a list whose operator
    // expects two says so, and then every one of the five must answer.
    refused_and_nobody_accused(&servers, &["--max-liars", "2"]);
    let (_, j, _) = plan(&servers, &servers.list, &["--max-liars", "2"]);
    assert_eq!(
        (&j["max_liars"], &j["needed"]),
        (&json!(2), &json!(5)),
        "{j}"
    );
}

#[test]
fn one_key_listed_three_times_is_one_vote_and_is_named() {
    let test = "minority_one_key_three_names";
    if !have_faketime(test) {
        return;
    }
    let spec = [
        ("alpha", None, "16s"),
        ("bravo", None, "16s"),
        ("slow", Some("-70"), "16s"),
    ];
    let servers = start_servers_with(test, &spec, None);
    let list = servers.list_of(
        "three-names.json",
        &[
            ("alpha", 0),
            ("bravo", 1),
            ("slow-a", 2),
            ("slow-b", 2),
            ("slow-c", 2),
        ],
    );
    let (code, j, stderr) = plan(&servers, &list, &[]);
    assert_eq!(code, 0, "{j}\n{stderr}");
    assert_eq!(j["step"]["action"], "none", "the clock is real: {j}");
    assert_eq!(j["consensus"]["answering"], 3, "three keys vote: {j}");
    assert_eq!(names(&j["outside"]), ["slow-a", "slow-b", "slow-c"], "{j}");
    assert_eq!(
        j["grouped"],
        serde_json::json!([["slow-a", "slow-b", "slow-c"]]),
        "{j}"
    );
    assert_eq!(j["listed"], 3, "five entries, three servers: {j}");
}

#[test]
fn a_narrow_liar_among_narrow_honest_servers_is_still_named() {
    let test = "minority_narrow_liar";
    if !have_faketime(test) {
        return;
    }
    let spec = [
        ("alpha", None, "16s"),
        ("bravo", None, "16s"),
        ("charlie", None, "16s"),
        ("liar", Some("+70"), "16s"),
    ];
    let servers = start_servers_with(test, &spec, None);
    let (code, j, stderr) = plan(&servers, &servers.list, &[]);
    assert_eq!(code, 0, "{j}\n{stderr}");
    assert_eq!(j["step"]["action"], "none", "{j}");
    assert_eq!(names(&j["outside"]), ["liar"], "{j}");
    let c = &j["consensus"];
    assert!(
        c["offset_low_us"].as_i64().unwrap() <= 0 && c["offset_high_us"].as_i64().unwrap() >= 0,
        "the true time agreed: {c}"
    );
    assert_eq!(names(&c["agreeing"]), ["alpha", "bravo", "charlie"], "{j}");
    assert!(j["disagreement"].is_null(), "{j}");
}

#[test]
fn the_daemon_sends_chrony_nothing_when_a_liar_splits_the_majority() {
    let test = "minority_chrony";
    if !have_faketime(test) {
        return;
    }
    let Some(chronyd) = Chronyd::start(test, "poll 0 filter 1 delay 40 noselect", "") else {
        return;
    };
    let servers = start_servers_with(test, &ONE_OF_THREE, None);
    let state = tempdir(test);
    let mut args = vec![
        "--servers",
        servers.list.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "--interval",
        "1s",
        "--jitter",
        "0",
        "--max-radius",
        MAX_RADIUS,
        "--chrony-max-radius",
        MAX_RADIUS,
        "--chrony-sock",
    ];
    let sock = chronyd.sock();
    args.push(sock.to_str().unwrap());
    args.extend_from_slice(&FAST);
    let mut service = Service::start(&args);
    for round in 0..3 {
        assert!(
            service.wait_for("wider than max-radius", Duration::from_secs(60)),
            "round {round}:\n{}",
            service.log
        );
    }
    let source = chronyd.source().expect("chronyc sources");
    let samples = chronyd.samples().expect("chronyc sourcestats");
    service.stop_cleanly(Duration::from_secs(30));
    assert_eq!(
        (source.last_rx, samples),
        (None, 0),
        "{source:?}\n{}",
        service.log
    );
    assert!(
        service.log.contains("the servers disagree"),
        "{}",
        service.log
    );
    assert!(!service.log.contains("out: narrow"), "{}", service.log);
    let saved = sync_support::state(&state);
    assert_eq!(saved["excluded"], serde_json::json!([]), "{saved}");
}

#[test]
fn watch_calls_nobody_lying_when_a_liar_splits_the_majority() {
    let test = "minority_watch";
    if !have_faketime(test) {
        return;
    }
    let servers = start_servers_with(test, &ONE_OF_THREE, None);
    let watch = watch_support::Watch::start(&servers.list);
    let api = watch.first_round(Duration::from_secs(90));
    let why = api["disagreement"]
        .as_str()
        .unwrap_or_else(|| panic!("{api}"));
    assert!(why.contains("the servers disagree"), "{why}");
    let (_, page) = watch.get("/");
    assert!(page.contains("The servers disagree"), "{page}");
    for name in ["narrow", "wide", "liar"] {
        let s = watch_support::server(&api, name);
        assert_ne!(s["state"], "lying", "{s}");
        assert!(s["report"].is_null(), "{s}");
    }
}
