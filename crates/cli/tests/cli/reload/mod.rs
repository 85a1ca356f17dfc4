//! SIGHUP and the delegation rescan on a real `gnomon serve`: each reload
//! is waited for on the server's own counters (bounded), never slept for.
//!
//! Here the server, its configuration and the answers that check it,
//! shared; the tests by what they try: `applied` (what a reload applies,
//! refuses, or leaves for a restart, and the rescan without a signal),
//! `load` (reloads and a storm of signals under load) and `in_place`
//! (configurations written in place, keyless while half written).

use crate::serve_support;
use gnomon_testkit::Reaped;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_protocol::{verify_response, Offer, Profile};

use serve_support::peer::{metric, sigterm_and_wait, wait_metric, PATIENCE};

mod applied;
mod in_place;
mod load;

const SUCCESS: &str = "gnomon_reloads_total{result=\"success\"}";
const FAILURE: &str = "gnomon_reloads_total{result=\"failure\"}";

/// A `gnomon serve --config FILE` child, killed when dropped; its log
/// lines arrive on a channel so that a test can wait for one with a bound.
struct Server {
    child: Reaped,
    addr: SocketAddr,
    metrics: SocketAddr,
    public: [u8; 32],
    log: serve_support::LogLines,
}

impl Server {
    fn start(config: &Path) -> Server {
        let mut child = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
            .args(["serve", "--summary-interval", "0", "--config"])
            .arg(config)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map(Reaped)
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let public = line
            .trim()
            .strip_prefix("public key (base64): ")
            .and_then(|k| B64.decode(k).ok())
            .and_then(|k| k.try_into().ok())
            .unwrap_or_else(|| panic!("no public key line: {line:?}"));
        let log = serve_support::LogLines::read(child.stderr.take().unwrap());
        let mut s = Server {
            child,
            addr: "0.0.0.0:0".parse().unwrap(),
            metrics: "0.0.0.0:0".parse().unwrap(),
            public,
            log,
        };
        let metrics = s.wait_log("metrics on http://");
        s.metrics = after(&metrics, "metrics on http://", '/');
        let listening = s.wait_log("listening on udp ");
        s.addr = after(&listening, "listening on udp ", ' ');
        s
    }

    /// The first line not yet waited for that contains `needle`, waiting
    /// at most `PATIENCE` for it.
    fn wait_log(&mut self, needle: &str) -> String {
        self.log.wait(needle)
    }

    fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .args([name, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// SIGHUP, then wait (bounded) until `series` reaches `target`.
    fn reload(&self, series: &str, target: u64) {
        self.signal("-HUP");
        let got = wait_metric(self.metrics, series, |v| v >= target);
        assert_eq!(got, target, "{series} after a SIGHUP");
    }

    fn metric(&self, series: &str) -> u64 {
        metric(self.metrics, series)
    }

    /// SIGTERM, bounded; the exit must be clean.
    fn stop(mut self) {
        let (status, _) = sigterm_and_wait(&mut self.child, PATIENCE)
            .unwrap_or_else(|| panic!("the server did not stop within {PATIENCE:?}"));
        assert!(status.success(), "{status}");
    }
}

/// The address in `line` after `marker`, up to `end`.
fn after(line: &str, marker: &str, end: char) -> SocketAddr {
    let (_, rest) = line.split_once(marker).unwrap();
    rest.split(end).next().unwrap().trim().parse().unwrap()
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gnomon-reload-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Write the configuration file atomically (a reload never sees half).
fn write_config(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// What every configuration here starts with: loopback, any port, metrics,
/// answering whatever the kernel says of the clock.
const BASE: &str = "listen = [\"127.0.0.1:0\"]\nmetrics = \"127.0.0.1:0\"\n\
                    clock.unsynchronized = \"answer-with-radius\"\n";

/// One request of `profile`; the answer, if any within a second.
fn ask(addr: SocketAddr, profile: &'static Profile) -> Option<(Vec<u8>, Vec<u8>)> {
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut req = vec![0u8; 1024];
    Offer::single(profile)
        .build(&[7u8; 64][..profile.nonce_len], None, 1024, &mut req)
        .unwrap();
    c.send_to(&req, addr).unwrap();
    let mut buf = [0u8; 2048];
    let (n, _) = c.recv_from(&mut buf).ok()?;
    Some((req, buf[..n].to_vec()))
}

/// A version-1 answer, checked against `key`.
fn verifies(addr: SocketAddr, key: &[u8; 32]) -> bool {
    let (req, resp) = ask(addr, Profile::rfc()).expect("an answer");
    verify_response(&req, &resp, key).is_ok()
}
