//! `gnomon_consensus`, called from Rust as C calls it: issue 21's cases,
//! one vote per distinct key, the quorum, every argument check; the same
//! verdicts as `gnomon_client::consensus::agree` (the rule `gnomon sync`,
//! `gnomon query --servers` and the Python package use) on thousands of
//! random answer sets; and no allocation at all.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::CStr;

use gnomon::*;
use gnomon_client::consensus::{agree, Flag, Vouch};

use GnomonVerdict::*;

const S: i64 = 1_000_000;

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
        message: [0; GNOMON_MESSAGE_LEN],
    }
}

fn call(vouches: &[GnomonVouch], quorum: usize) -> Outcome {
    let mut result = empty_result();
    // Each slot starts as a value the call must overwrite or leave alone.
    let mut verdicts = vec![GnomonVerdictNoConsensus; vouches.len()];
    // SAFETY: `vouches` holds valid key pointers; `verdicts` as long.
    let code = unsafe {
        gnomon_consensus(
            vouches.as_ptr(),
            vouches.len(),
            quorum,
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

fn consensus(answers: &Answers<'_>, quorum: usize) -> Outcome {
    let o = call(&vouches(answers), quorum);
    assert_eq!(o.code, GnomonError::GnomonOk, "{}", o.message());
    o
}

fn key(n: u8) -> [u8; 32] {
    [n; 32]
}

#[test]
fn issue_21_a_liar_beside_a_wide_honest_server_moves_nothing_and_is_not_believed() {
    // Honest ±16 s and ±60 s, a liar 70 s slow with ±16 s: the liar and
    // the wide server make a second majority stretch; the consensus spans
    // both, so it holds the truth and comes out wide, and nobody is named.
    let (narrow, wide, liar) = (key(1), key(2), key(3));
    let o = consensus(
        &[
            (&narrow, -16 * S, 16 * S),
            (&wide, -60 * S, 60 * S),
            (&liar, -86 * S, -54 * S),
        ],
        2,
    );
    assert_eq!(o.interval(), (-60 * S, 16 * S));
    assert_eq!(
        (o.result.midpoint_us, o.result.radius_us),
        (-22 * S, 38 * S)
    );
    assert_eq!(o.verdicts, [GnomonVerdictAgrees; 3], "nobody is flagged");
    assert_eq!(o.result.regions, 2);
    assert_eq!(o.keys(), (3, 3, 0, 0));
    assert!(o.result.quorum_met);
    let m = o.message();
    assert!(m.contains("disagree") && m.contains("±38.000 s"), "{m}");
}

#[test]
fn a_narrow_liar_among_narrow_honest_servers_is_outside() {
    let keys = [key(1), key(2), key(3), key(4)];
    let o = consensus(
        &[
            (&keys[0], -16 * S, 16 * S),
            (&keys[1], -15 * S, 17 * S),
            (&keys[2], -17 * S, 15 * S),
            (&keys[3], 54 * S, 86 * S),
        ],
        3,
    );
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
    assert_eq!(o.message(), "success");
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
        2,
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
    let o = consensus(&[(&a, 0, 10), (&a, 5, 20), (&b, 0, 10)], 2);
    assert_eq!((o.interval(), o.keys()), ((5, 10), (2, 2, 0, 0)));
    let o = consensus(&[(&a, 0, 10), (&a, 5, 20), (&a, 11, 30), (&b, 0, 10)], 1);
    assert_eq!(o.keys(), (1, 1, 0, 1));
    assert_eq!(o.verdicts[..3], [GnomonVerdictSelfContradiction; 3]);
    assert_eq!(o.verdicts[3], GnomonVerdictAgrees);
}

#[test]
fn a_key_that_contradicts_itself_is_named_and_does_not_vote() {
    let (x, b, c) = (key(1), key(2), key(3));
    let o = consensus(&[(&x, 0, 10), (&b, 0, 10), (&c, 5, 15), (&x, 20, 30)], 2);
    assert_eq!(o.interval(), (5, 10));
    assert_eq!(o.keys(), (2, 2, 0, 1));
    assert_eq!(
        o.verdicts,
        [
            GnomonVerdictSelfContradiction,
            GnomonVerdictAgrees,
            GnomonVerdictAgrees,
            GnomonVerdictSelfContradiction
        ]
    );
}

#[test]
fn without_a_strict_majority_there_is_no_consensus() {
    let (a, b, c, d) = (key(1), key(2), key(3), key(4));
    for answers in [
        &[(&a, 0, 10), (&b, 100, 110)][..],
        &[(&a, 0, 10), (&b, 5, 20), (&c, 100, 110), (&d, 200, 210)][..],
    ] {
        let o = consensus(answers, 1);
        assert!(!o.result.has_consensus && !o.result.quorum_met);
        assert_eq!(
            (o.result.low_us, o.result.high_us, o.result.regions),
            (0, 0, 0)
        );
        assert!(o.verdicts.iter().all(|&v| v == GnomonVerdictNoConsensus));
        assert_eq!(o.keys().0, answers.len());
        assert!(o.message().starts_with("no consensus"), "{}", o.message());
    }
    // A key that contradicts itself is still named without a consensus.
    let o = consensus(&[(&a, 0, 10), (&a, 20, 30), (&b, 0, 10), (&c, 50, 60)], 1);
    assert!(!o.result.has_consensus);
    assert_eq!(o.verdicts[0], GnomonVerdictSelfContradiction);
    assert_eq!(o.verdicts[2], GnomonVerdictNoConsensus);
}

#[test]
fn the_quorum_counts_distinct_agreeing_keys() {
    let (a, b, c) = (key(1), key(2), key(3));
    // One key under two names: one agreeing key.
    let one = [(&a, -S, S), (&a, -S, S)];
    let o = consensus(&one, 2);
    assert!(o.result.has_consensus && !o.result.quorum_met);
    assert_eq!(
        o.message(),
        "1 distinct key(s) agree, fewer than the quorum of 2"
    );
    assert!(consensus(&one, 1).result.quorum_met);
    // Three keys, one outside: two agree.
    let three = [(&a, -S, S), (&b, -S, S), (&c, 50 * S, 52 * S)];
    assert!(consensus(&three, 2).result.quorum_met);
    assert!(!consensus(&three, 3).result.quorum_met);
    assert!(!consensus(&three, usize::MAX).result.quorum_met);
}

#[test]
fn extreme_offsets_do_not_overflow() {
    let (a, b) = (key(1), key(2));
    let o = consensus(&[(&a, i64::MIN, i64::MAX), (&b, i64::MIN, i64::MAX)], 2);
    assert_eq!(o.interval(), (i64::MIN, i64::MAX));
    assert_eq!((o.result.midpoint_us, o.result.radius_us), (-1, i64::MAX));
    let o = consensus(&[(&a, i64::MIN, i64::MIN)], 1);
    assert_eq!((o.interval(), o.result.regions), ((i64::MIN, i64::MIN), 1));
}

#[test]
fn bad_arguments_are_codes_and_leave_the_verdicts_alone() {
    use GnomonError::*;
    let (a, b) = (key(1), key(2));
    let fine = vouches(&[(&a, 0, 10), (&b, 0, 10), (&a, 0, 10)]);
    let failed = |v: &[GnomonVouch], quorum: usize, want: GnomonError| {
        let o = call(v, quorum);
        assert_eq!(o.code, want, "{}", o.message());
        let r = &o.result;
        assert!(!r.has_consensus && !r.quorum_met);
        assert_eq!(
            (r.low_us, r.high_us, r.midpoint_us, r.radius_us),
            (0, 0, 0, 0)
        );
        assert_eq!(o.keys(), (0, 0, 0, 0));
        assert_eq!(r.regions, 0);
        assert!(o.verdicts.iter().all(|&v| v == GnomonVerdictNoConsensus));
        o.message()
    };
    failed(&[], 1, GnomonErrEmpty);
    assert_eq!(
        failed(&fine, 0, GnomonErrArgument),
        "a quorum of 0: at least one distinct key must agree"
    );
    let mut backwards = fine.clone();
    backwards[1].low_us = 11;
    assert_eq!(
        failed(&backwards, 1, GnomonErrArgument),
        "answer 1: low_us 11 is above high_us 10"
    );
    let mut no_key = fine.clone();
    no_key[2].public_key = std::ptr::null();
    assert_eq!(
        failed(&no_key, 1, GnomonErrNull),
        "answer 2: a required pointer is NULL"
    );
    let many = vec![fine[0]; GNOMON_MAX_ANSWERS + 1];
    assert_eq!(
        failed(&many, 1, GnomonErrTooLong),
        "257 answers; at most 256 are taken"
    );
    // Exactly the most it takes: one key, one vote.
    let o = call(&many[1..], 1);
    assert_eq!((o.code, o.keys()), (GnomonOk, (1, 1, 0, 0)));

    let mut r = empty_result();
    // SAFETY (each call): pointers valid or deliberately NULL or misaligned.
    let code = unsafe { gnomon_consensus(std::ptr::null(), 3, 1, std::ptr::null_mut(), &mut r) };
    assert_eq!((code, r.code), (GnomonErrNull, GnomonErrNull));
    let code = unsafe {
        gnomon_consensus(
            fine.as_ptr(),
            3,
            1,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(code, GnomonErrNull);
    // Verdicts are optional.
    let code = unsafe { gnomon_consensus(fine.as_ptr(), 3, 2, std::ptr::null_mut(), &mut r) };
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
    let code = unsafe { gnomon_consensus(fine.as_ptr(), 3, 1, odd, &mut r) };
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
/// function's terms.
fn by_the_client(answers: &Answers<'_>) -> (Option<(i64, i64)>, Vec<GnomonVerdict>, [usize; 5]) {
    let v: Vec<Vouch<'_>> = answers
        .iter()
        .enumerate()
        .map(|(i, &(key, low, high))| Vouch {
            server: i,
            key,
            low_us: low.into(),
            high_us: high.into(),
        })
        .collect();
    let a = agree(&v);
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
        c.map_or(0, |c| c.answering),
        c.map_or(0, |c| c.agreeing_keys),
        distinct(Flag::OutsideConsensus),
        distinct(Flag::SelfContradiction),
        a.regions.len(),
    ];
    let hull = c.map(|c| (c.low_us as i64, c.high_us as i64));
    (hull, verdicts, counts)
}

#[test]
fn the_same_verdicts_as_the_clients_rule_on_random_answers() {
    let keys: Vec<[u8; 32]> = (0..6).map(key).collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut seen, mut split) = ([0usize; 4], 0);
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
        let quorum = 1 + rng.below(4) as usize;
        let o = consensus(&answers, quorum);
        let (hull, verdicts, counts) = by_the_client(&answers);
        let r = &o.result;
        let what = format!("case {case}: {answers:?}");
        assert_eq!(
            r.has_consensus.then_some((r.low_us, r.high_us)),
            hull,
            "{what}"
        );
        assert_eq!(o.verdicts, verdicts, "{what}");
        // Without a consensus the client counts no voters; C still does.
        let voting = if r.has_consensus { r.voting_keys } else { 0 };
        assert_eq!(
            [
                voting,
                r.agreeing_keys,
                r.outside_keys,
                r.contradicting_keys,
                r.regions
            ],
            counts,
            "{what}"
        );
        assert_eq!(
            r.quorum_met,
            hull.is_some() && counts[1] >= quorum,
            "{what}"
        );
        for v in &o.verdicts {
            seen[*v as usize] += 1;
        }
        split += usize::from(r.regions > 1);
    }
    // Every verdict came up, many times, and disagreeing majorities too.
    assert!(seen.iter().all(|&n| n > 100), "{seen:?}");
    assert!(split > 20, "{split} cases with more than one region");
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
            high_us: (i as i64 % 7) * S + 3 * S,
        })
        .collect();
    let cases = [
        most,
        // Issue 21 and a key contradicting itself.
        vouches(&[
            (&keys[1], -16 * S, 16 * S),
            (&keys[2], -60 * S, 60 * S),
            (&keys[3], -86 * S, -54 * S),
            (&keys[4], 0, 1),
            (&keys[4], 5, 6),
        ]),
        // No consensus; a failure.
        vouches(&[(&keys[1], 0, 1), (&keys[2], 5, 6)]),
        vouches(&[(&keys[1], 1, 0)]),
    ];
    let mut results = vec![empty_result(); cases.len()];
    let mut verdicts = vec![GnomonVerdictNoConsensus; GNOMON_MAX_ANSWERS];
    let before = ALLOCATIONS.with(Cell::get);
    let mut codes = [GnomonOk; 4];
    for ((case, result), code) in cases.iter().zip(&mut results).zip(&mut codes) {
        // SAFETY: valid vouches, verdicts at least as long, a result.
        *code = unsafe {
            gnomon_consensus(case.as_ptr(), case.len(), 2, verdicts.as_mut_ptr(), result)
        };
    }
    let made = ALLOCATIONS.with(Cell::get) - before;
    assert_eq!(made, 0, "gnomon_consensus allocated {made} time(s)");
    assert_eq!(codes, [GnomonOk, GnomonOk, GnomonOk, GnomonErrArgument]);
    assert!(results[0].has_consensus && results[1].regions == 2 && !results[2].has_consensus);
    // The counter counts: this allocation is seen.
    let v = std::hint::black_box(vec![1u8; 10]);
    assert_eq!(ALLOCATIONS.with(Cell::get) - before, 1, "{v:?}");
}
