//! `gnomon sync --metrics`: Prometheus text scraped from a real
//! `gnomon sync --interval 1s` measuring real `gnomon serve` processes
//! (one lying through libfaketime), consistent with the rounds it logs;
//! and the endpoint's limits (the server's: connection cap, a deadline per
//! connection) keep slow and piled-up clients from stopping the rounds.

use crate::sync_support;

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gnomon_testkit::ReportSink;
use sync_support::{
    every_second, have_faketime, metrics_addr, real_now_us, scrape, start_servers, tempdir, value,
    Service,
};

const PATIENCE: Duration = Duration::from_secs(30);
const STOP: Duration = Duration::from_secs(10);

fn args<'a>(list: &'a str, dir: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["--metrics", "127.0.0.1:0"];
    a.extend_from_slice(extra);
    every_second(list, dir, &a)
}

#[test]
fn metrics_agree_with_the_rounds_a_liar_counted_as_disagreeing() {
    let test = "sync_metrics_round";
    if !have_faketime(test) {
        return;
    }
    let sink = ReportSink::start(0);
    let spec = [
        ("alpha", None),
        ("bravo", None),
        ("charlie", None),
        ("liar", Some("+3600")),
    ];
    let servers = start_servers(test, &spec, Some(&sink.url()));
    let dir = tempdir(test);
    // No chrony listens there: every sample fails, and is counted.
    let chrony = dir.join("no-chrony.sock");
    let mut s = Service::start(&args(
        servers.list.to_str().unwrap(),
        dir.to_str().unwrap(),
        &[
            "--allow-loopback-http-reports",
            "--chrony-sock",
            chrony.to_str().unwrap(),
            // Wider than any consensus here (the servers' radius is 3 s,
            // up to 16 s on an unsynchronized host): every sample is tried.
            "--chrony-max-radius",
            "30s",
            "--max-radius",
            "30s",
        ],
    ));
    let addr = metrics_addr(&mut s);
    assert!(s.wait_for("round 2: consensus", PATIENCE), "{}", s.log);
    assert!(s.log.contains("out: liar"), "{}", s.log);
    // The POST has its own thread: before or after the round's line.
    assert!(
        s.log.contains("report posted to") || s.wait_for("report posted to", PATIENCE),
        "{}",
        s.log
    );
    let text = scrape(addr, PATIENCE).expect("a scrape");

    for (series, want) in [
        ("gnomon_sync_servers{state=\"agreeing\"}", 3.0),
        ("gnomon_sync_servers{state=\"disagreeing\"}", 1.0),
        ("gnomon_sync_servers{state=\"unreachable\"}", 0.0),
        ("gnomon_sync_quorum_met", 1.0),
        ("gnomon_sync_listed_servers", 4.0),
        // The assumption: one liar of four, so three must answer.
        ("gnomon_sync_voters", 4.0),
        ("gnomon_sync_assumed_liars", 1.0),
        ("gnomon_sync_answering_voters", 4.0),
        ("gnomon_sync_needed_voters", 3.0),
        ("gnomon_sync_rounds_total{result=\"failed\"}", 0.0),
        ("gnomon_sync_reports_total{result=\"sent\"}", 1.0),
        ("gnomon_sync_list_refreshes_total{result=\"ok\"}", 0.0),
    ] {
        assert_eq!(value(&text, series), want, "{series}: {text}");
    }
    assert!(value(&text, "gnomon_sync_rounds_total{result=\"consensus\"}") >= 2.0);
    assert_eq!(sink.received().len(), 1);
    // sync's clock is real: the consensus offset is within its radius of
    // zero, and the radius is the honest servers' (3 s, or the kernel's
    // error estimate on an unsynchronized host) plus round trips.
    let (offset, radius) = (
        value(&text, "gnomon_sync_offset_seconds"),
        value(&text, "gnomon_sync_radius_seconds"),
    );
    assert!(radius > 0.0 && radius <= 60.0, "{text}");
    assert!(offset.abs() <= radius, "{text}");
    let last = value(&text, "gnomon_sync_last_success_timestamp_seconds");
    let now = real_now_us() as f64 / 1e6;
    assert!((now - last).abs() < 60.0, "{last} vs {now}");
    // The endpoint's own counters; the samples chrony did not get.
    assert!(text.contains("gnomon_http_connections_total{outcome=\"served\"}"));
    // Round 1's sample at least (the sinks run after the round's line).
    let failed = "gnomon_sync_chrony_samples_total{result=\"failed\"}";
    assert!(value(&text, failed) >= 1.0, "{text}");
    let sent = "gnomon_sync_chrony_samples_total{result=\"sent\"}";
    assert_eq!(value(&text, sent), 0.0, "{text}");
    let too_wide = "gnomon_sync_chrony_samples_total{result=\"too_wide\"}";
    assert_eq!(value(&text, too_wide), 0.0, "{text}");

    // The servers gone: the next round counts them unreachable, and the
    // offset of the last good round stays.
    drop(servers);
    assert!(s.wait_for("no consensus", PATIENCE), "{}", s.log);
    let text = scrape(addr, PATIENCE).expect("a scrape");
    // None agrees; the servers are unreachable, asked or backing off (one
    // that answered before it stopped, in a round without a consensus,
    // disagrees), and the three states add up to the list.
    let state = |s: &str| value(&text, &format!("gnomon_sync_servers{{state=\"{s}\"}}"));
    assert_eq!(state("agreeing"), 0.0, "{text}");
    assert!(state("unreachable") >= 3.0, "{text}");
    assert_eq!(
        state("agreeing") + state("disagreeing") + state("unreachable"),
        4.0,
        "{text}"
    );
    assert_eq!(value(&text, "gnomon_sync_quorum_met"), 0.0);
    assert!(value(&text, "gnomon_sync_rounds_total{result=\"no_consensus\"}") >= 1.0);
    // (A good round may have ended between the scrape and the stop, so
    // the kept offset is that of some good round: within its radius.)
    let kept = value(&text, "gnomon_sync_offset_seconds");
    assert!(
        kept.abs() <= value(&text, "gnomon_sync_radius_seconds"),
        "{text}"
    );
    s.stop_cleanly(STOP);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn slow_and_piled_up_scrapers_stop_neither_rounds_nor_sigterm() {
    let test = "sync_metrics_hostile";
    let honest = [("alpha", None), ("bravo", None), ("charlie", None)];
    let servers = start_servers(test, &honest, None);
    let dir = tempdir(test);
    let mut s = Service::start(&args(
        servers.list.to_str().unwrap(),
        dir.to_str().unwrap(),
        &[],
    ));
    let addr = metrics_addr(&mut s);
    assert!(s.wait_for("round 1: consensus", PATIENCE), "{}", s.log);
    // Twice the connection cap of slow clients, and more idle connections
    // that send nothing at all, all from one source.
    let stop = Arc::new(AtomicBool::new(false));
    let slow: Vec<_> = (0..32)
        .map(|_| gnomon_testkit::slowloris(addr, "/metrics", stop.clone()))
        .collect();
    let idle: Vec<TcpStream> = (0..64)
        .filter_map(|_| TcpStream::connect(addr).ok())
        .collect();
    // The rounds go on.
    let before = s.log.lines().filter(|l| l.contains(": consensus")).count();
    let mut seen = before;
    let until = Instant::now() + PATIENCE;
    while seen < before + 3 && Instant::now() < until {
        assert!(s.wait_for(": consensus", PATIENCE), "{}", s.log);
        seen += 1;
    }
    assert!(seen >= before + 3, "{}", s.log);
    // Every slow client is cut off (the deadline from accept), and then a
    // scrape is served and counts what happened.
    for h in slow {
        let lasted = h.join().unwrap().expect("a slow client was never closed");
        assert!(lasted < PATIENCE, "closed only after {lasted:?}");
    }
    drop(idle);
    let until = Instant::now() + PATIENCE;
    let text = loop {
        if let Some(t) = scrape(addr, Duration::from_secs(3)) {
            break t;
        }
        assert!(Instant::now() < until, "no scrape served after the flood");
    };
    // One source past its share: its oldest connections made room for
    // its newest.
    assert!(value(&text, "gnomon_http_connections_total{outcome=\"evicted\"}") >= 1.0);
    assert!(
        value(
            &text,
            "gnomon_http_connections_evicted_total{reason=\"per_source\"}"
        ) >= 1.0
    );
    assert!(value(&text, "gnomon_sync_rounds_total{result=\"consensus\"}") >= 4.0);
    // SIGTERM with slow clients connected again: no wait for them.
    let more: Vec<_> = (0..8)
        .map(|_| gnomon_testkit::slowloris(addr, "/metrics", stop.clone()))
        .collect();
    s.stop_cleanly(STOP);
    stop.store(true, Ordering::Relaxed);
    for h in more {
        let _ = h.join();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
