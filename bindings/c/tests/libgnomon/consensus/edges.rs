//! The edges: the largest offsets and assumptions, whole in the message,
//! and every bad argument a code that leaves the verdicts alone.

use gnomon::*;

use super::{call, consensus, empty_result, key, listed, vouches, Ask, AUTO};

use GnomonVerdict::*;

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
