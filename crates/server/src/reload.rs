//! Reloading a running engine, and what is counted about it.
//!
//! ```text
//!  SIGHUP (gnomon serve: a flag, read by the main loop, so a storm of
//!  signals is one reload)
//!    ▶ configuration re-read ── fails: the running configuration stays,
//!      counted "failure" (reason "config")
//!    ▶ names no key while a configured one is served (an empty or
//!      half-written file) ── refused the same way (reason "no_keys"):
//!      a configured identity is never swapped for an ephemeral one
//!    ▶ key files and delegation directories loaded ── fails: "keys"
//!    ▶ Engine::reload ▶ key thread: new sources, one new epoch minted
//!      ── fails (no delegation covers now): nothing changes, "apply"
//!    ▶ worker settings swapped whole (ArcSwap); each worker takes them at
//!      its next batch, TCP at each connection's next read   ── "success"
//! ```
//!
//! A worker sees the old settings or the new, never a mix, and every epoch
//! it can load signs validly: no datagram is lost or answered wrongly
//! because of a reload. What cannot change without new sockets or new
//! buffers (addresses, worker count, batch size, receive buffer, TCP on or
//! off) keeps its value from the start; `gnomon serve` names it in the log.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::keys::KeySource;

/// Why a reload was refused: the `reason` of
/// `gnomon_reload_refusals_total`. Every refusal leaves the running
/// configuration and keys in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The configuration did not load: unreadable file, bad TOML, a value
    /// out of range, a conflict between keys.
    Config,
    /// It names no long-term key while a configured one is served (an
    /// empty or half-written file): the quick-start's ephemeral key is
    /// never taken on a reload, it would change the public key under every
    /// client.
    NoKeys,
    /// A key file or delegation directory it names did not load.
    Keys,
    /// The key thread could not mint an epoch from the new identities (no
    /// delegation covers now), or did not answer in time.
    Apply,
}

impl Refusal {
    /// Every reason, in the order the metric lists them.
    pub const ALL: [Refusal; 4] = [
        Refusal::Config,
        Refusal::NoKeys,
        Refusal::Keys,
        Refusal::Apply,
    ];

    /// The metric's label.
    pub fn label(self) -> &'static str {
        match self {
            Refusal::Config => "config",
            Refusal::NoKeys => "no_keys",
            Refusal::Keys => "keys",
            Refusal::Apply => "apply",
        }
    }
}

/// Reload and rescan counters, shared by the engine, the key thread and
/// the metrics endpoint.
#[derive(Debug, Default)]
pub struct Reloads {
    succeeded: AtomicU64,
    failed: AtomicU64,
    refused: [AtomicU64; Refusal::ALL.len()],
    last_success_s: AtomicU64,
    last_failed: AtomicBool,
    offline_rejected: AtomicU64,
    offline_taken: AtomicU64,
    offline_delegations: AtomicU64,
}

/// A snapshot of [`Reloads`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReloadCounts {
    /// Reloads applied.
    pub succeeded: u64,
    /// Reloads refused (the running configuration stayed).
    pub failed: u64,
    /// The same, by reason (indexed as [`Refusal::ALL`]).
    pub refused: [u64; Refusal::ALL.len()],
    /// When the configuration last loaded (at start, then each successful
    /// reload), Unix s.
    pub last_success_s: u64,
    /// Whether the last attempt (start or reload) loaded.
    pub last_ok: bool,
    /// Delegation files a rescan refused.
    pub offline_rejected: u64,
    /// Delegation files a rescan took (new or changed).
    pub offline_taken: u64,
    /// Offline delegations held now, over every directory.
    pub offline_delegations: u64,
}

impl Reloads {
    /// Counters for an engine that loaded its configuration at `now_s`.
    pub fn started(now_s: u64) -> Reloads {
        let r = Reloads::default();
        r.last_success_s.store(now_s, Ordering::Relaxed);
        r
    }

    /// Count one reload attempt: applied at `now_s`, or refused and why.
    pub fn record(&self, outcome: Result<(), Refusal>, now_s: u64) {
        match outcome {
            Ok(()) => {
                self.last_success_s.store(now_s, Ordering::Relaxed);
                self.succeeded.fetch_add(1, Ordering::Relaxed);
            }
            Err(why) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                self.refused[why as usize].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.last_failed.store(outcome.is_err(), Ordering::Relaxed);
    }

    /// Count what a rescan did.
    pub(crate) fn rescanned(&self, taken: usize, rejected: usize) {
        self.offline_taken
            .fetch_add(taken as u64, Ordering::Relaxed);
        self.offline_rejected
            .fetch_add(rejected as u64, Ordering::Relaxed);
    }

    /// Set how many offline delegations are held.
    pub(crate) fn set_delegations(&self, sources: &[KeySource]) {
        let n = sources
            .iter()
            .map(|s| match s {
                KeySource::Offline(store) => store.delegations().len() as u64,
                KeySource::LongTerm(_) => 0,
            })
            .sum();
        self.offline_delegations.store(n, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn counts(&self) -> ReloadCounts {
        ReloadCounts {
            succeeded: self.succeeded.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            refused: std::array::from_fn(|i| self.refused[i].load(Ordering::Relaxed)),
            last_success_s: self.last_success_s.load(Ordering::Relaxed),
            last_ok: !self.last_failed.load(Ordering::Relaxed),
            offline_rejected: self.offline_rejected.load(Ordering::Relaxed),
            offline_taken: self.offline_taken.load(Ordering::Relaxed),
            offline_delegations: self.offline_delegations.load(Ordering::Relaxed),
        }
    }
}
