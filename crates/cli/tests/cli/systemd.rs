//! `gnomon serve` under systemd's protocols, with real processes: the
//! notifications (READY=1, STATUS=, WATCHDOG=1, STOPPING=1) read from a
//! NOTIFY_SOCKET the test listens on, the watchdog going quiet when a
//! worker stalls, and socket activation through `systemd-socket-activate`.

use crate::serve_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixDatagram};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use gnomon_protocol::{verify_response, Offer, Profile};

use serve_support::peer::{read_frame, sigterm_and_wait, PATIENCE};
use serve_support::{gnomon_via, read_public, serve_command, Started};

/// Runs the rest of its command line with WATCHDOG_PID set to its own pid,
/// which `exec` hands on to gnomon, as systemd sets it.
const WITH_WATCHDOG_PID: [&str; 3] = ["sh", "-c", r#"WATCHDOG_PID=$$ exec "$0" "$@""#];
/// systemd-socket-activate, where Debian puts it.
const ACTIVATE: &str = "/usr/bin/systemd-socket-activate";

/// Kills the process on drop, so a failing test leaks no server.
struct Reaper(Option<Child>);

impl Reaper {
    fn new(child: Child) -> Reaper {
        Reaper(Some(child))
    }

    fn child(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }

    /// Read its startup (see `Started::read`), still reaped on drop.
    fn started(mut self, stderr: BufReader<ChildStderr>) -> Running {
        Running(Started::read(self.0.take().unwrap(), stderr))
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A started server, killed on drop.
struct Running(Started);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.child.kill();
        let _ = self.0.child.wait();
    }
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gnomon-systemd-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A loopback port free for both UDP and TCP just now, for a launcher or
/// a server to bind. It is below the kernel's ephemeral range (32768 and
/// up by default), so no other process on this busy machine is handed it
/// for an outgoing socket before then.
fn free_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let seed = (std::process::id() % 12_000) as u16;
    for _ in 0..12_000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20_000 + (seed + n.wrapping_mul(97) % 12_000) % 12_000;
        let free = UdpSocket::bind(("127.0.0.1", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", port)).is_ok();
        if free {
            return port;
        }
    }
    panic!("no free port between 20000 and 32000");
}

/// A loopback port the test holds for both UDP and TCP.
fn held_port() -> (UdpSocket, TcpListener) {
    for _ in 0..1000 {
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        if let Ok(t) = TcpListener::bind(u.local_addr().unwrap()) {
            return (u, t);
        }
    }
    panic!("no port free for both UDP and TCP");
}

/// The service manager's end of NOTIFY_SOCKET.
struct Manager {
    socket: UnixDatagram,
    /// The NOTIFY_SOCKET value.
    env: String,
}

impl Manager {
    fn at_path(dir: &Path) -> Manager {
        let path = dir.join("notify");
        let socket = UnixDatagram::bind(&path).unwrap();
        Manager {
            socket,
            env: path.to_str().unwrap().to_string(),
        }
    }

    fn abstract_named(name: &str) -> Manager {
        let socket = UnixDatagram::bind_addr(&UnixAddr::from_abstract_name(name).unwrap()).unwrap();
        Manager {
            socket,
            env: format!("@{name}"),
        }
    }

    /// The next notification before `deadline`, if one comes.
    fn next_before(&self, deadline: Instant) -> Option<String> {
        let left = deadline.checked_duration_since(Instant::now())?;
        self.socket
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        let mut buf = [0u8; 4096];
        match self.socket.recv(&mut buf) {
            Ok(n) => Some(String::from_utf8(buf[..n].to_vec()).unwrap()),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                None
            }
            Err(e) => panic!("{e}"),
        }
    }

    /// Notifications until one has a line starting with `line`; that one.
    /// Panics after `PATIENCE`.
    fn wait_for(&self, line: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        let mut seen = Vec::new();
        while let Some(m) = self.next_before(deadline) {
            if m.lines().any(|l| l.starts_with(line)) {
                return m;
            }
            seen.push(m);
        }
        panic!("no {line} within {PATIENCE:?}; got {seen:?}");
    }

    /// Drop whatever is queued now.
    fn drain(&self) {
        self.socket.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 4096];
        while self.socket.recv(&mut buf).is_ok() {}
        self.socket.set_nonblocking(false).unwrap();
    }
}

fn request(profile: &'static Profile, seed: u8) -> Vec<u8> {
    let mut req = vec![0u8; 1024];
    let n = Offer::single(profile)
        .build(&vec![seed; profile.nonce_len], None, 1024, &mut req)
        .unwrap();
    req.truncate(n);
    req
}

/// One UDP query to `to`, verified against `public`.
fn query_udp(to: SocketAddr, public: &[u8; 32]) {
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(PATIENCE)).unwrap();
    let req = request(Profile::rfc(), 1);
    c.send_to(&req, to).unwrap();
    let mut buf = [0u8; 2048];
    let (n, _) = c.recv_from(&mut buf).expect("a UDP answer");
    verify_response(&req, &buf[..n], public).expect("a valid UDP answer");
}

/// One TCP query to `to`, verified against `public`.
fn query_tcp(to: SocketAddr, public: &[u8; 32]) {
    let mut c = TcpStream::connect_timeout(&to, PATIENCE).expect("TCP is served");
    c.set_read_timeout(Some(PATIENCE)).unwrap();
    let req = request(Profile::rfc(), 2);
    c.write_all(&req).unwrap();
    let answer = read_frame(&mut c).expect("a TCP answer");
    verify_response(&req, &answer, public).expect("a valid TCP answer");
}

fn wait_bounded(child: &mut Child) -> ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(t.elapsed() < PATIENCE, "still running after {PATIENCE:?}");
        std::thread::park_timeout(Duration::from_millis(10));
    }
}

/// READY=1 only once queries are answered on UDP and TCP, STATUS= lines
/// with the summary, WATCHDOG=1 again and again, RELOADING=1 and READY=1
/// around a SIGHUP reload, STOPPING=1 at SIGTERM.
fn notifications_follow_the_lifecycle(manager: Manager) {
    let mut cmd = serve_command(gnomon_via(&WITH_WATCHDOG_PID), "127.0.0.1:0", &[]);
    cmd.env("NOTIFY_SOCKET", &manager.env)
        .env("WATCHDOG_USEC", "1000000");
    let mut server = Reaper::new(cmd.spawn().unwrap());
    // Printed before the engine starts: known before READY=1.
    let public = read_public(server.child());
    let ready = manager.wait_for("READY=1");
    let status = ready
        .lines()
        .find_map(|l| l.strip_prefix("STATUS="))
        .unwrap_or_else(|| panic!("no STATUS= with READY=1: {ready:?}"));
    assert!(
        status.starts_with("answering ") && status.contains("online key valid until"),
        "{status}"
    );
    // "… on udp A and tcp B; …": where it listens, from the notification.
    let addr = |after: &str| -> SocketAddr {
        let rest = status
            .split_once(after)
            .unwrap_or_else(|| panic!("{status}"))
            .1;
        rest.split([' ', ';']).next().unwrap().parse().unwrap()
    };
    let (udp, tcp) = (addr(" on udp "), addr(" and tcp "));
    // Nothing read from the log: READY=1 alone says the sockets are
    // bound and the keys in place. TCP first: a connection to a port not
    // yet listening is refused at once.
    query_tcp(tcp, &public);
    query_udp(udp, &public);
    // A periodic refresh, which counts the two answers.
    let later = manager.wait_for("STATUS=");
    assert!(later.contains("2 responses"), "{later}");
    // WATCHDOG_USEC = 1 s: a ping every 0.5 s while all is well.
    for _ in 0..3 {
        manager.wait_for("WATCHDOG=1");
    }
    // A SIGHUP reload is bracketed: RELOADING=1, then READY=1 again.
    let hup = Command::new("kill")
        .args(["-HUP", &server.child().id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    let reloading = manager.wait_for("RELOADING=1");
    assert!(reloading.contains("MONOTONIC_USEC="), "{reloading}");
    let again = manager.wait_for("READY=1");
    assert!(again.contains("STATUS=answering "), "{again}");
    let (status, _) = sigterm_and_wait(server.child(), PATIENCE).expect("stops on SIGTERM");
    manager.wait_for("STOPPING=1");
    assert!(status.success(), "{status:?}");
}

#[test]
fn notifies_a_path_socket_through_the_lifecycle() {
    let dir = tempdir("path");
    notifications_follow_the_lifecycle(Manager::at_path(&dir));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn notifies_an_abstract_socket_through_the_lifecycle() {
    // systemd's own socket is often @/org/freedesktop/systemd1/notify.
    let name = format!("gnomon-test-notify-{}", std::process::id());
    notifications_follow_the_lifecycle(Manager::abstract_named(&name));
}

#[test]
fn a_stalled_worker_stops_the_watchdog_pings() {
    let dir = tempdir("stall");
    let manager = Manager::at_path(&dir);
    let mut cmd = serve_command(
        gnomon_via(&WITH_WATCHDOG_PID),
        "127.0.0.1:0",
        &["--workers", "2"],
    );
    // Debug builds: the first worker to receive a datagram stops looping.
    cmd.env("NOTIFY_SOCKET", &manager.env)
        .env("WATCHDOG_USEC", "1000000")
        .env("GNOMON_TEST_WORKER_STALL", "1");
    let mut child = Reaper::new(cmd.spawn().unwrap());
    let stderr = BufReader::new(child.child().stderr.take().unwrap());
    let mut server = child.started(stderr);
    let (addr, public) = (server.0.addr, server.0.public);
    // Healthy: pings.
    manager.wait_for("READY=1");
    manager.wait_for("WATCHDOG=1");
    manager.wait_for("WATCHDOG=1");
    // The worker that answers this stalls right after.
    query_udp(addr, &public);
    let stuck = manager.wait_for("STATUS=STUCK: udp worker");
    assert!(stuck.contains("#"), "{stuck}");
    // Pings sent before the stall was seen are queued ahead of that
    // status; none may follow it. Three ping intervals of silence.
    let deadline = Instant::now() + Duration::from_millis(1500);
    while let Some(m) = manager.next_before(deadline) {
        assert!(!m.contains("WATCHDOG=1"), "a ping after the stall: {m:?}");
    }
    assert!(
        server.0.child.try_wait().unwrap().is_none(),
        "the process lives on: systemd, not gnomon, decides what to do"
    );
    manager.drain();
    let (status, _) = sigterm_and_wait(&mut server.0.child, PATIENCE).expect("stops on SIGTERM");
    assert!(status.success(), "{status:?}");
    let _ = std::fs::remove_dir_all(dir);
}

/// `systemd-socket-activate` with `args`, then gnomon serve on `listen`
/// with `extra`; its stderr, read up to the launcher's first "Listening
/// on" line. `None` when the launcher ended before that (it could not
/// bind).
fn launch(args: &[&str], listen: &str, extra: &[&str]) -> Option<(Reaper, BufReader<ChildStderr>)> {
    let mut launcher = vec![ACTIVATE];
    launcher.extend_from_slice(args);
    let mut cmd = serve_command(gnomon_via(&launcher), listen, extra);
    cmd.stdin(Stdio::null());
    let mut child = Reaper::new(cmd.spawn().unwrap());
    let mut stderr = BufReader::new(child.child().stderr.take().unwrap());
    read_until(&mut stderr, "Listening on ").then_some((child, stderr))
}

/// Read lines until one contains `what`; false at the end of the stream.
fn read_until(stderr: &mut BufReader<ChildStderr>, what: &str) -> bool {
    let mut line = String::new();
    while !line.contains(what) {
        line.clear();
        if stderr.read_line(&mut line).unwrap() == 0 {
            return false;
        }
    }
    true
}

/// `attempt` on a fresh port until it works, five times at most: another
/// process may bind the port between `free_port` and the launcher.
fn on_a_free_port<T>(mut attempt: impl FnMut(u16) -> Option<T>) -> T {
    for _ in 0..5 {
        if let Some(t) = attempt(free_port()) {
            return t;
        }
    }
    panic!("the launcher could not bind a free port in five tries");
}

fn have_activate(test: &str) -> bool {
    let here = Path::new(ACTIVATE).exists();
    if !here {
        gnomon_testkit::skip(
            test,
            "systemd-socket-activate is not installed (apt: systemd)",
        );
    }
    here
}

#[test]
fn serves_the_udp_and_tcp_sockets_systemd_socket_activate_passes() {
    if !have_activate("serves_the_udp_and_tcp_sockets_systemd_socket_activate_passes") {
        return;
    }
    // The configured address is held by the test: binding it would fail,
    // so a server that starts did not bind it.
    let (held_udp, _held_tcp) = held_port();
    let configured = held_udp.local_addr().unwrap();
    let (server, stderr, passed, c, req) = on_a_free_port(|port| {
        let passed: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let l = passed.to_string();
        // A datagram launcher running a stream launcher: the second passes
        // the first's socket on (fd 3) with its own (fd 4), LISTEN_FDS=2.
        let (server, mut stderr) = launch(
            &["--datagram", "-l", &l, ACTIVATE, "-l", &l],
            &configured.to_string(),
            // The waiting datagram is as old as gnomon's start, which on a
            // loaded machine can pass the 500 ms default and would be
            // dropped as stale (rightly: its client has likely gone).
            &["--workers", "3", "--max-queue-delay", "1m"],
        )?;
        // Sent before gnomon runs: the launcher starts it on this datagram,
        // which waits in the passed socket and is answered.
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.set_read_timeout(Some(PATIENCE)).unwrap();
        let req = request(Profile::rfc(), 7);
        c.send_to(&req, passed).unwrap();
        // The stream launcher binds its socket now.
        read_until(&mut stderr, " as 4.").then_some((server, stderr, passed, c, req))
    });
    let mut server = server.started(stderr);
    let s = &mut server.0;
    assert_eq!(s.addr, passed, "{:?}", s.startup);
    assert!(
        s.startup
            .iter()
            .any(|l| l.contains("(socket passed by the service manager)")),
        "{:?}",
        s.startup
    );
    let mut buf = [0u8; 2048];
    let (n, _) = c
        .recv_from(&mut buf)
        .expect("the waiting datagram is answered");
    verify_response(&req, &buf[..n], &s.public).unwrap();
    assert_eq!(s.tcp_addr(), passed);
    // Three workers share the one passed socket: every query is answered.
    for _ in 0..20 {
        query_udp(passed, &s.public);
    }
    query_tcp(passed, &s.public);
    let (status, _) = sigterm_and_wait(&mut s.child, PATIENCE).expect("stops on SIGTERM");
    assert!(status.success(), "{status:?}");
    let mut rest = String::new();
    s.stderr.read_to_string(&mut rest).unwrap();
    // No NOTIFY_SOCKET: nothing sent, nothing complained about.
    assert!(!rest.contains("notify"), "{rest}");
}

/// gnomon started by `launched` (see `launch`): wake it with `trigger`,
/// and expect it to refuse the sockets: exit 64 and a log line containing
/// `why`.
fn refuses(launched: (Reaper, BufReader<ChildStderr>), trigger: impl FnOnce(), why: &str) {
    let (mut server, mut stderr) = launched;
    trigger();
    let status = wait_bounded(server.child());
    let mut log = String::new();
    stderr.read_to_string(&mut log).unwrap();
    assert_eq!(status.code(), Some(64), "{status:?}: {log}");
    assert!(log.contains(why), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn a_udp_socket_named_tcp_is_a_startup_error() {
    if !have_activate("a_udp_socket_named_tcp_is_a_startup_error") {
        return;
    }
    let (launched, port) = on_a_free_port(|port| {
        let l = format!("127.0.0.1:{port}");
        launch(
            &["--datagram", "--fdname=tcp", "-l", &l],
            "127.0.0.1:0",
            &[],
        )
        .map(|x| (x, port))
    });
    refuses(
        launched,
        || {
            UdpSocket::bind("127.0.0.1:0")
                .unwrap()
                .send_to(b"wake", ("127.0.0.1", port))
                .unwrap();
        },
        "descriptor 3 (named \"tcp\") is a UDP socket, but its name says a listening TCP socket",
    );
}

#[test]
fn a_unix_socket_is_a_startup_error() {
    if !have_activate("a_unix_socket_is_a_startup_error") {
        return;
    }
    let dir = tempdir("unix");
    let path = dir.join("passed");
    let p = path.to_str().unwrap().to_string();
    let launched = launch(&["--datagram", "-l", &p], "127.0.0.1:0", &[]).expect("launched");
    refuses(
        launched,
        || {
            UnixDatagram::unbound()
                .unwrap()
                .send_to(b"wake", &path)
                .unwrap();
        },
        "descriptor 3 is not an IPv4 or IPv6 socket",
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_stream_socket_alone_is_a_startup_error() {
    if !have_activate("a_stream_socket_alone_is_a_startup_error") {
        return;
    }
    let (launched, port) = on_a_free_port(|port| {
        let l = format!("127.0.0.1:{port}");
        launch(&["-l", &l], "127.0.0.1:0", &[]).map(|x| (x, port))
    });
    refuses(
        launched,
        || {
            let _ = TcpStream::connect(("127.0.0.1", port)).unwrap();
        },
        "no UDP socket was passed",
    );
}

#[test]
fn the_units_pass_systemd_analyze_verify() {
    let analyze = Path::new("/usr/bin/systemd-analyze");
    if !analyze.exists() {
        gnomon_testkit::skip(
            "the_units_pass_systemd_analyze_verify",
            "systemd-analyze is not installed (apt: systemd)",
        );
        return;
    }
    let dir = tempdir("units");
    let said = verify_units(analyze, &dir);
    // Unknown keys and unparsable values are warnings with exit 0: any
    // word about our units is a failure.
    assert!(!said.contains("gnomon."), "{said}");
    let _ = std::fs::remove_dir_all(dir);
}

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// `systemd-analyze verify` of deploy/'s gnomon.socket and gnomon.service
/// (naming the binary under test, whose existence verify checks) copied
/// into `dir`, which is also searched for drop-ins; what it said.
fn verify_units(analyze: &Path, dir: &Path) -> String {
    let service = std::fs::read_to_string(deploy().join("gnomon.service"))
        .unwrap()
        .replace("/usr/local/bin/gnomon", env!("CARGO_BIN_EXE_gnomon"));
    std::fs::write(dir.join("gnomon.service"), service).unwrap();
    std::fs::copy(deploy().join("gnomon.socket"), dir.join("gnomon.socket")).unwrap();
    let out = Command::new(analyze)
        .env("SYSTEMD_UNIT_PATH", format!("{}:", dir.display()))
        .args(["verify", "--man=no"])
        .arg(dir.join("gnomon.socket"))
        .arg(dir.join("gnomon.service"))
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    said
}

/// A bare port (`ListenDatagram=5319`): systemd-socket-activate binds
/// `[::]` with the kernel's default, which on Linux is dual-stack. An IPv4
/// client then arrives as `::ffff:127.0.0.1`, and must be answered as the
/// IPv4 client it is (not dropped as a forged mapped source).
#[test]
fn a_dual_stack_socket_serves_ipv4_clients() {
    if !have_activate("a_dual_stack_socket_serves_ipv4_clients") {
        return;
    }
    let v6only = std::fs::read_to_string("/proc/sys/net/ipv6/bindv6only").unwrap_or_default();
    if v6only.trim() != "0" || UdpSocket::bind("[::]:0").is_err() {
        gnomon_testkit::skip(
            "a_dual_stack_socket_serves_ipv4_clients",
            "net.ipv6.bindv6only is not 0 (or IPv6 is off): a bare port is not dual-stack here",
        );
        return;
    }
    let (server, stderr, port, c, req) = on_a_free_port(|port| {
        let (server, stderr) = launch(
            &["--datagram", "-l", &port.to_string()],
            "127.0.0.1:0",
            &["--workers", "2", "--max-queue-delay", "1m"],
        )?;
        // Wakes the launcher, waits in the passed socket, is answered.
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.set_read_timeout(Some(PATIENCE)).unwrap();
        let req = request(Profile::rfc(), 9);
        c.send_to(&req, ("127.0.0.1", port)).unwrap();
        Some((server, stderr, port, c, req))
    });
    let mut server = server.started(stderr);
    let s = &mut server.0;
    assert!(
        s.addr.is_ipv6() && s.addr.ip().is_unspecified(),
        "{:?}",
        s.startup
    );
    assert!(
        s.startup.iter().any(|l| l.contains("is dual-stack")),
        "{:?}",
        s.startup
    );
    let mut buf = [0u8; 2048];
    let (n, from) = c
        .recv_from(&mut buf)
        .expect("the waiting IPv4 datagram is answered");
    assert_eq!(from, SocketAddr::from(([127, 0, 0, 1], port)));
    verify_response(&req, &buf[..n], &s.public).unwrap();
    let v4: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    for _ in 0..5 {
        query_udp(v4, &s.public);
    }
    // IPv6 clients too, where the host has ::1.
    if let Ok(c6) = UdpSocket::bind("[::1]:0") {
        c6.set_read_timeout(Some(PATIENCE)).unwrap();
        let req = request(Profile::rfc(), 3);
        c6.send_to(&req, ("::1", port)).unwrap();
        let (n, _) = c6.recv_from(&mut buf).expect("an IPv6 answer");
        verify_response(&req, &buf[..n], &s.public).unwrap();
    }
    let (status, _) = sigterm_and_wait(&mut s.child, PATIENCE).expect("stops on SIGTERM");
    assert!(status.success(), "{status:?}");
    let mut rest = String::new();
    s.stderr.read_to_string(&mut rest).unwrap();
    assert!(!rest.contains("source_v4_mapped"), "{rest}");
}

/// A connected UDP socket (bash's `/dev/udp` connects) hears only its
/// peer: refused at start, naming the descriptor.
#[test]
fn a_connected_udp_socket_is_a_startup_error() {
    if !Path::new("/bin/bash").exists() {
        gnomon_testkit::skip(
            "a_connected_udp_socket_is_a_startup_error",
            "bash is not installed",
        );
        return;
    }
    let wrapper = [
        "/bin/bash",
        "-c",
        r#"exec 3<>/dev/udp/127.0.0.1/9 && LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@""#,
    ];
    let mut cmd = serve_command(gnomon_via(&wrapper), "127.0.0.1:0", &[]);
    cmd.stdin(Stdio::null()).env_remove("LISTEN_FDNAMES");
    let mut server = Reaper::new(cmd.spawn().unwrap());
    let status = wait_bounded(server.child());
    let mut log = String::new();
    server
        .child()
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    if log.contains("/dev/udp") {
        // bash built without network redirections: no socket was made.
        gnomon_testkit::skip(
            "a_connected_udp_socket_is_a_startup_error",
            "bash cannot open /dev/udp here",
        );
        return;
    }
    assert_eq!(status.code(), Some(64), "{status:?}: {log}");
    assert!(
        log.contains("descriptor 3 is a UDP socket on 127.0.0.1:"),
        "{log}"
    );
    assert!(log.contains("connected to 127.0.0.1:9"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

/// deploy/gnomon-xdp.conf, read as systemd reads a drop-in (from a unit
/// directory it searches, beside the unit), verifies: a misspelt key or an
/// unknown capability name is a failure here, not at an operator's restart.
#[test]
fn the_xdp_drop_in_verifies_with_the_unit() {
    let analyze = Path::new("/usr/bin/systemd-analyze");
    if !analyze.exists() {
        gnomon_testkit::skip(
            "the_xdp_drop_in_verifies_with_the_unit",
            "systemd-analyze is not installed (apt: systemd)",
        );
        return;
    }
    let dir = tempdir("xdp-units");
    std::fs::create_dir_all(dir.join("gnomon.service.d")).unwrap();
    let drop_in = std::fs::read_to_string(deploy().join("gnomon-xdp.conf")).unwrap();
    // What the path needs (docs/OPERATIONS.md, "The AF_XDP path").
    for needed in [
        "CAP_NET_ADMIN",
        "CAP_BPF",
        "CAP_NET_RAW",
        "LimitMEMLOCK=",
        "RestrictAddressFamilies=AF_XDP",
        "SystemCallFilter=bpf",
        "GNOMON_XDP=",
    ] {
        assert!(drop_in.contains(needed), "the drop-in lacks {needed}");
    }
    std::fs::write(dir.join("gnomon.service.d/xdp.conf"), drop_in).unwrap();
    let said = verify_units(analyze, &dir);
    assert!(
        !said.contains("gnomon") && !said.contains("xdp.conf"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
