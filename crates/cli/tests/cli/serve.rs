//! `gnomon serve` as a real process on loopback.

use crate::serve_support;
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use gnomon_protocol::{verify_response, Offer, Profile, PROFILES};

use serve_support::peer::PATIENCE;
use serve_support::{keygen_and_delegate, start_serve};

struct Server {
    /// Killed and reaped on drop, a panicking test's too.
    child: gnomon_testkit::Reaped,
    addr: SocketAddr,
    public: [u8; 32],
    stderr: BufReader<std::process::ChildStderr>,
    /// Everything the server logged up to "listening".
    startup: Vec<String>,
}

fn start(extra: &[&str]) -> Server {
    start_with_env(extra, &[])
}

fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> Server {
    Server::from(start_serve(extra, |c| {
        c.envs(env.iter().copied());
    }))
}

impl From<serve_support::Started> for Server {
    fn from(s: serve_support::Started) -> Server {
        Server {
            child: s.child,
            addr: s.addr,
            public: s.public,
            stderr: s.stderr,
            startup: s.startup,
        }
    }
}

fn terminate(mut s: Server) -> (std::process::ExitStatus, Duration, String) {
    let (status, took) = serve_support::peer::sigterm_and_wait(&mut s.child, PATIENCE)
        .unwrap_or_else(|| panic!("the server did not stop within {PATIENCE:?} of SIGTERM"));
    let mut rest = String::new();
    s.stderr.read_to_string(&mut rest).unwrap();
    (status, took, rest)
}

#[test]
fn answers_every_version_and_stops_cleanly_on_sigterm() {
    let server = start(&[]);
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 2048];
    // Every version served over UDP (ML-DSA-44 is not: pq_serve.rs).
    for profile in PROFILES.iter().filter(|p| p.udp) {
        let mut req = vec![0u8; 1024];
        Offer::single(profile)
            .build(&vec![7u8; profile.nonce_len], None, 1024, &mut req)
            .unwrap();
        c.send_to(&req, server.addr).unwrap();
        let (n, _) = c.recv_from(&mut buf).expect("an answer");
        let v = verify_response(&req, &buf[..n], &server.public)
            .unwrap_or_else(|e| panic!("{}: {e:?}", profile.name));
        assert_eq!(v.profile.id, profile.id);
        assert!(n <= req.len());
        assert!(v.radius_us >= 3_000_000, "radius floor");
    }
    let (status, took, rest) = terminate(server);
    assert!(status.success(), "exit status {status:?}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert!(
        rest.contains(&format!(
            "answered {}",
            PROFILES.iter().filter(|p| p.udp).count()
        )),
        "{rest}"
    );
}

#[test]
fn a_dying_worker_takes_the_process_down_with_exit_70() {
    // Debug builds honour the fault switch: each worker fails after its
    // first datagram, as if its socket had broken for good.
    let mut server = start_with_env(&[], &[("GNOMON_TEST_WORKER_FAULT", "1")]);
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut req = vec![0u8; 1024];
    Offer::single(Profile::rfc())
        .build(&[3u8; 32], None, 1024, &mut req)
        .unwrap();
    c.send_to(&req, server.addr).unwrap();
    let mut child = server.child;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait().unwrap()));
    // Nothing but the fault stops it: no signal is sent.
    let status = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the server should exit by itself");
    assert_eq!(status.code(), Some(70), "{status:?}");
    let mut rest = String::new();
    server.stderr.read_to_string(&mut rest).unwrap();
    assert!(
        rest.contains("a worker failed: injected fault after 1 datagrams"),
        "{rest}"
    );
}

#[test]
fn no_response_is_larger_than_its_request() {
    let server = start(&[]);
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 2048];
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut answered = 0;
    for i in 0..60u64 {
        // Sizes from 1024 to 1500, multiples of 4.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let size = 1024 + 4 * (state % 120) as usize;
        let udp: Vec<&Profile> = PROFILES.iter().filter(|p| p.udp).collect();
        let profile = udp[(i as usize) % udp.len()];
        let mut req = vec![0u8; size];
        Offer::single(profile)
            .build(&vec![i as u8; profile.nonce_len], None, size, &mut req)
            .unwrap();
        c.send_to(&req, server.addr).unwrap();
        let (n, _) = c.recv_from(&mut buf).unwrap();
        assert!(n <= size, "{}: {n} > {size}", profile.name);
        verify_response(&req, &buf[..n], &server.public).unwrap();
        answered += 1;
    }
    assert_eq!(answered, 60);
    let (status, _, _) = terminate(server);
    assert!(status.success());
}

#[test]
fn a_taken_port_is_a_clear_error() {
    let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(["serve", "--listen", &addr])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(71),
        "EX_OSERR, as watch and report-server"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("cannot listen on udp {addr}")) && !err.contains("os error"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "a key announced by a server that never ran"
    );
}

/// --summary-interval takes a duration with its unit, as every other
/// command's durations do; the summary line then comes on that schedule.
#[test]
fn the_summary_interval_takes_units() {
    let out = gnomon(&["serve", "--summary-interval", "soon"]);
    assert_eq!(out.status.code(), Some(64));
    let mut child = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(["serve", "--listen", "127.0.0.1:0", "--workers", "1"])
        .args(["--summary-interval", "200ms"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map(gnomon_testkit::Reaped)
        .unwrap();
    let pid = child.id();
    // Ends the server if the line never comes, so the read below ends too.
    let (done, watchdog) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if watchdog.recv_timeout(PATIENCE).is_err() {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    });
    let lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let summary = lines
        .map_while(Result::ok)
        // Not the last words of a stopped server, which say the same.
        .find(|l| l.contains("received ") && l.contains("answered ") && !l.contains("stopped"));
    let _ = done.send(());
    let _ = Command::new("kill").arg(pid.to_string()).status();
    let _ = child.wait();
    assert!(summary.is_some(), "no summary line within {PATIENCE:?}");
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("gnomon-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn gnomon(args: &[&str]) -> std::process::Output {
    gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(args)
        .output()
        .unwrap()
}

/// Ask `server` for a version-1 answer and verify it against `key`.
fn ask(server: &Server, key: &[u8; 32]) {
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = vec![0u8; 1024];
    let p = Profile::rfc();
    Offer::single(p)
        .build(&[9u8; 32], None, 1024, &mut req)
        .unwrap();
    c.send_to(&req, server.addr).unwrap();
    let mut buf = [0u8; 2048];
    let (n, _) = c.recv_from(&mut buf).unwrap();
    verify_response(&req, &buf[..n], key).unwrap();
}

#[test]
fn serves_a_key_file_made_by_keygen_and_refuses_a_loose_one() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir("keyfile");
    let key = dir.join("root.key");
    let out = gnomon(&["keygen", "--out", key.to_str().unwrap()]);
    assert!(out.status.success());
    let b64 = String::from_utf8(out.stdout).unwrap();
    let public: [u8; 32] = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .unwrap()
        .try_into()
        .unwrap();
    // A configured key refuses an unsynchronized clock by default, and
    // this machine's kernel may call its clock that.
    let server = start(&[
        "--key-file",
        key.to_str().unwrap(),
        "--clock-unsynchronized",
        "answer-with-radius",
    ]);
    assert_eq!(
        server.public, public,
        "serve announces the key file's public key"
    );
    ask(&server, &public);
    let (status, _, _) = terminate(server);
    assert!(status.success());
    // Group-readable: refused, naming the file and the fix.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = gnomon(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--key-file",
        key.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("root.key") && err.contains("chmod 600"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn serves_offline_delegations_without_the_long_term_key() {
    let dir = tempdir("offline");
    let (key, delegations, public) = keygen_and_delegate(&dir, 2);
    // The server gets the delegations only.
    std::fs::remove_file(&key).unwrap();
    let server = start(&[
        "--offline-dir",
        delegations.to_str().unwrap(),
        "--clock-unsynchronized",
        "answer-with-radius",
    ]);
    assert_eq!(server.public, public);
    ask(&server, &public);
    let (status, _, _) = terminate(server);
    assert!(status.success());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn metrics_and_health_are_served() {
    use std::io::Write;
    let server = start(&["--metrics", "127.0.0.1:0"]);
    let metrics: SocketAddr = server
        .startup
        .iter()
        .find_map(|l| l.split_once("metrics on http://").map(|(_, r)| r))
        .expect("the metrics address is logged before listening")
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let public = server.public;
    ask(&server, &public);
    let get = |path: &str| {
        let mut c = std::net::TcpStream::connect(metrics).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(c, "GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    };
    // Counters are published every 200 ms: poll (bounded) until the answer shows.
    let mut text = String::new();
    for _ in 0..100 {
        text = get("/metrics");
        if text.contains("gnomon_responses_total{version=\"rfc-10049\"} 1") {
            break;
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
    assert!(
        text.contains("gnomon_responses_total{version=\"rfc-10049\"} 1"),
        "{text}"
    );
    assert!(text.contains("gnomon_certificate_expiry_timestamp_seconds"));
    // TCP is served by default, and counted.
    assert!(text.contains("gnomon_tcp_open_connections 0"), "{text}");
    assert!(text.contains("gnomon_tcp_closed_total{reason=\"idle_timeout\"} 0"));
    assert!(get("/health").starts_with("HTTP/1.1 200"));
    let (status, _, _) = terminate(server);
    assert!(status.success());
}

#[test]
fn configuration_errors_name_the_key_and_range() {
    let out = gnomon(&["serve", "--batch-size", "5000"]);
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("batch-size") && err.contains("1..=1024"),
        "{err}"
    );
}

#[test]
fn logs_are_json_objects_when_asked() {
    let server = start(&["--log-format", "json"]);
    assert!(server.startup.len() >= 2);
    for line in &server.startup {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v["level"].is_string(), "{line}");
        assert!(v["fields"]["message"].is_string(), "{line}");
    }
    assert!(server.startup.last().unwrap().contains("listening on udp"));
    let (status, _, rest) = terminate(server);
    assert!(status.success());
    let last = rest.lines().last().unwrap();
    assert!(
        serde_json::from_str::<serde_json::Value>(last).is_ok(),
        "{last}"
    );
}

#[test]
fn the_server_is_not_dumpable() {
    // As an ordinary user, a process's /proc files belong to that user
    // unless it is non-dumpable, when the kernel gives them to root: the
    // one outside view of PR_SET_DUMPABLE that needs no ptrace.
    const TEST: &str = "serve::the_server_is_not_dumpable";
    if !gnomon_testkit::is_root() {
        return gnomon_testkit::skip(TEST, "needs root to start the server as nobody");
    }
    const NOBODY: u32 = 65534;
    // As nobody, from a copy nobody can reach.
    let gnomon = serve_support::gnomon_for_anyone();
    let server = Server::from(serve_support::start_serve_bin(&gnomon, &[], |c| {
        std::os::unix::process::CommandExt::uid(c, NOBODY);
        std::os::unix::process::CommandExt::gid(c, NOBODY);
    }));
    let proc_status = format!("/proc/{}/status", server.child.id());
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&proc_status).unwrap());
    let running_as = std::fs::read_to_string(&proc_status)
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .map(str::to_owned)
        .unwrap();
    assert!(running_as.contains(&NOBODY.to_string()), "{running_as}");
    assert_eq!(
        owner, 0,
        "{proc_status} belongs to uid {owner}: the server is dumpable"
    );
    let (status, _, _) = terminate(server);
    assert!(status.success());
}

#[test]
fn udp_workers_sleep_without_timer_slack() {
    // batch-wait is a sleep; with the kernel's default slack (50 µs) every
    // wait would run up to that much longer than configured.
    const TEST: &str = "serve::udp_workers_sleep_without_timer_slack";
    if !gnomon_testkit::is_root() {
        // Another process's timerslack_ns needs ptrace rights, and the
        // server is not dumpable.
        return gnomon_testkit::skip(TEST, "needs root to read the server's timer slack");
    }
    let server = start(&["--workers", "2"]);
    let pid = server.child.id();
    // (thread name, timer slack ns) of every thread of the server.
    let threads = || -> Vec<(String, u64)> {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return Vec::new();
        };
        dir.filter_map(|t| {
            let t = t.ok()?;
            let name = std::fs::read_to_string(t.path().join("comm")).ok()?;
            // Only /proc/TID has timerslack_ns, not /proc/PID/task/TID.
            let tid = t.file_name().into_string().ok()?;
            let slack = std::fs::read_to_string(format!("/proc/{tid}/timerslack_ns")).ok()?;
            Some((name.trim().to_string(), slack.trim().parse().ok()?))
        })
        .collect()
    };
    let workers = |all: &[(String, u64)]| -> Vec<u64> {
        all.iter()
            .filter(|(n, _)| n.starts_with("gnomon-udp"))
            .map(|(_, s)| *s)
            .collect()
    };
    // A worker sets its own slack as it starts: wait for both, boundedly.
    let deadline = std::time::Instant::now() + PATIENCE;
    let mut seen = threads();
    while workers(&seen).iter().filter(|&&s| s == 1_000).count() < 2
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
        seen = threads();
    }
    assert_eq!(workers(&seen), [1_000, 1_000], "threads: {seen:?}");
    // Only the workers: the rest keep what they inherited (ours).
    let inherited: u64 = std::fs::read_to_string("/proc/self/timerslack_ns")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_ne!(inherited, 1_000);
    assert!(
        seen.iter()
            .any(|(n, s)| !n.starts_with("gnomon-udp") && *s == inherited),
        "threads: {seen:?}"
    );
    let (status, _, _) = terminate(server);
    assert!(status.success());
}
