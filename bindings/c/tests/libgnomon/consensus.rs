//! `gnomon_consensus`, called from Rust as C calls it: issue 21's cases,
//! issue 33's (the drop attack: a list of five, only the two liars'
//! answers delivered), one vote per distinct key, the assumption, the
//! quorum, every argument check; the same verdicts as
//! `gnomon_client::consensus::agree` (the rule `gnomon sync`, `gnomon
//! query --servers` and the Python package use) on thousands of random
//! answer sets and assumptions; and no allocation at all.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::CStr;

use gnomon::*;
use gnomon_client::consensus::{agree, Electorate, Flag, Identity, Vouch};

use GnomonVerdict::*;

const S: i64 = 1_000_000;
const HOUR: i64 = 3600 * S;
const AUTO: usize = GNOMON_MAX_LIARS_AUTO;

/// The answers of one call: (key, low µs, high µs).
type Answers<'a> = [(&'a [u8; 32], i64, i64)];

struct Outcome {
    code: GnomonError,
    result: GnomonConsensusResult,
    verdicts: Vec<GnomonVerdict>,
}

impl Outcome {
    fn message(&self) -> String {
        // SAFETY: libgnomon NUL-terminates every message.
        unsafe { CStr::from_ptr(self.result.message.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    fn interval(&self) -> (i64, i64) {
        assert!(self.result.has_consensus, "{}", self.message());
        (self.result.low_us, self.result.high_us)
    }

    /// (listed, max_liars, needed): the assumption the result states.
    fn assumption(&self) -> (usize, usize, usize) {
        let r = &self.result;
        (r.listed, r.max_liars, r.needed)
    }

    /// (voting, agreeing, outside, self-contradicting) keys.
    fn keys(&self) -> (usize, usize, usize, usize) {
        let r = &self.result;
        (
            r.voting_keys,
            r.agreeing_keys,
            r.outside_keys,
            r.contradicting_keys,
        )
    }
}

fn vouches(answers: &Answers<'_>) -> Vec<GnomonVouch> {
    answers
        .iter()
        .map(|&(key, low_us, high_us)| GnomonVouch {
            public_key: key.as_ptr(),
            low_us,
            high_us,
        })
        .collect()
}

fn empty_result() -> GnomonConsensusResult {
    GnomonConsensusResult {
        code: GnomonError::GnomonOk,
        has_consensus: true,
        quorum_met: true,
        low_us: 7,
        high_us: 7,
        midpoint_us: 7,
        radius_us: 7,
        voting_keys: 7,
        agreeing_keys: 7,
        outside_keys: 7,
        contradicting_keys: 7,
        regions: 7,
        listed: 7,
        max_liars: 7,
        needed: 7,
        message: [0; GNOMON_MESSAGE_LEN],
    }
}

/// What the caller assumes and requires: `listed` distinct servers, at
/// most `max_liars` of them lying, `quorum` agreeing.
#[derive(Clone, Copy, Debug)]
struct Ask {
    listed: usize,
    max_liars: usize,
    quorum: usize,
}

/// Every answer's key listed, the default assumption.
fn listed(listed: usize, quorum: usize) -> Ask {
    Ask {
        listed,
        max_liars: AUTO,
        quorum,
    }
}

fn call(vouches: &[GnomonVouch], ask: Ask) -> Outcome {
    let mut result = empty_result();
    // Each slot starts as a value the call must overwrite or leave alone.
    let mut verdicts = vec![GnomonVerdictNoConsensus; vouches.len()];
    // SAFETY: `vouches` holds valid key pointers; `verdicts` as long.
    let code = unsafe {
        gnomon_consensus(
            vouches.as_ptr(),
            vouches.len(),
            ask.listed,
            ask.max_liars,
            ask.quorum,
            verdicts.as_mut_ptr(),
            &mut result,
        )
    };
    assert_eq!(result.code, code, "the result carries the code returned");
    Outcome {
        code,
        result,
        verdicts,
    }
}

fn consensus(answers: &Answers<'_>, ask: Ask) -> Outcome {
    let o = call(&vouches(answers), ask);
    assert_eq!(o.code, GnomonError::GnomonOk, "{}", o.message());
    o
}

fn key(n: u8) -> [u8; 32] {
    [n; 32]
}

#[test]
fn issue_21_a_liar_beside_a_wide_honest_server_moves_nothing_and_is_not_believed() {
    // Honest ±16 s and ±60 s, a liar 70 s slow with ±16 s, a list of
    // three (at most one lies, so two must share an offset): the liar and
    // the wide server make a second stretch; the consensus spans both, so
    // it holds the truth and comes out wide, and nobody is named.
    let (narrow, wide, liar) = (key(1), key(2), key(3));
    let o = consensus(
        &[
            (&narrow, -16 * S, 16 * S),
            (&wide, -60 * S, 60 * S),
            (&liar, -86 * S, -54 * S),
        ],
        listed(3, 2),
    );
    assert_eq!(o.interval(), (-60 * S, 16 * S));
    assert_eq!(
        (o.result.midpoint_us, o.result.radius_us),
        (-22 * S, 38 * S)
    );
    assert_eq!(o.verdicts, [GnomonVerdictAgrees; 3], "nobody is flagged");
    assert_eq!(o.result.regions, 2);
    assert_eq!(o.keys(), (3, 3, 0, 0));
    assert_eq!(o.assumption(), (3, 1, 3));
    assert!(o.result.quorum_met);
    let m = o.message();
    assert!(m.contains("disagree") && m.contains("±38.000 s"), "{m}");
    assert!(m.contains("2 of the 3 keys"), "{m}");
    assert!(
        m.ends_with("assumes at most 1 of the 3 listed servers lies; 3 answered, 3 needed"),
        "{m}"
    );
}

#[test]
fn three_honest_servers_and_a_liar_name_the_liar() {
    let keys = [key(1), key(2), key(3), key(4)];
    let answers = [
        (&keys[0], -16 * S, 16 * S),
        (&keys[1], -15 * S, 17 * S),
        (&keys[2], -17 * S, 15 * S),
        (&keys[3], HOUR - 16 * S, HOUR + 16 * S),
    ];
    let o = consensus(&answers, listed(4, 3));
    assert_eq!(o.interval(), (-15 * S, 15 * S));
    assert_eq!(
        o.verdicts,
        [
            GnomonVerdictAgrees,
            GnomonVerdictAgrees,
            GnomonVerdictAgrees,
            GnomonVerdictOutside
        ]
    );
    assert_eq!((o.keys(), o.result.regions), ((4, 3, 1, 0), 1));
    assert!(o.result.quorum_met);
    assert_eq!(
        o.message(),
        "assumes at most 1 of the 4 listed servers lies; 4 answered, 3 needed"
    );
    // A fifth server listed and silent: four of five answered, three
    // needed, and the liar is still named.
    let o = consensus(&answers, listed(5, 3));
    assert_eq!(o.interval(), (-15 * S, 15 * S));
    assert_eq!(o.verdicts[3], GnomonVerdictOutside);
    assert_eq!(o.assumption(), (5, 1, 3));
}

#[test]
fn the_drop_attack_leaves_no_consensus_not_the_liars_one() {
    // Issue 33: five listed, the three honest ones silenced on the path,
    // the two liars (an hour ahead, agreeing with each other) all that
    // arrives. A majority of the answers was theirs; under "at most one of
    // the five lies" three must answer, and two did.
    let (liar1, liar2) = (key(8), key(9));
    let answers = [
        (&liar1, HOUR - 3 * S, HOUR + 3 * S),
        (&liar2, HOUR - 2 * S, HOUR + 4 * S),
        (&liar1, HOUR - 3 * S, HOUR + 3 * S),
    ];
    let o = consensus(&answers, listed(5, 1));
    let r = &o.result;
    assert!(!r.has_consensus && !r.quorum_met, "{}", o.message());
    assert_eq!((r.low_us, r.high_us, r.regions), (0, 0, 0));
    assert_eq!(o.verdicts, [GnomonVerdictNoConsensus; 3]);
    assert_eq!(o.keys(), (2, 0, 0, 0));
    assert_eq!(o.assumption(), (5, 1, 3));
    assert_eq!(
        o.message(),
        "no consensus: too few answered, 2 of the 5 listed servers (3 needed to outvote \
         1 liar(s)): the silent ones may have been silenced on purpose"
    );
    // Told that none of the five lies, the same two answers are believed:
    // the assumption is the caller's to make.
    let o = consensus(
        &answers,
        Ask {
            listed: 5,
            max_liars: 0,
            quorum: 1,
        },
    );
    assert_eq!(o.interval(), (HOUR - 2 * S, HOUR + 3 * S));
    assert_eq!(o.assumption(), (5, 0, 1));
    // Assumed two of five, even three answering would not be enough.
    let o = consensus(
        &answers,
        Ask {
            listed: 5,
            max_liars: 2,
            quorum: 1,
        },
    );
    assert!(!o.result.has_consensus);
    assert_eq!(o.assumption(), (5, 2, 5));
}

#[test]
fn the_default_assumption_follows_the_list() {
    // max(1, ⌊(n − 1)/3⌋) of n listed: 1 up to 6, 2 from 7, 3 from 10.
    let k: Vec<[u8; 32]> = (0..4).map(key).collect();
    let answers: Vec<(&[u8; 32], i64, i64)> = k.iter().map(|k| (k, -S, S)).collect();
    for (n, f) in [(4, 1), (6, 1), (7, 2), (10, 3), (13, 4)] {
        let o = consensus(&answers, listed(n, 1));
        assert_eq!(o.assumption(), (n, f, 2 * f + 1), "{n} listed");
        assert_eq!(o.result.has_consensus, 4 > 2 * f, "{n} listed");
    }
    // A list of one or two cannot outvote the liar assumed, and says so.
    let o = consensus(&answers[..2], listed(2, 1));
    assert!(!o.result.has_consensus);
    let m = o.message();
    assert!(
        m.starts_with("no consensus: a list of 2 server(s) cannot outvote 1 liar(s)")
            && m.contains("max_liars"),
        "{m}"
    );
}

#[test]
fn one_key_given_three_times_is_one_vote() {
    // One slow key listed three times beside two honest keys: one vote of
    // three, alone, and outside. Counted per answer it would be the
    // majority.
    let (a, b, slow) = (key(1), key(2), key(9));
    let o = consensus(
        &[
            (&a, -S, S),
            (&slow, -71 * S, -69 * S),
            (&b, -S, S),
            (&slow, -71 * S, -69 * S),
            (&slow, -71 * S, -69 * S),
        ],
        listed(3, 2),
    );
    assert_eq!(o.interval(), (-S, S));
    assert_eq!(o.keys(), (3, 2, 1, 0));
    assert_eq!(
        o.verdicts,
        [
            GnomonVerdictAgrees,
            GnomonVerdictOutside,
            GnomonVerdictAgrees,
            GnomonVerdictOutside,
            GnomonVerdictOutside
        ]
    );
    // The same key's answers are intersected: its two narrower answers
    // together agree, its third one apart makes it contradict itself.
    let none = |listed| Ask {
        listed,
        max_liars: 0,
        quorum: 1,
    };
    let o = consensus(&[(&a, 0, 10), (&a, 5, 20), (&b, 0, 10)], none(2));
    assert_eq!((o.interval(), o.keys()), ((5, 10), (2, 2, 0, 0)));
    let o = consensus(
        &[(&a, 0, 10), (&a, 5, 20), (&a, 11, 30), (&b, 0, 10)],
        listed(3, 1),
    );
    assert_eq!(o.keys(), (1, 1, 0, 1));
    assert_eq!(o.verdicts[..3], [GnomonVerdictSelfContradiction; 3]);
    assert_eq!(o.verdicts[3], GnomonVerdictAgrees);
}

#[test]
fn a_key_that_contradicts_itself_is_named_does_not_vote_and_is_one_of_the_liars() {
    let (x, b, c) = (key(1), key(2), key(3));
    let answers = [(&x, 0, 10), (&b, 0, 10), (&c, 5, 15), (&x, 20, 30)];
    // Three listed, one liar assumed, and it is x: b and c must agree.
    let o = consensus(&answers, listed(3, 2));
    assert_eq!(o.interval(), (5, 10));
    assert_eq!(o.keys(), (2, 2, 0, 1));
    assert_eq!(
        o.assumption(),
        (3, 1, 3),
        "the assumption as the caller made it"
    );
    assert_eq!(
        o.verdicts,
        [
            GnomonVerdictSelfContradiction,
            GnomonVerdictAgrees,
            GnomonVerdictAgrees,
            GnomonVerdictSelfContradiction
        ]
    );
    // Two liars assumed of five: x is one, one more may hide among b and
    // c, and two voting cannot outvote it.
    let o = consensus(
        &answers,
        Ask {
            listed: 5,
            max_liars: 2,
            quorum: 1,
        },
    );
    assert!(!o.result.has_consensus);
    let m = o.message();
    assert!(m.contains("1 key(s) contradicted themselves"), "{m}");
}

#[test]
fn without_enough_answers_sharing_an_offset_there_is_no_consensus() {
    let (a, b, c, d) = (key(1), key(2), key(3), key(4));
    for answers in [
        &[(&a, 0, 10), (&b, 100, 110), (&c, 200, 210)][..],
        &[(&a, 0, 10), (&b, 5, 20), (&c, 100, 110), (&d, 200, 210)][..],
    ] {
        let o = consensus(answers, listed(answers.len(), 1));
        assert!(!o.result.has_consensus && !o.result.quorum_met);
        assert_eq!(
            (o.result.low_us, o.result.high_us, o.result.regions),
            (0, 0, 0)
        );
        assert!(o.verdicts.iter().all(|&v| v == GnomonVerdictNoConsensus));
        assert_eq!(o.keys().0, answers.len());
        let m = o.message();
        assert!(
            m.starts_with(&format!(
                "no consensus: no offset is held by {} of the {} keys",
                answers.len() - 1,
                answers.len()
            )),
            "{m}"
        );
    }
    // A key that contradicts itself is still named without a consensus.
    let o = consensus(
        &[(&a, 0, 10), (&a, 20, 30), (&b, 0, 10), (&c, 50, 60)],
        listed(4, 1),
    );
    assert!(!o.result.has_consensus);
    assert_eq!(o.verdicts[0], GnomonVerdictSelfContradiction);
    assert_eq!(o.verdicts[2], GnomonVerdictNoConsensus);
}

#[test]
fn the_quorum_counts_distinct_agreeing_keys() {
    let (a, b, c) = (key(1), key(2), key(3));
    // One key under two names: one agreeing key.
    let one = [(&a, -S, S), (&a, -S, S)];
    let trusted = |quorum| Ask {
        listed: 1,
        max_liars: 0,
        quorum,
    };
    let o = consensus(&one, trusted(2));
    assert!(o.result.has_consensus && !o.result.quorum_met);
    assert_eq!(
        o.message(),
        "1 distinct key(s) agree, fewer than the quorum of 2; \
         assumes at most 0 of the 1 listed servers lie; 1 answered, 1 needed"
    );
    assert!(consensus(&one, trusted(1)).result.quorum_met);
    // Three keys, one outside: two agree.
    let three = [(&a, -S, S), (&b, -S, S), (&c, 50 * S, 52 * S)];
    assert!(consensus(&three, listed(3, 2)).result.quorum_met);
    assert!(!consensus(&three, listed(3, 3)).result.quorum_met);
    assert!(!consensus(&three, listed(3, usize::MAX)).result.quorum_met);
}

#[test]
fn extreme_offsets_and_assumptions_do_not_overflow_or_cut_the_message() {
    let (a, b) = (key(1), key(2));
    let none = |listed| Ask {
        listed,
        max_liars: 0,
        quorum: 2,
    };
    let o = consensus(
        &[(&a, i64::MIN, i64::MAX), (&b, i64::MIN, i64::MAX)],
        none(2),
    );
    assert_eq!(o.interval(), (i64::MIN, i64::MAX));
    assert_eq!((o.result.midpoint_us, o.result.radius_us), (-1, i64::MAX));
    let o = consensus(&[(&a, i64::MIN, i64::MIN)], none(1));
    assert_eq!((o.interval(), o.result.regions), ((i64::MIN, i64::MIN), 1));
    // The largest numbers a message can hold, whole, with a key that
    // contradicted itself.
    let c = key(3);
    let apart = [(&a, 0, 10), (&b, 20, 30), (&c, 40, 50), (&a, 60, 70)];
    let most = usize::MAX;
    for (listed, max_liars) in [(most, 0), (most, most - 1), (most, most / 2), (3, most - 1)] {
        let o = consensus(
            &apart,
            Ask {
                listed,
                max_liars,
                quorum: most,
            },
        );
        let m = o.message();
        assert!(
            !m.ends_with('\u{2026}') && m.starts_with("no consensus"),
            "{m}"
        );
        assert!(m.contains(&most.to_string()), "{m}");
    }
    // The longest disagreement: the most answers, two stretches held by
    // 129 of 256 with 127 liars assumed, the widest radius.
    let keys: Vec<[u8; 32]> = (0..=255).map(key).collect();
    let split: Vec<(&[u8; 32], i64, i64)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| match i {
            0 | 1 => (k, i64::MIN, i64::MAX),
            i if i % 2 == 0 => (k, i64::MIN, -2),
            _ => (k, 0, i64::MAX),
        })
        .collect();
    let o = consensus(
        &split,
        Ask {
            listed: most,
            max_liars: 127,
            quorum: 1,
        },
    );
    let m = o.message();
    assert_eq!(o.result.regions, 2, "{m}");
    assert!(
        m.starts_with("the servers disagree: 129 of the 256 keys"),
        "{m}"
    );
    assert!(!m.ends_with('\u{2026}') && m.ends_with("255 needed"), "{m}");
}

#[test]
fn bad_arguments_are_codes_and_leave_the_verdicts_alone() {
    use GnomonError::*;
    let (a, b) = (key(1), key(2));
    let fine = vouches(&[(&a, 0, 10), (&b, 0, 10), (&a, 0, 10)]);
    let failed = |v: &[GnomonVouch], ask: Ask, want: GnomonError| {
        let o = call(v, ask);
        assert_eq!(o.code, want, "{}", o.message());
        let r = &o.result;
        assert!(!r.has_consensus && !r.quorum_met);
        assert_eq!(
            (r.low_us, r.high_us, r.midpoint_us, r.radius_us),
            (0, 0, 0, 0)
        );
        assert_eq!(o.keys(), (0, 0, 0, 0));
        assert_eq!(o.assumption(), (0, 0, 0));
        assert_eq!(r.regions, 0);
        assert!(o.verdicts.iter().all(|&v| v == GnomonVerdictNoConsensus));
        o.message()
    };
    failed(&[], listed(3, 1), GnomonErrEmpty);
    assert_eq!(
        failed(&fine, listed(3, 0), GnomonErrArgument),
        "a quorum of 0: at least one distinct key must agree"
    );
    // `listed` is required, and counts at least every key that answered.
    assert_eq!(
        failed(&fine, listed(0, 1), GnomonErrArgument),
        "listed is 0: pass how many distinct servers your list has, answered or not"
    );
    assert_eq!(
        failed(&fine, listed(1, 1), GnomonErrArgument),
        "the answers carry 2 distinct keys, more than the 1 listed: listed counts every \
         distinct server of your list, answered or not"
    );
    assert_eq!(call(&fine, listed(2, 1)).code, GnomonOk);
    let mut backwards = fine.clone();
    backwards[1].low_us = 11;
    assert_eq!(
        failed(&backwards, listed(3, 1), GnomonErrArgument),
        "answer 1: low_us 11 is above high_us 10"
    );
    let mut no_key = fine.clone();
    no_key[2].public_key = std::ptr::null();
    assert_eq!(
        failed(&no_key, listed(3, 1), GnomonErrNull),
        "answer 2: a required pointer is NULL"
    );
    let many = vec![fine[0]; GNOMON_MAX_ANSWERS + 1];
    assert_eq!(
        failed(&many, listed(3, 1), GnomonErrTooLong),
        "257 answers; at most 256 are taken"
    );
    // Exactly the most it takes: one key, one vote.
    let o = call(&many[1..], listed(3, 1));
    assert_eq!((o.code, o.keys()), (GnomonOk, (1, 0, 0, 0)));

    let mut r = empty_result();
    let null = std::ptr::null_mut();
    // SAFETY (each call): pointers valid or deliberately NULL or misaligned.
    let code = unsafe { gnomon_consensus(std::ptr::null(), 3, 3, AUTO, 1, null, &mut r) };
    assert_eq!((code, r.code), (GnomonErrNull, GnomonErrNull));
    let code = unsafe { gnomon_consensus(fine.as_ptr(), 3, 3, AUTO, 1, null, null.cast()) };
    assert_eq!(code, GnomonErrNull);
    // Verdicts are optional.
    let code = unsafe { gnomon_consensus(fine.as_ptr(), 3, 2, 0, 2, null, &mut r) };
    assert_eq!(
        (code, r.has_consensus, r.quorum_met),
        (GnomonOk, true, true)
    );
    // A verdict array that is not aligned for gnomon_verdict.
    let mut raw = [0u32; 8];
    let odd = raw
        .as_mut_ptr()
        .cast::<u8>()
        .wrapping_add(1)
        .cast::<GnomonVerdict>();
    let code = unsafe { gnomon_consensus(fine.as_ptr(), 3, 3, AUTO, 1, odd, &mut r) };
    assert_eq!(code, GnomonErrArgument);
    assert_eq!(raw, [0; 8], "nothing written through it");
}

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

// Every allocation made on this thread is counted: the library must make
// none. (The test harness allocates on its own threads.)
thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

struct Counting;

// SAFETY: every call is passed to the system allocator unchanged; the
// count is a thread-local Cell with a const initialiser and no destructor,
// so touching it never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// The no_std build's allocator refuses everything (src/lib.rs, NoHeap):
/// `gnomon_consensus` must not ask, at the most answers it takes and in
/// every outcome. Seen to fail with a `Vec` made inside gnomon_consensus.
#[test]
fn consensus_allocates_nothing() {
    use GnomonError::*;
    let keys: Vec<[u8; 32]> = (0..=255).map(key).collect();
    // The most answers, every one its own key, spread over a few offsets.
    let most: Vec<GnomonVouch> = (0..GNOMON_MAX_ANSWERS)
        .map(|i| GnomonVouch {
            public_key: keys[i].as_ptr(),
            low_us: (i as i64 % 7) * S,
            high_us: (i as i64 % 7) * S + 7 * S,
        })
        .collect();
    // Each with (listed, max_liars).
    let cases = [
        (most, (GNOMON_MAX_ANSWERS, AUTO)),
        // Issue 21 and a key contradicting itself, of five listed with two
        // liars assumed.
        (
            vouches(&[
                (&keys[1], -16 * S, 16 * S),
                (&keys[2], -60 * S, 60 * S),
                (&keys[3], -86 * S, -54 * S),
                (&keys[4], 0, 1),
                (&keys[4], 5, 6),
            ]),
            (5, 2),
        ),
        // No consensus; a failure.
        (vouches(&[(&keys[1], 0, 1), (&keys[2], 5, 6)]), (2, 0)),
        (vouches(&[(&keys[1], 1, 0)]), (1, AUTO)),
    ];
    let mut results = vec![empty_result(); cases.len()];
    let mut verdicts = vec![GnomonVerdictNoConsensus; GNOMON_MAX_ANSWERS];
    let before = ALLOCATIONS.with(Cell::get);
    let mut codes = [GnomonOk; 4];
    for (((case, (listed, liars)), result), code) in cases.iter().zip(&mut results).zip(&mut codes)
    {
        let (n, answers) = (case.len(), case.as_ptr());
        let v = verdicts.as_mut_ptr();
        // SAFETY: valid vouches, verdicts at least as long, a result.
        *code = unsafe { gnomon_consensus(answers, n, *listed, *liars, 2, v, result) };
    }
    let made = ALLOCATIONS.with(Cell::get) - before;
    assert_eq!(made, 0, "gnomon_consensus allocated {made} time(s)");
    assert_eq!(codes, [GnomonOk, GnomonOk, GnomonOk, GnomonErrArgument]);
    assert!(results[0].has_consensus && results[1].regions == 2 && !results[2].has_consensus);
    // The counter counts: this allocation is seen.
    let v = std::hint::black_box(vec![1u8; 10]);
    assert_eq!(ALLOCATIONS.with(Cell::get) - before, 1, "{v:?}");
}
