//! The service's judged time: a consensus proving the true time later
//! than the local clock expires a list the clock alone would keep, a
//! lower bound proven later never lowers it, and the merge installed then
//! names no server.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gnomon_protocol::signed_list::Pins;

use super::*;
use crate::signed::testing::Monitor;
use crate::signed::{Fetched, Kept, Standing};

fn quiet() -> Log {
    Arc::new(|_: &str| {})
}

fn store(name: &str) -> (std::path::PathBuf, Store) {
    let d = std::env::temp_dir().join(format!(
        "gnomon-service-signed-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    let s = Store::open(&d).unwrap();
    (d, s)
}

/// A service's signed lists with no URL to fetch from and one list of
/// `a` kept, expiring at `expires`.
fn with_kept(a: &Monitor, expires: i64) -> Signed {
    let pins = Pins::new(vec![a.key()], 1).unwrap();
    let mut monitors = Monitors::new(pins.clone());
    let now = local_unix();
    let doc = a.list(&[1, 2, 3], 1, now - 10, expires);
    let list = pins
        .check(&doc, &a.sign(&doc), now, &Default::default())
        .unwrap();
    monitors.restore(Kept {
        list,
        url: "http://a/l".into(),
        fetched_unix: now,
    });
    Signed {
        monitors,
        fetcher: Fetcher::signed(None, Duration::from_secs(1)).unwrap(),
        urls: Vec::new(),
        every: Duration::from_secs(3600),
        retry: Duration::from_secs(3600),
        jitter: 0,
        next: Instant::now() + Duration::from_secs(3600),
        pending: None,
        counts: Arc::default(),
        proven: None,
        said: None,
        written: None,
    }
}

#[test]
fn a_consensus_later_than_the_clock_expires_a_list_the_clock_would_keep() {
    let a = Monitor::new(1, "a");
    let local = local_unix();
    let mut s = with_kept(&a, local + 3600);
    let (dir, st) = store("consensus");
    assert_eq!(s.judged_by(), "the local clock");
    assert_eq!(s.monitors.standing(0, s.judged()), Standing::Current);
    let first = s.poll(b"", &st, &quiet()).expect("the merged list");
    assert_eq!(first.servers.len(), 3);
    assert!(s.poll(&first.raw, &st, &quiet()).is_none());

    // The quorum proved the true time is two hours ahead of this clock.
    s.proven_at_least(i128::from(local + 7200) * 1_000_000, Instant::now());
    assert!(s.judged() >= local + 7200);
    assert!(
        s.judged_by().contains("the last consensus"),
        "{}",
        s.judged_by()
    );
    assert_eq!(s.monitors.standing(0, s.judged()), Standing::Expired);
    let none = s.poll(&first.raw, &st, &quiet()).expect("a new list");
    assert!(none.servers.is_empty());
    assert!(s.shortfall().unwrap().contains("expired at"));

    // A weaker bound proven later does not bring the list back.
    s.proven_at_least(i128::from(local) * 1_000_000, Instant::now());
    assert!(s.judged() >= local + 7200);
    assert!(s.poll(&none.raw, &st, &quiet()).is_none());
    let status = read_back(&mut s, &st);
    assert_eq!(status.monitors[0].standing, "expired");
    assert_eq!(status.servers, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_fetch_that_brings_nothing_new_is_retried_at_the_round_interval() {
    let a = Monitor::new(1, "a");
    let local = local_unix();
    let mut s = with_kept(&a, local + 86_400);
    s.retry = Duration::from_secs(60);
    let (dir, st) = store("retry");
    let failed = Fetch {
        lists: vec![Fetched {
            url: "http://a/l".into(),
            outcome: Err(signed::NotAccepted::Fetch {
                url: "http://a/l".into(),
                failure: crate::refresh::Failure::Timeout,
            }),
        }],
        merged: s.monitors.merged(local),
    };
    s.take(&failed, local, &st, &quiet());
    assert_eq!(s.monitors.standing(0, local), Standing::Kept);
    assert!(s.next <= Instant::now() + Duration::from_secs(60));
    let status = read_back(&mut s, &st);
    assert_eq!(status.monitors[0].standing, "kept");
    assert_eq!(status.failures["timeout"], 1);
    assert!(status.monitors[0]
        .failure
        .as_deref()
        .unwrap()
        .contains("timed out"));
    // And the metrics' view says the same.
    let v = s.report(&st, &quiet());
    assert_eq!(
        (v.in_force, v.servers, v.monitors[0].standing.as_str()),
        (1, 3, "kept")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn read_back(s: &mut Signed, st: &Store) -> Status {
    s.report(st, &quiet());
    store::read_status(st).unwrap().unwrap()
}

#[test]
fn metrics_show_each_key_its_standing_and_the_counts_by_label() {
    let a = Monitor::new(1, "a \"quoted\"");
    let mut s = with_kept(&a, local_unix() + 3600);
    let (dir, st) = store("metrics");
    let m = crate::metrics::SyncMetrics::default();
    // The service counts into the metrics' own counters.
    s.counts = m.signed.clone();
    s.counts.bump("replayed");
    s.counts.bump("timeout");
    s.counts.accepted();
    m.set_signed(s.report(&st, &quiet()));
    let text = m.render();
    let labels = format!(
        "key=\"{}\",comment=\"a \\\"quoted\\\"\"",
        a.key().fingerprint()
    );
    for line in [
        format!("gnomon_sync_signed_list_state{{{labels},state=\"current\"}} 1"),
        format!("gnomon_sync_signed_list_state{{{labels},state=\"kept\"}} 0"),
        format!("gnomon_sync_signed_list_sequence{{{labels}}} 1"),
        "gnomon_sync_signed_list_servers 3".to_string(),
        "gnomon_sync_signed_lists_in_force 1".to_string(),
        "gnomon_sync_signed_lists_threshold 1".to_string(),
        "gnomon_sync_signed_lists_accepted_total 1".to_string(),
        "gnomon_sync_signed_list_refusals_total{reason=\"replayed\"} 1".to_string(),
        "gnomon_sync_signed_list_refusals_total{reason=\"reused\"} 0".to_string(),
        "gnomon_sync_signed_list_fetch_failures_total{class=\"timeout\"} 1".to_string(),
        "gnomon_sync_signed_list_fetch_failures_total{class=\"tls\"} 0".to_string(),
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
