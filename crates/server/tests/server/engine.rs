//! The engine on loopback: every profile answered and verified, batches
//! formed under load, bad input dropped and counted, no allocation in the
//! worker loop.

use crate::common;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use gnomon_protocol::{verify_response, KeyPair, Offer, Profile, ResponderOptions, PROFILES};
use gnomon_server::keys::mint_epoch;
use gnomon_server::limit::LimitConfig;
use gnomon_server::stats::{Drop, WorkerStats};
use gnomon_server::worker::{live, ClockState, Worker, WorkerConfig};
use gnomon_server::{sys, Engine, EngineConfig};
use gnomon_testkit::request;

use common::{config, worker_config};

fn engine(workers: usize) -> (Engine, KeyPair) {
    engine_with(workers, worker_config(64), Duration::from_secs(1800))
}

fn engine_with(workers: usize, worker: WorkerConfig, rotation: Duration) -> (Engine, KeyPair) {
    let lt = KeyPair::from_seed(&[9; 32]);
    let config = EngineConfig {
        workers,
        key_rotation: rotation,
        ..config("127.0.0.1:0", worker)
    };
    (Engine::start(config, vec![lt.clone()]).unwrap(), lt)
}

fn client() -> UdpSocket {
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c
}

/// Send `reqs` all at once, then collect one answer per request.
fn exchange(c: &UdpSocket, to: SocketAddr, reqs: &[Vec<u8>]) -> Vec<Vec<u8>> {
    for r in reqs {
        c.send_to(r, to).unwrap();
    }
    let mut out = Vec::new();
    let mut buf = [0u8; 2048];
    for _ in reqs {
        let (n, _) = c.recv_from(&mut buf).expect("an answer for every request");
        out.push(buf[..n].to_vec());
    }
    out
}

#[test]
fn every_profile_is_answered_and_verifies() {
    let (engine, lt) = engine(2);
    let to = engine.local[0];
    let c = client();
    // Every version served over UDP (not ML-DSA-44's: tests/pq.rs).
    for profile in PROFILES.iter().filter(|p| p.udp) {
        let reqs: Vec<Vec<u8>> = (0..8).map(|i| request(profile, i)).collect();
        let answers = exchange(&c, to, &reqs);
        for a in &answers {
            // Match the answer to its request by trying each (order may vary).
            let ok = reqs
                .iter()
                .any(|r| verify_response(r, a, &lt.public()).is_ok());
            assert!(ok, "{}: an answer did not verify", profile.name);
            assert!(a.len() <= 1024);
        }
    }
    let stats = engine.shutdown().unwrap();
    let udp = PROFILES.iter().filter(|p| p.udp).count();
    assert_eq!(stats.total_responses(), 8 * udp as u64);
    for p in PROFILES.iter() {
        let expected = if p.udp { 8 } else { 0 };
        assert_eq!(stats.responses[usize::from(p.id.0)], expected, "{}", p.name);
    }
}

#[test]
fn bad_input_is_dropped_and_counted() {
    let (engine, lt) = engine(1);
    let to = engine.local[0];
    let c = client();
    let good = request(Profile::rfc(), 1);
    let mut bad_framing = good.clone();
    bad_framing[8] ^= 1;
    let mut bad_type = request(Profile::rfc(), 2);
    // TYPE's value sits right before the padding: find it through the parser.
    let msg_at = 12;
    let m = gnomon_protocol::wire::Message::parse(&bad_type[msg_at..]).unwrap();
    let type_off = m.require(gnomon_protocol::Tag::TYPE).unwrap().as_ptr() as usize
        - bad_type.as_ptr() as usize;
    bad_type[type_off] = 1;
    let cases: Vec<(Vec<u8>, Drop)> = vec![
        (vec![0u8; 100], Drop::TooShort),
        (vec![0u8; 1600], Drop::Oversized),
        (bad_framing, Drop::Framing),
        (vec![0xffu8; 1024], Drop::Message),
        (bad_type, Drop::Type),
    ];
    for (d, _) in &cases {
        c.send_to(d, to).unwrap();
    }
    // A good request after the bad ones: its answer proves the bad ones were
    // processed (same socket, same worker, in order).
    let answer = exchange(&c, to, std::slice::from_ref(&good));
    verify_response(&good, &answer[0], &lt.public()).unwrap();
    let stats = engine.shutdown().unwrap();
    for (_, why) in &cases {
        assert_eq!(stats.drops[*why as usize], 1, "{}", why.label());
    }
    assert_eq!(stats.total_responses(), 1);
}

#[test]
fn batches_form_under_load_and_the_worker_loop_does_not_allocate() {
    let lt = KeyPair::from_seed(&[4; 32]);
    let epoch = mint_epoch(
        &[gnomon_server::keys::KeySource::from(lt.clone())],
        now_us(),
        3_600_000_000,
        60_000_000,
    )
    .unwrap();
    // The signer measured is the one production uses on this CPU.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    if graviola::util::is_cpu_supported() {
        assert_eq!(epoch.identities[0].signer.backend(), "graviola");
    }
    let socket = sys::udp_socket(
        "127.0.0.1:0".parse().unwrap(),
        Some(4 << 20),
        Duration::from_millis(100),
    )
    .unwrap();
    let to = socket.local_addr().unwrap().as_socket().unwrap();
    let worker = Worker {
        socket,
        // Room for 128, so a read of 64 also takes the batch-wait path.
        // Loopback is not exempt here, so every datagram goes through the
        // lists, the prefix table and (draft 01) the signature budget.
        config: live(WorkerConfig {
            batch_wait_us: 1_000,
            options: ResponderOptions {
                batch_disputed: false,
                google_nonce: false,
            },
            limit: LimitConfig {
                rate: Some(1_000),
                burst: 1_000,
                allow: Vec::new(),
                deny: vec!["192.0.2.0/24".parse().unwrap()],
                ..LimitConfig::default()
            },
            ..worker_config(128)
        }),
        keys: Arc::new(ArcSwap::from_pointee(epoch)),
        clock: Arc::new(ClockState::new(3_000_000)),
        stop: Arc::new(AtomicBool::new(false)),
        published: Arc::new(Mutex::new(WorkerStats::default())),
        broadcasts: Default::default(),
        heartbeat: Default::default(),
    };
    let mut state = worker.prepare();
    // Warm up: one request answered outside the measured window.
    let c = client();
    let warm = request(Profile::rfc(), 0);
    c.send_to(&warm, to).unwrap();
    while worker.serve_once(&mut state).unwrap() == 0 {}
    let mut buf = [0u8; 2048];
    c.recv_from(&mut buf).unwrap();
    // A reload that changes no table: the worker takes it inside the
    // measured window, and that must not allocate either.
    let reloaded = WorkerConfig {
        max_queue_delay_us: 4_000_000,
        ..(**worker.config.load()).clone()
    };
    worker.config.store(Arc::new(reloaded));
    // Queue 64 requests before the worker reads: they arrive as one batch.
    // Four are draft 01, answered one signature each within the budget.
    let draft01 = Profile::by_name("draft-01").unwrap();
    let reqs: Vec<Vec<u8>> = (1..=64)
        .map(|i| request(if i <= 4 { draft01 } else { Profile::rfc() }, i))
        .collect();
    for r in &reqs {
        c.send_to(r, to).unwrap();
    }
    let before = state.stats;
    let info = allocation_counter::measure(|| {
        let mut got = 0;
        for _ in 0..50 {
            got += worker.serve_once(&mut state).unwrap();
            if got >= 64 {
                break;
            }
        }
    });
    assert_eq!(state.stats.total_responses() - before.total_responses(), 64);
    assert!(
        state.stats.signatures - before.signatures < 64,
        "requests were batched"
    );
    assert_eq!(state.stats.responses[usize::from(draft01.id.0)], 4);
    assert_eq!(state.stats.drops, WorkerStats::default().drops);
    assert_eq!(info.count_total, 0, "the worker loop allocated");
    for _ in 0..64 {
        let (n, _) = c.recv_from(&mut buf).unwrap();
        assert!(reqs
            .iter()
            .any(|r| verify_response(r, &buf[..n], &lt.public()).is_ok()));
    }
}

fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

#[test]
fn requests_that_waited_too_long_are_dropped_before_any_crypto() {
    let mut cfg = worker_config(64);
    // Any wait at all is too long: the kernel's receive timestamp always
    // precedes the worker's clock read.
    cfg.max_queue_delay_us = 0;
    let (engine, _) = engine_with(1, cfg, Duration::from_secs(1800));
    let c = client();
    for i in 0..20 {
        c.send_to(&request(Profile::rfc(), i), engine.local[0])
            .unwrap();
    }
    // Nothing comes back; the counters say why once the worker has read all.
    c.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 2048];
    assert!(
        c.recv_from(&mut buf).is_err(),
        "a stale request was answered"
    );
    let stats = engine.shutdown().unwrap();
    assert_eq!(stats.drops[Drop::Stale as usize], 20);
    assert_eq!(stats.signatures, 0);
}

#[test]
fn grease_sends_broken_signatures_but_never_a_wrong_time() {
    let mut cfg = worker_config(64);
    cfg.grease_per_million = 500_000;
    let (engine, lt) = engine_with(1, cfg, Duration::from_secs(1800));
    let c = client();
    let (mut valid, mut greased) = (0, 0);
    let mut buf = [0u8; 2048];
    for i in 0..200 {
        let req = request(Profile::rfc(), i);
        c.send_to(&req, engine.local[0]).unwrap();
        let (n, _) = c.recv_from(&mut buf).unwrap();
        match verify_response(&req, &buf[..n], &lt.public()) {
            Ok(v) => {
                valid += 1;
                let off = v.midpoint_us.abs_diff(now_us());
                assert!(off < 5_000_000, "valid response with a wrong time");
            }
            Err(gnomon_protocol::VerifyError::ResponseSignature) => greased += 1,
            Err(e) => panic!("grease produced {e:?}"),
        }
    }
    let stats = engine.shutdown().unwrap();
    assert_eq!(stats.greased, greased);
    // 50 % of 200: far from both ends.
    assert!((40..=160).contains(&greased), "greased {greased}");
    assert_eq!(valid + greased, 200);
}

#[test]
fn keys_rotate_under_load_without_an_invalid_response() {
    // Rotation every 100 ms (the key thread's tick).
    let (engine, lt) = engine_with(2, worker_config(64), Duration::from_millis(100));
    let c = client();
    let mut online_keys = std::collections::HashSet::new();
    let mut buf = [0u8; 2048];
    let mut sent = 0u64;
    // Bounded: stop after three keys are seen or 20 000 exchanges.
    while online_keys.len() < 3 && sent < 20_000 {
        let burst: Vec<Vec<u8>> = (0..16).map(|k| request(Profile::rfc(), sent + k)).collect();
        for r in &burst {
            c.send_to(r, engine.local[0]).unwrap();
        }
        for _ in &burst {
            let (n, _) = c.recv_from(&mut buf).unwrap();
            let v = burst
                .iter()
                .find_map(|r| verify_response(r, &buf[..n], &lt.public()).ok())
                .expect("every response verifies across rotations");
            online_keys.insert(v.online_key);
        }
        sent += 16;
    }
    assert!(
        online_keys.len() >= 3,
        "saw {} online keys in {sent} requests",
        online_keys.len()
    );
    engine.shutdown().unwrap();
}

#[test]
fn several_identities_share_one_port_chosen_by_srv() {
    let (a, b) = (KeyPair::from_seed(&[31; 32]), KeyPair::from_seed(&[32; 32]));
    let engine = Engine::start(
        config("127.0.0.1:0", worker_config(8)),
        vec![a.clone(), b.clone()],
    )
    .unwrap();
    let to = engine.local[0];
    let c = client();
    let mut buf = [0u8; 2048];
    for key in [&a, &b] {
        let srv = gnomon_protocol::request::srv_for(&key.public());
        let mut req = vec![0u8; 1024];
        Offer::single(Profile::rfc())
            .build(&[5; 32], Some(&srv), 1024, &mut req)
            .unwrap();
        c.send_to(&req, to).unwrap();
        let (n, _) = c.recv_from(&mut buf).unwrap();
        verify_response(&req, &buf[..n], &key.public()).unwrap();
    }
    // No SRV with two keys: dropped for versions that define SRV; the
    // first identity answers versions that cannot name a key.
    c.send_to(&request(Profile::rfc(), 1), to).unwrap();
    let mut unknown = vec![0u8; 1024];
    Offer::single(Profile::rfc())
        .build(&[6; 32], Some(&[0xee; 32]), 1024, &mut unknown)
        .unwrap();
    c.send_to(&unknown, to).unwrap();
    let google = request(Profile::google(), 2);
    c.send_to(&google, to).unwrap();
    let (n, _) = c.recv_from(&mut buf).unwrap();
    verify_response(&google, &buf[..n], &a.public()).unwrap();
    let stats = engine.shutdown().unwrap();
    assert_eq!(stats.drops[Drop::SrvRequired as usize], 1);
    assert_eq!(stats.drops[Drop::UnknownSrv as usize], 1);
    assert_eq!(stats.total_responses(), 3);
}

#[test]
fn replies_leave_from_the_address_the_request_arrived_on() {
    // Bound to every address; the request goes to 127.0.0.2 from a socket
    // connected there, which only accepts datagrams from 127.0.0.2.
    let lt = KeyPair::from_seed(&[33; 32]);
    let engine = Engine::start(config("0.0.0.0:0", worker_config(8)), vec![lt.clone()]).unwrap();
    let port = engine.local[0].port();
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.connect(("127.0.0.2", port)).unwrap();
    let req = request(Profile::rfc(), 3);
    c.send(&req).unwrap();
    let mut buf = [0u8; 2048];
    let n = c.recv(&mut buf).expect("a reply from 127.0.0.2");
    verify_response(&req, &buf[..n], &lt.public()).unwrap();
    engine.shutdown().unwrap();
}

#[test]
fn a_dying_worker_stops_every_other_worker() {
    let worker = WorkerConfig {
        fail_after: Some(1),
        ..worker_config(64)
    };
    let (engine, lt) = engine_with(2, worker, Duration::from_secs(1800));
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = vec![0u8; 1024];
    Offer::single(Profile::rfc())
        .build(&[5u8; 32], None, 1024, &mut req)
        .unwrap();
    c.send_to(&req, engine.local[0]).unwrap();
    // The datagram that trips the fault is still answered: the batch that
    // was read is finished before the worker gives up.
    let mut buf = [0u8; 2048];
    let n = c.recv(&mut buf).expect("the last batch is answered");
    verify_response(&req, &buf[..n], &lt.public()).unwrap();
    let stop = engine.stop_flag();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !engine.failed() {
        assert!(std::time::Instant::now() < deadline, "no failure reported");
        std::thread::yield_now();
    }
    // The failing worker told everyone to stop; shutdown only joins.
    assert!(stop.load(std::sync::atomic::Ordering::Relaxed));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(engine.shutdown().map(|_| ())));
    let result = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("every worker stops");
    let err = result.expect_err("the worker's error is returned");
    assert!(err.to_string().contains("injected fault"), "{err}");
}

#[test]
fn a_short_batch_waits_for_company_and_signs_once() {
    // The first request is held (no answer while we watch for 100 ms),
    // the second joins it, and one signature covers both. Without the wait
    // the first is answered alone at once: two batches, two signatures.
    let worker = WorkerConfig {
        batch_wait_us: 1_500_000,
        ..worker_config(64)
    };
    let (engine, lt) = engine_with(1, worker, Duration::from_secs(1800));
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    let reqs: Vec<Vec<u8>> = (0..2u8)
        .map(|i| {
            let mut req = vec![0u8; 1024];
            Offer::single(Profile::rfc())
                .build(&[i + 40; 32], None, 1024, &mut req)
                .unwrap();
            req
        })
        .collect();
    let mut buf = [0u8; 2048];
    c.send_to(&reqs[0], engine.local[0]).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    assert!(c.recv(&mut buf).is_err(), "answered before the wait ended");
    c.send_to(&reqs[1], engine.local[0]).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for _ in 0..2 {
        let n = c.recv(&mut buf).expect("both are answered");
        assert!(reqs
            .iter()
            .any(|r| verify_response(r, &buf[..n], &lt.public()).is_ok()));
    }
    let total = engine.shutdown().unwrap();
    assert_eq!(total.received, 2);
    assert_eq!(total.signatures, 1, "{total:?}");
    assert_eq!(total.batches, 1, "{total:?}");
    assert!(
        total.ns_batch_wait > 0,
        "the wait is its own stage: {total:?}"
    );
}

#[test]
fn more_than_256_identities_each_sign_their_own_requests() {
    // The grouping key once packed the identity into 8 bits: identity 257
    // was answered (and signed) by identity 1.
    let keys: Vec<KeyPair> = (0..300u32)
        .map(|i| {
            let mut seed = [0u8; 32];
            seed[..4].copy_from_slice(&i.to_le_bytes());
            seed[4] = 0x5a;
            KeyPair::from_seed(&seed)
        })
        .collect();
    let engine = Engine::start(config("127.0.0.1:0", worker_config(64)), keys.clone()).unwrap();
    let to = engine.local[0];
    let c = client();
    let chosen = [1usize, 255, 256, 257, 299];
    let reqs: Vec<Vec<u8>> = chosen
        .iter()
        .map(|&i| {
            let srv = gnomon_protocol::request::srv_for(&keys[i].public());
            let mut req = vec![0u8; 1024];
            Offer::single(Profile::rfc())
                .build(&[i as u8; 32], Some(&srv), 1024, &mut req)
                .unwrap();
            req
        })
        .collect();
    // Sent together, so several identities can share one batch.
    let answers = exchange(&c, to, &reqs);
    let mut matched: Vec<usize> = answers
        .iter()
        .map(|answer| {
            chosen
                .iter()
                .zip(&reqs)
                .find(|(k, r)| verify_response(r, answer, &keys[**k].public()).is_ok())
                .map(|(k, _)| *k)
                .expect("an answer signed by the identity its request named")
        })
        .collect();
    matched.sort_unstable();
    assert_eq!(matched, chosen);
    let stats = engine.shutdown().unwrap();
    assert_eq!(stats.total_responses(), chosen.len() as u64);
}

#[test]
fn the_signature_budget_spares_allow_listed_sources_only() {
    // A budget smaller than one signature: after the first, draft 01 gets
    // about one answer per 3 ms. Loopback is allow-listed (the default)
    // in the first run and not in the second.
    let draft01 = Profile::by_name("draft-01").unwrap();
    let run = |allow: Vec<ipnet::IpNet>| {
        let mut cfg = worker_config(64);
        cfg.limit = LimitConfig {
            allow,
            signature_share_ppm: 10_000,
            signature_burst_us: 1_000,
            ..LimitConfig::default()
        };
        let (engine, lt) = engine_with(1, cfg, Duration::from_secs(1800));
        let c = client();
        let reqs: Vec<Vec<u8>> = (0..50).map(|i| request(draft01, i)).collect();
        for r in &reqs {
            c.send_to(r, engine.local[0]).unwrap();
        }
        c.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut buf = [0u8; 2048];
        let mut answered = 0;
        while let Ok((n, _)) = c.recv_from(&mut buf) {
            assert!(reqs
                .iter()
                .any(|r| verify_response(r, &buf[..n], &lt.public()).is_ok()));
            answered += 1;
        }
        (answered, engine.shutdown().unwrap())
    };
    let (answered, stats) = run(LimitConfig::loopback());
    assert_eq!(answered, 50);
    assert_eq!(stats.drops[Drop::SignatureBudget as usize], 0);
    let (answered, stats) = run(Vec::new());
    let refused = stats.drops[Drop::SignatureBudget as usize];
    assert!(refused >= 40, "{refused} refused, {answered} answered");
    assert_eq!(answered + refused, 50);
}
