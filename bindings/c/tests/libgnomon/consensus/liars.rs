//! Liars and the assumption: issue 21's wide honest server beside a liar,
//! a liar named among honest servers, issue 33's drop attack, and the
//! default number of liars a list assumes.

use gnomon::*;

use super::{consensus, key, listed, Ask, HOUR, S};

use GnomonVerdict::*;

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
