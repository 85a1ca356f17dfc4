//! `gnomon query` against loopback fixtures: output, JSON, exit codes.

use crate::client_support;
use std::time::Duration;

use client_support::{gnomon, key, FAST};
use gnomon_protocol::ProfileSet;
use gnomon_testkit::{profiles, Fixture, FixtureConfig, Mode};

/// `query ADDR --key K`, loopback timeouts, then `extra`.
pub(crate) fn args<'a>(addr: &'a str, k: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["query", addr, "--key", k];
    v.extend_from_slice(&FAST);
    v.extend_from_slice(extra);
    v
}

#[test]
fn query_prints_time_radius_rtt_version_and_offset() {
    let f = Fixture::honest(ProfileSet::ALL, 1);
    let (addr, k) = (f.addr().to_string(), key(&f));
    let r = gnomon(&args(&addr, &k, &[]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    for label in [
        "server",
        "version  rfc-10049 (1)",
        "time ",
        "radius   ±",
        "rtt ",
        "offset ",
    ] {
        assert!(r.stdout.contains(label), "{label}: {}", r.stdout);
    }
    assert!(r.stdout.contains("Z\n"), "UTC time: {}", r.stdout);
}

#[test]
fn query_json_is_one_object_and_version_forces_the_offer() {
    let f = Fixture::honest(ProfileSet::ALL, 2);
    let (addr, k) = (f.addr().to_string(), key(&f));
    for (v, want) in [
        ("google", "google"),
        ("0x8000000b", "draft-11"),
        ("draft-07", "draft-07"),
    ] {
        let r = gnomon(&args(&addr, &k, &["--protocol", v, "--json"]));
        assert_eq!(r.code, 0, "{v}: {}{}", r.stdout, r.stderr);
        let j = r.json();
        assert_eq!(j["version"]["name"], want);
        assert_eq!(j["exit_code"], 0);
        assert_eq!(j["transport"], "udp");
        assert!(j["radius_us"].as_u64().unwrap() >= 1_000_000);
        assert!(j["offset_us"].as_i64().unwrap().abs() < 5_000_000);
        assert!(j["midpoint_utc"].as_str().unwrap().ends_with('Z'));
    }
}

#[test]
fn tcp_flag_uses_tcp() {
    let f = Fixture::honest(profiles(&["1"]), 3);
    let (addr, k) = (f.addr().to_string(), key(&f));
    let r = gnomon(&args(&addr, &k, &["--tcp", "--json"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["transport"], "tcp");
    assert_eq!(f.udp_received(), 0);
}

#[test]
fn no_answer_is_exit_1_in_bounded_time() {
    let f = Fixture::start(FixtureConfig {
        mode: Mode::Silent,
        seed: 4,
        ..FixtureConfig::default()
    });
    let (addr, k) = (f.addr().to_string(), key(&f));
    let r = gnomon(&args(&addr, &k, &["--json"]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["error"]["kind"], "no_answer");
    // 150 + 225 ms, four later families at 150 ms, five TCP waits of 225 ms.
    assert!(r.took < Duration::from_secs(4), "{:?}", r.took);
    let r = gnomon(&args(&addr, &k, &["--deadline", "300ms"]));
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("no answer after"), "{}", r.stderr);
    assert!(r.took < Duration::from_secs(2), "{:?}", r.took);
}

#[test]
fn a_closed_port_is_exit_1_and_says_refused() {
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let r = gnomon(&["query", &addr, "--key", &"A".repeat(43), "--timeout", "5s"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("the port refused the request"),
        "{}",
        r.stderr
    );
    // Neither hint for silence applies to a refusal.
    assert!(!r.stderr.contains("older versions"), "{}", r.stderr);
    assert!(!r.stderr.contains("check the key"), "{}", r.stderr);
    assert!(r.took < Duration::from_secs(3));
}

/// `--json` promises one object for every outcome, usage errors included,
/// wherever the flag sits and whichever part refused the command line.
#[test]
fn usage_errors_under_json_are_one_json_object() {
    let k = "iBVjxg/1j7y1+kQUTBYdTabxCppesU/07D4PMDJk2WA=";
    let cases: [&[&str]; 6] = [
        // clap: an unknown flag, a bad value, a missing argument.
        &["query", "127.0.0.1", "--bogus", "--json"],
        &[
            "--json",
            "query",
            "127.0.0.1",
            "--key",
            k,
            "--timeout",
            "soon",
        ],
        &["query", "--json"],
        // The commands' own checks.
        &["query", "127.0.0.1", "--key", "short", "--json"],
        &["query", "--servers", "/nonexistent/list.json", "--json"],
        &["inspect", "/nonexistent/response.bin", "--json"],
    ];
    for c in cases {
        let r = gnomon(c);
        assert_eq!(r.code, 64, "{c:?}: {}{}", r.stdout, r.stderr);
        let j = r.json();
        assert_eq!(j["error"]["kind"], "usage", "{c:?}: {j}");
        assert_eq!(j["exit_code"], 64, "{c:?}: {j}");
        assert!(
            !j["error"]["message"].as_str().unwrap().is_empty(),
            "{c:?}: {j}"
        );
    }
    // Without --json, nothing on stdout.
    let r = gnomon(&["query", "127.0.0.1", "--bogus"]);
    assert_eq!((r.code, r.stdout.as_str()), (64, ""));
}

/// What is wrong with a server list is said in words, not as the parser's
/// enum variants.
#[test]
fn list_errors_are_sentences() {
    for (text, words) in [
        (r#"{"servers":"none"}"#, "`servers` is not an array"),
        (r#"{"servers":[{"name":"a"}]}"#, "skipped a: it has no `"),
    ] {
        let list = client_support::write("list.json", text.as_bytes());
        let r = gnomon(&["query", "--servers", list.to_str().unwrap()]);
        let all = format!("{}{}", r.stdout, r.stderr);
        assert!(all.contains(words), "{text}: {all}");
        for debug in ["WrongType", "Missing", "NoServers", "{"] {
            assert!(!r.stderr.contains(debug), "{text}: {}", r.stderr);
        }
        std::fs::remove_file(list).unwrap();
    }
    // The same for a malfeasance report.
    let report = client_support::write("report.json", b"{}");
    let r = gnomon(&["verify-report", report.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    let all = format!("{}{}", r.stdout, r.stderr);
    assert!(all.contains("`responses` is missing"), "{all}");
    assert!(!all.contains("Missing {"), "{all}");
    std::fs::remove_file(report).unwrap();
}

/// A list whose `reports` URL is plain HTTP is told just that: "names no
/// URL" would send its owner looking for a key that is there.
#[test]
fn an_http_reports_url_is_called_what_it_is() {
    let lineup = client_support::liar_lineup(90, Some("http://example.net/reports"));
    let mut args = vec!["query", "--servers", lineup.list.to_str().unwrap(), "--all"];
    args.extend_from_slice(&FAST);
    args.push("--report");
    let r = gnomon(&args);
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    let all = format!("{}{}", r.stdout, r.stderr);
    assert!(
        all.contains("\"http://example.net/reports\" is not HTTPS"),
        "{all}"
    );
    assert!(!all.contains("names no"), "{all}");
}

#[test]
fn invalid_answers_are_exit_2() {
    for (mode, words) in [
        (Mode::BadSignature, "signature does not verify"),
        (Mode::Garbage, "not a Roughtime packet"),
        // UDP's half answer is followed by TCP's, whose verdict is the one
        // reported: a TCP answer cannot be forged off-path.
        (Mode::Truncated, "TCP stream ended"),
    ] {
        let f = Fixture::start(FixtureConfig {
            mode,
            seed: 5,
            ..FixtureConfig::default()
        });
        let (addr, k) = (f.addr().to_string(), key(&f));
        let r = gnomon(&args(&addr, &k, &[]));
        assert_eq!(r.code, 2, "{mode:?}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(words), "{mode:?}: {}", r.stderr);
        let r = gnomon(&args(&addr, &k, &["--json"]));
        assert_eq!(r.json()["error"]["kind"], "invalid");
    }
}

#[test]
fn a_wrong_key_is_an_invalid_answer() {
    let f = Fixture::honest(ProfileSet::ALL, 6);
    let other = Fixture::honest(ProfileSet::ALL, 7);
    let (addr, k) = (f.addr().to_string(), key(&other));
    let r = gnomon(&args(&addr, &k, &[]));
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("long-term key"), "{}", r.stderr);
}

#[test]
fn usage_errors_are_exit_64() {
    let cases: [&[&str]; 7] = [
        &["query"],
        &["query", "127.0.0.1", "--bogus"],
        &["query", "127.0.0.1", "--key", "short"],
        &["query", "127.0.0.1"],
        &[
            "query",
            "[::1",
            "--key",
            "iBVjxg/1j7y1+kQUTBYdTabxCppesU/07D4PMDJk2WA=",
        ],
        &[
            "query",
            "127.0.0.1",
            "--key",
            "iBVjxg/1j7y1+kQUTBYdTabxCppesU/07D4PMDJk2WA=",
            "--protocol",
            "draft-99",
        ],
        &["query", "--servers", "/nonexistent/list.json"],
    ];
    for c in cases {
        let r = gnomon(c);
        assert_eq!(r.code, 64, "{c:?}: {}{}", r.stdout, r.stderr);
        assert!(!r.stderr.is_empty(), "{c:?}");
    }
    assert_eq!(gnomon(&[]).code, 64);
}

#[test]
fn help_documents_the_exit_codes() {
    let r = gnomon(&["query", "--help"]);
    assert_eq!(r.code, 0);
    for line in [
        "0   success",
        "1   no answer",
        "2   invalid answer",
        "3   malfeasance",
        "64  usage",
    ] {
        assert!(r.stdout.contains(line), "{line}: {}", r.stdout);
    }
    assert_eq!(gnomon(&["verify-report", "--help"]).code, 0);
    assert_eq!(gnomon(&["inspect", "--help"]).code, 0);
}

#[test]
fn silence_on_new_versions_is_no_answer_unless_fallback_is_asked_for() {
    // Every version spoken, but version 1 and drafts 08+ silenced, as an
    // on-path dropper would: no draft-07 answer without --version-fallback.
    let f = Fixture::start(FixtureConfig {
        silent_on: gnomon_testkit::modern_profiles(),
        seed: 12,
        ..FixtureConfig::default()
    });
    let (addr, k) = (f.addr().to_string(), key(&f));
    let r = gnomon(&args(&addr, &k, &["--json"]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let message = r.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("older versions were not tried"),
        "{message}"
    );
    assert_eq!(f.answered(), 0);
    let r = gnomon(&args(&addr, &k, &["--json", "--version-fallback"]));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["version"]["name"], "draft-07");
}
