//! The report sink (`gnomon report-server`): accepts malfeasance reports
//! over HTTP as VERSIONS.md §6.6 describes, verifies each with the code
//! `gnomon verify-report` uses (gnomon_client::report_check), keeps the
//! ones that prove something, and serves them for audit.
//!
//! ```text
//!  accept ─▶ cap (max_connections) ─▶ task: deadline(hyper http1 ─▶ router)
//!  POST / or /reports   rate (prefix) ─▶ type ─▶ size ─▶ parse ─▶ verify ─▶ store
//!                       429             415      413     400      422       201 new
//!                                                                           200 known
//!  GET  / or /reports  reports by accused server (HTML, no script)
//!  GET  /reports/ID.json   the body exactly as received
//!  GET  /reports/ID/verify the check recomputed now (JSON)
//!  GET  /metrics        Prometheus text
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

use std::sync::Arc;

pub use accept::Stored;
pub use http::serve;
pub use metrics::Counters;

use crate::Store;

/// Largest report accepted. A report from a full measurement sequence
/// (a few servers, twice) is a few KiB; this leaves room for ~30 entries.
pub const DEFAULT_MAX_BODY: usize = 64 * 1024;
/// Reports a minute per source prefix (and the burst).
pub const DEFAULT_RATE_PER_MINUTE: u32 = 10;
/// Connections served at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

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
}

impl Default for SinkConfig {
    fn default() -> Self {
        SinkConfig {
            max_body: DEFAULT_MAX_BODY,
            rate_per_minute: DEFAULT_RATE_PER_MINUTE,
            max_connections: DEFAULT_MAX_CONNECTIONS,
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
}

impl Shared {
    pub(crate) fn new(store: Store, config: SinkConfig) -> Arc<Shared> {
        Arc::new(Shared {
            store,
            limiter: limit::RateLimiter::new(config.rate_per_minute),
            config,
            counters: Counters::default(),
        })
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
            shared: Shared::new(store, config),
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
        let stored = self.shared.store.count(crate::Table::Reports).await.ok();
        self.shared.counters.render(stored)
    }

    /// Check and store a report made by this process; `sender` is what
    /// the store keeps as its source (no rate limit applies).
    pub async fn submit(&self, body: &str, sender: &str) -> Result<Stored, String> {
        accept::accept(
            &self.shared,
            axum::body::Bytes::copy_from_slice(body.as_bytes()),
            sender.to_string(),
        )
        .await
        .map_err(|(why, detail)| {
            self.shared.counters.rejected(why);
            detail
        })
    }
}

/// Runs the sink as a program: opens (and migrates) the store, serves
/// `listen` until SIGTERM or SIGINT. Says on stderr where it listens, once
/// it does (the line tests and operators wait for).
pub fn run(listen: std::net::SocketAddr, database: &str, config: SinkConfig) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("gnomon-sink")
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    runtime.block_on(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).map_err(|e| format!("signals: {e}"))?;
        let mut int = signal(SignalKind::interrupt()).map_err(|e| format!("signals: {e}"))?;
        let store = Store::open(database).await.map_err(|e| e.to_string())?;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| format!("{listen}: {e}"))?;
        let local = listener
            .local_addr()
            .map_err(|e| format!("{listen}: {e}"))?;
        eprintln!(
            "gnomon report-server: listening on {local}, {:?} database",
            store.backend()
        );
        let stop = async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        };
        serve(listener, store.clone(), config, stop)
            .await
            .map_err(|e| e.to_string())?;
        store.close().await;
        eprintln!("gnomon report-server: stopped");
        Ok(())
    })
}
