//! The signature budget across every TCP connection.
//!
//! TCP does not batch across connections (tcp.rs), so a peer that asks one
//! request at a time on each of its connections costs a whole signature per
//! request: an Ed25519 one of tens of µs, an ML-DSA-44 one of over 100 µs
//! (docs/COST.md). Handler threads compete with the UDP workers for the
//! cores, so without a bound a few TCP clients in lock-step could take the
//! time the UDP workers need. The same fair budget the workers use for
//! their single-signature versions (`crate::budget::FairBudget`), here one
//! for the whole transport: signing over TCP, for peers not on the allow
//! list, may take at most `limit.signature-share` of one core's time, and
//! while several source prefixes ask (the prefixes of the connection caps,
//! `source-prefix-v4`/`-v6`: /32 and /64 by default) each gets its share of
//! that, so one prefix's many connections cannot take another's. What it
//! refuses is dropped and counted as `signature_budget`; the connection
//! carries on.

use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

use crate::budget::{FairBudget, Ticket, SLOTS};
use crate::limit::{process_hasher, LimitConfig};

/// Shared by every handler; the lock is held for a few arithmetic
/// operations, never while signing.
pub(super) struct TcpBudget {
    inner: Mutex<Inner>,
    epoch: Instant,
}

struct Inner {
    budget: FairBudget,
    /// The settings the budget follows, to notice a reload.
    share_ppm: u32,
    burst_us: u64,
}

impl TcpBudget {
    pub(super) fn new(limit: &LimitConfig) -> TcpBudget {
        TcpBudget {
            inner: Mutex::new(Inner {
                budget: FairBudget::new(
                    limit.signature_share_ppm,
                    limit.signature_burst_us,
                    SLOTS,
                    process_hasher(),
                ),
                share_ppm: limit.signature_share_ppm,
                burst_us: limit.signature_burst_us,
            }),
            epoch: Instant::now(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// May one more signature be made now for an untrusted peer of source
    /// prefix `source`, under `limit` (the live settings: a reload changes
    /// the share at once)? `Some(Some(ticket))`: yes, and the ticket must
    /// be settled; `Some(None)`: no; `None`: there is no budget (share
    /// 1.0), nothing to settle.
    pub(super) fn admit(&self, limit: &LimitConfig, source: IpAddr) -> Option<Option<Ticket>> {
        if limit.signature_share_ppm >= 1_000_000 {
            return None;
        }
        let mut inner = self.lock();
        if (inner.share_ppm, inner.burst_us)
            != (limit.signature_share_ppm, limit.signature_burst_us)
        {
            inner
                .budget
                .reconfigure(limit.signature_share_ppm, limit.signature_burst_us);
            inner.share_ppm = limit.signature_share_ppm;
            inner.burst_us = limit.signature_burst_us;
        }
        // Read under the lock, so that the budget's clock never goes back.
        let now_ns = self.epoch.elapsed().as_nanos() as u64 + 1;
        Some(inner.budget.admit(source, now_ns))
    }

    /// The signature `ticket` admitted took `took_ns`, hashing and writing
    /// its run's responses included.
    pub(super) fn settle(&self, ticket: Ticket, took_ns: u64) {
        self.lock().budget.settle(&[ticket], 1, took_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(share_ppm: u32, burst_us: u64) -> LimitConfig {
        LimitConfig {
            signature_share_ppm: share_ppm,
            signature_burst_us: burst_us,
            ..LimitConfig::default()
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_spent_budget_refuses_until_a_reload_lifts_it() {
        // A share so small that after the first signature (charged far
        // more than the bucket holds) nothing more is earned in a test's
        // time: 1 ppm of wall time refills 1 ns per ms.
        let tight = limit(1, 1_000_000);
        let b = TcpBudget::new(&tight);
        let peer = ip("192.0.2.1");
        let t = b
            .admit(&tight, peer)
            .flatten()
            .expect("a full bucket admits one");
        b.settle(t, 100_000);
        assert_eq!(b.admit(&tight, peer), Some(None));
        assert_eq!(b.admit(&tight, peer), Some(None));
        // Share 1.0 is no budget, at once, with nothing to settle.
        assert_eq!(b.admit(&limit(1_000_000, 1_000_000), peer), None);
        // Back to the tight share: the debt is still owed.
        assert_eq!(b.admit(&tight, peer), Some(None));
    }

    #[test]
    fn a_prefix_in_debt_is_refused_and_another_answered() {
        // Half a core, a second's burst: 500 ms of signing in the bucket.
        let config = limit(500_000, 1_000_000);
        let b = TcpBudget::new(&config);
        let (slow, other) = (ip("192.0.2.1"), ip("198.51.100.1"));
        // One answer of the first prefix took 300 ms, far beyond its
        // estimate: it owes more than its share saves (a half of the
        // burst), and is refused until it has repaid.
        let t = b.admit(&config, slow).flatten().unwrap();
        b.settle(t, 300_000_000);
        assert_eq!(b.admit(&config, slow), Some(None));
        // Another prefix is answered from what the bucket still holds.
        for _ in 0..10 {
            let t = b
                .admit(&config, other)
                .flatten()
                .expect("another prefix is answered");
            b.settle(t, 100_000);
        }
        assert_eq!(b.admit(&config, slow), Some(None));
    }
}
