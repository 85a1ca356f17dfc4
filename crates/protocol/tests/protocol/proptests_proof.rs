//! Property tests of relayed proofs against an adversary: fewer than half
//! of the distinct keys lie, with any interval, and the relay may delay,
//! drop, duplicate, reorder, swap answers between bundles, replay another
//! bundle, and damage bytes. The verifier either refuses, or gives an
//! interval (on success, or as the majority's beside a named liar) that
//! holds the true now.

use crate::common;
use crate::props;

use common::relay::{self, Ask};
use common::*;
use gnomon_protocol::{
    verify_proof, Profile, Proof, ProofError, ProofPolicy, ProofWorkspace, Proven, Report,
};
use props::{apply, edit};
use proptest::prelude::*;
use proptest::sample::Index;

const T0: u64 = NOW_US;
/// Lies stay inside the test delegation (NOW ± 1 h) so that they verify.
const LIE_SPAN_US: u64 = 3_500_000_000;

/// What the relay does to the bundle, at the level of its entries.
#[derive(Clone, Debug)]
enum Op {
    Drop(Index),
    DropTail(Index),
    Duplicate(Index),
    Swap(Index, Index),
    /// Put in the answer of the same entry from a bundle for another D.
    Transplant(Index),
    /// Hand over the bundle made for another D.
    Replay,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        any::<Index>().prop_map(Op::Drop),
        any::<Index>().prop_map(Op::DropTail),
        any::<Index>().prop_map(Op::Duplicate),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Op::Swap(a, b)),
        any::<Index>().prop_map(Op::Transplant),
        Just(Op::Replay),
    ]
}

#[derive(Clone, Debug)]
struct Scenario {
    keys: usize,
    /// Which keys lie (fewer than half).
    liars: Vec<bool>,
    gap_us: u64,
    /// Per answer: honest jitter within the radius, or a liar's (midpoint
    /// offset from NOW − LIE_SPAN/2, radius).
    answers: Vec<(i64, u64, u32)>,
    /// How long the relay held the bundle after the last answer.
    delay_us: u64,
    /// How much more than the true elapsed time the device's bound says.
    slack_us: u64,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (3usize..=5, 1usize..=2)
        .prop_flat_map(|(keys, passes)| {
            let liars =
                prop::sample::subsequence((0..keys).collect::<Vec<_>>(), 0..=(keys - 1) / 2);
            let r = i64::from(RADIUS_US);
            let answer = (-r..=r, 0..=LIE_SPAN_US, 1u32..=u32::MAX);
            (
                Just(keys),
                liars,
                Just(passes),
                0u64..=500_000,
                prop::collection::vec(answer, keys * passes),
                0u64..=20_000_000,
                0u64..=1_000_000,
            )
        })
        .prop_map(
            |(keys, liar_list, _passes, gap_us, answers, delay_us, slack_us)| Scenario {
                liars: (0..keys).map(|k| liar_list.contains(&k)).collect(),
                keys,
                gap_us,
                answers,
                delay_us,
                slack_us,
            },
        )
}

impl Scenario {
    fn asks(&self) -> Vec<Ask> {
        self.answers
            .iter()
            .enumerate()
            .map(|(k, &(jitter, lie, lie_radius))| {
                let server = k % self.keys;
                let t = T0 + (k as u64 + 1) * self.gap_us;
                let (midpoint_us, radius_us) = if self.liars[server] {
                    (NOW_US - LIE_SPAN_US / 2 + lie, lie_radius)
                } else {
                    (t.checked_add_signed(jitter).unwrap(), RADIUS_US)
                };
                Ask {
                    server,
                    profile: Profile::rfc(),
                    midpoint_us,
                    radius_us,
                }
            })
            .collect()
    }

    /// The device's true elapsed time and the bound it passes.
    fn elapsed(&self) -> (u64, u64) {
        let last = (self.answers.len() as u64) * self.gap_us;
        let true_elapsed = last + self.delay_us;
        (true_elapsed, true_elapsed + self.slack_us)
    }
}

const D: &[u8] = b"the device's own value";
const OTHER: &[u8] = b"another value, same servers";

fn apply_op(report: &mut Report, other: &Proof, op: &Op) -> bool {
    let n = report.entries.len();
    match op {
        Op::Drop(i) => {
            if n > 1 {
                report.entries.remove(i.index(n));
            }
        }
        Op::DropTail(i) => report.entries.truncate(1 + i.index(n)),
        Op::Duplicate(i) => {
            let at = i.index(n);
            let e = report.entries[at].clone();
            report.entries.insert(at, e);
        }
        Op::Swap(a, b) => report.entries.swap(a.index(n), b.index(n)),
        Op::Transplant(i) => {
            let at = i.index(n);
            if let Some(e) = other.report().entries.get(at) {
                report.entries[at].response = e.response.clone();
            }
        }
        Op::Replay => return true,
    }
    false
}

/// Whether a verdict's interval (if any) holds `truth`.
fn sound(result: &Result<Proven, ProofError>, truth: i128) -> bool {
    let interval = match result {
        Ok(p) => Some(p),
        Err(ProofError::Liar { majority, .. } | ProofError::Contradiction { majority, .. }) => {
            majority.as_ref()
        }
        Err(_) => None,
    };
    interval.is_none_or(|p| p.earliest_us <= truth && truth <= p.latest_us)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, max_shrink_iters: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_verifier_never_gives_a_wrong_interval(
        s in scenario(),
        ops in prop::collection::vec(op(), 0..=2),
        damage in prop::option::weighted(0.3, edit()),
        max_liars in prop::option::of(0usize..=2),
    ) {
        let servers = relay::servers(s.keys);
        let keys = relay::keys(&servers, Profile::rfc());
        let asks = s.asks();
        let proof = relay::proof(&servers, D, &asks, 1);
        let other = relay::proof(&servers, OTHER, &asks, 2);
        let mut report = proof.report().clone();
        let mut replayed = false;
        for op in &ops {
            replayed |= apply_op(&mut report, &other, op);
        }
        let mut bundle = if replayed {
            other.to_binary()
        } else {
            Proof::new(D.to_vec(), report.clone()).unwrap().to_binary()
        };
        if let Some(e) = &damage {
            bundle = apply(&bundle, e);
        }
        let (true_elapsed, bound) = s.elapsed();
        let truth = i128::from(T0 + true_elapsed);
        let policy = ProofPolicy { max_liars, quorum: 1, max_radius_us: None };
        let f = policy.assumption(s.keys).liars;
        let mut ws = ProofWorkspace::new();
        let result = verify_proof(&bundle, D, &keys, bound, &policy, &mut ws);

        // The assumption is about the pinned keys alone (at most f of them
        // lie), whatever the relay left out, reordered or replayed
        // (docs/PROOF.md): then no interval given misses the truth.
        let lying_pinned = s.liars.iter().filter(|&&l| l).count();
        if lying_pinned <= f {
            prop_assert!(sound(&result, truth), "{result:?} truth {truth} (f {f})");
        }
        // Fewer than 2f + 1 pinned keys in the bundle prove nothing.
        let present = (0..s.keys)
            .filter(|&k| report.entries.iter().any(|e| e.public_key == keys[k].bytes()))
            .count();
        if present < 2 * f + 1 && !replayed {
            prop_assert!(result.is_err(), "{result:?} from {present} keys (f {f})");
        }
        if replayed && damage.is_none() {
            prop_assert_eq!(result, Err(ProofError::WrongNonce));
        } else if ops.is_empty()
            && damage.is_none()
            && s.liars.iter().all(|l| !l)
            && 2 * f < s.keys
        {
            // Not vacuous: an untouched honest bundle proves the truth.
            let p = result.unwrap();
            prop_assert!(p.earliest_us <= truth && truth <= p.latest_us);
            prop_assert_eq!(p.agreeing_keys, s.keys);
        }
    }

    #[test]
    fn any_truncation_or_flip_is_refused_or_changes_nothing_signed(
        cut in any::<Index>(),
        flip in any::<Index>(),
        mask in 1u8..,
    ) {
        let servers = relay::servers(3);
        let keys = relay::keys(&servers, Profile::rfc());
        let bundle = relay::proof(&servers, D, &relay::honest(3, T0, 100_000), 0).to_binary();
        let mut ws = ProofWorkspace::new();
        let policy = ProofPolicy::default();
        let whole = verify_proof(&bundle, D, &keys, 2_000_000, &policy, &mut ws).unwrap();
        let short = &bundle[..cut.index(bundle.len())];
        prop_assert_eq!(
            verify_proof(short, D, &keys, 2_000_000, &policy, &mut ws),
            Err(ProofError::Truncated)
        );
        let mut flipped = bundle.clone();
        flipped[flip.index(bundle.len())] ^= mask;
        // A flip either breaks something or lands on a byte no check covers
        // (none should exist; an unsigned field would give the same time).
        if let Ok(p) = verify_proof(&flipped, D, &keys, 2_000_000, &policy, &mut ws) {
            prop_assert_eq!(p, whole);
        }
    }
}
