//! `gnomon query --servers`, `gnomon verify-report`: the liar caught,
//! reported, posted and proved; broken servers never reported.

use crate::client_support;

use client_support::{gnomon, liar_lineup, temp, write, FAST};
use gnomon_protocol::report::MEDIA_TYPE;
use gnomon_testkit::{profiles, server_list, Fixture, FixtureConfig, Mode, ReportSink};
use serde_json::json;

const HOUR_US: i64 = 3_600_000_000;

fn seq_args<'a>(list: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["query", "--servers", list, "--all"];
    v.extend_from_slice(&FAST);
    v.extend_from_slice(extra);
    v
}

#[test]
fn honest_servers_of_three_versions_reach_a_consensus() {
    let g = Fixture::honest(profiles(&["google"]), 11);
    let d = Fixture::honest(profiles(&["0x8000000b"]), 12);
    let v = Fixture::honest(profiles(&["1", "draft-14"]), 13);
    let json = server_list(
        &[
            ("goo", &g, 3_000_600_613),
            ("d11", &d, 0x8000_000b),
            ("v1", &v, 1),
        ],
        None,
    );
    let list = write("honest.json", json.as_bytes());
    let list = list.to_str().unwrap();
    let r = gnomon(&seq_args(list, &[]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("consensus    "), "{}", r.stdout);
    assert!(
        r.stdout.contains("3 of 3 answering servers agree"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("MALFEASANCE"));
    let j = gnomon(&seq_args(list, &["--json"])).json();
    assert_eq!(j["entries"].as_array().unwrap().len(), 6);
    assert_eq!(j["malfeasance"], false);
    assert_eq!(j["consensus"]["agreeing"].as_array().unwrap().len(), 3);
    let versions: std::collections::BTreeSet<&str> = j["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["version"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["draft-11", "google", "rfc-10049"].into());
    assert_eq!(
        (j["quorum"].as_u64(), j["quorum_met"].as_bool()),
        (Some(2), Some(true))
    );

    // `--quorum` counts distinct keys that agree: four of three cannot.
    let r = gnomon(&seq_args(list, &["--quorum", "4", "--json"]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["quorum_met"], false, "{j}");
    assert!(j["consensus"].is_object(), "{j}");
    // `--ask` is how many are asked, at random; it conflicts with --all.
    let mut ask = vec!["query", "--servers", list, "--ask", "2", "--json"];
    ask.extend_from_slice(&FAST);
    let j = gnomon(&ask).json();
    assert_eq!(j["servers"].as_array().unwrap().len(), 2, "{j}");
    assert_eq!(gnomon(&seq_args(list, &["--ask", "2"])).code, 64);
}

#[test]
fn a_liar_is_named_reported_posted_and_proved() {
    let sink = ReportSink::start(1);
    let lineup = liar_lineup(21, Some(&sink.url()));
    let list = &lineup.list;
    let out = temp("report.json");
    let r = gnomon(&seq_args(
        list.to_str().unwrap(),
        &[
            "--report-out",
            out.to_str().unwrap(),
            "--report",
            "--allow-loopback-http-reports",
            "--report-backoff",
            "10ms",
        ],
    ));
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("FLAGGED      liar"), "{}", r.stdout);
    assert!(r.stdout.contains("MALFEASANCE  answer"), "{}", r.stdout);
    assert!(r.stdout.contains("suspect      liar\n"), "{}", r.stdout);
    assert!(r.stdout.contains("report written to"), "{}", r.stdout);
    assert!(r.stdout.contains("(HTTP 204, attempt 2)"), "{}", r.stdout);
    let written = std::fs::read(&out).unwrap();
    let posted = sink.received();
    assert_eq!(posted.len(), 2, "one 503, then accepted");
    assert_eq!(posted[1].body, written);
    assert_eq!(posted[1].content_type.as_deref(), Some(MEDIA_TYPE));

    let v = gnomon(&["verify-report", out.to_str().unwrap()]);
    assert_eq!(v.code, 3, "{}{}", v.stdout, v.stderr);
    assert!(v.stdout.contains("PROOF OF MALFEASANCE"), "{}", v.stdout);
    assert!(v.stdout.contains("contradiction  "), "{}", v.stdout);
    let liar_key = &lineup.liar_key;
    let j = gnomon(&["verify-report", out.to_str().unwrap(), "--json"]).json();
    assert_eq!(j["proof_of_malfeasance"], true);
    assert_eq!(j["entries"].as_array().unwrap().len(), 8);
    for c in j["contradictions"].as_array().unwrap() {
        assert!(c["earlier_key"] == liar_key.as_str() || c["later_key"] == liar_key.as_str());
    }

    // One flipped bit in a response and the report proves nothing.
    let mut doc: serde_json::Value = serde_json::from_slice(&written).unwrap();
    let entry = &mut doc["responses"][1]["response"];
    let mut bytes = gnomon_testkit_b64_decode(entry.as_str().unwrap());
    let last = bytes.len() - 40;
    bytes[last] ^= 1;
    *entry = serde_json::Value::String(gnomon_testkit::base64(&bytes));
    let tampered = write("tampered.json", doc.to_string().as_bytes());
    let t = gnomon(&["verify-report", tampered.to_str().unwrap()]);
    assert_eq!(t.code, 2, "{}{}", t.stdout, t.stderr);
    assert!(t.stdout.contains("INVALID"), "{}", t.stdout);
}

fn gnomon_testkit_b64_decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

#[test]
fn a_bad_signature_is_rejected_and_not_reported() {
    let a = Fixture::honest(profiles(&["1"]), 31);
    let b = Fixture::honest(profiles(&["draft-11"]), 32);
    let bad = Fixture::start(FixtureConfig {
        mode: Mode::BadSignature,
        offset_us: HOUR_US,
        seed: 33,
        ..FixtureConfig::default()
    });
    let sink = ReportSink::start(0);
    let json = server_list(
        &[("a", &a, 1), ("b", &b, 0x8000_000b), ("bad", &bad, 1)],
        Some(&sink.url()),
    );
    let list = write("badsig.json", json.as_bytes());
    let out = temp("never.json");
    let r = gnomon(&seq_args(
        list.to_str().unwrap(),
        &[
            "--report-out",
            out.to_str().unwrap(),
            "--report",
            "--allow-loopback-http-reports",
            "--json",
            // Two answers that verify: a consensus only when nobody is
            // assumed to lie (the bad one is silent, not a voter).
            "--max-liars",
            "0",
        ],
    ));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["malfeasance"], false);
    assert_eq!(
        (&j["answered"], &j["listed"]),
        (&json!(2), &json!(3)),
        "{j}"
    );
    assert!(j["report_file"].is_null());
    let bad_entries: Vec<_> = j["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["server"] == "bad")
        .collect();
    assert_eq!(bad_entries.len(), 2);
    for e in bad_entries {
        assert_eq!(e["error"]["kind"], "invalid");
    }
    assert!(!out.exists());
    assert!(sink.received().is_empty());
}

#[test]
fn verify_report_rejects_what_is_not_a_report() {
    let junk = write("junk.json", b"{\"responses\": 5}");
    assert_eq!(gnomon(&["verify-report", junk.to_str().unwrap()]).code, 2);
    let legacy = write(
        "legacy.json",
        br#"{"nonces":["AAEC"],"responses":["BgcI"]}"#,
    );
    let r = gnomon(&["verify-report", legacy.to_str().unwrap()]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("pre-draft-12"), "{}", r.stderr);
    assert_eq!(
        gnomon(&["verify-report", "/nonexistent/report.json"]).code,
        64
    );
}
