//! The signature budget across every TCP connection.
//!
//! TCP does not batch across connections (tcp.rs), so a peer that asks one
//! request at a time on each of its connections costs a whole signature per
//! request: an Ed25519 one of tens of µs, an ML-DSA-44 one of over 100 µs
//! (docs/COST.md). Handler threads compete with the UDP workers for the
//! cores, so without a bound a few TCP clients in lock-step could take the
//! time the UDP workers need. The same token bucket the workers use for
//! their single-signature versions (`crate::budget`), here one for the whole
//! transport: signing over TCP, for peers not on the allow list, may take at
//! most `limit.signature-share` of one core's time. What it refuses is
//! dropped and counted as `signature_budget`; the connection carries on.

use std::sync::Mutex;
use std::time::Instant;

use crate::budget::SignatureBudget;
use crate::limit::LimitConfig;

/// Shared by every handler; the lock is held for a few arithmetic
/// operations, never while signing.
pub(super) struct TcpBudget {
    inner: Mutex<Inner>,
    epoch: Instant,
}

struct Inner {
    budget: SignatureBudget,
    /// The settings the budget follows, to notice a reload.
    share_ppm: u32,
    burst_us: u64,
}

impl TcpBudget {
    pub(super) fn new(limit: &LimitConfig) -> TcpBudget {
        TcpBudget {
            inner: Mutex::new(Inner {
                budget: SignatureBudget::new(limit.signature_share_ppm, limit.signature_burst_us),
                share_ppm: limit.signature_share_ppm,
                burst_us: limit.signature_burst_us,
            }),
            epoch: Instant::now(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// May one more signature be made now for an untrusted peer, under
    /// `limit` (the live settings: a reload changes the share at once)?
    /// `Some(true)`: yes, and it must be settled; `Some(false)`: no;
    /// `None`: there is no budget (share 1.0), nothing to settle.
    pub(super) fn admit(&self, limit: &LimitConfig) -> Option<bool> {
        if limit.signature_share_ppm >= 1_000_000 {
            return None;
        }
        let now_ns = self.epoch.elapsed().as_nanos() as u64 + 1;
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
        inner.budget.refill(now_ns);
        Some(inner.budget.admit())
    }

    /// The signature admitted last took `took_ns`, hashing and writing its
    /// run's responses included.
    pub(super) fn settle(&self, took_ns: u64) {
        self.lock().budget.settle(1, took_ns);
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

    #[test]
    fn a_spent_budget_refuses_until_a_reload_lifts_it() {
        // A share so small that after the first signature (charged far
        // more than the bucket holds) nothing more is earned in a test's
        // time: 1 ppm of wall time refills 1 ns per ms.
        let tight = limit(1, 1_000_000);
        let b = TcpBudget::new(&tight);
        assert_eq!(b.admit(&tight), Some(true), "a full bucket admits one");
        b.settle(100_000);
        assert_eq!(b.admit(&tight), Some(false));
        assert_eq!(b.admit(&tight), Some(false));
        // Share 1.0 is no budget, at once, with nothing to settle.
        assert_eq!(b.admit(&limit(1_000_000, 1_000_000)), None);
        // Back to the tight share: the debt is still owed.
        assert_eq!(b.admit(&tight), Some(false));
    }
}
