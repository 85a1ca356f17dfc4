//! The same verdicts as `gnomon_client::consensus::agree` on thousands of
//! random answer sets and assumptions.

use gnomon::*;
use gnomon_client::consensus::{agree, Electorate, Flag, Identity, Vouch};

use super::{consensus, key, Answers, Ask, AUTO};

use GnomonVerdict::*;

/// A small deterministic generator (xorshift64*): the same cases every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What `agree` (the client's rule) says of the same answers, in the C
/// function's terms: one server per answer, grouped by key (as
/// `Electorate::of` groups servers that share one), and the servers listed
/// that did not answer, under the same assumption.
fn by_the_client(
    answers: &Answers<'_>,
    ask: Ask,
) -> (Option<(i64, i64)>, Vec<GnomonVerdict>, [usize; 8]) {
    let mut ids: Vec<Identity> = answers
        .iter()
        .enumerate()
        .map(|(i, &(key, _, _))| Identity {
            key: key.to_vec(),
            addresses: vec![format!("answer-{i}:2002")],
            operator: None,
        })
        .collect();
    let mut distinct: Vec<&[u8; 32]> = answers.iter().map(|a| a.0).collect();
    distinct.sort();
    distinct.dedup();
    // The silent ones: keys no answer has.
    for i in distinct.len()..ask.listed {
        ids.push(Identity {
            key: format!("silent {i}").into_bytes(),
            addresses: vec![format!("silent-{i}:2002")],
            operator: None,
        });
    }
    let electorate = Electorate::new(&ids);
    assert_eq!(electorate.voters(), ask.listed);
    let assumption =
        electorate.assume((ask.max_liars != GNOMON_MAX_LIARS_AUTO).then_some(ask.max_liars));
    let v: Vec<Vouch> = answers
        .iter()
        .enumerate()
        .map(|(i, &(_, low, high))| Vouch {
            server: i,
            low_us: low.into(),
            high_us: high.into(),
        })
        .collect();
    let a = agree(&v, &electorate, assumption);
    let flag = |i: usize| a.flagged.iter().find(|f| f.0 == i).map(|f| f.1);
    let verdicts = (0..answers.len())
        .map(|i| match (flag(i), &a.consensus) {
            (Some(Flag::SelfContradiction), _) => GnomonVerdictSelfContradiction,
            (Some(Flag::OutsideConsensus), _) => GnomonVerdictOutside,
            (None, None) => GnomonVerdictNoConsensus,
            (None, Some(c)) => {
                assert!(c.agreeing.contains(&i));
                GnomonVerdictAgrees
            }
        })
        .collect();
    let distinct = |f: Flag| {
        let mut keys: Vec<_> = a
            .flagged
            .iter()
            .filter(|x| x.1 == f)
            .map(|x| answers[x.0].0)
            .collect();
        keys.sort();
        keys.dedup();
        keys.len()
    };
    let c = a.consensus.as_ref();
    let counts = [
        a.answered,
        c.map_or(0, |c| c.agreeing_voters),
        distinct(Flag::OutsideConsensus),
        distinct(Flag::SelfContradiction),
        a.regions.len(),
        a.assumption.voters,
        a.assumption.liars,
        a.assumption.needed(),
    ];
    let hull = c.map(|c| (c.low_us as i64, c.high_us as i64));
    (hull, verdicts, counts)
}

#[test]
fn the_same_verdicts_as_the_clients_rule_on_random_answers() {
    let keys: Vec<[u8; 32]> = (0..6).map(key).collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut seen, mut split, mut too_few, mut no_offset) = ([0usize; 4], 0, 0, 0);
    for case in 0..4000 {
        let n = 1 + rng.below(12) as usize;
        // Narrow offsets on a small scale make overlaps, touching ends,
        // gaps of one and repeated keys common.
        let answers: Vec<(&[u8; 32], i64, i64)> = (0..n)
            .map(|_| {
                let k = &keys[rng.below(keys.len() as u64) as usize];
                let low = rng.below(40) as i64 - 20;
                (k, low, low + rng.below(15) as i64)
            })
            .collect();
        let mut distinct: Vec<_> = answers.iter().map(|a| a.0).collect();
        distinct.sort();
        distinct.dedup();
        // Listed: every key that answered and up to four silent ones; the
        // default assumption or 0 to 3 liars.
        let ask = Ask {
            listed: distinct.len() + rng.below(5) as usize,
            max_liars: match rng.below(5) {
                4 => AUTO,
                f => f as usize,
            },
            quorum: 1 + rng.below(4) as usize,
        };
        let o = consensus(&answers, ask);
        let (hull, verdicts, counts) = by_the_client(&answers, ask);
        let r = &o.result;
        let what = format!("case {case}: {ask:?} {answers:?}");
        assert_eq!(
            r.has_consensus.then_some((r.low_us, r.high_us)),
            hull,
            "{what}"
        );
        assert_eq!(o.verdicts, verdicts, "{what}");
        assert_eq!(
            [
                r.voting_keys,
                r.agreeing_keys,
                r.outside_keys,
                r.contradicting_keys,
                r.regions,
                r.listed,
                r.max_liars,
                r.needed,
            ],
            counts,
            "{what}"
        );
        assert_eq!(
            r.quorum_met,
            hull.is_some() && counts[1] >= ask.quorum,
            "{what}"
        );
        for v in &o.verdicts {
            seen[*v as usize] += 1;
        }
        split += usize::from(r.regions > 1);
        let m = o.message();
        too_few += usize::from(m.starts_with("no consensus: too few answered"));
        no_offset += usize::from(m.starts_with("no consensus: no offset"));
    }
    // Every verdict came up, many times, and disagreeing stretches and
    // both reasons for no consensus too.
    assert!(seen.iter().all(|&n| n > 100), "{seen:?}");
    assert!(split > 20, "{split} cases with more than one region");
    assert!(too_few > 100 && no_offset > 100, "{too_few} {no_offset}");
}
