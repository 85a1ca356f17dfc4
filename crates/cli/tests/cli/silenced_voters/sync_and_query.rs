//! `gnomon sync` and `gnomon query` over lists of distinct servers: three
//! honest of five silenced, the same five all heard, one liar of four.

use crate::sync_support;

use std::path::PathBuf;

use gnomon_testkit::Forwarder;
use serde_json::Value;
use sync_support::{have_faketime, real_now_us, start_servers_with, Servers};

use super::{
    behind_forwarders, flagged, forwarders_did, holds_zero, json_of, names, plan, query, verdict,
    SMALL_US,
};

/// Three honest servers and two liars an hour fast.
const FIVE: [(&str, Option<&str>, &str); 5] = [
    ("honest-1", None, "3s"),
    ("honest-2", None, "3s"),
    ("honest-3", None, "3s"),
    ("liar-1", Some("+3600"), "3s"),
    ("liar-2", Some("+3600"), "3s"),
];

/// The five servers of [`FIVE`] behind forwarders, the honest ones
/// silenced from the start when `silence_honest`.
fn five_behind_forwarders(test: &str, silence_honest: bool) -> (Servers, Vec<Forwarder>, PathBuf) {
    let servers = start_servers_with(test, &FIVE, None);
    let silenced = |i: usize| silence_honest && FIVE[i].1.is_none();
    let (forwarders, list) = behind_forwarders(&servers, &FIVE, silenced, "forwarded.json");
    (servers, forwarders, list)
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
