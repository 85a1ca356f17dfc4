use super::*;

const S: i128 = 1_000_000;

fn v(server: usize, low_us: i128, high_us: i128) -> Vouch {
    Vouch {
        server,
        low_us,
        high_us,
    }
}

/// Servers with the given keys, each on its own address.
fn list(keys: &[&str]) -> Electorate {
    let ids: Vec<Identity> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| Identity {
            key: k.as_bytes().to_vec(),
            addresses: vec![format!("127.0.0.1:{}", 1000 + i)],
            operator: None,
        })
        .collect();
    Electorate::new(&ids)
}

fn run(keys: &[&str], answers: &[Vouch], liars: Option<usize>) -> Agreement {
    let e = list(keys);
    agree(answers, &e, e.assume(liars))
}

#[test]
fn three_honest_and_a_liar_name_the_liar() {
    let hour = 3_600 * S;
    let a = run(
        &["a", "b", "c", "d"],
        &[
            v(0, -3 * S, 3 * S),
            v(1, -2 * S, 4 * S),
            v(2, hour - 3 * S, hour + 3 * S),
            v(3, -S, 5 * S),
            v(0, -5 * S / 2, 2 * S),
        ],
        None,
    );
    let c = a.consensus.as_ref().unwrap();
    assert_eq!((c.low_us, c.high_us), (-S, 2 * S));
    assert_eq!(c.agreeing, [0, 1, 3]);
    assert_eq!((c.answering, c.agreeing_voters), (4, 3));
    assert_eq!(a.flagged, [(2, Flag::OutsideConsensus)]);
    assert_eq!(a.regions, [(-S, 2 * S)]);
    assert!(a.disagreement().is_none() && a.why_none().is_none());
    assert_eq!(
        a.assumption_text(),
        "assumes at most 1 of the 4 listed servers lies; 4 answered, 3 needed"
    );
}

#[test]
fn silencing_the_honest_servers_leaves_no_consensus() {
    // Issue 33: 3 honest, 2 liars an hour ahead, the honest ones dropped.
    let hour = 3_600 * S;
    let a = run(
        &["h1", "h2", "h3", "l1", "l2"],
        &[v(3, hour - S, hour + S), v(4, hour - S, hour + S)],
        None,
    );
    assert_eq!(a.consensus, None);
    assert!(a.flagged.is_empty() && a.regions.is_empty());
    assert_eq!(
        a.none,
        Some(NoConsensus::TooFew {
            answered: 2,
            needed: 3
        })
    );
    let why = a.why_none().unwrap();
    assert!(
        why.contains("2 distinct server(s) answered, 3 needed"),
        "{why}"
    );
}

#[test]
fn a_short_list_says_how_to_trust_it() {
    let a = run(&["a", "b"], &[v(0, 0, 10), v(1, 5, 20)], None);
    assert_eq!(a.consensus, None);
    let why = a.why_none().unwrap();
    assert!(why.contains("--max-liars"), "{why}");
    let trusted = run(&["a", "b"], &[v(0, 0, 10), v(1, 5, 20)], Some(0));
    let c = trusted.consensus.unwrap();
    assert_eq!((c.low_us, c.high_us), (5, 10));
}

#[test]
fn one_liar_beside_a_wide_honest_server_moves_nothing_and_is_not_believed() {
    // Issue 21: honest ±16 s and ±60 s, a liar 70 s slow with ±16 s.
    let a = run(
        &["narrow", "wide", "liar"],
        &[
            v(0, -16 * S, 16 * S),
            v(1, -60 * S, 60 * S),
            v(2, -86 * S, -54 * S),
        ],
        None,
    );
    let c = a.consensus.as_ref().unwrap();
    assert_eq!((c.low_us, c.high_us), (-60 * S, 16 * S));
    assert!(a.flagged.is_empty(), "nobody is accused: {:?}", a.flagged);
    assert_eq!(a.regions, [(-60 * S, -54 * S), (-16 * S, 16 * S)]);
    let why = a.disagreement().unwrap();
    assert!(why.contains("disagree") && why.contains("-54.000"), "{why}");
}

#[test]
fn two_liars_of_five_assumed_make_the_consensus_wide_not_wrong() {
    let answers = [
        v(0, -16 * S, 16 * S),
        v(1, -60 * S, 60 * S),
        v(2, -60 * S, 60 * S),
        v(3, 54 * S, 86 * S),
        v(4, 54 * S, 86 * S),
    ];
    let keys = ["h16", "h60a", "h60b", "l1", "l2"];
    let a = run(&keys, &answers, Some(2));
    let c = a.consensus.unwrap();
    assert_eq!((c.low_us, c.high_us), (-16 * S, 60 * S));
    assert!(a.flagged.is_empty());
    // Assuming one liar while two lie, the assumption is broken and so is
    // the promise: the liars and the two wide honest servers hold [54, 60]
    // four times over, and that is the consensus (docs/CLIENT.md, "When
    // more than f lie").
    let a = run(&keys, &answers, None);
    let c = a.consensus.unwrap();
    assert_eq!((c.low_us, c.high_us), (54 * S, 60 * S));
    assert_eq!(a.flagged, [(0, Flag::OutsideConsensus)]);
}

#[test]
fn one_key_under_three_names_is_one_vote() {
    let a = run(
        &["a", "b", "c", "slow", "slow", "slow"],
        &[
            v(0, -S, S),
            v(1, -S, S),
            v(2, -S, S),
            v(3, -71 * S, -69 * S),
            v(4, -71 * S, -69 * S),
            v(5, -71 * S, -69 * S),
        ],
        None,
    );
    assert_eq!(a.assumption, Assumption::new(4, 1));
    let c = a.consensus.unwrap();
    assert_eq!((c.low_us, c.high_us, c.answering), (-S, S, 4));
    assert_eq!(
        a.flagged,
        [
            (3, Flag::OutsideConsensus),
            (4, Flag::OutsideConsensus),
            (5, Flag::OutsideConsensus)
        ]
    );
    assert_eq!(a.grouped, [vec![3, 4, 5]]);
    assert_eq!(a.grouped_because, ["shared key"]);
}

#[test]
fn one_machine_with_two_identities_is_one_vote_and_its_contradiction_is_proven() {
    // Issue 33: an Ed25519 and an ML-DSA-44 identity on one port, lying,
    // beside two honest machines. Counted twice it was two of four.
    let ids = [
        ("h1", "127.0.0.1:1"),
        ("h2", "127.0.0.1:2"),
        ("ed", "127.0.0.1:3"),
        ("pq", "127.0.0.1:3"),
    ]
    .map(|(k, addr)| Identity {
        key: k.as_bytes().to_vec(),
        addresses: vec![addr.into()],
        operator: None,
    });
    let e = Electorate::new(&ids);
    assert_eq!(e.voters(), 3);
    let a = agree(
        &[
            v(0, -2 * S, 2 * S),
            v(1, -S, 3 * S),
            v(2, 8 * S, 12 * S),
            v(3, 9 * S, 13 * S),
        ],
        &e,
        Assumption::new(3, 1),
    );
    let c = a.consensus.unwrap();
    assert_eq!((c.low_us, c.high_us), (-S, 2 * S));
    assert_eq!(
        a.flagged,
        [(2, Flag::OutsideConsensus), (3, Flag::OutsideConsensus)]
    );
    assert_eq!(a.grouped, [vec![2, 3]]);
    // Its two identities disagreeing with each other is its own proof.
    let a = agree(
        &[
            v(0, -2 * S, 2 * S),
            v(1, -S, 3 * S),
            v(2, -S, S),
            v(3, 20 * S, 21 * S),
        ],
        &e,
        Assumption::new(3, 1),
    );
    assert_eq!(
        a.flagged,
        [(2, Flag::SelfContradiction), (3, Flag::SelfContradiction)]
    );
    // Proven, it was the one liar: the other two are trusted (f − 1 = 0).
    let c = a.consensus.unwrap();
    assert_eq!((c.low_us, c.high_us, c.answering), (-S, 2 * S, 2));
}

#[test]
fn a_key_that_contradicts_itself_is_flagged_and_does_not_vote() {
    let e = {
        let ids: Vec<Identity> = ["x", "b", "c", "x"]
            .iter()
            .enumerate()
            .map(|(i, k)| Identity {
                key: k.as_bytes().to_vec(),
                addresses: vec![format!("h:{i}")],
                operator: None,
            })
            .collect();
        Electorate::new(&ids)
    };
    let a = agree(
        &[v(0, 0, 10), v(3, 20, 30), v(1, 0, 10), v(2, 5, 15)],
        &e,
        Assumption::new(3, 1),
    );
    assert_eq!(
        a.flagged,
        [(0, Flag::SelfContradiction), (3, Flag::SelfContradiction)]
    );
    let c = a.consensus.unwrap();
    assert_eq!((c.low_us, c.high_us, c.answering), (5, 10, 2));
}

#[test]
fn answers_of_servers_outside_the_list_are_ignored() {
    let a = run(&["a"], &[v(0, 0, 10), v(7, 100, 110)], Some(0));
    let c = a.consensus.unwrap();
    assert_eq!((c.low_us, c.high_us, c.answering), (0, 10, 1));
}

#[test]
fn regions_are_the_stretches_held_by_enough() {
    let spans = [
        Span { low: 0, high: 10 },
        Span { low: 10, high: 20 },
        Span { low: 10, high: 30 },
    ];
    assert_eq!(
        regions(spans.into_iter(), Assumption::new(3, 1)),
        [(10, 20)]
    );
    let spans = [Span { low: 0, high: 0 }, Span { low: 0, high: 0 }];
    assert_eq!(regions(spans.into_iter(), Assumption::new(2, 0)), [(0, 0)]);
}
