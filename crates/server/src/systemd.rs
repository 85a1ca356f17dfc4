//! Telling the service manager how the server is doing (sd_notify(3)):
//! READY=1, STATUS=, WATCHDOG=1 and STOPPING=1 datagrams to the socket in
//! `NOTIFY_SOCKET`, and when to send WATCHDOG=1.
//!
//! The states and the environment (`WATCHDOG_USEC`, `WATCHDOG_PID`) come
//! from the `sd-notify` crate. The datagram is sent here because that
//! crate (0.5) connects to `NOTIFY_SOCKET` as a path, and systemd names its
//! socket in the abstract namespace (`@/org/freedesktop/systemd1/notify`)
//! in some setups; std's Linux socket addresses cover both forms.
//!
//! Without `NOTIFY_SOCKET` nothing is sent and nothing fails: the same
//! binary runs under systemd, under another supervisor, or by hand.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixDatagram};
use std::time::{Duration, Instant};

pub use sd_notify::NotifyState;

use crate::liveness::{Named, Watch};

/// Where notifications go, if anywhere.
#[derive(Debug)]
pub struct Notifier {
    to: Option<UnixAddr>,
}

/// The address in a `NOTIFY_SOCKET` value: a path, or `@name` for the
/// abstract namespace.
fn parse_address(value: &str) -> io::Result<UnixAddr> {
    match value.strip_prefix('@') {
        Some(name) => UnixAddr::from_abstract_name(name),
        None if value.starts_with('/') => UnixAddr::from_pathname(value),
        None => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("NOTIFY_SOCKET={value:?} is neither a path nor an @abstract name"),
        )),
    }
}

impl Notifier {
    /// From `NOTIFY_SOCKET`; one that sends nothing when it is unset.
    pub fn from_env() -> io::Result<Notifier> {
        let to = match std::env::var("NOTIFY_SOCKET") {
            Ok(v) => Some(parse_address(&v)?),
            Err(std::env::VarError::NotPresent) => None,
            Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidInput, e)),
        };
        Ok(Notifier { to })
    }

    /// One that sends nothing.
    pub fn none() -> Notifier {
        Notifier { to: None }
    }

    /// Whether anything is listening (`NOTIFY_SOCKET` was set).
    pub fn enabled(&self) -> bool {
        self.to.is_some()
    }

    /// Send `states` in one datagram. Nothing is sent when disabled.
    pub fn send(&self, states: &[NotifyState<'_>]) -> io::Result<()> {
        let Some(to) = &self.to else {
            return Ok(());
        };
        let mut msg = String::new();
        for s in states {
            msg += &format!("{s}\n");
        }
        // A socket per message: a few a second at most, and nothing to
        // reconnect if the manager re-creates its socket.
        let sent = UnixDatagram::unbound()?.send_to_addr(msg.as_bytes(), to)?;
        if sent == msg.len() {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "notification cut short",
            ))
        }
    }
}

/// The watchdog interval systemd asked for (`WATCHDOG_USEC`, for this
/// process when `WATCHDOG_PID` is set), if any.
pub fn watchdog_timeout() -> Option<Duration> {
    sd_notify::watchdog_enabled().filter(|d| !d.is_zero())
}

/// What the watchdog supervisor decided at a poll.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not time to look yet.
    Wait,
    /// Every thread went round its loop since the last look: ping.
    Ping,
    /// These threads did not: no ping.
    Stalled(Vec<String>),
}

/// Pings at half the watchdog timeout, and only when every heartbeat
/// advanced since the previous look: one stuck thread is enough for
/// systemd to see the pings stop and restart the process.
#[derive(Debug)]
pub struct Watchdog {
    every: Duration,
    next: Instant,
    watch: Watch,
}

impl Watchdog {
    /// Watch `beats` against a watchdog `timeout`, starting at `now`.
    pub fn new(timeout: Duration, beats: Vec<Named>, now: Instant) -> Watchdog {
        let every = timeout / 2;
        Watchdog {
            every,
            next: now + every,
            watch: Watch::new(beats),
        }
    }

    /// How often the beats are checked.
    pub fn every(&self) -> Duration {
        self.every
    }

    /// Look at the beats if it is time.
    pub fn poll(&mut self, now: Instant) -> Verdict {
        if now < self.next {
            return Verdict::Wait;
        }
        // From now rather than from the missed deadline: a late poll must
        // not be followed by a burst of them.
        self.next = now + self.every;
        let stalled = self.watch.stalled();
        if stalled.is_empty() {
            Verdict::Ping
        } else {
            Verdict::Stalled(stalled.into_iter().map(str::to_owned).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::liveness::Beat;

    #[test]
    fn paths_and_abstract_names_are_understood() {
        let a = parse_address("/run/systemd/notify").unwrap();
        assert_eq!(
            a.as_pathname(),
            Some(std::path::Path::new("/run/systemd/notify"))
        );
        let a = parse_address("@/org/freedesktop/systemd1/notify").unwrap();
        assert_eq!(
            a.as_abstract_name(),
            Some(&b"/org/freedesktop/systemd1/notify"[..])
        );
        assert!(parse_address("relative/path").is_err());
        assert!(parse_address("").is_err());
    }

    #[test]
    fn a_disabled_notifier_sends_nothing_and_does_not_fail() {
        let n = Notifier::none();
        assert!(!n.enabled());
        n.send(&[NotifyState::Ready]).unwrap();
    }

    #[test]
    fn the_watchdog_pings_only_when_every_beat_moved() {
        let (a, b) = (Beat::new(), Beat::new());
        let t0 = Instant::now();
        let mut w = Watchdog::new(
            Duration::from_secs(2),
            vec![("a".into(), a.clone()), ("b".into(), b.clone())],
            t0,
        );
        assert_eq!(w.every(), Duration::from_secs(1));
        a.tick();
        b.tick();
        assert_eq!(w.poll(t0 + Duration::from_millis(999)), Verdict::Wait);
        assert_eq!(w.poll(t0 + Duration::from_secs(1)), Verdict::Ping);
        a.tick();
        assert_eq!(w.poll(t0 + Duration::from_millis(1500)), Verdict::Wait);
        assert_eq!(
            w.poll(t0 + Duration::from_secs(2)),
            Verdict::Stalled(vec!["b".into()])
        );
        a.tick();
        b.tick();
        assert_eq!(w.poll(t0 + Duration::from_secs(3)), Verdict::Ping);
    }
}
