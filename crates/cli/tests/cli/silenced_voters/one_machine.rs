//! One lying machine listed twice (an Ed25519 and an ML-DSA-44 identity on
//! one port) is one voter: the two honest machines hold the time.

use crate::serve_support;
use crate::sync_support;

use std::net::SocketAddr;
use std::path::Path;

use gnomon_testkit::Reaped;
use serde_json::Value;
use sync_support::{have_faketime, list_entry, shift_clock, start_servers_with, write_list};

use super::{centred_on_zero, flagged, json_of, names, plan, query, text, verdict};

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
