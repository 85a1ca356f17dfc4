//! A relayed proof from two liars and one honest server, two honest ones
//! silenced: neither `gnomon relay` nor `gnomon verify-proof` gives the
//! device the liars' time.

use crate::sync_support;

use std::time::Instant;

use serde_json::Value;
use sync_support::{have_faketime, real_now_us, start_servers_with};

use super::{behind_forwarders, forwarders_did, gnomon, json_of, verdict};

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
    // The radius limit is lifted (5 minutes, as relay_proof does for
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
