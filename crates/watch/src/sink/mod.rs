//! The report sink (`gnomon report-server`): accepts malfeasance reports
//! over HTTP as RFC 10049's malfeasance report describes, verifies each with the code
//! `gnomon verify-report` uses (gnomon_client::report_check), keeps the
//! ones that prove something, and serves them for audit.
//!
//! ```text
//!  accept ─▶ cap (max_connections) ─▶ task: deadline(hyper http1 ─▶ router)
//!  POST / or /reports   rate (prefix, LRU table) ─▶ type ─▶ size ─▶ parse ─▶ keys ─▶ verify
//!                       429                         415      413     400      422     422
//!                       ─▶ accused keys ─▶ known? ─▶ quota (prefix, total) ─▶ store canonical
//!                          422 unwatched   200         429 / 507               201
//!  GET  / or /reports  reports newest first, a page at a time (HTML, no script)
//!  GET  /api/reports   the same as JSON, with cursors
//!  GET  /reports/ID.json   the report as stored (canonical JSON)
//!  GET  /reports/ID/verify the check made on arrival (JSON; nothing verified again)
//!  GET  /metrics        Prometheus text
//!  every retention/10 (at most 1 h): delete reports older than `retention`
//! ```
//!
//! Everything that arrives is hostile: each connection is a task with a
//! deadline from accept, the request head must arrive within a few seconds
//! and fit a small buffer, at most `max_connections` are open and
//! `crate::http::MAX_PER_SOURCE` from one source (a newcomer takes the
//! slot of the oldest connection whose request is not complete), a body is read up to `max_body` and no further, and
//! every refusal is counted by reason, never logged per request.

mod accept;
mod http;
pub mod limit;
mod metrics;
mod page;
mod run;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

pub use accept::Stored;
pub use http::serve;
pub use metrics::{Counters, Summary};
pub use run::{run, Ended, RunError};

use crate::Store;

/// Largest report accepted. A report from a full measurement sequence
/// (a few servers, twice) is a few KiB; this leaves room for ~30 entries.
pub const DEFAULT_MAX_BODY: usize = 64 * 1024;
/// Reports a minute per source prefix (and the burst).
pub const DEFAULT_RATE_PER_MINUTE: u32 = 10;
/// Connections served at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;
/// Bytes of reports kept from one sender /24 or /48: about 900 reports of
/// a measurement sequence over four servers (8 entries: ~19 KB with the
/// stored check), 256 of the largest accepted.
pub const DEFAULT_QUOTA_PER_SOURCE: u64 = 16 << 20;
/// Bytes of reports kept in all.
pub const DEFAULT_QUOTA_TOTAL: u64 = 1 << 30;
/// Reports older than this are deleted.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(365 * 86_400);
/// Sender prefixes the rate limit tracks at once.
pub use limit::DEFAULT_MAX_PREFIXES as DEFAULT_RATE_TABLE;
/// Lines on a page of the audit list.
pub const PAGE_SIZE: u32 = 100;

/// The servers a sink keeps reports about: their long-term keys, base64
/// (standard alphabet, padded, as reports are read back).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeySet(HashSet<String>);

impl KeySet {
    /// The set of these keys (32 bytes for Ed25519, 1312 for ML-DSA-44).
    pub fn new<K: AsRef<[u8]>>(keys: impl IntoIterator<Item = K>) -> KeySet {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD;
        KeySet(keys.into_iter().map(|k| b64.encode(k.as_ref())).collect())
    }

    /// Whether `key` (base64, as [`gnomon_client::report_check::accused_keys`]
    /// writes it) is in the set.
    pub fn contains_b64(&self, key: &str) -> bool {
        self.0.contains(key)
    }

    /// Whether `key` is in the set.
    pub fn contains(&self, key: &[u8]) -> bool {
        use base64::Engine;
        self.0
            .contains(&base64::engine::general_purpose::STANDARD.encode(key))
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// No keys.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds the keys of `other`.
    pub fn extend(&mut self, other: KeySet) {
        self.0.extend(other.0);
    }
}

/// How the sink behaves.
#[derive(Clone, Debug)]
pub struct SinkConfig {
    /// Largest body read, bytes (larger: 413).
    pub max_body: usize,
    /// POSTs a minute per /24 or /48 (more: 429).
    pub rate_per_minute: u32,
    /// Connections open at once (a newcomer past it, or past its source's
    /// share, takes the slot of the oldest incomplete connection).
    pub max_connections: usize,
    /// Only reports accusing one of these keys are kept (others: 422
    /// `unwatched`); None keeps reports about any server.
    pub keys: Option<Arc<KeySet>>,
    /// Bytes stored from one sender prefix at most (more: 429).
    pub quota_per_source: u64,
    /// Bytes stored in all at most (more: 507).
    pub quota_total: u64,
    /// Reports older than this are deleted.
    pub retention: Duration,
    /// Sender prefixes tracked by the rate limit (past it, the least
    /// recently seen is forgotten).
    pub rate_table: usize,
}

impl Default for SinkConfig {
    fn default() -> Self {
        SinkConfig {
            max_body: DEFAULT_MAX_BODY,
            rate_per_minute: DEFAULT_RATE_PER_MINUTE,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            keys: None,
            quota_per_source: DEFAULT_QUOTA_PER_SOURCE,
            quota_total: DEFAULT_QUOTA_TOTAL,
            retention: DEFAULT_RETENTION,
            rate_table: DEFAULT_RATE_TABLE,
        }
    }
}

/// What the handlers share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) store: Store,
    pub(crate) config: SinkConfig,
    pub(crate) limiter: limit::RateLimiter,
    pub(crate) counters: Counters,
    /// Held from the quota check to the insert, so concurrent POSTs cannot
    /// each see room for one and together overrun the quota.
    pub(crate) storing: tokio::sync::Mutex<()>,
    /// Mounted beside a monitor's status page at `/` (the list links back
    /// to it), rather than serving the list at `/` itself.
    pub(crate) beside_status: bool,
}

impl Shared {
    pub(crate) fn new(store: Store, config: SinkConfig, beside_status: bool) -> Arc<Shared> {
        Arc::new(Shared {
            store,
            limiter: limit::RateLimiter::new(config.rate_per_minute, config.rate_table),
            config,
            counters: Counters::default(),
            storing: tokio::sync::Mutex::new(()),
            beside_status,
        })
    }

    /// The counters as Prometheus text, with the store's size.
    pub(crate) async fn metrics(&self) -> String {
        let rows = self.store.count(crate::Table::Reports).await.ok();
        let bytes = self.store.report_usage("").await.ok().map(|u| u.total);
        let stored = rows.zip(bytes);
        self.counters.render(stored, self.limiter.evicted())
    }
}

/// How often retention runs: a tenth of the retention (so a report
/// outlives it by at most 10 %), at least a second, at most an hour.
pub fn sweep_interval(retention: Duration) -> Duration {
    (retention / 10).clamp(Duration::from_secs(1), Duration::from_secs(3600))
}

/// Deletes reports older than the retention now, and then every
/// [`sweep_interval`], until the task is dropped.
pub(crate) async fn retention_loop(shared: Arc<Shared>) {
    let every = sweep_interval(shared.config.retention);
    let keep_us = i64::try_from(shared.config.retention.as_micros()).unwrap_or(i64::MAX);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let cutoff = accept::now_us().saturating_sub(keep_us);
        let n = shared.store.expire_reports(cutoff).await.ok();
        shared.counters.swept(n);
    }
}

/// The sink as a part of another program (`gnomon watch --sink`): its
/// `/reports` routes to mount, its counters to export, and a door for the
/// host's own reports, which are checked and stored exactly as POSTed ones
/// are.
#[derive(Clone, Debug)]
pub struct Sink {
    shared: Arc<Shared>,
}

impl Sink {
    /// A sink over `store`.
    pub fn new(store: Store, config: SinkConfig) -> Sink {
        Sink {
            shared: Shared::new(store, config, true),
        }
    }

    /// `POST /reports`, `GET /reports` (the audit list),
    /// `/reports/ID.json` and `/reports/ID/verify`. Serve them with
    /// crate::http::serve_router: its limits guard the connections, and the
    /// peer address it attaches to each request is what the rate limit and
    /// the stored sender prefix read.
    pub fn router(&self) -> axum::Router {
        http::reports_routes(self.shared.clone())
    }

    /// The sink's counters as Prometheus text (`gnomon_reports_*`).
    pub async fn metrics(&self) -> String {
        self.shared.metrics().await
    }

    /// Starts retention on `runtime`: reports older than the configured
    /// retention are deleted now and on a schedule ([`sweep_interval`]).
    pub fn spawn_retention(&self, runtime: &tokio::runtime::Handle) {
        runtime.spawn(retention_loop(self.shared.clone()));
    }

    /// Check and store a report made by this process; `sender` is what
    /// the store keeps as its source (no rate limit applies). `judged` is
    /// the key this process judged lying: the report's line marks it,
    /// also when the report was stored before (another liar's round may
    /// have made the same chain).
    pub async fn submit(
        &self,
        body: &str,
        sender: &str,
        judged: Option<&[u8]>,
    ) -> Result<Stored, String> {
        let stored = accept::accept(
            &self.shared,
            axum::body::Bytes::copy_from_slice(body.as_bytes()),
            sender.to_string(),
        )
        .await
        .map_err(|(why, detail)| {
            self.shared.counters.rejected(why);
            detail
        })?;
        if let Some(key) = judged {
            use base64::Engine;
            let key = base64::engine::general_purpose::STANDARD.encode(key);
            self.shared
                .store
                .mark_judged(&stored.id, &key)
                .await
                .map_err(|e| format!("stored, but the judged key not marked: {e}"))?;
        }
        Ok(stored)
    }
}
