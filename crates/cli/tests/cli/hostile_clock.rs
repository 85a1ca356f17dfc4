//! `gnomon serve` under libfaketime: its clock stepped back and forward
//! while a client loads it, started an hour ahead of the kernel's receive
//! timestamps, and stopped right after a step.
//!
//! libfaketime shifts the process's clock and not the kernel's, which is
//! both a clock step (the offset file is rewritten while the server runs)
//! and a clock that disagrees with the kernel's `SO_TIMESTAMPNS`.
//! `FAKETIME_DONT_FAKE_MONOTONIC=1` keeps the monotonic clock honest, as
//! in a real step.

use crate::serve_support;

use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gnomon_protocol::{verify_response, Offer, Profile, Verified};

use serve_support::{keygen_and_delegate, start_serve};

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
/// How soon after a step the server must answer with the new time. The
/// key thread polls every 100 ms; this is the bound the issue sets.
const RECOVERY: Duration = Duration::from_secs(1);

struct Server {
    child: gnomon_testkit::Reaped,
    addr: SocketAddr,
    metrics: SocketAddr,
    public: [u8; 32],
    /// The server's stderr, read by a thread so logging never blocks it.
    log: Arc<Mutex<String>>,
    offset_file: PathBuf,
    dir: PathBuf,
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gnomon-clock-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Move the server's clock to real time + `offset` (libfaketime syntax,
/// such as "+3600" or "-120"). Written whole and renamed so the server
/// never reads half a file.
fn set_offset(file: &Path, offset: &str) {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, format!("{offset}\n")).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

/// `gnomon serve` with its clock at real time + `offset`; `None` (after
/// recording the skip) where libfaketime is missing.
fn start(test: &str, offset: &str, extra: &[&str]) -> Option<Server> {
    if !Path::new(LIBFAKETIME).exists() {
        gnomon_testkit::skip(
            test,
            &format!("{LIBFAKETIME} missing (package libfaketime)"),
        );
        return None;
    }
    Some(start_with(test, Some(offset), extra, &[]))
}

/// `gnomon serve` with `env`, under libfaketime when `offset` is given.
fn start_with(test: &str, offset: Option<&str>, extra: &[&str], env: &[(&str, &str)]) -> Server {
    let dir = tempdir(test);
    let offset_file = dir.join("offset");
    let mut args = vec!["--metrics", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    if let Some(offset) = offset {
        set_offset(&offset_file, offset);
    }
    let started = start_serve(&args, |c| {
        c.envs(env.iter().copied());
        if offset.is_some() {
            c.env("LD_PRELOAD", LIBFAKETIME)
                .env("FAKETIME_TIMESTAMP_FILE", &offset_file)
                .env("FAKETIME_NO_CACHE", "1")
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
        }
    });
    let mut stderr = started.stderr;
    let startup = started.startup.concat();
    let log = Arc::new(Mutex::new(startup));
    let sink = log.clone();
    std::thread::spawn(move || {
        let mut rest = String::new();
        while stderr.read_line(&mut rest).unwrap_or(0) > 0 {
            sink.lock().unwrap().push_str(&rest);
            rest.clear();
        }
    });
    Server {
        child: started.child,
        addr: started.addr,
        metrics: started
            .metrics
            .expect("metrics address logged before listening"),
        public: started.public,
        log,
        offset_file,
        dir,
    }
}

/// As [`start`], once it has answered a first request with the time it
/// was started at: the server, a client socket and the last nonce used.
fn answering(test: &str, offset_s: i64, extra: &[&str]) -> Option<(Server, UdpSocket, u64)> {
    let s = start(test, &format!("{offset_s:+}"), extra)?;
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut nonce = 0;
    assert!(
        first_good_answer(&c, &s, &mut nonce, offset_s, Duration::from_secs(10)).is_some(),
        "no first answer; log:\n{}",
        s.log.lock().unwrap()
    );
    Some((s, c, nonce))
}

impl Server {
    fn step(&self, offset: &str) {
        set_offset(&self.offset_file, offset);
    }

    /// The whole HTTP response to GET `path` on the metrics listener.
    fn get(&self, path: &str) -> String {
        let mut c = TcpStream::connect(self.metrics).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(c, "GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    }

    /// The status line of GET /health.
    fn health(&self) -> String {
        self.get("/health").lines().next().unwrap_or("").to_string()
    }

    /// SIGTERM; how long the process took to exit, and its log. Bounded:
    /// a server that does not stop within 30 s fails the test.
    fn terminate(mut self) -> (std::process::ExitStatus, Duration, String) {
        let (status, took) =
            serve_support::peer::sigterm_and_wait(&mut self.child, Duration::from_secs(30))
                .expect("the server did not stop within 30 s of SIGTERM");
        let _ = std::fs::remove_dir_all(&self.dir);
        let log = self.log.lock().unwrap().clone();
        (status, took, log)
    }
}

fn real_now_us() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i128
}

fn request(nonce: u64) -> Vec<u8> {
    let mut n = [0u8; 32];
    n[..8].copy_from_slice(&nonce.to_le_bytes());
    let mut req = vec![0u8; 1024];
    Offer::single(Profile::rfc())
        .build(&n, None, 1024, &mut req)
        .unwrap();
    req
}

/// One request; its verified answer if one comes within `wait` (answers
/// to earlier requests on the same socket fail verification and are
/// skipped).
fn ask(c: &UdpSocket, s: &Server, nonce: u64, wait: Duration) -> Option<Verified> {
    let req = request(nonce);
    c.send_to(&req, s.addr).unwrap();
    let deadline = Instant::now() + wait;
    let mut buf = [0u8; 2048];
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        c.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        let (n, _) = c.recv_from(&mut buf).ok()?;
        if let Ok(v) = verify_response(&req, &buf[..n], &s.public) {
            return Some(v);
        }
    }
}

/// Whether `v` vouches for real time + `offset_s` (the server's clock).
fn vouches_for(v: &Verified, offset_s: i64) -> bool {
    let expected = real_now_us() + i128::from(offset_s) * 1_000_000;
    // The answer was signed a moment before it was checked.
    v.earliest_us() <= expected && expected <= v.latest_us() + 1_000_000
}

/// Ask until an answer vouches for real time + `offset_s`, for at most
/// `within`; how long it took, or `None`.
fn first_good_answer(
    c: &UdpSocket,
    s: &Server,
    nonce: &mut u64,
    offset_s: i64,
    within: Duration,
) -> Option<Duration> {
    let t = Instant::now();
    while t.elapsed() < within {
        *nonce += 1;
        if let Some(v) = ask(c, s, *nonce, Duration::from_millis(50)) {
            if vouches_for(&v, offset_s) {
                return Some(t.elapsed());
            }
        }
    }
    None
}

/// A client asking in a loop until told to stop (or 60 s pass), counting
/// the answers that verify.
struct Load {
    stop: Arc<AtomicBool>,
    good: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

fn load(s: &Server) -> Load {
    let (stop, good) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (addr, public) = (s.addr, s.public);
    let (st, g) = (stop.clone(), good.clone());
    let thread = std::thread::spawn(move || {
        let started = Instant::now();
        let mut buf = [0u8; 2048];
        c.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let mut i = 1u64 << 40;
        while !st.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(60) {
            i += 1;
            let req = request(i);
            // The server may be gone (a SIGTERM test): sending may fail.
            if c.send_to(&req, addr).is_err() {
                break;
            }
            if let Ok((n, _)) = c.recv_from(&mut buf) {
                if verify_response(&req, &buf[..n], &public).is_ok() {
                    g.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
    Load { stop, good, thread }
}

impl Load {
    /// Wait (at most `within`) until the loading client has had a valid
    /// answer: after a quick recovery it may not have been scheduled yet.
    fn answered_within(&self, within: Duration) -> bool {
        let t = Instant::now();
        while self.good.load(Ordering::Relaxed) == 0 && t.elapsed() < within {
            std::thread::park_timeout(Duration::from_millis(10));
        }
        self.good.load(Ordering::Relaxed) > 0
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
        self.good.load(Ordering::Relaxed)
    }
}

#[test]
fn clock_steps_under_load_keep_the_server_answering_the_new_time() {
    let _heavy = crate::heavy();
    let Some((s, c, mut nonce)) = answering("clock_steps_under_load", 0, &[]) else {
        return;
    };
    let l = load(&s);
    for (offset, offset_s) in [("-120", -120), ("+3600", 3600)] {
        s.step(offset);
        let took = first_good_answer(&c, &s, &mut nonce, offset_s, RECOVERY);
        assert!(
            took.is_some(),
            "no valid answer for the clock at {offset} s within {RECOVERY:?}; log:\n{}",
            s.log.lock().unwrap()
        );
        // Answering again, and /health says so.
        assert!(s.health().contains("200"), "{}", s.health());
    }
    assert!(
        l.answered_within(Duration::from_secs(10)),
        "the loading client got no valid answer"
    );
    l.finish();
    let (status, _, log) = s.terminate();
    assert!(status.success(), "{status:?}\n{log}");
}

#[test]
fn sigterm_right_after_a_step_back_ends_the_process_promptly() {
    let Some((s, c, mut nonce)) = answering("sigterm_after_step", 0, &[]) else {
        return;
    };
    let l = load(&s);
    s.step("-120");
    // Requests arriving after the step are what used to put workers to
    // sleep for the size of the step.
    for _ in 0..5 {
        nonce += 1;
        c.send_to(&request(nonce), s.addr).unwrap();
    }
    let (status, took, log) = s.terminate();
    l.finish();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(
        took < Duration::from_secs(2),
        "SIGTERM took {took:?}\n{log}"
    );
}

#[test]
fn a_server_an_hour_ahead_of_the_kernel_answers_over_udp() {
    // Every request's receive timestamp is an hour behind the server's
    // clock: answered all the same, with the server's time.
    let Some((s, _, _)) = answering("an_hour_ahead", 3600, &[]) else {
        return;
    };
    let (status, _, log) = s.terminate();
    assert!(status.success(), "{status:?}\n{log}");
}

/// Offline delegations cover a fixed window: stepped before it, the
/// server cannot sign, and /health must say so rather than 200; stepped
/// back into it, it signs again.
#[test]
fn health_is_503_while_no_delegation_covers_the_clock_and_200_after() {
    if !Path::new(LIBFAKETIME).exists() {
        gnomon_testkit::skip(
            "health_follows_signing",
            &format!("{LIBFAKETIME} missing (package libfaketime)"),
        );
        return;
    }
    let keys = tempdir("offline-keys");
    let (_, deleg, _) = keygen_and_delegate(&keys, 1);
    // A configured key refuses an unsynchronized clock by default; this
    // machine's kernel may call its clock that.
    let Some((s, c, mut nonce)) = answering(
        "health_follows_signing",
        0,
        &[
            "--offline-dir",
            deleg.to_str().unwrap(),
            "--clock-unsynchronized",
            "answer-with-radius",
        ],
    ) else {
        return;
    };
    assert!(s.health().contains("200"), "{}", s.health());
    // An hour before the only delegation starts.
    s.step("-3600");
    let t = Instant::now();
    let mut health = s.health();
    while !health.contains("503") && t.elapsed() < Duration::from_secs(10) {
        std::thread::park_timeout(Duration::from_millis(20));
        health = s.health();
    }
    assert!(health.contains("503"), "{health}");
    nonce += 1;
    assert!(
        ask(&c, &s, nonce, Duration::from_millis(300)).is_none(),
        "signed outside every delegation"
    );
    s.step("+0");
    assert!(
        first_good_answer(&c, &s, &mut nonce, 0, RECOVERY).is_some(),
        "no answer after stepping back into the delegation"
    );
    assert!(s.health().contains("200"), "{}", s.health());
    let (status, _, log) = s.terminate();
    assert!(status.success(), "{status:?}\n{log}");
    // Each change of state logged once, not once per poll.
    assert_eq!(
        log.matches("no delegation covers the current time").count(),
        1,
        "{log}"
    );
    assert_eq!(log.matches("signing again").count(), 1, "{log}");
    std::fs::remove_dir_all(&keys).unwrap();
}

/// The clock shim must not blind the stale drop: requests that really
/// waited (the server stopped with SIGSTOP while they queued) are still
/// dropped as stale by a server an hour ahead, and fresh ones answered.
#[test]
fn a_server_an_hour_ahead_still_drops_requests_that_really_waited() {
    let Some((s, c, mut nonce)) =
        answering("stale_an_hour_ahead", 3600, &["--max-queue-delay", "20ms"])
    else {
        return;
    };
    let signal = |sig: &str| {
        let ok = Command::new("kill")
            .args([sig, &s.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    };
    signal("-STOP");
    // kill(2) returns once the stop is queued, not once it has happened: on
    // a busy machine the worker can still read the requests first. Wait
    // until every thread of the server is in the stopped state.
    let pid = s.child.id();
    let t = Instant::now();
    while !all_threads_stopped(pid) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the server did not stop within 10 s of SIGSTOP"
        );
        std::thread::park_timeout(Duration::from_millis(5));
    }
    for _ in 0..10 {
        nonce += 1;
        c.send_to(&request(nonce), s.addr).unwrap();
    }
    // Not synchronisation: this is the queueing the test is about, ten
    // times the limit.
    std::thread::sleep(Duration::from_millis(200));
    signal("-CONT");
    // At least the ten (a probe that lost the CPU for the limit may add
    // to them on a busy machine).
    let stale = |m: &str| {
        m.lines()
            .find_map(|l| l.strip_prefix("gnomon_dropped_total{reason=\"stale\"} "))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let t = Instant::now();
    let mut metrics = s.get("/metrics");
    while stale(&metrics) < 10 && t.elapsed() < Duration::from_secs(10) {
        std::thread::park_timeout(Duration::from_millis(20));
        metrics = s.get("/metrics");
    }
    assert!(stale(&metrics) >= 10, "{metrics}");
    assert!(
        first_good_answer(&c, &s, &mut nonce, 3600, Duration::from_secs(5)).is_some(),
        "a fresh request was not answered"
    );
    let (status, _, log) = s.terminate();
    assert!(status.success(), "{status:?}\n{log}");
}

/// Whether every thread of `pid` is stopped by a signal (state `T` in
/// /proc/PID/task/TID/stat; the state follows the parenthesised name).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut seen = 0;
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            return false;
        };
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next());
        if state != Some('T') {
            return false;
        }
        seen += 1;
    }
    seen > 0
}

/// adjtimex refused (systemd's ProtectClock=yes; here the debug build's
/// GNOMON_TEST_CLOCK_UNREADABLE): the clock counts as unsynchronized, so a
/// configured key refuses by default and /health says 503, while the
/// ephemeral quick-start answers with the large radius. Said once each.
#[test]
fn an_unreadable_kernel_clock_is_unsynchronized_and_said_once() {
    let unreadable = [("GNOMON_TEST_CLOCK_UNREADABLE", "1")];
    let dir = tempdir("unreadable-keys");
    let (key, _, public) = keygen_and_delegate(&dir, 1);
    let s = start_with(
        "unreadable_configured",
        None,
        &["--key-file", key.to_str().unwrap()],
        &unreadable,
    );
    assert_eq!(s.public, public);
    let health = s.get("/health");
    assert!(
        health.starts_with("HTTP/1.1 503") && health.contains("unsynchronized"),
        "{health}"
    );
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    assert!(
        ask(&c, &s, 1, Duration::from_millis(300)).is_none(),
        "answered with a clock nobody vouches for"
    );
    // Polled many times meanwhile (every 100 ms), said once.
    let said = |log: &str| log.matches("cannot read the kernel's clock state").count();
    let (status, _, log) = s.terminate();
    assert!(status.success(), "{status:?}\n{log}");
    assert_eq!(said(&log), 1, "{log}");
    assert!(log.contains("not answering until it is"), "{log}");
    let s = start_with("unreadable_ephemeral", None, &[], &unreadable);
    let v = ask(&c, &s, 2, Duration::from_secs(5)).expect("the quick-start answers");
    assert!(v.radius_us >= 60_000_000, "{}", v.radius_us);
    let (status, _, log) = s.terminate();
    assert!(status.success(), "{status:?}\n{log}");
    assert_eq!(said(&log), 1, "{log}");
    std::fs::remove_dir_all(&dir).unwrap();
}
