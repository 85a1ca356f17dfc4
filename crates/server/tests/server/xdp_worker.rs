//! The AF_XDP worker on a real queue: a veth pair between two network
//! namespaces made here, the program attached to the server's end, and
//! a batch of requests from a client in the other namespace answered by
//! `XdpWorker::serve_once` without one allocation, every answer verified;
//! then a reload that denies the client's network, which the worker
//! follows at its next batch.
//!
//! The test re-runs itself inside the server's namespace (an AF_XDP socket
//! binds to an interface of its own namespace); the client is Python's
//! standard library, run in the other one. Where it cannot run (not root,
//! no AF_XDP, no `ip`, `ethtool` or `python3`), it says so and returns.

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use gnomon_protocol::{verify_response, KeyPair, Profile};
use gnomon_server::keys::mint_epoch;
use gnomon_server::limit::LimitConfig;
use gnomon_server::stats::{Drop as Dropped, WorkerStats};
use gnomon_server::worker::{live, ClockState, Worker, WorkerConfig, WorkerState};
use gnomon_server::xdp::worker::Rings;
use gnomon_server::xdp::{self, XdpConfig};
use gnomon_testkit::request;

#[allow(dead_code)]
use common::worker_config;

const TEST: &str = "xdp_worker::the_xdp_worker_answers_a_batch_without_allocating";
const CHILD: &str = "GNOMON_XDP_WORKER_CLIENT_NS";
const SERVER: &str = "10.79.0.1:2002";
const BATCH: usize = 64;

/// The namespaces, deleted however the test ends.
struct Namespaces([String; 2]);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn ip(args: &str) -> bool {
    Command::new("ip")
        .args(args.split_whitespace())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

#[test]
fn the_xdp_worker_answers_a_batch_without_allocating() {
    if let Ok(client_ns) = std::env::var(CHILD) {
        return child(&client_ns);
    }
    if !gnomon_testkit::is_root() {
        return gnomon_testkit::skip(TEST, "not root: no network namespaces or XDP");
    }
    if let Some(e) = xdp::unavailable() {
        return gnomon_testkit::skip(TEST, &format!("no AF_XDP socket can be made here: {e}"));
    }
    for tool in ["ip", "ethtool", "python3"] {
        if !have(tool) {
            return gnomon_testkit::skip(TEST, &format!("{tool} is not installed"));
        }
    }
    let tag = format!("gxw{}", std::process::id());
    let ns = Namespaces([format!("{tag}s"), format!("{tag}c")]);
    let [s, c] = &ns.0;
    assert!(ip(&format!("netns add {s}")) && ip(&format!("netns add {c}")));
    assert!(ip(&format!(
        "link add xws0 netns {s} type veth peer name xwc0 netns {c}"
    )));
    assert!(ip(&format!("-n {s} addr add 10.79.0.1/24 dev xws0")));
    assert!(ip(&format!("-n {c} addr add 10.79.0.2/24 dev xwc0")));
    assert!(ip(&format!("-n {s} link set xws0 up")) && ip(&format!("-n {c} link set xwc0 up")));
    // Whole checksums from the client, as from a wire (docs/OPERATIONS.md,
    // "What it does not do").
    let off = Command::new("ip")
        .args(["netns", "exec", c, "ethtool", "-K", "xwc0", "tx", "off"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(off.success());
    let out = Command::new("ip")
        .args(["netns", "exec", s])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads", "1"])
        .env(CHILD, c)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.contains("1 passed"),
        "the worker in the server's namespace failed:\n{said}"
    );
}

/// The client: send each request in `dir/requests` (length-prefixed) from
/// one socket, then write every reply that comes within 20 s to
/// `dir/replies`, stopping once there are as many as requests.
const CLIENT: &str = r#"
import socket, struct, sys, time
d, to = sys.argv[1], (sys.argv[2], int(sys.argv[3]))
data = open(d + "/requests", "rb").read()
reqs, i = [], 0
while i < len(data):
    (n,) = struct.unpack("<I", data[i:i + 4]); reqs.append(data[i + 4:i + 4 + n]); i += 4 + n
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.79.0.2", 0))
for r in reqs:
    s.sendto(r, to)
out, end = [], time.monotonic() + 20
while len(out) < len(reqs) and time.monotonic() < end:
    s.settimeout(max(end - time.monotonic(), 0.01))
    try:
        out.append(s.recv(4096))
    except socket.timeout:
        break
with open(d + "/replies", "wb") as f:
    for r in out:
        f.write(struct.pack("<I", len(r)) + r)
"#;

/// Send `reqs` from the client namespace; the process, to wait for once
/// the worker has served.
fn send(client_ns: &str, dir: &Path, reqs: &[Vec<u8>]) -> gnomon_testkit::Reaped {
    let mut blob = Vec::new();
    for r in reqs {
        blob.extend_from_slice(&(r.len() as u32).to_le_bytes());
        blob.extend_from_slice(r);
    }
    std::fs::write(dir.join("requests"), blob).unwrap();
    let _ = std::fs::remove_file(dir.join("replies"));
    let to: SocketAddr = SERVER.parse().unwrap();
    Command::new("ip")
        .args(["netns", "exec", client_ns, "python3", "-c", CLIENT])
        .arg(dir)
        .arg(to.ip().to_string())
        .arg(to.port().to_string())
        .spawn()
        .map(gnomon_testkit::Reaped)
        .unwrap()
}

fn replies(dir: &Path) -> Vec<Vec<u8>> {
    let data = std::fs::read(dir.join("replies")).unwrap_or_default();
    let (mut out, mut i) = (Vec::new(), 0);
    while i + 4 <= data.len() {
        let n = u32::from_le_bytes(data[i..i + 4].try_into().unwrap()) as usize;
        out.push(data[i + 4..i + 4 + n].to_vec());
        i += 4 + n;
    }
    out
}

/// Serve until `answered` replies went out in all, or 20 s passed.
fn serve(w: &mut xdp::XdpWorker, state: &mut WorkerState, rings: &mut Rings, answered: u64) {
    let end = Instant::now() + Duration::from_secs(20);
    while state.stats.xdp_sent < answered && Instant::now() < end {
        w.serve_once(state, rings).unwrap();
    }
}

fn child(client_ns: &str) {
    let lt = KeyPair::from_seed(&[6; 32]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let epoch = mint_epoch(
        &[gnomon_server::keys::KeySource::from(lt.clone())],
        now,
        3_600_000_000,
        60_000_000,
    )
    .unwrap();
    let keys = Arc::new(ArcSwap::from_pointee(epoch));
    let make = |_| Worker {
        socket: socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).unwrap(),
        // A wait for company, so the measured loop takes that path too.
        config: live(WorkerConfig {
            batch_wait_us: 1_000,
            ..worker_config(BATCH)
        }),
        keys: keys.clone(),
        clock: Arc::new(ClockState::new(3_000_000)),
        stop: Arc::new(AtomicBool::new(false)),
        published: Arc::new(Mutex::new(WorkerStats::default())),
        broadcasts: Default::default(),
        heartbeat: Default::default(),
    };
    let config = XdpConfig {
        interface: "xws0".into(),
        mode: None,
    };
    let (attached, mut workers) = xdp::start(&config, &[SERVER.parse().unwrap()], make).unwrap();
    assert_eq!(
        attached.queues, 1,
        "a veth made by `ip link add` has one queue"
    );
    let mut w = workers.pop().unwrap();
    let (mut state, mut rings) = w.prepare();
    let dir = tempfile::tempdir().unwrap();
    // Warm up outside the measured window: one request, one answer.
    let warm = vec![request(Profile::rfc(), 0)];
    let mut client = send(client_ns, dir.path(), &warm);
    serve(&mut w, &mut state, &mut rings, 1);
    assert!(client.wait().unwrap().success());
    assert_eq!(
        replies(dir.path()).len(),
        1,
        "the warm-up request was not answered"
    );
    let reqs: Vec<Vec<u8>> = (1..=BATCH as u64)
        .map(|i| request(Profile::rfc(), i))
        .collect();
    let mut client = send(client_ns, dir.path(), &reqs);
    let info = allocation_counter::measure(|| {
        serve(&mut w, &mut state, &mut rings, 1 + BATCH as u64);
    });
    assert!(client.wait().unwrap().success());
    let stats = state.stats;
    assert_eq!(stats.xdp_sent, 1 + BATCH as u64, "{stats:?}");
    assert_eq!(stats.total_responses(), 1 + BATCH as u64);
    assert!(stats.signatures < 1 + BATCH as u64, "requests were batched");
    assert_eq!(stats.drops, WorkerStats::default().drops);
    assert!(stats.ns_batch_wait > 0, "batch-wait was never taken");
    assert_eq!(info.count_total, 0, "the AF_XDP worker loop allocated");
    let got = replies(dir.path());
    assert_eq!(got.len(), BATCH);
    for reply in &got {
        assert!(
            reqs.iter()
                .any(|r| verify_response(r, reply, &lt.public()).is_ok()),
            "a reply verifies against no request"
        );
    }
    // A reload reaches the AF_XDP worker as it reaches a socket worker:
    // with the client's network denied, its next request is dropped and
    // counted, not answered.
    let reloaded = WorkerConfig {
        limit: LimitConfig {
            deny: vec!["10.79.0.0/24".parse().unwrap()],
            ..w.worker.config.load().limit.clone()
        },
        ..(**w.worker.config.load()).clone()
    };
    w.worker.config.store(Arc::new(reloaded));
    let denied = vec![request(Profile::rfc(), 999)];
    let mut client = send(client_ns, dir.path(), &denied);
    let end = Instant::now() + Duration::from_secs(20);
    while state.stats.drops[Dropped::Denied as usize] == 0 && Instant::now() < end {
        w.serve_once(&mut state, &mut rings).unwrap();
    }
    assert_eq!(state.stats.drops[Dropped::Denied as usize], 1);
    // The client waits its 20 s for an answer that does not come: stop it.
    let _ = client.kill();
    let _ = client.wait();
    assert_eq!(
        state.stats.xdp_sent,
        1 + BATCH as u64,
        "the denied source was answered"
    );
    drop(attached);
}
