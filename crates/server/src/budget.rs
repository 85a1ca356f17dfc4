//! The signature budget: the versions a worker answers one per signature
//! (drafts 01–02 always, the orientation-disputed ones unless batched) may
//! take at most a set share of its time.
//!
//! A batching version costs one signature per batch, so a flood of it
//! makes batches grow and costs little more per request than hashing. A
//! version answered singly costs a whole Ed25519 signature per request; a
//! flood of it would otherwise fill the worker, the socket would overflow,
//! and every version's clients would lose answers. The budget is a token
//! bucket in nanoseconds of worker time: it fills at `share` × wall time up
//! to `burst` × `share`; each request answered singly is admitted only if
//! the bucket holds the estimated cost of one, and afterwards the bucket is
//! charged what the answers really took (measured), so the share holds
//! whatever a signature costs on this machine. What is refused is dropped
//! before any hashing and counted as `signature_budget`. Versions that
//! batch, and allow-listed sources, never touch it.
//!
//! That bucket is the *pool* of a [`FairBudget`] (`fair.rs`), which is what
//! the UDP workers and the TCP transport use: the same bound on the total,
//! shared fairly among the source prefixes that ask, so that a flood from
//! one prefix is what gets refused, not everyone's requests alike.

mod fair;

pub use fair::{FairBudget, Ticket, SLOTS};

/// First estimate of one single-signature answer, ns, before any is
/// measured (an Ed25519 signature is ~20 µs on a 2020s core; erring high
/// only admits fewer in the first batch).
const FIRST_ESTIMATE_NS: u64 = 50_000;

/// One worker's budget.
#[derive(Clone, Debug)]
pub struct SignatureBudget {
    /// Millionths of wall time credited; `None`: no budget.
    share_ppm: Option<u64>,
    cap_ns: i64,
    credit_ns: i64,
    last_ns: u64,
    estimate_ns: u64,
    charged_ns: u64,
}

impl SignatureBudget {
    /// A budget of `share_ppm` millionths of the worker's time, saving at
    /// most `burst_us` of wall time's worth while idle. It starts full.
    pub fn new(share_ppm: u32, burst_us: u64) -> SignatureBudget {
        let share = (share_ppm < 1_000_000).then_some(u64::from(share_ppm));
        let cap = share.map_or(0, |s| {
            burst_us.saturating_mul(1_000).saturating_mul(s) / 1_000_000
        });
        let cap_ns = i64::try_from(cap).unwrap_or(i64::MAX);
        SignatureBudget {
            share_ppm: share,
            cap_ns,
            credit_ns: cap_ns,
            last_ns: 0,
            estimate_ns: FIRST_ESTIMATE_NS,
            charged_ns: 0,
        }
    }

    /// A new share and burst (a configuration reload), between batches.
    /// What was saved is kept up to the new cap, and what the worker has
    /// learnt a signature costs is kept: a reload hands out no fresh burst.
    pub fn reconfigure(&mut self, share_ppm: u32, burst_us: u64) {
        let fresh = SignatureBudget::new(share_ppm, burst_us);
        let credit_ns = if self.limited() {
            self.credit_ns.min(fresh.cap_ns)
        } else {
            fresh.cap_ns
        };
        *self = SignatureBudget {
            credit_ns,
            last_ns: self.last_ns,
            estimate_ns: self.estimate_ns,
            ..fresh
        };
    }

    /// Whether there is a budget at all.
    pub fn limited(&self) -> bool {
        self.share_ppm.is_some()
    }

    /// Credit the time since the last call (monotonic ns).
    pub fn refill(&mut self, now_ns: u64) {
        let Some(share) = self.share_ppm else { return };
        let elapsed = now_ns.saturating_sub(self.last_ns);
        self.last_ns = self.last_ns.max(now_ns);
        let earned = i64::try_from(elapsed.saturating_mul(share) / 1_000_000).unwrap_or(i64::MAX);
        self.credit_ns = self.credit_ns.saturating_add(earned).min(self.cap_ns);
    }

    /// Admit one more single-signature answer, charging its estimate.
    pub fn admit(&mut self) -> bool {
        if self.share_ppm.is_none() {
            return true;
        }
        let estimate = self.charge_ns();
        if self.credit_ns < estimate {
            return false;
        }
        self.credit_ns -= estimate;
        self.charged_ns += estimate as u64;
        true
    }

    /// The `answered` requests admitted since the last settle took
    /// `took_ns`: replace their estimate with the truth and learn from it.
    pub fn settle(&mut self, answered: usize, took_ns: u64) {
        if self.share_ppm.is_none() || answered == 0 {
            return;
        }
        let charged = std::mem::take(&mut self.charged_ns);
        let correction = charged as i64 - took_ns.min(i64::MAX as u64) as i64;
        // Debt is allowed (the next admissions wait for it), but not more
        // than one burst: one preempted batch must not silence a version
        // for long.
        self.credit_ns = self
            .credit_ns
            .saturating_add(correction)
            .clamp(-self.cap_ns, self.cap_ns);
        self.learn(answered, took_ns);
    }

    /// What one more single-signature answer is charged when admitted:
    /// the estimate, never more than a full bucket (or a bucket smaller
    /// than one answer would admit none).
    fn charge_ns(&self) -> i64 {
        (self.estimate_ns.min(i64::MAX as u64) as i64).min(self.cap_ns)
    }

    /// `answered` answers took `took_ns`: move the estimate towards it.
    fn learn(&mut self, answered: usize, took_ns: u64) {
        if answered == 0 {
            return;
        }
        // A preempted batch says little about the next: one sample moves
        // the estimate by at most a bucket's worth.
        let per = (took_ns / answered as u64).min(self.cap_ns as u64);
        // A moving average over about eight groups.
        self.estimate_ns = (self.estimate_ns * 7 + per) / 8;
        self.estimate_ns = self.estimate_ns.max(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Admit as many as the budget allows at `now`, each costing `cost`.
    fn spend(b: &mut SignatureBudget, now: u64, cost: u64) -> usize {
        b.refill(now);
        let mut n = 0;
        while n < 100_000 && b.admit() {
            n += 1;
        }
        b.settle(n, n as u64 * cost);
        n
    }

    #[test]
    fn the_share_holds_whatever_a_signature_costs() {
        for cost in [10_000u64, 40_000, 200_000] {
            // A quarter of the time, a 10 ms burst.
            let mut b = SignatureBudget::new(250_000, 10_000);
            let mut now = 0;
            spend(&mut b, now, cost);
            let mut answered = 0;
            for _ in 0..1000 {
                now += MS;
                answered += spend(&mut b, now, cost);
            }
            // One second at 25 %: 250 ms of signatures, within one estimate
            // of slack either way.
            let spent = answered as u64 * cost;
            assert!(
                (240 * MS..=262 * MS).contains(&spent),
                "cost {cost}: {answered} answered, {spent} ns"
            );
        }
    }

    #[test]
    fn it_starts_full_and_saves_at_most_a_burst() {
        let mut b = SignatureBudget::new(500_000, 10_000);
        // 10 ms × 0.5 = 5 ms of credit: 100 at 50 µs.
        assert_eq!(spend(&mut b, 0, 50_000), 100);
        // An idle hour saves no more than the burst.
        assert_eq!(spend(&mut b, 3_600_000 * MS, 50_000), 100);
    }

    #[test]
    fn a_slow_batch_is_a_bounded_debt() {
        let mut b = SignatureBudget::new(250_000, 10_000);
        b.refill(0);
        assert!(b.admit());
        // One admitted answer took a second (the worker was preempted).
        b.settle(1, 1_000 * MS);
        assert!(!b.admit());
        // The debt is at most one burst (2.5 ms) and is repaid at 25 %:
        // 20 ms later there is credit again.
        b.refill(20 * MS);
        assert!(b.admit());
    }

    #[test]
    fn unlimited_admits_everything() {
        let mut b = SignatureBudget::new(1_000_000, 10_000);
        assert!(!b.limited());
        b.refill(0);
        assert!((0..100_000).all(|_| b.admit()));
    }
}
