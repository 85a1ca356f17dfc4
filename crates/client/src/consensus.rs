//! Whom to believe: the one place that decides it, for `query --servers`,
//! `sync`, `watch`, the Python package and the C library.
//!
//! ```text
//!  answers (server, key, offset interval) ──per distinct key──▶ intersection
//!     │ empty: the key contradicts itself (proven by its own signatures)
//!     ▼
//!  gnomon_protocol::majority::majority_hull over the keys that vote
//!     ▼
//!  Consensus (the hull) ─▶ flagged: keys whose interval misses it
//! ```
//!
//! **One key, one vote.** Answers count per distinct long-term public key,
//! not per list entry: the same key under two names or addresses is one
//! server, and its answers are intersected like any key's.
//!
//! **Assumption.** Fewer than half of the distinct keys that vote lie.
//! Under it the consensus holds the true offset, and only liars are
//! flagged (the argument is in `gnomon_protocol::majority` and
//! docs/CLIENT.md, "Whom to believe"). When it does not hold (half or more
//! lie), the consensus may be wrong, or the liars may make it wide; the
//! callers' radius limits refuse a wide one.
//!
//! A key whose own answers do not overlap has lied, whatever anyone else
//! says: it is flagged and does not vote. Taking a proven liar out keeps
//! the assumption: `f < n/2` gives `f − 1 < (n − 1)/2`.

use gnomon_protocol::majority::{self, Span};

/// One answer: a server (an id of the caller's, such as its index in a
/// list) with its long-term public key, and the interval of offsets
/// (server − local, µs) the answer vouches for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vouch<'k> {
    /// The caller's id of the server.
    pub server: usize,
    /// Its long-term public key: votes are counted per distinct key.
    pub key: &'k [u8],
    /// Smallest offset, µs.
    pub low_us: i128,
    /// Largest offset, µs.
    pub high_us: i128,
}

/// The interval the servers prove, under the assumption.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consensus {
    /// Smallest offset (server − local), µs.
    pub low_us: i128,
    /// Largest offset, µs.
    pub high_us: i128,
    /// Servers whose interval meets it (ids as given, sorted).
    pub agreeing: Vec<usize>,
    /// Distinct keys that voted (answered and did not contradict
    /// themselves).
    pub answering: usize,
    /// Distinct keys among `agreeing`.
    pub agreeing_keys: usize,
}

impl Consensus {
    /// The middle of the interval.
    pub fn midpoint_us(&self) -> i128 {
        self.span().midpoint()
    }

    /// Half the width.
    pub fn radius_us(&self) -> i128 {
        self.span().radius()
    }

    fn span(&self) -> Span {
        Span {
            low: self.low_us,
            high: self.high_us,
        }
    }
}

/// Why a server is flagged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Flag {
    /// Its interval misses the consensus: under the assumption, it lies.
    OutsideConsensus,
    /// Its own answers do not overlap each other: it lied, proven.
    SelfContradiction,
}

/// The result over a set of answers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Agreement {
    /// The hull of every offset a strict majority of keys vouches for.
    pub consensus: Option<Consensus>,
    /// Flagged servers, by id, with the reason (every id of a flagged key).
    pub flagged: Vec<(usize, Flag)>,
    /// The stretches of offsets a strict majority vouches for, in order.
    /// More than one: the servers disagree, and the consensus spans them.
    pub regions: Vec<(i128, i128)>,
    /// Servers that share one key (each group sorted, two ids or more):
    /// each group was one vote.
    pub shared_keys: Vec<Vec<usize>>,
}

impl Agreement {
    /// Why the servers disagree, in words, when a strict majority vouches
    /// for more than one stretch of offsets (liars can make a second one
    /// beside a wide honest interval); `None` when they do not.
    pub fn disagreement(&self) -> Option<String> {
        let c = self.consensus.as_ref()?;
        if self.regions.len() < 2 {
            return None;
        }
        let parts: Vec<String> = self
            .regions
            .iter()
            .map(|&(lo, hi)| format!("[{}, {}]", secs(lo), secs(hi)))
            .collect();
        Some(format!(
            "the servers disagree: a majority of the {} keys vouches for offsets in {} s; \
             the consensus spans them all (±{} s), so fewer than half may be lying but \
             which cannot be told",
            c.answering,
            parts.join(" and "),
            secs(c.radius_us()),
        ))
    }
}

fn secs(us: i128) -> String {
    format!("{:.3}", us as f64 / 1e6)
}

/// A distinct key and what it vouches for.
struct Voter {
    /// Ids of the servers with this key, in the order first seen.
    servers: Vec<usize>,
    /// The intersection of its answers; `None` once it contradicts itself.
    span: Option<Span>,
}

/// Apply the majority rule to `answers` (any number per server and per
/// key, in any order). An answer whose interval is empty (low > high) is
/// a contradiction of its key.
pub fn agree(answers: &[Vouch<'_>]) -> Agreement {
    let mut keys: Vec<&[u8]> = Vec::new();
    let mut voters: Vec<Voter> = Vec::new();
    for a in answers {
        let span = Span::new(a.low_us, a.high_us);
        match keys.iter().position(|k| *k == a.key) {
            Some(i) => {
                let v = &mut voters[i];
                if !v.servers.contains(&a.server) {
                    v.servers.push(a.server);
                }
                v.span = v.span.zip(span).and_then(|(x, y)| x.intersect(y));
            }
            None => {
                keys.push(a.key);
                voters.push(Voter {
                    servers: vec![a.server],
                    span,
                });
            }
        }
    }
    let spans = voters.iter().filter_map(|v| v.span);
    let hull = majority::majority_hull(spans.clone());
    let mut flagged = Vec::new();
    let mut agreeing = Vec::new();
    let mut agreeing_keys = 0;
    for v in &voters {
        let flag = match (v.span, hull) {
            (None, _) => Some(Flag::SelfContradiction),
            (Some(s), Some(h)) if majority::outside(h, s) => Some(Flag::OutsideConsensus),
            (Some(_), Some(_)) => {
                agreeing.extend(&v.servers);
                agreeing_keys += 1;
                None
            }
            (Some(_), None) => None,
        };
        if let Some(f) = flag {
            flagged.extend(v.servers.iter().map(|&s| (s, f)));
        }
    }
    flagged.sort_unstable();
    agreeing.sort_unstable();
    let mut shared_keys: Vec<Vec<usize>> = voters
        .iter()
        .filter(|v| v.servers.len() > 1)
        .map(|v| {
            let mut g = v.servers.clone();
            g.sort_unstable();
            g
        })
        .collect();
    shared_keys.sort_unstable();
    let answering = spans.clone().count();
    Agreement {
        consensus: hull.map(|h| Consensus {
            low_us: h.low,
            high_us: h.high,
            agreeing,
            answering,
            agreeing_keys,
        }),
        flagged,
        regions: regions(spans),
        shared_keys,
    }
}

/// The maximal stretches of offsets held by a strict majority of `spans`.
fn regions<I>(spans: I) -> Vec<(i128, i128)>
where
    I: Iterator<Item = Span> + Clone,
{
    let need = majority::strict_majority(spans.clone().count());
    // +1 where an interval starts, −1 just after it ends (offsets are
    // whole µs, so "just after" is high + 1).
    let mut steps: Vec<(i128, i32)> = spans
        .flat_map(|s| [(s.low, 1), (s.high.saturating_add(1), -1)])
        .collect();
    steps.sort_unstable();
    let (mut out, mut count, mut start) = (Vec::new(), 0i32, None);
    let mut i = 0;
    while i < steps.len() {
        let x = steps[i].0;
        while i < steps.len() && steps[i].0 == x {
            count += steps[i].1;
            i += 1;
        }
        let inside = count >= 0 && count as usize >= need;
        match (inside, start) {
            (true, None) => start = Some(x),
            (false, Some(s)) => {
                out.push((s, x - 1));
                start = None;
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i128 = 1_000_000;

    fn v(server: usize, key: &[u8], low_us: i128, high_us: i128) -> Vouch<'_> {
        Vouch {
            server,
            key,
            low_us,
            high_us,
        }
    }

    #[test]
    fn majority_wins_and_the_liar_is_flagged() {
        let hour = 3_600 * S;
        let a = agree(&[
            v(0, b"a", -3 * S, 3 * S),
            v(1, b"b", -2 * S, 4 * S),
            v(2, b"c", hour - 3 * S, hour + 3 * S),
            v(3, b"d", -S, 5 * S),
            v(0, b"a", -5 * S / 2, 2 * S),
        ]);
        let c = a.consensus.as_ref().unwrap();
        assert_eq!((c.low_us, c.high_us), (-S, 2 * S));
        assert_eq!(c.agreeing, [0, 1, 3]);
        assert_eq!((c.answering, c.agreeing_keys), (4, 3));
        assert_eq!(a.flagged, [(2, Flag::OutsideConsensus)]);
        assert_eq!(a.regions, [(-S, 2 * S)]);
        assert!(a.disagreement().is_none());
    }

    #[test]
    fn one_liar_beside_a_wide_honest_server_moves_nothing_and_is_not_believed() {
        // Issue 21: honest ±16 s and ±60 s, a liar 70 s slow with ±16 s.
        let a = agree(&[
            v(0, b"narrow", -16 * S, 16 * S),
            v(1, b"wide", -60 * S, 60 * S),
            v(2, b"liar", -86 * S, -54 * S),
        ]);
        let c = a.consensus.as_ref().unwrap();
        assert_eq!((c.low_us, c.high_us), (-60 * S, 16 * S));
        assert!(a.flagged.is_empty(), "nobody is accused: {:?}", a.flagged);
        assert_eq!(a.regions, [(-60 * S, -54 * S), (-16 * S, 16 * S)]);
        let why = a.disagreement().unwrap();
        assert!(why.contains("disagree") && why.contains("-54.000"), "{why}");
    }

    #[test]
    fn two_liars_of_five_make_the_consensus_wide_not_wrong() {
        let a = agree(&[
            v(0, b"h16", -16 * S, 16 * S),
            v(1, b"h60a", -60 * S, 60 * S),
            v(2, b"h60b", -60 * S, 60 * S),
            v(3, b"l1", 54 * S, 86 * S),
            v(4, b"l2", 54 * S, 86 * S),
        ]);
        let c = a.consensus.unwrap();
        assert_eq!((c.low_us, c.high_us), (-16 * S, 60 * S));
        assert!(a.flagged.is_empty());
    }

    #[test]
    fn one_key_under_three_names_is_one_vote() {
        // One slow key listed three times beside two honest keys: it is
        // one of three votes, and alone.
        let slow = b"slow".as_slice();
        let a = agree(&[
            v(0, b"a", -S, S),
            v(1, b"b", -S, S),
            v(2, slow, -71 * S, -69 * S),
            v(3, slow, -71 * S, -69 * S),
            v(4, slow, -71 * S, -69 * S),
        ]);
        let c = a.consensus.unwrap();
        assert_eq!((c.low_us, c.high_us, c.answering), (-S, S, 3));
        assert_eq!(
            a.flagged,
            [
                (2, Flag::OutsideConsensus),
                (3, Flag::OutsideConsensus),
                (4, Flag::OutsideConsensus)
            ]
        );
        assert_eq!(a.shared_keys, [vec![2, 3, 4]]);
    }

    #[test]
    fn no_majority_no_consensus() {
        let a = agree(&[v(0, b"a", 0, 10), v(1, b"b", 100, 110)]);
        assert_eq!(a.consensus, None);
        assert!(a.flagged.is_empty() && a.regions.is_empty());
        let b = agree(&[
            v(0, b"a", 0, 10),
            v(1, b"b", 5, 20),
            v(2, b"c", 100, 110),
            v(3, b"d", 200, 210),
        ]);
        assert_eq!(b.consensus, None);
    }

    #[test]
    fn a_key_that_contradicts_itself_is_flagged_and_does_not_vote() {
        // Its two names' answers do not overlap: one key, proven to lie.
        let a = agree(&[
            v(0, b"x", 0, 10),
            v(3, b"x", 20, 30),
            v(1, b"b", 0, 10),
            v(2, b"c", 5, 15),
        ]);
        assert_eq!(
            a.flagged,
            [(0, Flag::SelfContradiction), (3, Flag::SelfContradiction)]
        );
        let c = a.consensus.unwrap();
        assert_eq!((c.low_us, c.high_us, c.answering), (5, 10, 2));
    }

    #[test]
    fn regions_are_the_majority_stretches() {
        let spans = [
            Span { low: 0, high: 10 },
            Span { low: 10, high: 20 },
            Span { low: 10, high: 30 },
        ];
        assert_eq!(regions(spans.into_iter()), [(10, 20)]);
        let spans = [Span { low: 0, high: 0 }, Span { low: 0, high: 0 }];
        assert_eq!(regions(spans.into_iter()), [(0, 0)]);
    }
}
