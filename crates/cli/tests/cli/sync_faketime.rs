//! docs/SYNC.md's word on the `faketime` wrapper ("Trying it with a liar
//! on loopback"), as measured for issue 36: it shifts the clock as asked,
//! but it runs the server as its child, so a SIGTERM to the PID a shell or
//! a test holds ends the wrapper alone and leaves the server answering.

use crate::serve_support::start_serve_via;
use crate::sync_support::have_faketime;

use std::path::Path;
use std::time::{Duration, Instant};

const PATIENCE: Duration = Duration::from_secs(30);
const WRAPPER: &str = "/usr/bin/faketime";

/// A process that is not ours to wait for, killed when dropped.
struct Orphan(u32);

impl Drop for Orphan {
    fn drop(&mut self) {
        // Only while it is still that server: a PID that ended may be
        // someone else's by now.
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", self.0)).unwrap_or_default();
        if !running(self.0) || !String::from_utf8_lossy(&cmdline).contains("serve") {
            return;
        }
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &self.0.to_string()])
            .status();
    }
}

fn signal(sig: &str, pid: u32) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success(), "kill {sig} {pid}");
}

/// Whether `pid` still runs (a zombie has ended).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let state = s.rsplit_once(") ")?.1.chars().next()?;
            Some(state != 'Z')
        })
        .unwrap_or(false)
}

/// The offset `gnomon query` measures of the server at `addr`, in µs.
/// The server's offset from this clock and how far it may honestly be
/// from the truth, both µs: the answer's midpoint is whole seconds (up to
/// 1 s dropped), and the answer came back within the round trip, which a
/// loaded machine stretches.
fn offset_us(addr: &str, key: &str) -> (i64, i64) {
    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(["query", addr, "--key", key, "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let j: serde_json::Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("{e}: {text}{}", String::from_utf8_lossy(&out.stderr)));
    let offset = j["offset_us"].as_i64().unwrap_or_else(|| panic!("{j}"));
    let rtt = j["rtt_us"].as_i64().unwrap_or_else(|| panic!("{j}"));
    (offset, 1_000_000 + rtt + 250_000)
}

#[test]
fn sigterm_to_the_faketime_wrapper_leaves_the_server_answering() {
    let test = "sync_faketime_wrapper";
    if !have_faketime(test) {
        return;
    }
    if !Path::new(WRAPPER).exists() {
        gnomon_testkit::skip(test, "no faketime wrapper (package faketime)");
        return;
    }
    // --exclude-monotonic, so that the server's own SIGTERM works at the end.
    let mut started = start_serve_via(
        &[WRAPPER, "--exclude-monotonic", "-f", "+1h"],
        "127.0.0.1:0",
        &[],
        |_| {},
    );
    let wrapper = started.child.id();
    let children = std::fs::read_to_string(format!("/proc/{wrapper}/task/{wrapper}/children"))
        .expect("the wrapper's children (CONFIG_PROC_CHILDREN)");
    let pids: Vec<u32> = children
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 1, "the wrapper forks the server: {pids:?}");
    let server = Orphan(pids[0]);
    let addr = started.addr.to_string();
    let key = gnomon_testkit::base64(&started.public);
    // The clock is an hour ahead, as asked (the answer's whole seconds
    // against the local clock's fraction).
    let hour = 3_600_000_000i64;
    let (off, slack) = offset_us(&addr, &key);
    assert!((off - hour).abs() < slack, "offset {off} µs (±{slack})");

    // SIGTERM to the PID this test holds, the wrapper's: the wrapper ends.
    signal("-TERM", wrapper);
    let status = started.child.wait().unwrap();
    assert!(!status.success(), "{status:?}");
    // The server does not: it goes on answering.
    assert!(running(server.0), "the server stopped with the wrapper");
    let (off, slack) = offset_us(&addr, &key);
    assert!((off - hour).abs() < slack, "offset {off} µs (±{slack})");

    // Only its own PID stops it.
    signal("-TERM", server.0);
    let until = Instant::now() + PATIENCE;
    while running(server.0) {
        assert!(
            Instant::now() < until,
            "the server ignored SIGTERM to its own PID"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
