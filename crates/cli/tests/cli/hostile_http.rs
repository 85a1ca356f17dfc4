//! Slow HTTP clients against a real `gnomon serve`'s /metrics and /health:
//! a client that trickles its request one byte at a time must neither
//! block other scrapers nor delay shutdown, and is cut off by the
//! per-connection deadline. A source that opens connections without
//! end, or many sources at once, must not starve an honest /health probe:
//! a newcomer over a cap takes the slot of the oldest connection that has
//! not sent its whole request.

use crate::serve_support;

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serve_support::peer::{connect_from, PATIENCE};
use serve_support::start_serve;

/// How often the slow client sends its next byte: below any sane
/// per-read timeout, so only an overall deadline can end it.
const TRICKLE: Duration = Duration::from_millis(200);

/// A slowloris client: one byte of an endless request header every
/// `TRICKLE` until the server closes the connection or `stop` is set
/// (bounded by `2 × PATIENCE`). Returns how long the server let it go on,
/// or `None` if it was never closed.
fn slowloris(to: SocketAddr, stop: Arc<AtomicBool>) -> JoinHandle<Option<Duration>> {
    let mut c = TcpStream::connect(to).unwrap();
    // The read timeout paces the trickle: it waits for the server's close.
    c.set_read_timeout(Some(TRICKLE)).unwrap();
    std::thread::spawn(move || {
        let started = Instant::now();
        let bytes = b"GET /health HTTP/1.1\r\nx-slow: "
            .iter()
            .chain(std::iter::repeat(&b'a'));
        for b in bytes {
            if stop.load(Ordering::Relaxed) || started.elapsed() > 2 * PATIENCE {
                return None;
            }
            if c.write_all(&[*b]).is_err() {
                return Some(started.elapsed());
            }
            let mut buf = [0u8; 512];
            match c.read(&mut buf) {
                Ok(_) => return Some(started.elapsed()),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return Some(started.elapsed())
                }
                Err(_) => {} // nothing from the server yet
            }
        }
        None
    })
}

/// The answer to GET `path` within `within`; `None` if the connection was
/// refused, closed unanswered or not answered in time.
fn get(to: SocketAddr, path: &str, within: Duration) -> Option<String> {
    let mut c = TcpStream::connect(to).ok()?;
    c.set_read_timeout(Some(within)).unwrap();
    write!(c, "GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").ok()?;
    let mut s = String::new();
    c.read_to_string(&mut s).ok().map(|_| s)
}

#[test]
fn a_slow_client_blocks_neither_health_nor_other_slow_clients() {
    let s = start_serve(&["--metrics", "127.0.0.1:0"], |_| {});
    let metrics = s.metrics.expect("metrics address logged");
    let stop = Arc::new(AtomicBool::new(false));
    // Several slow clients at once, then a scrape: each is served on its own.
    let slow: Vec<_> = (0..4).map(|_| slowloris(metrics, stop.clone())).collect();
    for path in ["/health", "/metrics"] {
        let answer = get(metrics, path, Duration::from_secs(3))
            .unwrap_or_else(|| panic!("{path} was held by the slow clients"));
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    // Each slow client is cut off by the deadline from accept, whatever it
    // sends: a per-read timeout alone would let it go on for ever.
    for h in slow {
        let lasted = h.join().unwrap().expect("a slow client was never closed");
        assert!(lasted < PATIENCE, "closed only after {lasted:?}");
    }
    let (status, _, _) = s.terminate_bounded();
    assert!(status.success());
}

#[test]
fn sigterm_does_not_wait_for_a_slow_client() {
    let s = start_serve(&["--metrics", "127.0.0.1:0"], |_| {});
    let metrics = s.metrics.expect("metrics address logged");
    let stop = Arc::new(AtomicBool::new(false));
    let slow = slowloris(metrics, stop.clone());
    // Wait until the server holds the slow connection (the scrape that
    // asks is the other one open).
    assert!(
        s.wait_metric("gnomon_http_open_connections", |v| v >= 2) >= 2,
        "the slow client was not accepted"
    );
    let (status, took, _) = s.terminate_bounded();
    stop.store(true, Ordering::Relaxed);
    let _ = slow.join();
    assert!(status.success(), "{status:?}");
    assert!(took < Duration::from_secs(1), "SIGTERM took {took:?}");
}

/// New connections a second from the holder: above the 9–22 a second that
/// held every slot of the old endpoint (issue 22).
const HOLD_RATE: u32 = 50;
/// /health asks of the honest client.
const ASKS: usize = 10;

/// A holder: opens a connection to `to` every `1 / HOLD_RATE` s, from
/// each of `sources` in turn, sends half a request head and keeps it open,
/// until `stop` (bounded by `3 × PATIENCE`). Sends on `ready` once it has
/// opened more connections than the endpoint has slots.
fn holder(
    sources: Vec<IpAddr>,
    to: SocketAddr,
    stop: Arc<AtomicBool>,
    ready: std::sync::mpsc::Sender<()>,
) -> JoinHandle<usize> {
    std::thread::spawn(move || {
        let started = Instant::now();
        let mut held = VecDeque::new();
        let mut opened = 0;
        while !stop.load(Ordering::Relaxed) && started.elapsed() < 3 * PATIENCE {
            let from = sources[opened % sources.len()];
            let mut c = connect_from(from, to);
            let _ = c.write_all(b"GET /health HTTP/1.1\r\n");
            held.push_back(c);
            if held.len() > 256 {
                held.pop_front();
            }
            opened += 1;
            if opened == 24 {
                let _ = ready.send(());
            }
            // Pacing the attack, not waiting for anything.
            std::thread::sleep(Duration::from_secs(1) / HOLD_RATE);
        }
        opened
    })
}

/// `ASKS` /health probes from 127.0.0.1 a tenth of a second apart: how
/// many were answered 200 within 3 s.
fn honest_probes(to: SocketAddr) -> usize {
    (0..ASKS)
        .filter(|_| {
            std::thread::sleep(Duration::from_millis(100));
            get(to, "/health", Duration::from_secs(3))
                .is_some_and(|a| a.starts_with("HTTP/1.1 200"))
        })
        .count()
}

/// Holders from `sources` against a fresh `gnomon serve`; returns the
/// honest client's answers and the evictions counted for `reason`.
fn probe_under_holders(sources: Vec<IpAddr>, reason: &str) -> (usize, u64) {
    let s = start_serve(&["--metrics", "127.0.0.1:0"], |_| {});
    let metrics = s.metrics.expect("metrics address logged");
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let h = holder(sources, metrics, stop.clone(), tx);
    rx.recv_timeout(PATIENCE)
        .expect("the holder opened its connections");
    let answered = honest_probes(metrics);
    stop.store(true, Ordering::Relaxed);
    let opened = h.join().unwrap();
    let series = format!("gnomon_http_connections_evicted_total{{reason=\"{reason}\"}}");
    let evicted = s.metric(&series);
    eprintln!(
        "holders opened {opened}; honest /health answered {answered} of {ASKS}; {series} {evicted}"
    );
    let (status, _, _) = s.terminate_bounded();
    assert!(status.success());
    (answered, evicted)
}

#[test]
fn one_source_holding_slots_does_not_starve_health() {
    let _heavy = crate::heavy();
    let (answered, evicted) = probe_under_holders(vec!["127.0.0.2".parse().unwrap()], "per_source");
    assert!(
        answered >= ASKS - 1,
        "honest /health answered {answered} of {ASKS}"
    );
    assert!(
        evicted >= 1,
        "the holder's oldest connections were not evicted"
    );
}

#[test]
fn many_sources_holding_slots_do_not_starve_health() {
    let _heavy = crate::heavy();
    let sources = (10..30)
        .map(|i| IpAddr::from([127, 0, 0, i]))
        .collect::<Vec<_>>();
    let (answered, evicted) = probe_under_holders(sources, "total");
    assert!(
        answered >= ASKS - 1,
        "honest /health answered {answered} of {ASKS}"
    );
    assert!(
        evicted >= 1,
        "the holders' oldest connections were not evicted"
    );
}
