//! Slow HTTP clients against a real `gnomon serve`'s /metrics and /health:
//! a client that trickles its request one byte at a time must neither
//! block other scrapers nor delay shutdown, and is cut off by the
//! per-connection deadline.

mod serve_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serve_support::peer::PATIENCE;
use serve_support::start_serve;

/// How often the slow client sends its next byte: below any sane
/// per-read timeout, so only an overall deadline can end it.
const TRICKLE: Duration = Duration::from_millis(200);

/// A slowloris client: one byte of an endless request header every
/// `TRICKLE` until the server closes the connection or `stop` is set
/// (bounded by `2 × PATIENCE`). Returns how long the server let it go on,
/// or `None` if it was never closed.
fn slowloris(to: std::net::SocketAddr, stop: Arc<AtomicBool>) -> JoinHandle<Option<Duration>> {
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

fn get(to: std::net::SocketAddr, path: &str, within: Duration) -> Option<String> {
    let mut c = TcpStream::connect(to).unwrap();
    c.set_read_timeout(Some(within)).unwrap();
    write!(c, "GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
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
