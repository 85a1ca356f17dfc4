//! `gnomon serve` under a service manager (`Type=notify`): READY=1 once
//! the engine runs, a STATUS= summary every few seconds, WATCHDOG=1 only
//! while every worker goes round its loop, RELOADING=1 and READY=1 around
//! a SIGHUP reload, STOPPING=1 on the way out.
//! Everything here runs on the main thread's 50 ms poll, never on a
//! worker. Without `NOTIFY_SOCKET` it sends nothing.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gnomon_server::offline::format_utc;
use gnomon_server::systemd::{watchdog_timeout, Notifier, NotifyState, Verdict, Watchdog};
use gnomon_server::Engine;

/// How often STATUS= is refreshed.
const STATUS_EVERY: Duration = Duration::from_secs(5);
/// Below this the watchdog can fire on a healthy server: an idle worker
/// wakes every 100 ms, a full batch takes a few more.
const WATCHDOG_FLOOR: Duration = Duration::from_secs(1);

/// The service manager's view of this process.
pub(crate) struct Service {
    notifier: Notifier,
    watchdog: Option<Watchdog>,
    /// "N versions on udp A and tcp B": what changes only on a reload.
    serving: String,
    next_status: Instant,
    /// Responses at the last status, and when.
    last: (u64, Instant),
    /// Threads the watchdog last found stuck (empty: all well).
    stalled: Vec<String>,
    /// A notification failed and was logged; later failures are not.
    send_failed: bool,
}

fn responses(engine: &Engine) -> u64 {
    let s = engine.snapshot();
    s.stats.total_responses() + s.tcp.map_or(0, |t| t.total_responses())
}

impl Service {
    /// Everything is bound and the first key epoch is in place (the engine
    /// started): say READY=1 with the first status, and start watching
    /// the heartbeats if systemd asked for a watchdog. `serving`: what is
    /// served where ("15 versions on udp A and 14 on tcp B").
    pub(crate) fn ready(engine: &Engine, serving: String) -> Service {
        let notifier = Notifier::from_env().unwrap_or_else(|e| {
            tracing::warn!(
                "not notifying the service manager (NOTIFY_SOCKET): {}",
                crate::words::strip_os_error(&e.to_string())
            );
            Notifier::none()
        });
        let now = Instant::now();
        let watchdog = watchdog_timeout()
            .filter(|_| notifier.enabled())
            .map(|timeout| {
                if timeout < WATCHDOG_FLOOR {
                    tracing::warn!(
                        "WatchdogSec={timeout:?} is below {WATCHDOG_FLOOR:?}: a healthy worker \
                         may miss a ping"
                    );
                }
                let w = Watchdog::new(timeout, engine.heartbeats(), now);
                tracing::info!(
                    "watchdog: pinging every {:?} while all threads make progress",
                    w.every()
                );
                w
            });
        let mut service = Service {
            notifier,
            watchdog,
            serving,
            next_status: now + STATUS_EVERY,
            last: (responses(engine), now),
            stalled: Vec::new(),
            send_failed: false,
        };
        let status = service.status(engine, now);
        service.send(&[NotifyState::Ready, NotifyState::Status(&status)]);
        service
    }

    /// A SIGHUP reload begins (systemd shows "reloading" until READY=1).
    pub(crate) fn reloading(&mut self) {
        match NotifyState::monotonic_usec_now() {
            Ok(now) => self.send(&[NotifyState::Reloading, now]),
            Err(_) => self.send(&[NotifyState::Reloading]),
        }
    }

    /// The reload is over, applied or refused: serving `serving` now.
    pub(crate) fn reloaded(&mut self, engine: &Engine, serving: String) {
        self.serving = serving;
        let status = self.status(engine, Instant::now());
        self.send(&[NotifyState::Ready, NotifyState::Status(&status)]);
    }

    /// Called on every poll of the main loop.
    pub(crate) fn tick(&mut self, engine: &Engine) {
        if !self.notifier.enabled() {
            return;
        }
        let now = Instant::now();
        if let Some(w) = &mut self.watchdog {
            match w.poll(now) {
                Verdict::Wait => {}
                Verdict::Ping => {
                    if !self.stalled.is_empty() {
                        tracing::info!("watchdog: every thread makes progress again; pinging");
                        self.stalled.clear();
                    }
                    self.send(&[NotifyState::Watchdog]);
                }
                Verdict::Stalled(names) => {
                    if names != self.stalled {
                        tracing::error!(
                            "watchdog: no progress from {}; not pinging, so systemd will \
                             restart the service",
                            names.join(", ")
                        );
                        self.stalled = names;
                        // Say it now rather than at the next refresh.
                        self.next_status = now;
                    }
                }
            }
        }
        if now >= self.next_status {
            let status = self.status(engine, now);
            self.send(&[NotifyState::Status(&status)]);
            self.next_status = now + STATUS_EVERY;
        }
    }

    /// The server is stopping (`failed`: because a worker died).
    pub(crate) fn stopping(&mut self, failed: bool) {
        let why = if failed {
            "stopping: a worker failed"
        } else {
            "stopping"
        };
        self.send(&[NotifyState::Stopping, NotifyState::Status(why)]);
    }

    /// The one-line summary `systemctl status` shows.
    fn status(&mut self, engine: &Engine, now: Instant) -> String {
        let snapshot = engine.snapshot();
        let total = responses(engine);
        let (before, at) = self.last;
        let secs = now.duration_since(at).as_secs_f64();
        let rate = if secs > 0.0 {
            total.saturating_sub(before) as f64 / secs
        } else {
            0.0
        };
        self.last = (total, now);
        let now_s = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let state = if !snapshot.answering {
            "not answering (clock unsynchronized and clock.unsynchronized = \"refuse\"; \
             --clock-unsynchronized answer-with-radius answers anyway)"
        } else if !snapshot.can_sign {
            "not answering (no delegation covers the current time)"
        } else {
            "answering"
        };
        let mut line = String::new();
        if !self.stalled.is_empty() {
            line += &format!("STUCK: {}; ", self.stalled.join(", "));
        }
        line += &format!(
            "{state} {}; {total} responses, {rate:.0}/s; online key valid until {} ({} s)",
            self.serving,
            format_utc(snapshot.cert_expiry_s.saturating_mul(1_000_000)),
            snapshot.cert_expiry_s.saturating_sub(now_s)
        );
        line
    }

    fn send(&mut self, states: &[NotifyState<'_>]) {
        match self.notifier.send(states) {
            Ok(()) => self.send_failed = false,
            Err(e) if !self.send_failed => {
                tracing::warn!(
                    "cannot notify the service manager (NOTIFY_SOCKET): {}",
                    crate::words::io(&e)
                );
                self.send_failed = true;
            }
            Err(_) => {}
        }
    }
}
