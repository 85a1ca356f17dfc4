//! Socket activation through `systemd-socket-activate`: the UDP and TCP
//! sockets it passes served (a dual-stack one too), and every socket gnomon
//! cannot serve refused at start.

use crate::serve_support;

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Child, ChildStderr, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use gnomon_protocol::{verify_response, Profile};

use serve_support::peer::{sigterm_and_wait, PATIENCE};
use serve_support::{gnomon_via, serve_command};

use super::{query_tcp, query_udp, request, tempdir, Reaper};

/// systemd-socket-activate, where Debian puts it.
const ACTIVATE: &str = "/usr/bin/systemd-socket-activate";

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
