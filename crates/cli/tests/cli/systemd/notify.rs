//! The notifications on NOTIFY_SOCKET (a path or an abstract name) through
//! a server's life, and the watchdog going quiet when a worker stalls.

use crate::serve_support;

use std::io::BufReader;
use std::net::SocketAddr;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixDatagram};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serve_support::peer::{sigterm_and_wait, PATIENCE};
use serve_support::{gnomon_via, read_public, serve_command};

use super::{query_tcp, query_udp, tempdir, Reaper};

/// Runs the rest of its command line with WATCHDOG_PID set to its own pid,
/// which `exec` hands on to gnomon, as systemd sets it.
const WITH_WATCHDOG_PID: [&str; 3] = ["sh", "-c", r#"WATCHDOG_PID=$$ exec "$0" "$@""#];

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
    // "… on udp A and 14 on tcp B; …" (or "and tcp B" when both
    // transports answer as many versions): where it listens, from the
    // notification.
    let addr = |after: &str| -> SocketAddr {
        let rest = status
            .split_once(after)
            .unwrap_or_else(|| panic!("{status}"))
            .1;
        rest.split([' ', ';']).next().unwrap().parse().unwrap()
    };
    let (udp, tcp) = (addr(" on udp "), addr(" tcp "));
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
    let _heavy = crate::heavy();
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
