//! `gnomon query` speaks as the other commands do (issue 36): `-V` is
//! gnomon's version and `--protocol` the protocol's, every draft from 01 to
//! 19 can be asked for by its number and is named the same way by query
//! and inspect, a silent server is said while the query waits, and every
//! output that cannot be written exits 73.

use crate::client_support;
use crate::query_cli::args;

use client_support::{gnomon, key, liar_lineup, temp, write, FAST};
use gnomon_protocol::ProfileSet;
use gnomon_testkit::{profiles, server_list, Fixture, FixtureConfig, Mode};

/// `query --servers LIST --all`, loopback timeouts, then `extra`.
fn sequence(list: &std::path::Path, extra: &[&str]) -> client_support::Run {
    let mut v = vec!["query", "--servers", list.to_str().unwrap(), "--all"];
    v.extend_from_slice(&FAST);
    v.extend_from_slice(extra);
    gnomon(&v)
}

#[test]
fn dash_v_is_gnomons_version_in_every_client_command() {
    let version = env!("CARGO_PKG_VERSION");
    for argv in [
        &["query", "-V"][..],
        &["query", "--version"],
        &["bench", "-V"],
        &["bench", "load", "--version"],
        &["bench", "null-server", "-V"],
    ] {
        let r = gnomon(argv);
        assert_eq!(r.code, 0, "{argv:?}: {}{}", r.stdout, r.stderr);
        assert!(r.stdout.contains(version), "{argv:?}: {}", r.stdout);
    }
    // The protocol version has its own name, the same in both commands.
    for argv in [&["query", "--help"][..], &["bench", "load", "--help"]] {
        let help = gnomon(argv).stdout;
        assert!(help.contains("--protocol <V>"), "{argv:?}: {help}");
        assert!(help.contains("-V, --version"), "{argv:?}: {help}");
    }
}

/// Each draft's number asks for the format that draft puts on the wire
/// (as each draft's text gives it): its own number up to draft 11, 0x8000000c from 12
/// on, with TYPE from 14 on; and the answer says which drafts share it.
#[test]
fn every_draft_is_asked_in_the_format_it_puts_on_the_wire() {
    let f = Fixture::honest(ProfileSet::ALL, 40);
    let (addr, k) = (f.addr().to_string(), key(&f));
    for n in 1u32..=19 {
        let draft = format!("draft-{n:02}");
        let r = gnomon(&args(&addr, &k, &["--protocol", &draft, "--json"]));
        assert_eq!(r.code, 0, "{draft}: {}{}", r.stdout, r.stderr);
        let v = &r.json()["version"];
        let (number, name) = match n {
            1..=11 => (0x8000_0000 + n, draft.clone()),
            12 | 13 => (0x8000_000c, "draft-12".to_owned()),
            _ => (0x8000_000c, "draft-14".to_owned()),
        };
        assert_eq!(v["number"], number, "{draft}: {v}");
        assert_eq!(v["name"], name.as_str(), "{draft}: {v}");
        let span = v["drafts"].as_array().expect("drafts");
        let (first, last) = (span[0].as_u64().unwrap(), span[1].as_u64().unwrap());
        assert!(
            first <= u64::from(n) && u64::from(n) <= last,
            "{draft}: {v}"
        );
    }
    // Draft 00 had no number on the wire: refused, saying why.
    let r = gnomon(&args(&addr, &k, &["--protocol", "draft-00"]));
    assert_eq!(r.code, 64, "{}", r.stderr);
    assert!(r.stderr.contains("google"), "{}", r.stderr);
}

/// The row drafts 14–19 share is called the same in query's answer and in
/// inspect's reading of it; the number drafts 12–19 share names its range.
#[test]
fn a_format_several_drafts_share_is_named_with_its_range() {
    let f = Fixture::honest(ProfileSet::ALL, 41);
    let (addr, k) = (f.addr().to_string(), key(&f));
    let (req, resp) = (temp("d16.req"), temp("d16.resp"));
    let (req_s, resp_s) = (req.to_str().unwrap(), resp.to_str().unwrap());
    let r = gnomon(&args(
        &addr,
        &k,
        &[
            "--protocol",
            "draft-16",
            "--save-request",
            req_s,
            "--save-response",
            resp_s,
        ],
    ));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("version  draft-14 (drafts 14–19; 0x8000000c)"),
        "{}",
        r.stdout
    );
    let i = gnomon(&["inspect", resp_s, "--key", &k, "--request", req_s]);
    assert_eq!(i.code, 0, "{}{}", i.stdout, i.stderr);
    for said in [
        "draft-14 (drafts 14–19; VER 0x8000000c, signed)",
        "0x8000000c (drafts 12–19)",
    ] {
        assert!(i.stdout.contains(said), "{said}: {}", i.stdout);
    }
    assert!(!i.stdout.contains("(draft-14)"), "{}", i.stdout);
    for p in [req, resp] {
        std::fs::remove_file(p).unwrap();
    }
}

/// A silent server is said while the query waits, one line per attempt
/// after the first; the closing hint names the clock beside the key, and
/// the flag that would try older versions.
#[test]
fn a_silent_server_is_said_while_the_query_waits() {
    let f = Fixture::start(FixtureConfig {
        mode: Mode::Silent,
        seed: 42,
        ..FixtureConfig::default()
    });
    let (addr, k) = (f.addr().to_string(), key(&f));
    let r = gnomon(&args(&addr, &k, &[]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let waits: Vec<(u32, u32)> = r
        .stderr
        .lines()
        .filter(|l| l.contains(&format!("no answer from {addr} yet")))
        .map(|l| {
            let (_, tail) = l.split_once("retrying, ").expect(l);
            let (k, rest) = tail.split_once(" of ").expect(l);
            let n = rest.split_whitespace().next().expect(l);
            (k.parse().expect(l), n.parse().expect(l))
        })
        .collect();
    // Attempts 2 to N, each said once, the first attempt never.
    let planned = waits.first().map(|w| w.1).expect("no progress line");
    let numbers: Vec<u32> = waits.iter().map(|w| w.0).collect();
    assert_eq!(numbers, (2..=planned).collect::<Vec<_>>(), "{}", r.stderr);
    assert!(waits.iter().all(|w| w.1 == planned), "{}", r.stderr);
    for hint in [
        "check the key",
        "clock is unsynchronized",
        "--clock-unsynchronized answer-with-radius",
        "--version-fallback",
    ] {
        assert!(r.stderr.contains(hint), "{hint}: {}", r.stderr);
    }
    // Under --json the object is still the only thing on stdout.
    let r = gnomon(&args(&addr, &k, &["--json"]));
    assert_eq!(r.json()["exit_code"], 1);
    assert!(r.stderr.contains("retrying, 2 of"), "{}", r.stderr);
}

/// A port that refuses is said to refuse while the query goes on, not to
/// be silent: the user learns at once that nothing listens there.
#[test]
fn a_refusing_port_is_said_to_refuse_while_the_query_goes_on() {
    // Bound and dropped: the kernel answers it with port unreachable.
    let addr = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let k = "iBVjxg/1j7y1+kQUTBYdTabxCppesU/07D4PMDJk2WA=";
    let r = gnomon(&args(&addr, k, &[]));
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let progress: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("retrying,"))
        .collect();
    assert!(!progress.is_empty(), "{}", r.stderr);
    for line in &progress {
        assert!(line.contains("refused the request"), "{}", r.stderr);
        assert!(!line.contains("no answer from"), "{}", r.stderr);
    }
    assert!(r.stderr.contains("nothing listens there"), "{}", r.stderr);
}

#[test]
fn without_a_server_query_names_both_ways_to_give_one() {
    for argv in [&["query"][..], &["query", "--json"]] {
        let r = gnomon(argv);
        assert_eq!(r.code, 64, "{}", r.stderr);
        assert!(
            r.stderr.contains("--key") && r.stderr.contains("--servers"),
            "{}",
            r.stderr
        );
    }
}

#[test]
fn an_empty_list_says_it_has_no_servers() {
    let list = write("empty.json", br#"{"servers": []}"#);
    let r = gnomon(&["query", "--servers", list.to_str().unwrap()]);
    assert_eq!(r.code, 64, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("the list has no servers"), "{}", r.stderr);
    assert!(!r.stderr.contains("()"), "{}", r.stderr);
    std::fs::remove_file(list).unwrap();
}

/// `--report` is a switch as sync's and watch's are: bare it is on, and
/// `=off` turns it off; a word that is no switch is refused.
#[test]
fn report_is_a_switch_like_everywhere_else() {
    let lineup = liar_lineup(43, None);
    let run = |extra: &[&str]| sequence(&lineup.list, extra);
    let asked = "--report given, but";
    let r = run(&["--report"]);
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains(asked), "{}", r.stdout);
    for off in ["--report=off", "--report=no"] {
        let r = run(&[off]);
        assert_eq!(r.code, 3, "{off}: {}{}", r.stdout, r.stderr);
        assert!(!r.stdout.contains(asked), "{off}: {}", r.stdout);
    }
    let r = run(&["--report=maybe"]);
    assert_eq!(r.code, 64, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("neither on nor off"), "{}", r.stderr);
}

/// --report-out says when no report is written and why; an output that
/// cannot be written is 73 whichever flag names it, and says which file.
#[test]
fn outputs_say_what_was_not_written_and_exit_73() {
    let a = Fixture::honest(profiles(&["1"]), 44);
    let b = Fixture::honest(profiles(&["1"]), 45);
    let c = Fixture::honest(profiles(&["1"]), 46);
    let json = server_list(&[("a", &a, 1), ("b", &b, 1), ("c", &c, 1)], None);
    let honest = write("honest3.json", json.as_bytes());
    let out = temp("never.json");
    let r = sequence(&honest, &["--report-out", out.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let said = format!("no report written to {}", out.display());
    assert!(r.stdout.contains(&said), "{}", r.stdout);
    assert!(
        r.stdout.contains("no pair of answers contradicts"),
        "{}",
        r.stdout
    );
    assert!(!out.exists());

    // A liar proved, and the report's directory missing.
    let lineup = liar_lineup(47, None);
    let nowhere = "/nonexistent-gnomon-dir/report.json";
    let r = sequence(&lineup.list, &["--report-out", nowhere]);
    assert_eq!(r.code, 73, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "cannot write the report to {nowhere}: it does not exist"
        )),
        "{}",
        r.stderr
    );
    // The verdict is printed all the same.
    assert!(r.stdout.contains("MALFEASANCE"), "{}", r.stdout);
    let j = sequence(&lineup.list, &["--report-out", nowhere, "--json"]).json();
    assert_eq!(j["exit_code"], 73, "{j}");
    assert_eq!(j["malfeasance"], true, "{j}");
    assert!(
        j["error"]["message"].as_str().unwrap().contains(nowhere),
        "{j}"
    );

    // The same for the saved exchange of a single query.
    let (addr, k) = (a.addr().to_string(), key(&a));
    for flag in ["--save-request", "--save-response"] {
        let r = gnomon(&args(&addr, &k, &[flag, nowhere]));
        assert_eq!(r.code, 73, "{flag}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(nowhere), "{flag}: {}", r.stderr);
        assert!(!r.stderr.contains("os error"), "{flag}: {}", r.stderr);
    }
    std::fs::remove_file(honest).unwrap();
}

/// A report that cannot be delivered says where it went and why in words:
/// no `io:` prefix, no `(os error N)`.
#[test]
fn an_undelivered_report_says_why_without_library_words() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/reports", closed.local_addr().unwrap());
    drop(closed);
    let lineup = liar_lineup(48, Some(&url));
    let r = sequence(
        &lineup.list,
        &[
            "--report",
            "--report-attempts",
            "1",
            "--allow-loopback-http-reports",
        ],
    );
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    let line = r
        .stdout
        .lines()
        .find(|l| l.contains("report NOT delivered"))
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(line.contains(&url), "{line}");
    assert!(line.to_lowercase().contains("refused"), "{line}");
    for library in ["os error", "io:", "Io("] {
        assert!(!line.contains(library), "{library}: {line}");
    }
}
