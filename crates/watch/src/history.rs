//! The prober's rounds in the store: one `probe` observation per server
//! per round (the answer's version, RTT, offset, radius, certificate
//! window and raw response, or the failure's label), and one `answers`
//! observation per version family offered alone. The server pages draw
//! their history from the `probe` rows, so it survives restarts and can be
//! shared by several monitors writing one PostgreSQL database.

use std::time::Duration;

use base64::Engine as _;
use gnomon_client::Server;
use gnomon_protocol::serverlist::Transport;
use tokio::runtime::Handle;

use crate::state::{Point, Status};
use crate::store::{Observation, ServerRow, Store, StoreError};

/// The check name of a round's main probe.
pub const PROBE: &str = "probe";
/// How far back a server page looks.
pub const WINDOW: Duration = Duration::from_secs(7 * 86_400);
/// Points a server page plots at most, whatever the store holds: the
/// database sums the window into this many buckets (a week of 5-minute
/// rounds is ~2,000 rows; a busier schedule, or several monitors writing
/// one database, many more).
pub const MAX_POINTS: i64 = 500;

/// The store, written from the prober's (synchronous) thread.
#[derive(Clone, Debug)]
pub struct History {
    store: Store,
    handle: Handle,
}

impl History {
    /// Write to `store` through the runtime behind `handle`.
    pub fn new(store: Store, handle: Handle) -> History {
        History { store, handle }
    }

    /// The store, for readers.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Runs `f` to its end on the store's runtime, from the prober's
    /// thread.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.handle.block_on(f)
    }

    /// Add the list's servers (or update their keys and addresses).
    pub fn register(&self, servers: &[Server], now_us: i64) -> Result<(), StoreError> {
        self.handle.block_on(async {
            for s in servers {
                self.store.upsert_server(&row(s, now_us)).await?;
            }
            Ok(())
        })
    }

    /// Record a round's statuses; the number of rows written.
    pub fn record(&self, statuses: &[Status]) -> Result<usize, StoreError> {
        self.handle.block_on(async {
            let rows: Vec<Observation> = statuses.iter().flat_map(observations).collect();
            self.store.insert_observations(&rows).await
        })
    }
}

fn row(s: &Server, now_us: i64) -> ServerRow {
    let addresses: Vec<serde_json::Value> = [Transport::Udp, Transport::Tcp]
        .into_iter()
        .filter_map(|t| {
            let a = s.describe_address(t)?;
            let protocol = if t == Transport::Udp { "udp" } else { "tcp" };
            Some(serde_json::json!({ "protocol": protocol, "address": a }))
        })
        .collect();
    ServerRow {
        name: s.name.clone(),
        public_key: base64::engine::general_purpose::STANDARD.encode(s.public_key.bytes()),
        addresses: serde_json::Value::from(addresses).to_string(),
        seen_us: now_us,
    }
}

/// The rows one status becomes.
pub fn observations(s: &Status) -> Vec<Observation> {
    let t = s.checked_at_us;
    let result = if s.up {
        "ok"
    } else {
        s.failure.as_deref().unwrap_or("local")
    };
    let mut probe = Observation::new(
        &s.name,
        s.version.as_deref().unwrap_or(""),
        PROBE,
        t,
        result,
    );
    probe.detail = s.error.clone().or_else(|| s.flagged.clone());
    probe.rtt_us = s.rtt_us.map(|v| v as i64);
    probe.offset_us = s.offset_consensus_us.or(s.offset_local_us);
    probe.radius_us = s.radius_us.map(|v| v as i64);
    probe.cert_min_us = s.cert_mint_us.map(|v| v as i64);
    probe.cert_max_us = s.cert_maxt_us.map(|v| v as i64);
    probe.response = s.raw_response.clone();
    let mut out = vec![probe];
    for f in &s.families {
        let mut o = Observation::new(
            &s.name,
            &f.offered,
            "answers",
            t,
            if f.answered.is_some() {
                "ok"
            } else {
                "no_answer"
            },
        );
        o.detail = f.answered.clone().or_else(|| f.error.clone());
        out.push(o);
    }
    out
}

/// A server's history over the last [`WINDOW`], oldest first: at most
/// [`MAX_POINTS`] points (each the mean of a bucket of rounds, down when
/// any round in it was), and the uptime over every round in the window.
pub async fn points(store: &Store, server: &str, now_us: i64) -> Result<Window, StoreError> {
    let since = now_us - WINDOW.as_micros() as i64;
    let Some(first) = store.first_time(server, PROBE, since).await? else {
        return Ok(Window::default());
    };
    // Buckets span what is there, not the whole week: a monitor started
    // an hour ago still plots its rounds one by one.
    let bucket = ((now_us - first) / MAX_POINTS + 1).max(1);
    let buckets = store
        .buckets(server, PROBE, (first, now_us), bucket)
        .await?;
    let mut w = Window::default();
    for b in buckets {
        w.rounds += b.count.max(0) as u64;
        w.up += b.ok.max(0) as u64;
        w.points.push(Point {
            at_us: b.first_us,
            up: b.ok == b.count,
            rtt_us: b.rtt_us.map(|v| v.max(0) as u64),
            offset_us: b.offset_us,
            radius_us: b.radius_us.map(|v| v.max(0) as u64),
        });
    }
    Ok(w)
}

/// What a server page shows of the history.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Window {
    /// The plotted points, oldest first.
    pub points: Vec<Point>,
    /// Rounds in the window.
    pub rounds: u64,
    /// Of those, rounds answered.
    pub up: u64,
}
