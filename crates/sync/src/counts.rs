//! The counters the service's parts keep and `--metrics` shows: plain
//! atomics, bumped by whoever counts (the list refresh, the now socket,
//! chrony's sink, the signed lists) and read by the metrics, which never
//! reach into those parts; and the signed lists' status, plain data the
//! service fills and both `--status` (through the state directory) and
//! the metrics read. This module imports nothing of the crate.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

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

// Kept by the signed lists (the service's fetches of them).

/// Every refusal's label, the `reason` of
/// `gnomon_sync_signed_list_refusals_total`
/// (gnomon_protocol::signed_list::Refusal::label).
pub const SIGNED_REFUSALS: [&str; 6] = [
    "signature",
    "other_key",
    "expired",
    "replayed",
    "reused",
    "malformed",
];

/// Every download failure's class, the `class` of
/// `gnomon_sync_signed_list_fetch_failures_total` (the list refresh's
/// labels that a download can give).
pub const SIGNED_FAILURES: [&str; 6] =
    ["timeout", "status", "redirect", "too_big", "tls", "network"];

/// Signed lists accepted, refused by reason, and downloads failed by
/// class, shared with the metrics.
#[derive(Debug, Default)]
pub struct SignedLists {
    accepted: AtomicU64,
    refused: [AtomicU64; SIGNED_REFUSALS.len()],
    failed: [AtomicU64; SIGNED_FAILURES.len()],
}

impl SignedLists {
    /// Count one list accepted.
    pub fn accepted(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
    }

    /// Count one `label`: a refusal's or a download failure's.
    pub fn bump(&self, label: &str) {
        if let Some(i) = SIGNED_REFUSALS.iter().position(|r| *r == label) {
            self.refused[i].fetch_add(1, Ordering::Relaxed);
        } else if let Some(i) = SIGNED_FAILURES.iter().position(|r| *r == label) {
            self.failed[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Lists accepted.
    pub fn accepted_total(&self) -> u64 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// (reason, count) for each of [`SIGNED_REFUSALS`].
    pub fn refusals(&self) -> Vec<(&'static str, u64)> {
        SIGNED_REFUSALS
            .iter()
            .zip(&self.refused)
            .map(|(l, c)| (*l, c.load(Ordering::Relaxed)))
            .collect()
    }

    /// (class, count) for each of [`SIGNED_FAILURES`].
    pub fn failures(&self) -> Vec<(&'static str, u64)> {
        SIGNED_FAILURES
            .iter()
            .zip(&self.failed)
            .map(|(l, c)| (*l, c.load(Ordering::Relaxed)))
            .collect()
    }
}

/// What `--status` shows of the signed lists, as the service last wrote it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SignedStatus {
    /// Format version.
    pub format: u32,
    /// When it was written (judged time), Unix seconds.
    pub written_unix: i64,
    /// How the time was judged then: "the local clock" or "a consensus".
    pub judged_by: String,
    /// K.
    pub threshold: usize,
    /// Lists in force then.
    pub in_force: usize,
    /// Servers in the merged list then.
    pub servers: usize,
    /// Why there were no servers, when there were none.
    pub no_servers: Option<String>,
    /// Each pinned key, in pin order.
    pub monitors: Vec<MonitorStatus>,
    /// Lists refused since the service started, by reason.
    pub refusals: BTreeMap<String, u64>,
    /// Downloads that failed since the service started, by class.
    pub failures: BTreeMap<String, u64>,
}

/// One pinned key in [`SignedStatus`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonitorStatus {
    /// `SHA256:…`.
    pub fingerprint: String,
    /// The key's comment.
    pub comment: String,
    /// `current`, `kept`, `expired` or `none` when written.
    pub standing: String,
    /// The sequence of the list in force (or last kept).
    pub sequence: Option<u64>,
    /// The monitor's name for itself, from that list.
    pub monitor: Option<String>,
    /// When that list was published, Unix seconds.
    pub published_unix: Option<i64>,
    /// When it expires, Unix seconds.
    pub expires_unix: Option<i64>,
    /// When it was fetched, Unix seconds.
    pub fetched_unix: Option<i64>,
    /// Where from.
    pub url: Option<String>,
    /// Why the last fetch brought no new list of this key.
    pub failure: Option<String>,
}
