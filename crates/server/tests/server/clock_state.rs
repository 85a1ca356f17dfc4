//! The engine when the kernel's clock state cannot be read (adjtimex
//! refused, as under systemd's ProtectClock=yes), through the clock-reader
//! seam: the clock counts as unsynchronized and the policy applies.

use crate::common;

use std::io;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gnomon_protocol::{verify_response, KeyPair, Offer, Profile};
use gnomon_server::stats::Drop;
use gnomon_server::sys::KernelClock;
use gnomon_server::{Engine, EngineConfig};

use common::{config, worker_config};

/// Fails with EPERM while `failing` is set; synchronized, ±1 ms otherwise.
/// The engine's radius floor is 3 s and its unsynchronized radius 10 s.
fn reader(failing: Arc<AtomicBool>) -> gnomon_server::engine::ClockReader {
    Arc::new(move || {
        if failing.load(Ordering::Relaxed) {
            Err(io::Error::from_raw_os_error(libc::EPERM))
        } else {
            Ok(KernelClock {
                max_error_us: 1_000,
                synchronized: true,
            })
        }
    })
}

fn start(unsynchronized_radius_us: Option<u64>, failing: Arc<AtomicBool>) -> (Engine, KeyPair) {
    let lt = KeyPair::from_seed(&[5; 32]);
    let cfg = EngineConfig {
        unsynchronized_radius_us,
        ..config("127.0.0.1:0", worker_config(64))
    };
    let sources = vec![gnomon_server::keys::KeySource::from(lt.clone())];
    (
        Engine::start_with_clock(cfg, sources, reader(failing)).unwrap(),
        lt,
    )
}

/// One request, and its answer's radius if one verifies within `wait`.
fn radius(engine: &Engine, lt: &KeyPair, nonce: u8, wait: Duration) -> Option<u64> {
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(wait)).unwrap();
    let mut req = vec![0u8; 1024];
    Offer::single(Profile::rfc())
        .build(&[nonce; 32], None, 1024, &mut req)
        .unwrap();
    c.send_to(&req, engine.local[0]).unwrap();
    let mut buf = [0u8; 2048];
    let (n, _) = c.recv_from(&mut buf).ok()?;
    Some(
        verify_response(&req, &buf[..n], &lt.public())
            .unwrap()
            .radius_us,
    )
}

/// Poll `cond` for at most 10 s.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        if cond() {
            return true;
        }
        std::thread::park_timeout(Duration::from_millis(20));
    }
    false
}

#[test]
fn an_unreadable_clock_is_refused_under_refuse_and_served_once_readable() {
    let failing = Arc::new(AtomicBool::new(true));
    let (engine, lt) = start(None, failing.clone());
    let s = engine.snapshot();
    assert!(!s.answering && !s.clock_readable && !s.clock_synchronized);
    assert!(!s.healthy(), "/health must not say 200");
    assert_eq!(radius(&engine, &lt, 1, Duration::from_millis(300)), None);
    assert!(eventually(|| engine.stats().drops
        [Drop::Unsynchronized as usize]
        == 1));
    // adjtimex works again: the key thread notices within a poll.
    failing.store(false, Ordering::Relaxed);
    assert!(eventually(|| engine.snapshot().healthy()));
    // The floor (3 s; RFC 10049 rounds up to whole seconds), not the
    // unsynchronized radius.
    let r = radius(&engine, &lt, 2, Duration::from_secs(5)).expect("an answer");
    assert!((3_000_000..10_000_000).contains(&r), "{r}");
    engine.shutdown().unwrap();
}

#[test]
fn an_unreadable_clock_answers_with_the_unsynchronized_radius_when_told_to() {
    let (engine, lt) = start(Some(10_000_000), Arc::new(AtomicBool::new(true)));
    assert!(engine.snapshot().healthy());
    // Not the floor a synchronized clock would get.
    let r = radius(&engine, &lt, 3, Duration::from_secs(5)).expect("an answer");
    assert!(r >= 10_000_000, "{r}");
    engine.shutdown().unwrap();
}
