//! Talking to a started server as a (possibly hostile) peer: its TCP
//! address, its counters, raw TCP connections from a chosen loopback
//! source, and a bounded SIGTERM.

use std::io::{BufRead, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};

use super::Started;

/// Bounds a wait that should end far sooner.
pub const PATIENCE: Duration = Duration::from_secs(10);

impl Started {
    /// The first TCP address, read from the log lines that follow the UDP
    /// ones (TCP must be on).
    pub fn tcp_addr(&mut self) -> SocketAddr {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stderr.read_line(&mut line).unwrap() > 0,
                "the server exited without listening on TCP"
            );
            if let Some((_, rest)) = line.split_once("listening on tcp ") {
                return rest.split_whitespace().next().unwrap().parse().unwrap();
            }
        }
    }

    /// SIGTERM, then wait at most `PATIENCE`. Returns the exit status, how
    /// long the exit took and what the server logged meanwhile.
    pub fn terminate_bounded(mut self) -> (ExitStatus, Duration, String) {
        let (status, took) = sigterm_and_wait(&mut self.child, PATIENCE)
            .unwrap_or_else(|| panic!("the server did not stop within {PATIENCE:?} of SIGTERM"));
        let mut rest = String::new();
        self.stderr.read_to_string(&mut rest).unwrap();
        (status, took, rest)
    }

    /// GET `path` from the metrics endpoint: the whole response.
    pub fn get(&self, path: &str) -> String {
        get(self.metrics.expect("metrics on"), path)
    }

    /// The value of one series (`name{labels}` exactly) now.
    pub fn metric(&self, series: &str) -> u64 {
        metric(self.metrics.expect("metrics on"), series)
    }

    /// Poll `series` (bounded by `PATIENCE`) until `done` holds; returns
    /// the last value seen.
    pub fn wait_metric(&self, series: &str, done: impl Fn(u64) -> bool) -> u64 {
        wait_metric(self.metrics.expect("metrics on"), series, done)
    }
}

/// GET `path` from a metrics endpoint at `addr`: the whole response.
pub fn get(addr: SocketAddr, path: &str) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(PATIENCE)).unwrap();
    write!(c, "GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let mut s = String::new();
    c.read_to_string(&mut s).unwrap();
    s
}

/// The value of one series (`name{labels}` exactly) at `addr` now.
pub fn metric(addr: SocketAddr, series: &str) -> u64 {
    let text = get(addr, "/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .trim()
        .parse::<f64>()
        .unwrap() as u64
}

/// Poll `series` at `addr` (bounded by `PATIENCE`) until `done` holds;
/// returns the last value seen.
pub fn wait_metric(addr: SocketAddr, series: &str, done: impl Fn(u64) -> bool) -> u64 {
    let started = Instant::now();
    loop {
        let v = metric(addr, series);
        if done(v) || started.elapsed() > PATIENCE {
            return v;
        }
        std::thread::park_timeout(Duration::from_millis(20));
    }
}

/// A TCP connection to `to` from the loopback address `from`.
pub fn connect_from(from: IpAddr, to: SocketAddr) -> TcpStream {
    let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
    s.bind(&SocketAddr::new(from, 0).into()).unwrap();
    s.connect_timeout(&to.into(), PATIENCE).unwrap();
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s
}

/// Read one ROUGHTIM frame; `None` at the end of the stream.
pub fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = [0u8; 12];
    if let Err(e) = s.read_exact(&mut head) {
        assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
            ),
            "no frame and no end of stream: {e}"
        );
        return None;
    }
    assert_eq!(&head[..8], b"ROUGHTIM");
    let len = u32::from_le_bytes(head[8..12].try_into().unwrap()) as usize;
    let mut frame = head.to_vec();
    frame.resize(12 + len, 0);
    s.read_exact(&mut frame[12..]).unwrap();
    Some(frame)
}

/// SIGTERM to `child`, then wait for it at most `patience`: its exit
/// status and how long the exit took, or `None` (after killing it) when it
/// did not stop in time.
pub fn sigterm_and_wait(child: &mut Child, patience: Duration) -> Option<(ExitStatus, Duration)> {
    let t = Instant::now();
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some((s, t.elapsed()));
        }
        if t.elapsed() > patience {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::park_timeout(Duration::from_millis(10));
    }
}
