//! Consensus: the offsets from our clock that a majority of servers agree
//! on, and the servers outside it.
//!
//! Each answer vouches for an interval of offsets, MIDP − local midpoint ±
//! (RADI + RTT/2). A server's answers are intersected (an honest server's
//! intervals all hold the true offset); a server whose own answers do not
//! overlap contradicts itself. Over the servers, the point covered by the
//! most intervals is found by a sweep (Marzullo's algorithm); when a strict
//! majority covers it, the consensus is the intersection of their
//! intervals, and every server whose interval misses it is flagged.

/// The interval a majority agrees on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consensus {
    /// Smallest offset (server − local), µs.
    pub low_us: i128,
    /// Largest offset, µs.
    pub high_us: i128,
    /// Servers whose intervals make it (their ids as given).
    pub agreeing: Vec<usize>,
    /// Servers that answered at all.
    pub answering: usize,
}

impl Consensus {
    /// The middle of the interval.
    pub fn midpoint_us(&self) -> i128 {
        self.low_us + (self.high_us - self.low_us) / 2
    }

    /// Half the width.
    pub fn radius_us(&self) -> i128 {
        (self.high_us - self.low_us) / 2
    }
}

/// Why a server is flagged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Flag {
    /// Its interval does not overlap the consensus.
    OutsideConsensus,
    /// Its own answers do not overlap each other.
    SelfContradiction,
}

/// The result over a set of servers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Agreement {
    /// The consensus, when a strict majority of answering servers agrees.
    pub consensus: Option<Consensus>,
    /// Flagged servers, by id, with the reason.
    pub flagged: Vec<(usize, Flag)>,
}

/// `answers` are (server id, low, high) offset intervals, any number per
/// server, in any order.
pub fn agree(answers: &[(usize, i128, i128)]) -> Agreement {
    let mut servers: Vec<(usize, i128, i128)> = Vec::new();
    let mut flagged = Vec::new();
    let mut broken: Vec<usize> = Vec::new();
    for &(id, lo, hi) in answers {
        if broken.contains(&id) {
            continue;
        }
        match servers.iter_mut().find(|s| s.0 == id) {
            Some(s) => {
                s.1 = s.1.max(lo);
                s.2 = s.2.min(hi);
                if s.1 > s.2 {
                    broken.push(id);
                    flagged.push((id, Flag::SelfContradiction));
                }
            }
            None => servers.push((id, lo, hi)),
        }
    }
    servers.retain(|s| !broken.contains(&s.0));
    let answering = servers.len() + broken.len();
    let Some(point) = best_point(&servers) else {
        return Agreement {
            consensus: None,
            flagged,
        };
    };
    let clique: Vec<&(usize, i128, i128)> = servers
        .iter()
        .filter(|s| s.1 <= point && point <= s.2)
        .collect();
    if clique.len() * 2 <= answering {
        return Agreement {
            consensus: None,
            flagged,
        };
    }
    let low = clique.iter().map(|s| s.1).max().unwrap_or(point);
    let high = clique.iter().map(|s| s.2).min().unwrap_or(point);
    for s in &servers {
        if s.2 < low || s.1 > high {
            flagged.push((s.0, Flag::OutsideConsensus));
        }
    }
    flagged.sort_unstable();
    Agreement {
        consensus: Some(Consensus {
            low_us: low,
            high_us: high,
            agreeing: clique.iter().map(|s| s.0).collect(),
            answering,
        }),
        flagged,
    }
}

/// A point covered by the most intervals (touching intervals overlap, as in
/// the causal-order check).
fn best_point(intervals: &[(usize, i128, i128)]) -> Option<i128> {
    let mut events: Vec<(i128, i32)> = Vec::with_capacity(intervals.len() * 2);
    for s in intervals {
        events.push((s.1, -1)); // starts sort before ends at the same value
        events.push((s.2, 1));
    }
    events.sort_unstable();
    let (mut count, mut best, mut at) = (0i32, 0i32, None);
    for (x, kind) in events {
        if kind < 0 {
            count += 1;
            if count > best {
                best = count;
                at = Some(x);
            }
        } else {
            count -= 1;
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majority_wins_and_the_liar_is_flagged() {
        let hour = 3_600_000_000;
        let a = agree(&[
            (0, -3_000_000, 3_000_000),
            (1, -2_000_000, 4_000_000),
            (2, hour - 3_000_000, hour + 3_000_000),
            (3, -1_000_000, 5_000_000),
            (0, -2_500_000, 2_000_000),
        ]);
        let c = a.consensus.unwrap();
        assert_eq!((c.low_us, c.high_us), (-1_000_000, 2_000_000));
        assert_eq!(c.agreeing, [0, 1, 3]);
        assert_eq!(c.answering, 4);
        assert_eq!(a.flagged, [(2, Flag::OutsideConsensus)]);
    }

    #[test]
    fn no_majority_no_consensus() {
        let a = agree(&[(0, 0, 10), (1, 100, 110)]);
        assert_eq!(a.consensus, None);
        assert!(a.flagged.is_empty());
        // One of two is not a strict majority either.
        let b = agree(&[(0, 0, 10), (1, 5, 20), (2, 100, 110), (3, 200, 210)]);
        assert_eq!(b.consensus, None);
    }

    #[test]
    fn a_server_that_contradicts_itself_is_flagged_and_counted() {
        let a = agree(&[(0, 0, 10), (0, 20, 30), (1, 0, 10), (2, 5, 15)]);
        assert_eq!(a.flagged, [(0, Flag::SelfContradiction)]);
        let c = a.consensus.unwrap();
        assert_eq!((c.low_us, c.high_us), (5, 10));
        assert_eq!(c.answering, 3);
    }

    #[test]
    fn touching_intervals_agree() {
        let a = agree(&[(0, 0, 10), (1, 10, 20), (2, 10, 30)]);
        let c = a.consensus.unwrap();
        assert_eq!((c.low_us, c.high_us), (10, 10));
        assert!(a.flagged.is_empty());
    }
}
