//! `gnomon bench load` through its library entry point, against in-test
//! responders on loopback. Every run is bounded by a request count and a
//! duration.

use crate::common;

use std::net::UdpSocket;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use common::{Behaviour, TestResponder};
use gnomon_loadgen::{run, LoadConfig, LoadError, Mode, Report, MAX_WINDOW};
use gnomon_protocol::Profile;

static NO_STOP: AtomicBool = AtomicBool::new(false);

fn config(r: &TestResponder, profile: &str) -> LoadConfig {
    let mut cfg = LoadConfig::new(
        r.addr.to_string(),
        r.public_key,
        Profile::by_name(profile).expect("profile"),
    );
    cfg.duration = Duration::from_secs(20);
    cfg.workers = 2;
    cfg
}

fn assert_all_valid(rep: &Report, n: u64) {
    assert_eq!(rep.sent, n, "{rep:?}");
    assert_eq!(rep.answered, n, "{rep:?}");
    assert_eq!(rep.verified, n, "{rep:?}");
    assert_eq!(rep.valid, n, "{rep:?}");
    assert_eq!(rep.invalid, 0, "{rep:?}");
    assert_eq!(rep.lost, 0, "{rep:?}");
    assert_eq!(rep.unmatched + rep.late + rep.duplicate, 0, "{rep:?}");
    let lat = rep.latency.expect("latency");
    assert!(lat.p50_us > 0.0 && lat.p50_us <= lat.p90_us, "{lat:?}");
    assert!(
        lat.p90_us <= lat.p99_us && lat.p99_us <= lat.p999_us,
        "{lat:?}"
    );
    assert!(lat.p999_us <= lat.max_us, "{lat:?}");
}

#[test]
fn rate_mode_against_an_honest_responder_is_all_valid() {
    let r = TestResponder::start(Behaviour::Honest);
    let mut cfg = config(&r, "1");
    cfg.mode = Mode::Rate(4000.0);
    cfg.count = Some(800);
    // At most 2 × 16 requests in flight: however long the responder is
    // kept off the CPU, its socket buffer holds them all, so none can be
    // lost (the default window let a busy machine overflow it: 4 of 800).
    cfg.window = Some(16);
    let rep = run(&cfg, &NO_STOP).expect("run");
    assert_all_valid(&rep, 800);
    // 800 requests at 4000/s take at least 0.2 s: the pacing held.
    assert!(rep.send_secs >= 0.19, "{rep:?}");
    assert_eq!(r.stop(), 800);
}

#[test]
fn max_mode_against_an_honest_responder_is_all_valid() {
    let r = TestResponder::start(Behaviour::Honest);
    let mut cfg = config(&r, "1");
    cfg.mode = Mode::Max;
    cfg.window = Some(16);
    cfg.count = Some(2000);
    let rep = run(&cfg, &NO_STOP).expect("run");
    assert_all_valid(&rep, 2000);
    assert_eq!(rep.window, 16);
}

#[test]
fn every_response_layout_is_matched_and_verified() {
    // Google carries no nonce copy (matched by Merkle proof), drafts 01–02
    // sign it inside SREP, later ones copy it at top level.
    for name in [
        "google",
        "draft-01",
        "draft-07",
        "0x8000000b",
        "draft-12",
        "draft-14",
        "1",
    ] {
        let r = TestResponder::start(Behaviour::Honest);
        let mut cfg = config(&r, name);
        cfg.mode = Mode::Max;
        cfg.window = Some(32);
        cfg.count = Some(300);
        let rep = run(&cfg, &NO_STOP).expect("run");
        assert_all_valid(&rep, 300);
        assert_eq!(rep.version, Profile::by_name(name).unwrap().name);
    }
}

#[test]
fn bad_signatures_are_counted_invalid_by_reason() {
    let r = TestResponder::start(Behaviour::BadSignature);
    let mut cfg = config(&r, "1");
    cfg.mode = Mode::Max;
    cfg.window = Some(8);
    cfg.count = Some(200);
    let rep = run(&cfg, &NO_STOP).expect("run");
    assert_eq!(rep.answered, 200, "{rep:?}");
    assert_eq!(rep.valid, 0, "{rep:?}");
    assert_eq!(rep.invalid, 200, "{rep:?}");
    assert_eq!(rep.invalid_reasons, vec![("response-signature", 200)]);
}

#[test]
fn a_wrong_key_makes_every_response_invalid() {
    let r = TestResponder::start(Behaviour::Honest);
    let mut cfg = config(&r, "google");
    cfg.key = [9; 32].into();
    cfg.mode = Mode::Max;
    cfg.window = Some(8);
    cfg.count = Some(100);
    let rep = run(&cfg, &NO_STOP).expect("run");
    assert_eq!(
        (rep.answered, rep.invalid, rep.valid),
        (100, 100, 0),
        "{rep:?}"
    );
    assert_eq!(rep.invalid_reasons, vec![("delegation-signature", 100)]);
}

#[test]
fn garbage_replies_answer_nothing() {
    let r = TestResponder::start(Behaviour::Garbage);
    let mut cfg = config(&r, "1");
    cfg.mode = Mode::Rate(2000.0);
    cfg.count = Some(100);
    // Garbage frees no window slot, so every request waits out the whole
    // timeout: long enough for a responder kept off the CPU on a busy
    // machine to have sent every reply (counted unmatched) by then.
    cfg.timeout = Duration::from_secs(2);
    let rep = run(&cfg, &NO_STOP).expect("run");
    assert_eq!(rep.sent, 100);
    assert_eq!(rep.answered, 0);
    assert_eq!(rep.lost, 100);
    assert_eq!(rep.unmatched, 100, "{rep:?}");
    assert_eq!(rep.loss_pct(), 100.0);
    assert!(rep.latency.is_none());
}

#[test]
fn a_black_hole_loses_everything_and_the_run_ends_on_time() {
    // Bound but never read: no reply and no ICMP error.
    let hole = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut cfg = LoadConfig::new(
        hole.local_addr().unwrap().to_string(),
        [1; 32],
        Profile::rfc(),
    );
    cfg.mode = Mode::Rate(1000.0);
    cfg.duration = Duration::from_millis(400);
    cfg.timeout = Duration::from_millis(200);
    let t = Instant::now();
    let rep = run(&cfg, &NO_STOP).expect("run");
    let took = t.elapsed();
    assert!(rep.sent >= 300 && rep.sent <= 410, "{rep:?}");
    assert_eq!(rep.answered, 0);
    assert_eq!(rep.lost, rep.sent);
    assert_eq!(rep.loss_pct(), 100.0);
    assert!(took >= Duration::from_millis(400), "{took:?}");
    // Duration plus one timeout, with room for a loaded test machine.
    assert!(took < Duration::from_millis(1500), "{took:?}");
}

#[test]
fn a_closed_port_is_survived_and_reported() {
    // Nothing listens: ICMP port-unreachable comes back as socket errors.
    let port = {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap().port()
    };
    let mut cfg = LoadConfig::new(format!("127.0.0.1:{port}"), [1; 32], Profile::rfc());
    cfg.mode = Mode::Rate(500.0);
    cfg.workers = 1;
    cfg.duration = Duration::from_millis(200);
    cfg.timeout = Duration::from_millis(100);
    let rep = run(&cfg, &NO_STOP).expect("run");
    assert!(rep.sent > 0, "{rep:?}");
    assert_eq!(rep.answered, 0);
    assert!(rep.send_errors + rep.recv_errors > 0, "{rep:?}");
}

#[test]
fn remote_targets_are_refused_without_allow_remote() {
    // Documentation addresses (RFC 5737, RFC 3849): refused before any
    // socket exists, so nothing is sent.
    for target in ["192.0.2.1:2002", "[2001:db8::1]:2002"] {
        let cfg = LoadConfig::new(target, [1; 32], Profile::rfc());
        match run(&cfg, &NO_STOP) {
            Err(e @ LoadError::RemoteTarget(_)) => {
                assert!(e.to_string().contains("--allow-remote"), "{e}");
            }
            other => panic!("{target}: {other:?}"),
        }
    }
}

#[test]
fn out_of_range_values_are_refused_by_name() {
    let base = LoadConfig::new("127.0.0.1:9", [1; 32], Profile::rfc());
    type Edit = Box<dyn Fn(&mut LoadConfig)>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "duration",
            Box::new(|c| c.duration = Duration::from_secs(301)),
        ),
        ("duration", Box::new(|c| c.duration = Duration::ZERO)),
        ("timeout", Box::new(|c| c.timeout = Duration::from_secs(11))),
        ("workers", Box::new(|c| c.workers = 0)),
        ("window", Box::new(|c| c.window = Some(MAX_WINDOW + 1))),
        ("rate", Box::new(|c| c.mode = Mode::Rate(0.0))),
        ("rate", Box::new(|c| c.mode = Mode::Rate(f64::NAN))),
        ("request-size", Box::new(|c| c.request_size = 1023)),
        ("request-size", Box::new(|c| c.request_size = 64)),
        ("request-size", Box::new(|c| c.request_size = 2000)),
        ("verify-fraction", Box::new(|c| c.verify_fraction = 1.5)),
        ("count", Box::new(|c| c.count = Some(0))),
        ("target", Box::new(|c| c.target = "no port".into())),
    ];
    for (name, edit) in cases {
        let mut cfg = base.clone();
        edit(&mut cfg);
        match run(&cfg, &NO_STOP) {
            Err(LoadError::Invalid { what, .. }) => assert_eq!(what, name, "{cfg:?}"),
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn verification_is_sampled_by_fraction() {
    let r = TestResponder::start(Behaviour::Honest);
    let mut cfg = config(&r, "1");
    cfg.mode = Mode::Max;
    cfg.window = Some(16);
    cfg.count = Some(1000);
    cfg.verify_fraction = 0.0;
    let rep = run(&cfg, &NO_STOP).expect("run");
    assert_eq!(
        (rep.answered, rep.verified, rep.valid),
        (1000, 0, 0),
        "{rep:?}"
    );

    cfg.verify_fraction = 0.25;
    let rep = run(&cfg, &NO_STOP).expect("run");
    assert_eq!(rep.answered, 1000);
    assert_eq!(rep.valid, rep.verified);
    assert!((150..=350).contains(&rep.verified), "{rep:?}");
}

#[test]
fn a_set_stop_flag_ends_the_run_at_once() {
    let r = TestResponder::start(Behaviour::Honest);
    let mut cfg = config(&r, "1");
    cfg.mode = Mode::Rate(1000.0);
    let stop = AtomicBool::new(true);
    let t = Instant::now();
    let rep = run(&cfg, &stop).expect("run");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(rep.sent <= 2, "{rep:?}");
    assert_eq!(rep.answered + rep.lost, rep.sent);
}

#[test]
fn the_json_report_has_every_key() {
    let r = TestResponder::start(Behaviour::Honest);
    let mut cfg = config(&r, "1");
    cfg.mode = Mode::Rate(2000.0);
    cfg.count = Some(50);
    let rep = run(&cfg, &NO_STOP).expect("run");
    let text = rep.to_json().to_string();
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    for key in [
        "target",
        "version",
        "mode",
        "rate",
        "workers",
        "window",
        "request_size",
        "verify_fraction",
        "send_secs",
        "elapsed_secs",
        "sent",
        "answered",
        "verified",
        "valid",
        "invalid",
        "invalid_reasons",
        "lost",
        "loss_pct",
        "late",
        "duplicate",
        "unmatched",
        "throttled",
        "send_errors",
        "recv_errors",
        "send_rate",
        "answer_rate",
        "latency_us",
        "cpu_secs",
    ] {
        assert!(v.get(key).is_some(), "missing {key}: {text}");
    }
    assert_eq!(v["sent"], 50);
    assert_eq!(v["valid"], 50);
    assert_eq!(v["mode"], "rate");
    assert_eq!(v["loss_pct"], 0.0);
    for p in ["p50", "p90", "p99", "p99_9", "max"] {
        assert!(
            v["latency_us"][p].as_f64().is_some_and(|x| x > 0.0),
            "{p}: {text}"
        );
    }
    let human = rep.to_text();
    assert!(
        human.contains("answered") && human.contains("p99.9"),
        "{human}"
    );
}
