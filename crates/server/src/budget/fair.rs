//! The signature budget shared fairly among source prefixes: one
//! implementation for the UDP workers (a table each) and for TCP (one for
//! every connection).
//!
//! ```text
//!  request from p ─▶ prefix of p ─▶ keyed hash ─▶ slot of a fixed table (made once)
//!  pool   fills at share × wall time; holds one burst at most, less what the slots hold
//!  slot   earns share / k of wall time from the pool (k: slots asking in the last 1–2 s)
//!         and holds at most burst / (k + 1); new (or back after a pause): given that at once
//!  admit  its slot holds one estimate ─▶ charged it ─▶ sign ─▶ settle: charged what it took
//!  else   dropped before any hashing, counted as signature_budget
//! ```
//!
//! One bucket for everyone ([`SignatureBudget`]) bounds the total but hands
//! it out first come, first served: a source that asks a thousand times a
//! second takes nearly all of it, and a client from elsewhere that asks
//! once is refused about as often as the flood is (issue 34: one address
//! with 16 lock-step TCP connections, ~4,500 ML-DSA-44 requests a second,
//! left a client of another prefix 7–8 answers of 12). Here that bucket is
//! a *pool*, and each source prefix spends only what its slot has drawn
//! from it: while k prefixes ask, each earns `share / k` of wall time, so a
//! prefix asking at most that much is answered, and what is refused is the
//! excess of those asking more. A prefix alone gets the whole share.
//!
//! * **The total is bounded as before.** Every credit a slot holds was
//!   drawn from the pool, and the pool is capped at one burst less what the
//!   counted slots hold, so signing in any interval t takes at most
//!   `burst × share + share × t` (plus what answers took beyond a
//!   bucket's debt, forgiven as in [`SignatureBudget`]). Rotating prefixes
//!   (a new one per request) only moves credit from the pool to new slots;
//!   it never makes more.
//! * **A newcomer is answered at once.** A slot asking for the first time,
//!   or again after a pause of a window or two, is given its cap from the
//!   pool at once rather than starting empty. The k slots together hold at
//!   most k/(k + 1) of a burst, so the pool keeps room for one more; while
//!   newcomers have taken that room, every prefix earns `share / (k + 1)`
//!   until it is back (at most one burst of wall time). What a slot saved
//!   before its pause is not kept (it was not counted meanwhile); what it
//!   owes is.
//! * **k is counted, not scanned.** Time is cut in windows of one second; a
//!   slot counts from its request to the end of the next window. The slots
//!   of the current and the previous window, and what they hold, are kept
//!   as four numbers, moved when a slot asks and when a window ends.
//! * **Memory is fixed.** The table has [`SLOTS`] entries of 24 bytes, made
//!   once (the UDP worker loop stays allocation-free), indexed by a keyed
//!   hash of the prefix (SipHash with the process's random key in the
//!   server), so no remote party can aim at someone else's slot; prefixes
//!   that hash to one slot share it (with n prefixes asking, a given one
//!   shares with probability about n / [`SLOTS`]).
//! * **Estimates, then the truth.** As in [`SignatureBudget`]: an admitted
//!   request is charged the estimate, and settling replaces it with what
//!   the answers took, on the slot that asked. Answers nobody was charged
//!   for (allow-listed sources in the same UDP group) are taken from the
//!   pool: they used the time too.
//!
//! What this cannot do: with more prefixes than the burst holds signatures
//! (`k + 1 > burst × share / estimate`) a slot's cap is one estimate and
//! the pool's room no longer covers every newcomer's first request, though
//! each prefix still earns only its share. Forged UDP sources count as
//! prefixes: they make k larger and every share smaller, never the total
//! (the per-source rate limit and the stale drop are for them).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::IpAddr;

use super::SignatureBudget;

/// Slots per table: 4,096 × 24 bytes, 96 KiB per UDP worker and for TCP.
pub const SLOTS: usize = 4096;

/// One window of asking, ns: a slot counts among the k sharing the budget
/// from its request to the end of the next window, one to two seconds.
const WINDOW_NS: u64 = 1_000_000_000;

/// Longest gap credited at once: the arithmetic stays in range, and any
/// bucket has filled long before.
const MAX_GAP_NS: u64 = 3_600 * 1_000_000_000;

/// One slot of the table.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    /// Signing time it may still spend, ns; negative: owed.
    credit_ns: i64,
    /// The fair clock when it last earned.
    earned_at: u64,
    /// The window it last asked in; 0: never (windows start at 2).
    window: u64,
}

/// What one admitted request was charged, and to whom: handed back to
/// [`FairBudget::settle`] with what its answer took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    slot: u32,
    charged_ns: i64,
}

impl Ticket {
    /// Admitted without a budget: nothing to settle.
    const FREE: Ticket = Ticket {
        slot: u32::MAX,
        charged_ns: 0,
    };
}

/// A signature budget shared fairly by source prefix. `S` hashes prefixes:
/// the process's keyed [`RandomState`] in the server, a fixed one where a
/// test needs a repeatable table.
pub struct FairBudget<S = RandomState> {
    /// The pool: share, burst, what is left undrawn, and the estimate.
    pool: SignatureBudget,
    hasher: S,
    slots: Box<[Slot]>,
    /// What one slot asking all along has earned since start:
    /// ∫ share / k dt, ns.
    clock_ns: u64,
    /// What the last division by k left over, ns × millionths.
    clock_rem: u128,
    /// The last time seen, monotonic ns.
    last_ns: u64,
    /// The current window (time / window + 2).
    window: u64,
    /// Slots that last asked in the current window \[0\] and in the one
    /// before \[1\]: together, k.
    asking: [u32; 2],
    /// What those slots hold, ns.
    held_ns: [i128; 2],
}

impl<S: BuildHasher> FairBudget<S> {
    /// A budget of `share_ppm` millionths of wall time, saving up at most
    /// `burst_us` of wall time's worth, shared through a table of `slots`
    /// (rounded up to a power of two) allocated here and never again. It
    /// starts full.
    pub fn new(share_ppm: u32, burst_us: u64, slots: usize, hasher: S) -> FairBudget<S> {
        FairBudget {
            pool: SignatureBudget::new(share_ppm, burst_us),
            hasher,
            slots: vec![Slot::default(); slots.max(1).next_power_of_two()].into_boxed_slice(),
            clock_ns: 0,
            clock_rem: 0,
            last_ns: 0,
            window: 0,
            asking: [0; 2],
            held_ns: [0; 2],
        }
    }

    /// A new share and burst (a configuration reload). The pool keeps what
    /// it held up to the new burst and what it learnt a signature costs;
    /// every slot keeps its credit and debt (brought under the new caps as
    /// it next asks): a reload hands no prefix a fresh burst.
    pub fn reconfigure(&mut self, share_ppm: u32, burst_us: u64) {
        self.pool.reconfigure(share_ppm, burst_us);
    }

    /// Whether there is a budget at all.
    pub fn limited(&self) -> bool {
        self.pool.limited()
    }

    /// Slots in the table: fixed at creation.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Admit one more single-signature answer for `prefix` (the source's
    /// prefix, see [`crate::limit::source_prefix`]) at `now_ns`
    /// (monotonic): a ticket to settle once it is answered, or `None`
    /// when its prefix has spent its share. Without a budget every request
    /// is admitted, with a ticket that settles nothing.
    pub fn admit(&mut self, prefix: IpAddr, now_ns: u64) -> Option<Ticket> {
        if !self.pool.limited() {
            return Some(Ticket::FREE);
        }
        self.advance(now_ns);
        let i = self.hasher.hash_one(prefix) as usize & (self.slots.len() - 1);
        let entering = self.ask(i);
        let cap = self.cap_ns();
        let old = self.slots[i].credit_ns;
        let credit = if entering {
            // Given its cap from the pool's room at once, so that its
            // first request is answered; it keeps its debt, not its saving.
            let gain = cap.min(self.pool.credit_ns.max(0));
            self.pool.credit_ns -= gain;
            old.min(0) + gain
        } else {
            // Above its cap (k has grown): the rest goes back to the pool.
            let kept = old.min(cap);
            self.pool.credit_ns = self.pool.credit_ns.saturating_add(old - kept);
            let earned = self.clock_ns.saturating_sub(self.slots[i].earned_at);
            let gain = i64::try_from(earned)
                .unwrap_or(i64::MAX)
                .min(cap - kept)
                .min(self.pool.credit_ns)
                .max(0);
            self.pool.credit_ns -= gain;
            kept + gain
        };
        // What it earned and could not take is forfeited, not owed.
        self.slots[i].earned_at = self.clock_ns;
        let charge = self.pool.charge_ns();
        if credit < charge {
            self.set_credit(i, credit);
            return None;
        }
        self.set_credit(i, credit - charge);
        Some(Ticket {
            slot: i as u32,
            charged_ns: charge,
        })
    }

    /// `answered` answers, of which those of `tickets` were admitted here,
    /// took `took_ns` together: each ticket's slot is charged its part of
    /// the truth instead of its estimate, what the others took comes from
    /// the pool, and the estimate learns. A slot owes at most one burst.
    pub fn settle(&mut self, tickets: &[Ticket], answered: usize, took_ns: u64) {
        if !self.pool.limited() || answered == 0 {
            return;
        }
        let per = i64::try_from(took_ns / answered as u64).unwrap_or(i64::MAX);
        let floor = -self.pool.cap_ns;
        let mut charged = 0;
        for t in tickets {
            let i = t.slot as usize;
            let Some(slot) = self.slots.get(i) else {
                continue;
            };
            charged += 1;
            let credit = slot
                .credit_ns
                .saturating_add(t.charged_ns)
                .saturating_sub(per)
                .max(floor);
            self.set_credit(i, credit);
        }
        let others = i64::try_from(answered.saturating_sub(charged)).unwrap_or(i64::MAX);
        self.pool.credit_ns = self
            .pool
            .credit_ns
            .saturating_sub(others.saturating_mul(per))
            .max(floor);
        self.pool.learn(answered, took_ns);
    }

    /// Bring the clocks to `now_ns`: the fair clock at the rate in force
    /// since the last call, the pool's credit, the windows.
    fn advance(&mut self, now_ns: u64) {
        let now = now_ns.max(self.last_ns);
        let gap = (now - self.last_ns).min(MAX_GAP_NS);
        self.last_ns = now;
        let k = i64::from(self.k());
        // While newcomers have taken the room kept for one more, nobody
        // earns it: the pool fills back at one share.
        let shares = if self.pool.credit_ns < self.pool.cap_ns / (k + 1) {
            k + 1
        } else {
            k
        };
        let share = u128::from(self.pool.share_ppm.unwrap_or(1_000_000));
        let earned = u128::from(gap) * share + self.clock_rem;
        let per = 1_000_000 * shares as u128;
        self.clock_ns = self
            .clock_ns
            .saturating_add(u64::try_from(earned / per).unwrap_or(u64::MAX));
        self.clock_rem = earned % per;
        self.pool.refill(now);
        let window = now / WINDOW_NS + 2;
        if window != self.window {
            let before = if window == self.window + 1 {
                (self.asking[0], self.held_ns[0])
            } else {
                (0, 0)
            };
            self.asking = [0, before.0];
            self.held_ns = [0, before.1];
            self.window = window;
        }
        // What the pool and the slots that count hold is one burst at most.
        let held = self.held_ns[0] + self.held_ns[1];
        let room = i64::try_from((i128::from(self.pool.cap_ns) - held).max(0)).unwrap_or(i64::MAX);
        self.pool.credit_ns = self.pool.credit_ns.min(room);
    }

    /// Count slot `i` as asking in the current window; true when it was
    /// not counted before (a newcomer, or back after a pause).
    fn ask(&mut self, i: usize) -> bool {
        let s = &mut self.slots[i];
        if s.window == self.window {
            return false;
        }
        let counted = s.window + 1 == self.window;
        if counted {
            self.asking[1] -= 1;
            self.held_ns[1] -= i128::from(s.credit_ns);
        }
        self.asking[0] += 1;
        self.held_ns[0] += i128::from(s.credit_ns);
        s.window = self.window;
        !counted
    }

    /// Set slot `i`'s credit, keeping the sums of the windows right.
    fn set_credit(&mut self, i: usize, credit: i64) {
        let s = &mut self.slots[i];
        let delta = i128::from(credit) - i128::from(s.credit_ns);
        s.credit_ns = credit;
        if s.window == self.window {
            self.held_ns[0] += delta;
        } else if s.window + 1 == self.window {
            self.held_ns[1] += delta;
        }
    }

    /// Prefixes sharing the budget now (at least 1).
    fn k(&self) -> u32 {
        (self.asking[0] + self.asking[1]).max(1)
    }

    /// Most a slot holds: its part of a burst with room for one more, and
    /// never less than one answer.
    fn cap_ns(&self) -> i64 {
        (self.pool.cap_ns / (i64::from(self.k()) + 1)).max(self.pool.charge_ns())
    }
}

#[cfg(test)]
mod tests;
