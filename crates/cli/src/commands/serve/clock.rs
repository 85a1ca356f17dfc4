//! What the operator is told about the clock: each change of the kernel's
//! clock state once (not on every poll), and while a refusing server
//! drops requests, the setting that would make it answer, by the names an
//! operator types (flag, variable, file key).

use std::sync::atomic::Ordering;

use gnomon_server::Engine;

/// The flag, variable and file key of the unsynchronized-clock policy, as
/// the one table of keys names them.
pub(super) fn policy_names() -> (String, &'static str, &'static str) {
    const KEY: &str = "clock.unsynchronized";
    match gnomon_server::config::lookup(KEY) {
        Some(k) => (format!("--{}", k.flag), k.env, k.key),
        None => (format!("--{}", KEY.replace('.', "-")), "", KEY),
    }
}

/// What would make a refusing server answer: said wherever it refuses.
pub(super) fn how_to_answer() -> String {
    let (flag, env, key) = policy_names();
    format!(
        "to answer meanwhile with a wider radius, run with {flag} answer-with-radius \
         ({env}=answer-with-radius, or {key} = \"answer-with-radius\" in the \
         configuration file, which a SIGHUP applies); or get the clock synchronized \
         (chrony, ntpd, or `gnomon sync`)"
    )
}

/// What the operator was last told about the clock, so that each change
/// is logged once rather than on every poll.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct ClockReport {
    /// errno of the last failed adjtimex, 0 when it worked.
    read_error: i32,
    synchronized: bool,
    answering: bool,
    can_sign: bool,
    radius_s: u64,
}

impl ClockReport {
    /// The state nothing needs to be said about.
    pub(super) const FINE: ClockReport = ClockReport {
        read_error: 0,
        synchronized: true,
        answering: true,
        can_sign: true,
        radius_s: 0,
    };

    pub(super) fn read(engine: &Engine) -> ClockReport {
        let c = &engine.clock;
        ClockReport {
            read_error: c.read_error.load(Ordering::Relaxed),
            synchronized: c.synchronized.load(Ordering::Relaxed),
            answering: c.answering.load(Ordering::Relaxed),
            can_sign: engine.can_sign(),
            radius_s: c.radius_us.load(Ordering::Relaxed) / 1_000_000,
        }
    }

    fn policy(&self) -> String {
        let (_, _, key) = policy_names();
        if self.answering {
            format!(
                "answering with a radius of {} s ({key} = \"answer-with-radius\")",
                self.radius_s
            )
        } else {
            format!(
                "not answering until it is ({key} = \"refuse\"): every request is dropped, \
                 so clients get no answer at all; {}",
                how_to_answer()
            )
        }
    }

    pub(super) fn log_changes_from(&self, before: &ClockReport) {
        if self.read_error != before.read_error {
            if self.read_error != 0 {
                tracing::warn!(
                    "cannot read the kernel's clock state (adjtimex: {}; systemd's \
                     ProtectClock=yes does this); treating the clock as unsynchronized, {}",
                    crate::words::io(&std::io::Error::from_raw_os_error(self.read_error)),
                    self.policy()
                );
            } else {
                tracing::info!("the kernel's clock state can be read again");
            }
        } else if self.read_error == 0 && self.synchronized != before.synchronized {
            if self.synchronized {
                tracing::info!("the kernel says the system clock is synchronized");
            } else {
                tracing::warn!(
                    "the kernel says the system clock is not synchronized; {}",
                    self.policy()
                );
            }
        } else if self.answering && !before.answering {
            tracing::info!("answering again");
        } else if !self.answering && before.answering {
            // Still unsynchronized, and a reload made the policy refuse.
            tracing::warn!("the clock is still unsynchronized; {}", self.policy());
        }
        if self.can_sign != before.can_sign {
            if self.can_sign {
                tracing::info!("signing again: a delegation covers the current time");
            } else {
                tracing::warn!(
                    "no delegation covers the current time (clock step, or the offline \
                     delegations ran out); not answering until one does"
                );
            }
        }
    }
}
