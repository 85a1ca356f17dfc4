//! What `/metrics` and `/health` read of a running engine: the workers'
//! last published counters summed, the key epoch, the clock state, TCP's
//! and the reloads' counters and where the AF_XDP path runs, gathered into
//! one [`Snapshot`] at each scrape.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::{now_us, Engine};
use crate::keys::SharedKeys;
use crate::metrics::Snapshot;
use crate::reload::Reloads;
use crate::settings::ClockState;
use crate::stats::{TcpStats, WorkerStats};

impl Engine {
    /// Sum of the workers' last published counters.
    pub fn stats(&self) -> WorkerStats {
        self.snapshot().stats
    }

    /// What `/metrics` and `/health` report.
    pub fn snapshot(&self) -> Snapshot {
        snapshot(
            &self.stats,
            &self.keys,
            &self.clock,
            self.tcp_stats(),
            &self.reloads,
            self.xdp_info(),
        )
    }

    /// A closure producing snapshots, for the metrics thread.
    pub fn snapshot_source(&self) -> impl Fn() -> Snapshot + Send + 'static {
        let (stats, keys, clock) = (self.stats.clone(), self.keys.clone(), self.clock.clone());
        let reloads = self.reloads.clone();
        let tcp = self.tcp.as_ref().map(|t| t.stats_source());
        let xdp = self.xdp_info();
        move || {
            snapshot(
                &stats,
                &keys,
                &clock,
                tcp.as_ref().map(|f| f()),
                &reloads,
                xdp.clone(),
            )
        }
    }

    /// Where the AF_XDP path runs, when it does.
    pub fn xdp_info(&self) -> Option<crate::metrics::XdpInfo> {
        self.xdp.as_ref().map(|a| crate::metrics::XdpInfo {
            interface: a.interface.clone(),
            mode: a.mode.label(),
            zero_copy: a.zero_copy,
            queues: a.queues,
            gate: a.gate.clone(),
        })
    }

    /// The TCP counters, when TCP is served.
    pub fn tcp_stats(&self) -> Option<TcpStats> {
        self.tcp.as_ref().map(|t| t.stats())
    }
}

fn snapshot(
    stats: &[Arc<Mutex<WorkerStats>>],
    keys: &SharedKeys,
    clock: &ClockState,
    tcp: Option<TcpStats>,
    reloads: &Reloads,
    xdp: Option<crate::metrics::XdpInfo>,
) -> Snapshot {
    let mut total = WorkerStats::default();
    for s in stats {
        if let Ok(s) = s.lock() {
            total.add(&s);
        }
    }
    let now = now_us();
    let keys_now = keys.load();
    let key_info = keys_now
        .identities
        .iter()
        .map(|i| crate::metrics::KeyInfo {
            long_term: i.public.clone(),
            online: i.online.public_key().clone(),
            host: i.host.clone(),
        })
        .collect();
    Snapshot {
        keys: key_info,
        stats: total,
        cert_expiry_s: keys.load().expires_us() / 1_000_000,
        now_s: now / 1_000_000,
        can_sign: keys.load().covers(now),
        radius_us: clock.radius_us.load(Ordering::Relaxed),
        answering: clock.answering.load(Ordering::Relaxed),
        clock_synchronized: clock.synchronized.load(Ordering::Relaxed),
        clock_readable: clock.read_error.load(Ordering::Relaxed) == 0,
        tcp,
        reloads: reloads.counts(),
        xdp,
    }
}
