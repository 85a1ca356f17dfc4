//! Servers that lie, alone or helped by a relay that drops answers: the
//! quorum rule over the pinned servers and the policy's limits.

use super::*;

/// The attack the assumption about the pinned keys is for: one liar among
/// three pinned keys, and a relay that drops the honest answer the liar's
/// interval misses. The two keys left agree on the liar's side of an
/// honest wide interval; a device that assumed nobody lies would take it,
/// the default (one liar of three: all three must be in the bundle)
/// refuses.
#[test]
fn a_relay_that_drops_an_honest_key_to_help_a_liar_is_refused() {
    let servers = relay::servers(3);
    let mut asks = relay::honest(3, T0, GAP_US);
    // Server 0 honest and wide (±30 s); server 1 lies 20 s ahead with a
    // narrow radius, inside server 0's interval; server 2 honest and narrow.
    for a in asks.iter_mut() {
        match a.server {
            0 => a.radius_us = 30_000_000,
            1 => a.midpoint_us += 20_000_000,
            _ => {}
        }
    }
    let proof = relay::proof(&servers, D, &asks, 0);
    let keys = rfc_keys(&servers);
    // The relay keeps servers 0 and 1 only: their first pass.
    let bundle = rebuilt(&proof, |r| r.entries.truncate(2));
    let two = ProofPolicy {
        max_liars: Some(0),
        max_radius_us: None,
        ..ProofPolicy::default()
    };
    let mut ws = ProofWorkspace::new();
    let fooled = verify_proof(&bundle, D, &keys, ELAPSED_US, &two, &mut ws).unwrap();
    assert!(
        !holds_true_now(&fooled),
        "the attack did not work: {fooled:?}"
    );
    assert_eq!(
        verify(&bundle, D, &keys),
        Err(ProofError::TooFewKeys {
            present: 2,
            needed: 3,
            assumption: Assumption::new(3, 1),
        })
    );
    // With all three, the chain shows the lie: the liar's answer, 20 s
    // ahead, comes before an honest narrow one that says otherwise.
    let bundle = proof.to_binary();
    let all = verify(&bundle, D, &keys);
    assert!(
        matches!(all, Err(ProofError::Contradiction { earlier: 1, .. })),
        "{all:?}"
    );
}

/// Four servers, twice; server `liar` signs `lie_us` instead of the time.
fn with_liar(liar: usize, lie_us: u64) -> (Vec<Server>, Proof) {
    let servers = relay::servers(4);
    let mut asks = relay::honest(4, T0, GAP_US);
    for a in asks.iter_mut().filter(|a| a.server == liar) {
        a.midpoint_us = lie_us;
    }
    let proof = relay::proof(&servers, D, &asks, 0);
    (servers, proof)
}

#[test]
fn a_minority_liar_is_named_and_the_majority_interval_still_given() {
    // One pass over four servers; the first is a minute slow. Nothing came
    // before it, so no causal pair names it, but it misses the majority.
    let servers = relay::servers(4);
    let mut asks = relay::honest(4, T0, GAP_US);
    asks.truncate(4);
    asks[0].midpoint_us = T0 - 60_000_000;
    let proof = relay::proof(&servers, D, &asks, 0);
    let err = verify(&proof.to_binary(), D, &rfc_keys(&servers)).unwrap_err();
    let ProofError::Liar { liars, majority } = err else {
        panic!("{err:?}")
    };
    assert!(err.is_malfeasance());
    assert_eq!(liars, EntrySet(1));
    assert_eq!(liars.iter().collect::<Vec<_>>(), [0]);
    let p = majority.expect("the honest majority meets the policy");
    assert!(holds_true_now(&p), "{p:?}");
    assert_eq!((p.agreeing_keys, p.answering_keys), (3, 4));
}

#[test]
fn a_causal_contradiction_is_proof_of_malfeasance() {
    // The first server is an hour ahead: every later honest answer ends
    // before its interval begins.
    let (servers, proof) = with_liar(0, T0 + HOUR_US - 10_000_000);
    let err = verify(&proof.to_binary(), D, &rfc_keys(&servers)).unwrap_err();
    let ProofError::Contradiction {
        earlier,
        later,
        majority,
    } = err
    else {
        panic!("{err:?}")
    };
    assert_eq!((earlier, later), (0, 1));
    assert!(holds_true_now(&majority.expect("honest majority")));
}

#[test]
fn a_key_that_contradicts_itself_is_a_liar() {
    // Server 2 answers honestly, then far in the future: its two
    // intervals for now do not meet.
    let servers = relay::servers(3);
    let mut asks = relay::honest(3, T0, GAP_US);
    asks[5].midpoint_us = T0 + HOUR_US - 10_000_000;
    let proof = relay::proof(&servers, D, &asks, 0);
    let err = verify(&proof.to_binary(), D, &rfc_keys(&servers)).unwrap_err();
    let ProofError::Liar { liars, majority } = err else {
        panic!("{err:?}")
    };
    assert_eq!(liars.iter().collect::<Vec<_>>(), [2, 5]);
    let p = majority.unwrap();
    assert_eq!((p.agreeing_keys, p.answering_keys), (2, 2));
    assert!(holds_true_now(&p));
}

#[test]
fn two_disagreeing_keys_are_no_quorum() {
    let servers = relay::servers(2);
    // One pass: the later answer is an hour ahead, which no causal pair
    // catches, and one key against one is no majority.
    let mut asks = relay::honest(2, T0, GAP_US);
    asks.truncate(2);
    asks[1].midpoint_us = T0 + HOUR_US - 10_000_000;
    let proof = relay::proof(&servers, D, &asks, 0);
    assert_eq!(
        verify(&proof.to_binary(), D, &rfc_keys(&servers)),
        Err(ProofError::NoQuorum {
            agreeing: 0,
            needed: 2
        })
    );
}

#[test]
fn a_wide_consensus_is_too_wide() {
    let servers = relay::servers(3);
    let mut asks = relay::honest(3, T0, GAP_US);
    for a in &mut asks {
        a.radius_us = 30_000_000;
    }
    let proof = relay::proof(&servers, D, &asks, 0);
    let keys = rfc_keys(&servers);
    assert!(matches!(
        verify(&proof.to_binary(), D, &keys),
        Err(ProofError::TooWide { radius_us }) if radius_us > 30_000_000
    ));
    let mut ws = ProofWorkspace::new();
    let open = ProofPolicy {
        max_radius_us: None,
        ..ProofPolicy::default()
    };
    let p = verify_proof(&proof.to_binary(), D, &keys, ELAPSED_US, &open, &mut ws).unwrap();
    assert!(holds_true_now(&p));
}
