//! How a liar places its answers, for the property tests of the rules that
//! decide whom to believe: the protocol's quorum
//! (crates/protocol/tests/protocol/quorum_adversary.rs) and the client's
//! consensus (crates/client/tests/client/consensus_adversary.rs) meet the
//! same adversary, described once.
//!
//! Intervals are µs, as `(low, high)` in `i128` so that no placement
//! overflows near `i64`'s ends.

use proptest::prelude::*;
use std::ops::{Range, RangeInclusive};

/// Where a liar puts its interval, relative to the honest ones.
#[derive(Clone, Debug)]
pub enum LiarShape {
    /// Anywhere, any width.
    Random { at: i64, width: i64 },
    /// `width` wide at one end of honest interval `k`, nudged by `nudge` µs
    /// (touching it, just inside, just outside).
    AtEdge {
        k: usize,
        high: bool,
        nudge: i64,
        width: i64,
    },
    /// Across one end of honest interval `k`.
    Straddle { k: usize, high: bool, width: i64 },
    /// Inside the widest honest interval, as far from the true time as it
    /// goes.
    FarInsideWidest { high: bool, width: i64 },
    /// Wider than everything.
    Everything,
    /// Two answers that do not overlap.
    SelfContradiction { at: i64 },
}

impl LiarShape {
    /// The liar's answers, given the honest intervals, the widest of them,
    /// and the true time `t` (what "honest interval k" means when none is
    /// honest).
    pub fn answers(
        &self,
        honest: &[(i128, i128)],
        widest: (i128, i128),
        t: i128,
    ) -> Vec<(i128, i128)> {
        let pick = |k: usize| {
            if honest.is_empty() {
                (t, t)
            } else {
                honest[k % honest.len()]
            }
        };
        match *self {
            LiarShape::Random { at, width } => {
                let at = i128::from(at);
                vec![(at, at + i128::from(width))]
            }
            LiarShape::AtEdge {
                k,
                high,
                nudge,
                width,
            } => {
                let (lo, hi) = pick(k);
                let (nudge, width) = (i128::from(nudge), i128::from(width));
                if high {
                    vec![(hi + nudge, hi + nudge + width)]
                } else {
                    vec![(lo + nudge - width, lo + nudge)]
                }
            }
            LiarShape::Straddle { k, high, width } => {
                let (lo, hi) = pick(k);
                let edge = if high { hi } else { lo };
                let half = i128::from(width) / 2;
                vec![(edge - half, edge + half)]
            }
            LiarShape::FarInsideWidest { high, width } => {
                let (lo, hi) = widest;
                let width = i128::from(width).min(hi - lo);
                if high {
                    vec![(hi - width, hi)]
                } else {
                    vec![(lo, lo + width)]
                }
            }
            LiarShape::Everything => vec![(i128::from(i64::MIN), i128::from(i64::MAX))],
            LiarShape::SelfContradiction { at } => {
                let at = i128::from(at);
                vec![(at, at + 10), (at + 20, at + 30)]
            }
        }
    }
}

/// Every shape: `k` picks the honest interval an edge liar aims at, and
/// `edge_width` how wide its interval at that edge is. Random and
/// contradicting liars sit within ±300 s of zero and are up to 120 s wide;
/// one inside the widest honest interval is up to 20 s wide.
pub fn liar_shape(
    k: Range<usize>,
    edge_width: RangeInclusive<i64>,
) -> impl Strategy<Value = LiarShape> {
    const S: i64 = 1_000_000;
    let width = 0..120 * S;
    prop_oneof![
        (-300 * S..300 * S, width.clone()).prop_map(|(at, width)| LiarShape::Random { at, width }),
        (k.clone(), any::<bool>(), -2i64..=2, edge_width).prop_map(|(k, high, nudge, width)| {
            LiarShape::AtEdge {
                k,
                high,
                nudge,
                width,
            }
        }),
        (k, any::<bool>(), width).prop_map(|(k, high, width)| LiarShape::Straddle {
            k,
            high,
            width
        }),
        (any::<bool>(), 0..20 * S)
            .prop_map(|(high, width)| LiarShape::FarInsideWidest { high, width }),
        Just(LiarShape::Everything),
        (-300 * S..300 * S).prop_map(|at| LiarShape::SelfContradiction { at }),
    ]
}
