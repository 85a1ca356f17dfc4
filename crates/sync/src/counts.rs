//! The counters the service's parts keep and `--metrics` shows: plain
//! atomics, bumped by whoever counts (the list refresh, the now socket,
//! chrony's sink) and read by the metrics, which never reach into those
//! parts. This module imports nothing of the crate.

use std::sync::atomic::{AtomicU64, Ordering};

// Kept by the list refresh (`refresh::Counts`).

/// Every `result` label, in the order metrics print them.
pub const REFRESH_RESULTS: [&str; 9] = [
    "ok", "timeout", "status", "redirect", "too_big", "tls", "network", "parse", "too_few",
];

/// Refreshes by result, shared with the metrics.
#[derive(Debug, Default)]
pub struct Refreshes([AtomicU64; REFRESH_RESULTS.len()]);

impl Refreshes {
    /// Count one `label` (one of [`REFRESH_RESULTS`]).
    pub fn bump(&self, label: &str) {
        if let Some(i) = REFRESH_RESULTS.iter().position(|r| *r == label) {
            self.0[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// (label, count) for each of [`REFRESH_RESULTS`].
    pub fn get(&self) -> Vec<(&'static str, u64)> {
        REFRESH_RESULTS
            .iter()
            .zip(&self.0)
            .map(|(l, c)| (*l, c.load(Ordering::Relaxed)))
            .collect()
    }
}

// Kept by the now socket (`now_socket::Counts`).

/// What happened to requests, the `result` label of
/// `gnomon_sync_now_requests_total`.
#[derive(Debug, Default)]
pub struct NowRequests {
    pub(crate) answered: AtomicU64,
    pub(crate) bad_request: AtomicU64,
    pub(crate) too_long: AtomicU64,
    pub(crate) deadline: AtomicU64,
    pub(crate) evicted: AtomicU64,
    pub(crate) busy: AtomicU64,
    pub(crate) paced: AtomicU64,
}

impl NowRequests {
    /// (result, count), in a fixed order.
    pub fn get(&self) -> [(&'static str, u64); 7] {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        [
            ("answered", l(&self.answered)),
            ("bad_request", l(&self.bad_request)),
            ("too_long", l(&self.too_long)),
            ("deadline", l(&self.deadline)),
            ("evicted", l(&self.evicted)),
            ("busy", l(&self.busy)),
            ("paced", l(&self.paced)),
        ]
    }

    pub(crate) fn add(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

// Kept by chrony's sink (`chrony::Counters`).

/// Samples sent, failed and too wide to send, readable while the sender
/// is owned elsewhere (by the service, for metrics).
#[derive(Debug, Default)]
pub struct ChronySamples {
    pub(crate) sent: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) too_wide: AtomicU64,
}

impl ChronySamples {
    /// Samples chrony's socket accepted.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Samples the socket did not take, for any reason.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Samples not sent because their radius exceeds `chrony-max-radius`.
    pub fn too_wide(&self) -> u64 {
        self.too_wide.load(Ordering::Relaxed)
    }
}
