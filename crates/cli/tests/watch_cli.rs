//! `gnomon watch` over a lineup of real loopback servers, each in a known
//! state: honest `gnomon serve` on three versions, one an hour ahead
//! (libfaketime), one whose only delegation ends in 20 minutes, one
//! silent, one answering garbage. `/api/servers` and `/metrics` must say
//! which is which after the first round.

mod serve_support;
mod sync_support;
mod watch_support;

use std::process::Command;
use std::time::Duration;

use watch_support::{check, server, Lineup, Watch, EXPIRING, GARBAGE, HONEST, LIAR, SILENT};

/// Generous bound on the first round: the silent and garbage servers cost
/// a few seconds of waits each on a busy machine.
const FIRST_ROUND: Duration = Duration::from_secs(90);

fn metric(text: &str, name: &str, server: &str) -> Option<f64> {
    let prefix = format!("{name}{{server=\"{server}\"");
    text.lines()
        .filter(|l| l.starts_with(&prefix))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

/// `gnomon verify-report` on `report` (written to `path`): its exit code
/// (3: proof of malfeasance).
fn verify_report(path: &std::path::Path, report: &[u8]) -> Option<i32> {
    std::fs::write(path, report).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gnomon"))
        .arg("verify-report")
        .arg(path)
        .output()
        .unwrap();
    println!("{}", String::from_utf8_lossy(&out.stdout));
    out.status.code()
}

#[test]
fn each_server_shows_its_state_in_the_api_and_the_metrics() {
    if !sync_support::have_faketime("each_server_shows_its_state_in_the_api_and_the_metrics") {
        return;
    }
    let sink = gnomon_testkit::ReportSink::start(0);
    let lineup: Lineup = watch_support::start_reporting("watch-states", true, Some(&sink.url()));
    let watch = Watch::start_with(&lineup.list, &["--report", "--allow-loopback-http-reports"]);
    let api = watch.first_round(FIRST_ROUND);

    for name in HONEST {
        let s = server(&api, name);
        assert_eq!(s["state"], "ok", "{s}");
        assert_eq!(s["up"], true);
        assert_eq!(check(s, "agreement"), "ok", "{s}");
        // The burst came back whole and every PATH verified.
        assert_eq!(check(s, "batch"), "ok", "{s}");
        assert_eq!(s["batch"]["verified"], s["batch"]["sent"], "{s}");
    }
    assert!(server(&api, HONEST[0])["versions_answered"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v == "rfc-10049"));
    assert_eq!(server(&api, HONEST[1])["version"], "draft-08");
    assert_eq!(server(&api, HONEST[2])["version"], "draft-05");
    // The RFC server batches: some response proved a multi-leaf tree.
    assert!(
        server(&api, HONEST[0])["batch"]["max_depth"]
            .as_u64()
            .unwrap()
            >= 1
    );

    let liar = server(&api, LIAR);
    assert_eq!(liar["state"], "lying", "{liar}");
    assert_eq!(check(liar, "agreement"), "fail");
    let offset = liar["offset_consensus_us"].as_i64().unwrap();
    assert!((offset - 3_600_000_000).abs() < 60_000_000, "{offset}");
    // The chain proves it: the report verifies as proof of malfeasance.
    let report = liar["report"].as_str().expect("a report for the liar");
    let path = lineup.dir.join("report.json");
    assert_eq!(verify_report(&path, report.as_bytes()), Some(3));
    // --report posted one to the list's `reports` URL, and it verifies.
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let posted = loop {
        if let Some(p) = sink.received().into_iter().next() {
            break p;
        }
        assert!(std::time::Instant::now() < until, "no report was posted");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        verify_report(&path, &posted.body),
        Some(3),
        "the posted report does not prove the lie"
    );

    let silent = server(&api, SILENT);
    assert_eq!(silent["state"], "down", "{silent}");
    assert_eq!(silent["failure"], "silent");
    assert_eq!(check(silent, "reachable"), "fail");

    let garbage = server(&api, GARBAGE);
    assert_eq!(garbage["state"], "invalid", "{garbage}");
    assert_eq!(garbage["failure"], "invalid");
    assert_eq!(check(garbage, "signature"), "fail");

    let expiring = server(&api, EXPIRING);
    assert_eq!(expiring["state"], "warning", "{expiring}");
    assert_eq!(check(expiring, "certificate"), "warn");
    assert_eq!(check(expiring, "agreement"), "ok");
    let days = expiring["days_to_expiry"].as_f64().unwrap();
    assert!(days > 0.0 && days < 21.0 / 1440.0, "{days}");

    let (status, m) = watch.get("/metrics");
    assert_eq!(status, 200);
    for name in HONEST.iter().chain([&LIAR, &EXPIRING]) {
        assert_eq!(
            metric(&m, "gnomon_watch_up", name),
            Some(1.0),
            "{name}\n{m}"
        );
    }
    assert_eq!(metric(&m, "gnomon_watch_up", SILENT), Some(0.0));
    assert_eq!(metric(&m, "gnomon_watch_up", GARBAGE), Some(0.0));
    assert_eq!(
        metric(&m, "gnomon_watch_outside_consensus", LIAR),
        Some(1.0)
    );
    assert_eq!(
        metric(&m, "gnomon_watch_outside_consensus", HONEST[0]),
        Some(0.0)
    );
    let liar_offset = metric(&m, "gnomon_watch_offset_seconds", LIAR).unwrap();
    assert!((liar_offset - 3600.0).abs() < 60.0, "{liar_offset}");
    assert!(metric(&m, "gnomon_watch_certificate_expiry_days", EXPIRING).unwrap() < 0.015);
    assert!(metric(&m, "gnomon_watch_certificate_expiry_days", HONEST[0]).unwrap() > 0.5);
    assert!(metric(&m, "gnomon_watch_rtt_seconds", HONEST[0]).is_some());
    // At least the 3 s the unsynchronized server was told to add.
    assert!(metric(&m, "gnomon_watch_radius_seconds", HONEST[0]).unwrap() >= 3.0);
    assert!(m.contains(&format!(
        "gnomon_watch_version_answered{{server=\"{}\",version=\"draft-08\"}} 1",
        HONEST[1]
    )));
    for (name, reason) in [
        (SILENT, "silent"),
        (GARBAGE, "invalid"),
        (LIAR, "outside_consensus"),
    ] {
        let line = format!("gnomon_watch_failures_total{{server=\"{name}\",reason=\"{reason}\"}}");
        assert!(m.contains(&line), "{line} missing\n{m}");
    }
    assert!(!m.contains(&format!(
        "gnomon_watch_failures_total{{server=\"{}\"",
        HONEST[0]
    )));
}
