//! The signature budget shared fairly among source prefixes: one
//! implementation for the UDP workers (a table each) and for TCP (one for
//! every connection).
//!
//! ```text
//!  request from p ─▶ prefix of p ─▶ keyed hash ─▶ slot of a fixed table (made once)
//!  bucket  the budget: fills at share × wall time up to one burst (the hard bound)
//!  slot    its prefix's own share: earns share / k of wall time (k: slots asking in
//!          the last 1–2 s), saves up to burst / (k + 1); a grant of as much when
//!          it begins to ask
//!  admit   paid by its own share ─▶ else by its grant (may take the room kept for
//!          one more prefix) ─▶ else by the bucket's spare beyond that room
//!          ─▶ sign ─▶ settle: the truth instead of the estimate
//!  else    dropped before any hashing, counted as signature_budget
//! ```
//!
//! One bucket for everyone ([`SignatureBudget`]) bounds the total but hands
//! it out first come, first served: a source that asks a thousand times a
//! second takes nearly all of it, and a client from elsewhere that asks
//! once is refused about as often as the flood is (issue 34: one address
//! with 16 lock-step TCP connections, ~4,500 ML-DSA-44 requests a second,
//! left a client of another prefix 7–8 answers of 12). Here the bucket
//! stays, and each source prefix also has a share of it, as a class has in
//! a hierarchical token bucket: while k prefixes ask, each earns
//! `share / k` of wall time, and what a prefix's share pays for is
//! answered even when the others have emptied the bucket. What nobody's
//! share is using, anyone may take, so a prefix alone, or many asking less
//! than their shares, are answered as by the single bucket. What is refused
//! is the excess of the prefixes asking more than their share.
//!
//! * **Three ways to pay**, tried in turn for each request. Its prefix's
//!   own share. Its grant: a prefix that has just begun to ask (or asks
//!   again after a pause of a window or two) may take up to
//!   `burst / (k + 1)` from the bucket, even from the room kept for one
//!   more prefix, so that its first requests are answered at once during a
//!   flood; a right to draw, not credit set aside, so that many newcomers
//!   who each ask a little hold nothing back from the rest. The spare:
//!   what the bucket holds beyond that room. Grants come before the spare,
//!   so a flooding newcomer has spent its grant by the time it lives on the
//!   spare and cannot come back for the room. Every way charges the bucket
//!   too; grant and spare need it to hold the charge, a share may leave it
//!   owing up to one burst (what newcomers and spare-takers cannot take
//!   from it). A prefix that owes more than its cap (its answers took far
//!   longer than their estimates) pays with its share alone until it has
//!   repaid.
//! * **The room comes back.** While the bucket holds less than the room,
//!   the prefixes asking beyond their share (last paid by the spare, or
//!   refused) earn `share / (k + 1)`, so that it fills back at one share at
//!   least, within a burst of wall time; those asking within their share
//!   keep `share / k`.
//! * **The total stays bounded.** The bucket fills at the share and owes at
//!   most a burst, so signing in any interval t takes at most `share × t`
//!   and two bursts' worth (`2 × burst × share`): the one the bucket had
//!   saved, and what the prefixes had saved of their own shares (together
//!   at most k/(k + 1) of a burst), which the bucket may owe; the single
//!   bucket allowed one. Rotating prefixes (a new one per request) take
//!   only grants, which the bucket must hold: they make nothing.
//! * **k is counted, not scanned.** Time is cut in windows of one second; a
//!   slot counts from its request to the end of the next window. The
//!   numbers of slots of the current and of the previous window are kept,
//!   moved when a slot asks and when a window ends.
//! * **Memory is fixed.** The table has [`SLOTS`] entries of 40 bytes, made
//!   once (the UDP worker loop stays allocation-free), indexed by a keyed
//!   hash of the prefix (SipHash with the process's random key in the
//!   server), so no remote party can aim at someone else's slot; prefixes
//!   that hash to one slot share it (with n prefixes asking, a given one
//!   shares with probability about n / [`SLOTS`]).
//! * **Estimates, then the truth.** As in [`SignatureBudget`]: an admitted
//!   request is charged the estimate, and settling replaces it with what
//!   the answers took, on the bucket and on the slot that asked (its slow
//!   answers are its own debt). Answers nobody was charged for (allow-listed
//!   sources in the same UDP group) are taken from the bucket alone.
//!
//! What this cannot do. With more prefixes than the burst holds signatures
//! (`k + 1 > burst × share / estimate`) a share saves one estimate at most
//! and the room no longer covers every newcomer's first request, though
//! each prefix still earns its share. Flooders that arrive one after the
//! other each take the room with their grant; a newcomer just after one
//! may find it empty until it has come back. Forged UDP sources count as
//! prefixes: they make k larger and every share smaller, never the total
//! (the per-source rate limit and the stale drop are for them).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::IpAddr;

use super::SignatureBudget;

/// Slots per table: 4,096 × 40 bytes, 160 KiB per UDP worker and for TCP.
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
    /// What its share has saved, ns; negative: what its answers took
    /// beyond their estimates, owed.
    share_ns: i64,
    /// What it may still take from the bucket's room, ns, granted when it
    /// last began to ask.
    grant_ns: i64,
    /// The fair clocks up to which its share has earned.
    earned_at: Clocks,
    /// The window it last asked in; 0: never (windows start at 2).
    window: u32,
    /// Its last request was beyond its share (paid by the spare, or
    /// refused): it earns at the slower rate while the room is short.
    over: bool,
}

// The table's size is what the docs say it is.
const _: () = assert!(size_of::<Slot>() == 40);

/// What one share has earned since start, ns: at `share / k` all along
/// (`within`), and at `share / (k + 1)` while the room is short
/// (`beyond`, for the prefixes asking more than their share).
#[derive(Clone, Copy, Debug, Default)]
struct Clocks {
    within: u64,
    beyond: u64,
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
    /// The bucket: share, burst, what signing may still take in all, and
    /// the estimate.
    bucket: SignatureBudget,
    hasher: S,
    slots: Box<[Slot]>,
    /// What one share asking all along has earned since start.
    clock: Clocks,
    /// What the last divisions by k left over, ns × millionths.
    clock_rem: [u128; 2],
    /// The last time seen, monotonic ns.
    last_ns: u64,
    /// The current window (time / window + 2).
    window: u32,
    /// Slots that last asked in the current window \[0\] and in the one
    /// before \[1\]: together, k.
    asking: [u32; 2],
}

impl<S: BuildHasher> FairBudget<S> {
    /// A budget of `share_ppm` millionths of wall time, saving up at most
    /// `burst_us` of wall time's worth, shared through a table of `slots`
    /// (rounded up to a power of two) allocated here and never again. It
    /// starts full.
    pub fn new(share_ppm: u32, burst_us: u64, slots: usize, hasher: S) -> FairBudget<S> {
        FairBudget {
            bucket: SignatureBudget::new(share_ppm, burst_us),
            hasher,
            slots: vec![Slot::default(); slots.max(1).next_power_of_two()].into_boxed_slice(),
            clock: Clocks::default(),
            clock_rem: [0; 2],
            last_ns: 0,
            window: 0,
            asking: [0; 2],
        }
    }

    /// A new share and burst (a configuration reload). The bucket keeps
    /// what it held up to the new burst and what it learnt a signature
    /// costs; every slot keeps its saving and its debt (brought under the
    /// new caps as it next asks): a reload hands no prefix a fresh burst.
    pub fn reconfigure(&mut self, share_ppm: u32, burst_us: u64) {
        self.bucket.reconfigure(share_ppm, burst_us);
    }

    /// Whether there is a budget at all.
    pub fn limited(&self) -> bool {
        self.bucket.limited()
    }

    /// Slots in the table: fixed at creation.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Admit one more single-signature answer for `prefix` (the source's
    /// prefix, see [`crate::limit::source_prefix`]) at `now_ns`
    /// (monotonic): a ticket to settle once it is answered, or `None`
    /// when its prefix has spent its share and nothing else may pay.
    /// Without a budget every request is admitted, with a ticket that
    /// settles nothing.
    pub fn admit(&mut self, prefix: IpAddr, now_ns: u64) -> Option<Ticket> {
        if !self.bucket.limited() {
            return Some(Ticket::FREE);
        }
        self.advance(now_ns);
        let i = self.hasher.hash_one(prefix) as usize & (self.slots.len() - 1);
        let entering = self.ask(i);
        let cap = self.cap_ns();
        let clock = self.clock;
        let slot = &mut self.slots[i];
        if entering {
            // What it saved went with its turn (it counted in no k
            // meanwhile); what it owes stays. Its grant is a right to
            // draw, not credit set aside, so that many newcomers who ask a
            // little each hold nothing back from the rest.
            slot.share_ns = slot.share_ns.min(0);
            slot.grant_ns = cap;
            slot.over = false;
        } else {
            // Earned since it last asked, up to its cap (which shrinks as
            // k grows); the rest is forfeited.
            let earned = if slot.over {
                clock.beyond.saturating_sub(slot.earned_at.beyond)
            } else {
                clock.within.saturating_sub(slot.earned_at.within)
            };
            let earned = i64::try_from(earned).unwrap_or(i64::MAX);
            slot.share_ns = slot.share_ns.min(cap).saturating_add(earned).min(cap);
        }
        slot.earned_at = clock;
        let charge = self.bucket.charge_ns();
        let (left, full) = (self.bucket.credit_ns, self.bucket.cap_ns);
        let owes = slot.share_ns < -cap;
        let own = slot.share_ns >= charge && left - charge >= -full;
        // Beyond its share: a newcomer's grant, which may take the room
        // kept for newcomers, else the spare beyond that room. Grants go
        // first, so a flooding newcomer has spent its grant by the time it
        // lives on the spare, and cannot take the room from the next.
        let granted = !own && !owes && slot.grant_ns >= charge && left >= charge;
        let spare = !own && !granted && !owes && left - cap >= charge;
        slot.over = !own && !granted;
        if own {
            slot.share_ns -= charge;
        } else if granted {
            slot.grant_ns -= charge;
        } else if !spare {
            return None;
        }
        self.bucket.credit_ns -= charge;
        Some(Ticket {
            slot: i as u32,
            charged_ns: charge,
        })
    }

    /// `answered` answers, of which those of `tickets` were admitted here,
    /// took `took_ns` together: the bucket is charged what they took
    /// instead of the estimates (the answers of no ticket as well), each
    /// ticket's slot what its answer took beyond its estimate (or is given
    /// back what it took less), and the estimate learns. Each owes at most
    /// a burst.
    pub fn settle(&mut self, tickets: &[Ticket], answered: usize, took_ns: u64) {
        if !self.bucket.limited() || answered == 0 {
            return;
        }
        let per = i64::try_from(took_ns / answered as u64).unwrap_or(i64::MAX);
        let full = self.bucket.cap_ns;
        let mut charged = 0i64;
        for t in tickets {
            let Some(slot) = self.slots.get_mut(t.slot as usize) else {
                continue;
            };
            charged = charged.saturating_add(t.charged_ns);
            slot.share_ns = slot
                .share_ns
                .saturating_add(t.charged_ns)
                .saturating_sub(per)
                .max(-full);
        }
        let took = i64::try_from(took_ns).unwrap_or(i64::MAX);
        // Owing a burst is what a share may leave it at; one more is room
        // for the answers then in flight.
        self.bucket.credit_ns = self
            .bucket
            .credit_ns
            .saturating_add(charged)
            .saturating_sub(took)
            .clamp(full.saturating_mul(-2), full);
        self.bucket.learn(answered, took_ns);
    }

    /// Bring the clocks to `now_ns`: the fair clocks at the rates in force
    /// since the last call, the bucket, the windows.
    fn advance(&mut self, now_ns: u64) {
        let now = now_ns.max(self.last_ns);
        let gap = (now - self.last_ns).min(MAX_GAP_NS);
        self.last_ns = now;
        let k = u128::from(self.k());
        // While the bucket holds less than the room kept for one more, the
        // shares of the prefixes asking beyond them do not earn it: the
        // bucket fills back at one share, and the shares of those asking
        // within them are whole.
        let short = self.bucket.credit_ns < self.cap_ns();
        let share = u128::from(self.bucket.share_ppm.unwrap_or(1_000_000));
        let tick = |rem: &mut u128, shares: u128| {
            let earned = u128::from(gap) * share + *rem;
            let per = 1_000_000 * shares;
            *rem = earned % per;
            u64::try_from(earned / per).unwrap_or(u64::MAX)
        };
        let within = tick(&mut self.clock_rem[0], k);
        let beyond = tick(&mut self.clock_rem[1], if short { k + 1 } else { k });
        self.clock.within = self.clock.within.saturating_add(within);
        self.clock.beyond = self.clock.beyond.saturating_add(beyond);
        self.bucket.refill(now);
        let window = u32::try_from(now / WINDOW_NS + 2).unwrap_or(u32::MAX);
        if window != self.window {
            let before = if self.window.checked_add(1) == Some(window) {
                self.asking[0]
            } else {
                0
            };
            self.asking = [0, before];
            self.window = window;
        }
    }

    /// Count slot `i` as asking in the current window; true when it was
    /// not counted before (a newcomer, or back after a pause).
    fn ask(&mut self, i: usize) -> bool {
        let s = &mut self.slots[i];
        if s.window == self.window {
            return false;
        }
        let counted = s.window.checked_add(1) == Some(self.window);
        if counted {
            self.asking[1] -= 1;
        }
        self.asking[0] += 1;
        s.window = self.window;
        !counted
    }

    /// Prefixes sharing the budget now (at least 1).
    fn k(&self) -> u32 {
        (self.asking[0] + self.asking[1]).max(1)
    }

    /// Most a share saves, a grant gives and the room holds: a part of a
    /// burst with room for one more prefix, never less than one answer.
    fn cap_ns(&self) -> i64 {
        (self.bucket.cap_ns / (i64::from(self.k()) + 1)).max(self.bucket.charge_ns())
    }
}

#[cfg(test)]
mod tests;
