//! A plain-HTTP listener on loopback that records POSTed reports.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// One request the sink received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostedReport {
    /// Request method.
    pub method: String,
    /// Request path.
    pub path: String,
    /// `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// The body.
    pub body: Vec<u8>,
    /// The status the sink answered with.
    pub status: u16,
}

/// The listener. Answers 503 to the first `fail_first` requests, then 204.
#[derive(Debug)]
pub struct ReportSink {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    received: Arc<Mutex<Vec<PostedReport>>>,
    thread: Option<JoinHandle<()>>,
}

impl ReportSink {
    /// Start listening on 127.0.0.1.
    pub fn start(fail_first: usize) -> ReportSink {
        ReportSink::listen(fail_first, None)
    }

    /// A sink that answers every request with `307 Temporary Redirect` to
    /// `location` (a report endpoint that sends the report elsewhere, say
    /// to plain HTTP). It records what it received like any sink.
    pub fn redirecting(location: &str) -> ReportSink {
        ReportSink::listen(0, Some(location.to_string()))
    }

    fn listen(fail_first: usize, redirect: Option<String>) -> ReportSink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind http");
        let addr = listener.local_addr().expect("http addr");
        let stop = Arc::new(AtomicBool::new(false));
        let received = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let (stop, received) = (stop.clone(), received.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = conn else { continue };
                    let n = received.lock().map(|r| r.len()).unwrap_or(0);
                    let status = match (&redirect, n < fail_first) {
                        (Some(_), _) => 307,
                        (None, true) => 503,
                        (None, false) => 204,
                    };
                    // Recorded before it is answered: a client that has its
                    // answer finds its request in `received()`.
                    let record = |r: PostedReport| {
                        if let Ok(mut list) = received.lock() {
                            list.push(r);
                        }
                    };
                    handle(stream, status, redirect.as_deref(), record);
                }
            })
        };
        ReportSink {
            addr,
            stop,
            received,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT/reports`.
    pub fn url(&self) -> String {
        format!("http://{}/reports", self.addr)
    }

    /// What was received so far.
    pub fn received(&self) -> Vec<PostedReport> {
        self.received.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for ReportSink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Read one request, give it to `record`, then answer it with `status`.
fn handle(
    stream: TcpStream,
    status: u16,
    location: Option<&str>,
    record: impl FnOnce(PostedReport),
) -> Option<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut content_type = None;
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (name, value) = h.split_once(':')?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().ok()?;
        } else if name.eq_ignore_ascii_case("content-type") {
            content_type = Some(value.to_string());
        }
    }
    let mut body = vec![0u8; length.min(1 << 20)];
    reader.read_exact(&mut body).ok()?;
    let reason = match status {
        503 => "Service Unavailable",
        307 => "Temporary Redirect",
        _ => "No Content",
    };
    let location = location
        .map(|l| format!("Location: {l}\r\n"))
        .unwrap_or_default();
    record(PostedReport {
        method,
        path,
        content_type,
        body,
        status,
    });
    let mut out = stream;
    let _ = write!(
        out,
        "HTTP/1.1 {status} {reason}\r\n{location}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    Some(())
}

/// A slowloris client on its own thread: a request head for `path`
/// trickled one byte every 200 ms, never finished, until the server
/// closes the connection or `stop` is set (at most a minute). Returns how
/// long the server let it go on, `None` when it never closed it.
pub fn slowloris(
    to: SocketAddr,
    path: &'static str,
    stop: Arc<AtomicBool>,
) -> JoinHandle<Option<Duration>> {
    std::thread::spawn(move || {
        let Ok(mut c) = TcpStream::connect(to) else {
            return Some(Duration::ZERO);
        };
        c.set_read_timeout(Some(Duration::from_millis(200))).ok()?;
        let started = std::time::Instant::now();
        let head = format!("GET {path} HTTP/1.1\r\nx-slow: ").into_bytes();
        let mut bytes = head.iter().chain(std::iter::repeat(&b'a'));
        while !stop.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(60) {
            let b = bytes.next()?;
            if c.write_all(&[*b]).is_err() {
                return Some(started.elapsed());
            }
            let mut buf = [0u8; 64];
            match c.read(&mut buf) {
                Ok(_) => return Some(started.elapsed()),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return Some(started.elapsed())
                }
                Err(_) => {}
            }
        }
        None
    })
}
