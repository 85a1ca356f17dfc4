//! Whom to believe: which offsets a set of servers proves, when at most
//! `f` of the `n` servers on the *list* lie, whoever answered.
//!
//! A *voter* is one server: the caller merges every identity of one
//! machine (a shared key, address or operator) before calling, and
//! intersects their intervals. Each voter that answered vouches for a
//! closed interval of offsets (server time minus local time); an honest
//! voter's interval holds the true offset `t`.
//!
//! **Assumption** ([`Assumption`]). At most `f` of the `n` listed voters
//! lie. It is a number about the list, never about who happened to
//! answer: an attacker who owns the network decides who answers (it drops
//! or delays honest answers at will), so a rule that counts the answers it
//! is given lets that attacker choose the electorate. A majority of
//! whoever answered is exactly that rule: silence three honest servers of
//! five and two liars are "all of the answers".
//!
//! **Rule.** Let `m` distinct voters answer. There is a consensus only
//! when `m ≥ 2f + 1`; it is the hull of
//! `C = { x : at least m − f of the m intervals hold x }`.
//!
//! **Why it holds the truth.** At most `f` of the `m` lie, so at least
//! `m − f` honest intervals hold `t`: `t ∈ C`, so `t` is in the hull.
//! Dropping honest answers only lowers `m`; below `2f + 1` there is no
//! consensus at all, never a wrong one.
//!
//! **Why liars cannot stretch it far.** `m ≥ 2f + 1` gives `m − f ≥ f + 1`:
//! every point of `C` is held by more intervals than there are liars, so by
//! at least one honest interval. The hull therefore lies inside the hull of
//! the honest intervals, which all hold `t`: liars can widen the consensus
//! only up to the honest servers' own radii, never move it away.
//!
//! **Flagging.** A voter whose interval misses the hull cannot hold `t`, so
//! under the assumption it lies. An honest voter's interval holds `t`,
//! which is in the hull: no honest voter is ever flagged.
//!
//! **Proven liars.** A voter whose own answers do not overlap has lied
//! whatever the truth is. It does not vote, and it is one of the `f`: the
//! rule runs over the others with `f − 1` ([`Assumption::after_proven`]).
//!
//! **Computing it.** The cover of `x` changes only at endpoints. If `x ∈ C`,
//! the intervals holding it all hold the largest low end among them, so
//! that low end is in `C` too; hence the smallest point of `C` is a low end,
//! and likewise its largest point is a high end. Checking each endpoint
//! against every interval finds both in `O(m²)` with no allocation, which is
//! what a firmware build needs.
//!
//! Intervals are closed: two that touch share a point.

/// A closed interval of offsets, µs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    /// Smallest offset.
    pub low: i128,
    /// Largest offset (never below `low`).
    pub high: i128,
}

impl Span {
    /// `[low, high]`; `None` when `low > high`.
    pub fn new(low: i128, high: i128) -> Option<Span> {
        (low <= high).then_some(Span { low, high })
    }

    /// Whether `x` is in it.
    pub fn holds(self, x: i128) -> bool {
        self.low <= x && x <= self.high
    }

    /// Whether the two share a point.
    pub fn meets(self, other: Span) -> bool {
        self.low <= other.high && other.low <= self.high
    }

    /// The points both hold, if any.
    pub fn intersect(self, other: Span) -> Option<Span> {
        Span::new(self.low.max(other.low), self.high.min(other.high))
    }

    /// Half the width.
    pub fn radius(self) -> i128 {
        (self.high - self.low) / 2
    }

    /// The middle.
    pub fn midpoint(self) -> i128 {
        self.low + (self.high - self.low) / 2
    }
}

/// The assumption a consensus is computed under: at most `liars` of the
/// `voters` on the list (or pinned, for a relayed proof) lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Assumption {
    /// Distinct voters listed (servers, after merging identities).
    pub voters: usize,
    /// How many of them may lie.
    pub liars: usize,
}

impl Assumption {
    /// At most `liars` of `voters` lie.
    pub const fn new(voters: usize, liars: usize) -> Assumption {
        Assumption { voters, liars }
    }

    /// The default for a client that asks the servers itself (sync, query,
    /// watch): `max(1, ⌊(n − 1)/3⌋)`. With `n ≥ 3f + 1` the rule survives
    /// `f` liars *and* `f` honest servers silenced at once (`n − f ≥ 2f + 1`
    /// still answer), and one liar is always assumed possible: a list of
    /// one or two servers proves nothing unless the caller says none lies.
    pub const fn for_list(voters: usize) -> Assumption {
        let third = voters.saturating_sub(1) / 3;
        Assumption::new(voters, if third > 1 { third } else { 1 })
    }

    /// The default for a relayed proof, where the relay chooses every
    /// answer that arrives: fewer than half of the pinned keys lie,
    /// `⌊(n − 1)/2⌋`. The bundle must then carry `2f + 1` of them, all or
    /// all but one.
    pub const fn for_proof(voters: usize) -> Assumption {
        Assumption::new(voters, voters.saturating_sub(1) / 2)
    }

    /// How many distinct voters must answer: `2f + 1`.
    pub const fn needed(self) -> usize {
        self.liars.saturating_mul(2).saturating_add(1)
    }

    /// Whether the list is long enough for a consensus to exist at all.
    pub const fn satisfiable(self) -> bool {
        self.needed() <= self.voters
    }

    /// The same list after `proven` voters proved themselves liars (their
    /// own answers contradict each other): they are out, and they were
    /// among the `f`.
    pub const fn after_proven(self, proven: usize) -> Assumption {
        Assumption::new(
            self.voters.saturating_sub(proven),
            self.liars.saturating_sub(proven),
        )
    }
}

/// Why there is no consensus.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NoConsensus {
    /// Fewer than `2f + 1` distinct voters answered: whoever is missing
    /// may have been silenced, and what is left may be the liars.
    TooFew {
        /// Distinct voters that answered (and did not contradict
        /// themselves).
        answered: usize,
        /// `2f + 1`.
        needed: usize,
    },
    /// Enough answered, but no offset is held by `m − f` of them: more
    /// than `f` lie (or an honest server's radius is wrong).
    NoCommonOffset {
        /// Distinct voters that answered.
        answered: usize,
        /// `m − f`: how many intervals had to share a point.
        cover: usize,
    },
}

/// How many of `spans` hold `x`.
pub fn cover<I>(spans: I, x: i128) -> usize
where
    I: IntoIterator<Item = Span>,
{
    spans.into_iter().filter(|s| s.holds(x)).count()
}

/// The number of intervals that must hold a point for it to be in the
/// consensus, or why there is none yet.
fn threshold(answered: usize, assumption: Assumption) -> Result<usize, NoConsensus> {
    let needed = assumption.needed();
    if answered < needed {
        return Err(NoConsensus::TooFew { answered, needed });
    }
    Ok(answered - assumption.liars)
}

/// The consensus of `spans` (one per distinct voter that answered: the
/// caller merges a voter's answers and leaves out proven liars) under
/// `assumption`: the hull of every offset held by `m − f` of them.
pub fn consensus<I>(spans: I, assumption: Assumption) -> Result<Span, NoConsensus>
where
    I: IntoIterator<Item = Span> + Clone,
{
    let answered = spans.clone().into_iter().count();
    let need = threshold(answered, assumption)?;
    let in_cover = |x: i128| cover(spans.clone(), x) >= need;
    let none = NoConsensus::NoCommonOffset {
        answered,
        cover: need,
    };
    let ends = |end: fn(Span) -> i128| spans.clone().into_iter().map(end).filter(|&x| in_cover(x));
    let low = ends(|s| s.low).min().ok_or(none)?;
    let high = ends(|s| s.high).max().ok_or(none)?;
    Ok(Span { low, high })
}

/// How many separate stretches of offsets are held by `m − f` of `spans`
/// (the "regions" of the hull; offsets are whole µs, so two stretches are
/// separate when some offset between them is held by fewer). More than
/// one: the voters disagree, and the hull spans them all. Zero when there
/// is no consensus. Counted without allocation, for the C library.
///
/// A stretch starts at an `x` held by enough while `x − 1` is not; the
/// intervals holding `x` do not all hold `x − 1`, so one of them starts at
/// `x`: each stretch is counted once, at a low end.
pub fn regions<I>(spans: I, assumption: Assumption) -> usize
where
    I: IntoIterator<Item = Span> + Clone,
{
    let answered = spans.clone().into_iter().count();
    let Ok(need) = threshold(answered, assumption) else {
        return 0;
    };
    let in_cover = |x: i128| cover(spans.clone(), x) >= need;
    spans
        .clone()
        .into_iter()
        .enumerate()
        .filter(|&(i, s)| {
            in_cover(s.low)
                && s.low.checked_sub(1).is_none_or(|x| !in_cover(x))
                // The same low end of an earlier interval starts the same stretch.
                && spans.clone().into_iter().take(i).all(|t| t.low != s.low)
        })
        .count()
}

/// The cover a point needs under `assumption` when `answered` voters
/// answered (`m − f`), or why there is no consensus: for callers that
/// list the regions themselves.
pub fn required_cover(answered: usize, assumption: Assumption) -> Result<usize, NoConsensus> {
    threshold(answered, assumption)
}

/// Whether a voter whose interval is `span` is outside `hull` (and so,
/// under the assumption, lies).
pub fn outside(hull: Span, span: Span) -> bool {
    !hull.meets(span)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(low: i128, high: i128) -> Span {
        Span::new(low, high).unwrap()
    }

    #[test]
    fn the_defaults_are_the_documented_numbers() {
        let list: [(usize, usize); 9] = [
            (1, 1),
            (2, 1),
            (3, 1),
            (4, 1),
            (6, 1),
            (7, 2),
            (9, 2),
            (10, 3),
            (13, 4),
        ];
        for (n, f) in list {
            assert_eq!(Assumption::for_list(n).liars, f, "list of {n}");
        }
        let proof: [(usize, usize); 6] = [(1, 0), (2, 0), (3, 1), (4, 1), (5, 2), (8, 3)];
        for (n, f) in proof {
            assert_eq!(Assumption::for_proof(n).liars, f, "proof of {n}");
        }
        assert_eq!(Assumption::new(5, 1).needed(), 3);
        assert!(!Assumption::for_list(2).satisfiable());
        assert!(Assumption::for_list(3).satisfiable());
        assert_eq!(Assumption::new(5, 2).after_proven(1), Assumption::new(4, 1));
        assert_eq!(Assumption::new(5, 1).after_proven(3), Assumption::new(2, 0));
    }

    #[test]
    fn silenced_honest_servers_leave_no_consensus_not_the_liars_one() {
        // Issue 33's first case: 3 honest, 2 liars an hour ahead, the
        // honest ones silenced. A majority of the answers was the liars'.
        let hour = 3_600_000_000;
        let liars = [s(hour - 3, hour + 3), s(hour - 2, hour + 4)];
        let f1 = Assumption::for_list(5);
        assert_eq!(
            consensus(liars, f1),
            Err(NoConsensus::TooFew {
                answered: 2,
                needed: 3
            })
        );
        assert_eq!(regions(liars, f1), 0);
        // With every answer delivered, two liars break an assumption of
        // one: no offset is held by four, so no consensus either. Assumed
        // two of five, the truth wins and both are outside.
        let all = [s(-3, 3), s(-2, 4), s(-4, 2), liars[0], liars[1]];
        assert_eq!(
            consensus(all, f1),
            Err(NoConsensus::NoCommonOffset {
                answered: 5,
                cover: 4
            })
        );
        let hull = consensus(all, Assumption::new(5, 2)).unwrap();
        assert_eq!(hull, s(-2, 2));
        assert!(outside(hull, liars[0]) && outside(hull, liars[1]));
    }

    #[test]
    fn a_wide_honest_interval_cannot_lend_a_liar_the_consensus() {
        // Issue 21's case, in seconds: honest ±16 and ±60, a liar 70 slow
        // with ±16; f = 1 of 3 needs every one and a cover of 2.
        let spans = [s(-16, 16), s(-60, 60), s(-86, -54)];
        let a = Assumption::for_list(3);
        assert_eq!(consensus(spans, a), Ok(s(-60, 16)));
        assert!(spans.iter().all(|&x| !outside(s(-60, 16), x)));
        assert_eq!(regions(spans, a), 2);
    }

    #[test]
    fn no_liar_assumed_is_the_intersection_of_all() {
        let none = Assumption::new(2, 0);
        assert_eq!(consensus([s(0, 10), s(5, 20)], none), Ok(s(5, 10)));
        assert_eq!(
            consensus([s(0, 10), s(20, 30)], none),
            Err(NoConsensus::NoCommonOffset {
                answered: 2,
                cover: 2
            })
        );
        assert_eq!(consensus([s(3, 4)], Assumption::new(1, 0)), Ok(s(3, 4)));
        assert_eq!(
            consensus([] as [Span; 0], Assumption::new(0, 0)),
            Err(NoConsensus::TooFew {
                answered: 0,
                needed: 1
            })
        );
    }

    #[test]
    fn regions_are_counted_once_each_and_whole_microseconds_join() {
        let f0 = Assumption::new(3, 0);
        // Three equal low ends start one stretch.
        assert_eq!(regions([s(0, 10), s(0, 5), s(0, 7)], f0), 1);
        // Held by four of five at every whole offset from 0 to 20 (f = 1).
        let f1 = Assumption::new(5, 1);
        let joined = [s(0, 10), s(0, 10), s(11, 20), s(11, 20), s(0, 20)];
        assert_eq!(regions(joined, Assumption::new(5, 2)), 1);
        assert_eq!(regions(joined, f1), 0);
        // A gap of one offset (11) held by two of five: two stretches.
        let split = [s(0, 10), s(0, 10), s(12, 20), s(12, 20), s(0, 20)];
        let f2 = Assumption::new(5, 2);
        assert_eq!(regions(split, f2), 2);
        assert_eq!(consensus(split, f2), Ok(s(0, 20)));
        // The lowest offset there is.
        assert_eq!(regions([s(i128::MIN, 0)], Assumption::new(1, 0)), 1);
    }

    #[test]
    fn touching_intervals_share_their_point() {
        assert_eq!(
            consensus([s(0, 10), s(10, 20), s(10, 30)], Assumption::new(3, 1)),
            Ok(s(10, 20))
        );
    }
}
