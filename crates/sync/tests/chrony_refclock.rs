//! Samples from consensus to a real chronyd's `refclock SOCK`: chronyd
//! (Debian's package, clock control off) must show the Roughtime refclock
//! with the offset the servers vouch for.
//!
//! The servers are in-process fixtures speaking draft 07, whose µs
//! timestamps make the consensus narrow; crates/cli/tests/cli/sync_chrony.rs
//! runs the same check with `gnomon serve` and `gnomon sync` processes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gnomon_client::{Backoff, Client, Config, Plan, Selection, Server};
use gnomon_protocol::Profile;
use gnomon_sync::chrony::{conf, ChronySock, Sample};
use gnomon_sync::Settings;
use gnomon_testkit::chrony::Chronyd;
use gnomon_testkit::{profiles, Fixture, FixtureConfig};

const RADIUS_US: u32 = 50_000;
/// Draft 07: timestamps in µs, so the consensus is as narrow as RADI.
const VERSION: &str = "0x80000007";
/// What chrony is told: RADI and the round trips on loopback are inside it.
const BOUND: Duration = Duration::from_millis(100);

/// The options of the refclock line `conf` prints for a sample a second
/// (the feeder's pace) within `BOUND`, after `extra`; and its other lines.
fn chrony_lines(extra: &str) -> (String, String) {
    let text = conf(&Settings {
        chrony_sock: Some("/placeholder.sock".into()),
        interval: Duration::from_secs(1),
        jitter: 0,
        chrony_max_radius: BOUND,
        ..Settings::default()
    })
    .unwrap();
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let refclock = lines.next().unwrap();
    let options = refclock
        .strip_prefix("refclock SOCK /placeholder.sock refid RTIM ")
        .unwrap_or_else(|| panic!("{refclock}"));
    let rest: Vec<&str> = lines.collect();
    (format!("{options} {extra}"), rest.join("\n"))
}

fn sender(chronyd: &Chronyd) -> ChronySock {
    ChronySock::new(chronyd.sock(), BOUND, Arc::new(|_: &str| {}))
}

fn fixtures(offset_us: i64) -> Vec<Fixture> {
    (1..=3)
        .map(|seed| {
            Fixture::start(FixtureConfig {
                profiles: profiles(&[VERSION]),
                offset_us,
                radius_us: RADIUS_US,
                seed,
                ..FixtureConfig::default()
            })
        })
        .collect()
}

/// Measure and send a sample every half second until dropped; the widest
/// consensus radius seen, µs.
struct Feeder {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<(i128, u64)>>,
}

impl Feeder {
    fn start(fixtures: &[Fixture], mut sock: ChronySock) -> Feeder {
        let servers: Vec<Server> = fixtures
            .iter()
            .map(|f| {
                // Discovery never falls back to an old version on silence:
                // name it.
                Server::at(&f.addr().to_string(), f.public_key())
                    .unwrap()
                    .with_version(Profile::by_name(VERSION).unwrap())
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut client = Client::new(Config {
                backoff: Backoff {
                    initial: Duration::from_millis(300),
                    factor: 1.5,
                    max: Duration::from_secs(2),
                    attempts: 3,
                },
                ..Config::default()
            });
            let plan = Plan {
                selection: Selection::All,
                passes: 1,
                assumption: None,
            };
            let mut widest = 0;
            while !flag.load(Ordering::Relaxed) {
                let seq = client.measure(&servers, &plan).expect("measurement");
                let Some(c) = seq.agreement.consensus.as_ref() else {
                    panic!(
                        "no consensus: {:?}",
                        seq.entries
                            .iter()
                            .map(|e| e.result.as_ref().err())
                            .collect::<Vec<_>>()
                    )
                };
                widest = widest.max(c.radius_us());
                let _ = sock.send(&Sample::of_sequence(&seq).expect("sample"));
                // chrony is polled every second (poll 0): twice a second
                // gives each poll a sample.
                std::thread::park_timeout(Duration::from_millis(500));
            }
            (widest, sock.counters().sent())
        });
        Feeder {
            stop,
            thread: Some(thread),
        }
    }

    /// Panics when the feeding thread has (it panicked).
    fn check(&self) {
        assert!(
            !self.thread.as_ref().is_some_and(|t| t.is_finished()),
            "the feeder stopped"
        );
    }

    fn finish(mut self) -> (i128, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Feeder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn chrony_selects_roughtime_as_its_source_when_the_servers_agree_with_us() {
    let (options, conf) = chrony_lines("");
    assert_eq!(options, "poll 0 filter 1 delay 0.2 ");
    let Some(chronyd) = Chronyd::start("chrony_selects_roughtime", &options, &conf) else {
        return;
    };
    let servers = fixtures(0);
    let feeder = Feeder::start(&servers, sender(&chronyd));
    let s = chronyd.wait_for("the refclock selected", Duration::from_secs(60), |s, n| {
        feeder.check();
        s.state == '*' && n >= 3
    });
    let tracking = chronyd.tracking().expect("chronyc tracking");
    let (widest_us, sent) = feeder.finish();
    // With -x chrony never corrects the clock: `tracking` says how far
    // behind it believes the clock is, which is what the samples said.
    let bound = widest_us as f64 / 1e6 + 0.05;
    assert_eq!(tracking.reference, "RTIM", "{tracking:?}");
    assert!(
        tracking.behind.abs() <= bound,
        "{tracking:?} {s:?}, bound {bound}"
    );
    assert!(sent >= 3, "{sent}");
}

#[test]
fn chrony_sees_servers_300_s_ahead_as_a_source_300_s_ahead() {
    // noselect: chrony measures it but never steers by it, so its offset
    // stays the raw one (with -x, a selected source's offset would be
    // folded into chrony's idea of the clock and fade from `sources`).
    let (options, conf) = chrony_lines("noselect");
    let Some(chronyd) = Chronyd::start("chrony_sees_300_s", &options, &conf) else {
        return;
    };
    let servers = fixtures(300_000_000);
    let feeder = Feeder::start(&servers, sender(&chronyd));
    let s = chronyd.wait_for("three samples", Duration::from_secs(60), |s, n| {
        feeder.check();
        s.last_rx.is_some() && n >= 3
    });
    let (widest_us, _) = feeder.finish();
    // chrony prints local minus source: a source ahead is negative.
    let bound = widest_us as f64 / 1e6 + 0.05;
    assert!(
        (s.measured_offset + 300.0).abs() <= bound,
        "{s:?}, bound {bound}\n{}",
        chronyd.log()
    );
    assert!(s.reach != 0, "{s:?}");
}
