//! The majority rule: which offsets a set of servers proves, when fewer
//! than half of them lie.
//!
//! Each distinct long-term key that answered vouches for a closed interval
//! of offsets (server time minus local time). An honest key's interval
//! holds the true offset `t`.
//!
//! **Assumption.** Of the `n` distinct keys that vote, fewer than `n/2`
//! lie. Then more than `n/2` intervals hold `t`, so `t` is in
//! `M = { x : more than n/2 intervals hold x }`.
//!
//! **Rule.** The consensus is the hull of `M`: from its smallest point to
//! its largest. It holds `t` whenever the assumption does. It is not one
//! region of `M` chosen by count or by position: liars that sit inside a
//! wide honest interval can make a second majority region, and any rule
//! that picks one region can be made to pick theirs. The hull spans both,
//! comes out wide, and a caller's radius limit refuses it.
//!
//! **Flagging.** A key whose interval misses the hull cannot hold `t`, so
//! under the assumption it lies. An honest key's interval holds `t`, which
//! is in the hull: no honest key is ever flagged.
//!
//! **Computing it.** The number of intervals holding `x` changes only at
//! endpoints. If `x` is in `M`, the intervals holding it all hold the
//! largest low end among them, so that low end is in `M` too; hence the
//! smallest point of `M` is a low end, and likewise its largest point is a
//! high end. Checking each endpoint against every interval finds both in
//! `O(n²)` with no allocation, which is what a firmware build needs.
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

/// The smallest strict majority of `n`.
pub const fn strict_majority(n: usize) -> usize {
    n / 2 + 1
}

/// How many of `spans` hold `x`.
pub fn cover<I>(spans: I, x: i128) -> usize
where
    I: IntoIterator<Item = Span>,
{
    spans.into_iter().filter(|s| s.holds(x)).count()
}

/// The hull of every offset held by a strict majority of `spans` (one per
/// distinct key: the caller merges a key's answers first), or `None` when
/// no offset is.
pub fn majority_hull<I>(spans: I) -> Option<Span>
where
    I: IntoIterator<Item = Span> + Clone,
{
    let n = spans.clone().into_iter().count();
    let need = strict_majority(n);
    let in_majority = |x: i128| cover(spans.clone(), x) >= need;
    let low = spans
        .clone()
        .into_iter()
        .map(|s| s.low)
        .filter(|&x| in_majority(x))
        .min()?;
    let high = spans
        .clone()
        .into_iter()
        .map(|s| s.high)
        .filter(|&x| in_majority(x))
        .max()?;
    Some(Span { low, high })
}

/// How many separate stretches of offsets a strict majority of `spans`
/// holds (the "regions" of the hull; offsets are whole µs, so two
/// stretches are separate when some offset between them is held by fewer).
/// More than one: the keys disagree, and the hull spans them all. Counted
/// without allocation, for the C library.
///
/// A stretch starts at an `x` a majority holds while `x − 1` is not; the
/// intervals holding `x` do not all hold `x − 1`, so one of them starts at
/// `x`: each stretch is counted once, at a low end.
pub fn majority_regions<I>(spans: I) -> usize
where
    I: IntoIterator<Item = Span> + Clone,
{
    let n = spans.clone().into_iter().count();
    let need = strict_majority(n);
    let in_majority = |x: i128| cover(spans.clone(), x) >= need;
    spans
        .clone()
        .into_iter()
        .enumerate()
        .filter(|&(i, s)| {
            in_majority(s.low)
                && s.low.checked_sub(1).is_none_or(|x| !in_majority(x))
                // The same low end of an earlier interval starts the same stretch.
                && spans.clone().into_iter().take(i).all(|t| t.low != s.low)
        })
        .count()
}

/// Whether a key whose interval is `span` is outside `hull` (and so, under
/// the assumption, lies).
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
    fn a_wide_honest_interval_cannot_lend_a_liar_its_majority() {
        // Issue 21's first case, in seconds: honest ±16 and ±60, a liar 70
        // slow with ±16. Two majority regions; the hull spans both.
        let spans = [s(-16, 16), s(-60, 60), s(-86, -54)];
        assert_eq!(majority_hull(spans), Some(s(-60, 16)));
        assert!(spans.iter().all(|&x| !outside(s(-60, 16), x)));
        assert_eq!(majority_regions(spans), 2);
    }

    #[test]
    fn a_narrow_liar_among_narrow_honest_servers_is_outside() {
        let spans = [s(-16, 16), s(-15, 17), s(-17, 15), s(54, 86)];
        let hull = majority_hull(spans).unwrap();
        assert_eq!(hull, s(-15, 15));
        assert!(outside(hull, spans[3]));
        assert!(!outside(hull, spans[0]));
        assert_eq!(majority_regions(spans), 1);
    }

    #[test]
    fn regions_are_counted_once_each_and_whole_microseconds_join() {
        assert_eq!(majority_regions([] as [Span; 0]), 0);
        assert_eq!(majority_regions([s(0, 10), s(20, 30)]), 0);
        // Three equal low ends start one stretch.
        assert_eq!(majority_regions([s(0, 10), s(0, 5), s(0, 7)]), 1);
        // Held by three of five at every whole offset from 0 to 20: one
        // stretch, though no single pair of intervals spans it.
        let joined = [s(0, 10), s(0, 10), s(11, 20), s(11, 20), s(0, 20)];
        assert_eq!(majority_regions(joined), 1);
        // A gap of one offset (11) held by two of five: two stretches.
        let split = [s(0, 10), s(0, 10), s(12, 20), s(12, 20), s(0, 20)];
        assert_eq!(majority_regions(split), 2);
        assert_eq!(majority_hull(split), Some(s(0, 20)));
        // The lowest offset there is.
        assert_eq!(majority_regions([s(i128::MIN, 0)]), 1);
    }

    #[test]
    fn half_is_not_a_majority() {
        assert_eq!(majority_hull([s(0, 10), s(20, 30)]), None);
        assert_eq!(
            majority_hull([s(0, 10), s(5, 8), s(20, 30), s(25, 28)]),
            None
        );
        assert_eq!(majority_hull([] as [Span; 0]), None);
        assert_eq!(majority_hull([s(3, 4)]), Some(s(3, 4)));
    }

    #[test]
    fn touching_intervals_share_their_point() {
        assert_eq!(
            majority_hull([s(0, 10), s(10, 20), s(10, 30)]),
            Some(s(10, 20))
        );
    }
}
