//! Who votes: one vote per distinct key, a key that contradicts itself,
//! answers sharing no offset, and the quorum of distinct agreeing keys.

use gnomon::*;

use super::{consensus, key, listed, Ask, S};

use GnomonVerdict::*;

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
