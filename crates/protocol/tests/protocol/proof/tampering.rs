//! A relay that replays, forges, reorders, drops or truncates: each is
//! refused with its own error.

use super::*;

#[test]
fn another_devices_or_a_replayed_bundle_is_wrong_nonce() {
    let (servers, proof) = honest();
    let keys = rfc_keys(&servers);
    assert_eq!(
        verify(&proof.to_binary(), OTHER, &keys),
        Err(ProofError::WrongNonce)
    );
    // A bundle made earlier for this device's previous nonce.
    let old = relay::proof(
        &servers,
        OTHER,
        &relay::honest(3, T0 - HOUR_US / 2, GAP_US),
        1,
    );
    assert_eq!(
        verify(&old.to_binary(), D, &keys),
        Err(ProofError::WrongNonce)
    );
}

#[test]
fn a_bundle_claiming_the_device_value_over_another_chain_is_a_broken_binding() {
    let servers = relay::servers(3);
    let other = relay::proof(&servers, OTHER, &relay::honest(3, T0, GAP_US), 0);
    let mut bundle = other.to_binary();
    let at = find(&bundle, OTHER);
    bundle[at..at + D.len()].copy_from_slice(D);
    assert_eq!(
        verify(&bundle, D, &rfc_keys(&servers)),
        Err(ProofError::Binding)
    );
    // So is a first rand that was not the one used.
    let (servers, proof) = honest();
    let bundle = rebuilt(&proof, |r| r.entries[0].rand.as_mut().unwrap()[3] ^= 1);
    assert_eq!(
        verify(&bundle, D, &rfc_keys(&servers)),
        Err(ProofError::Binding)
    );
}

#[test]
fn an_unpinned_key_is_refused() {
    let (servers, proof) = honest();
    let keys = [
        servers[0].public(Profile::rfc()),
        servers[2].public(Profile::rfc()),
    ];
    assert_eq!(
        verify(&proof.to_binary(), D, &keys),
        Err(ProofError::UnknownKey(1))
    );
}

#[test]
fn a_forged_signature_is_refused() {
    let (servers, proof) = honest();
    // Edited after the fact, an answer the next request was chained from
    // breaks that link first: links are checked before any signature
    // (the last answer has no next link; a forgery chained from is its
    // own signature error, tests/proof/order.rs).
    for (k, want) in [
        (0, ProofError::Link(1)),
        (3, ProofError::Link(4)),
        (5, ProofError::Signature(5)),
    ] {
        let mut bundle = proof.to_binary();
        let response = &proof.report().entries[k].response;
        let at = find(&bundle, response) + srep_sig_offset(response) + 9;
        bundle[at] ^= 0x20;
        assert_eq!(
            verify(&bundle, D, &rfc_keys(&servers)),
            Err(want),
            "entry {k}"
        );
    }
    // A valid answer under an unpinned identity that claims a pinned key:
    // at the end, its signature; in the middle, the next link first.
    let impostor = relay::servers(4).pop().unwrap();
    for (k, want) in [(5, ProofError::Signature(5)), (1, ProofError::Link(2))] {
        let bundle = rebuilt(&proof, |r| {
            let request = r.entries[k].request.clone();
            let ask = Ask {
                server: 0,
                profile: Profile::rfc(),
                midpoint_us: T0,
                radius_us: RADIUS_US,
            };
            r.entries[k].response = relay::answer(&impostor, &ask, &request);
        });
        assert_eq!(
            verify(&bundle, D, &rfc_keys(&servers)),
            Err(want),
            "entry {k}"
        );
    }
}

#[test]
fn a_swapped_or_transplanted_answer_is_not_for_the_request() {
    let (servers, proof) = honest();
    let keys = rfc_keys(&servers);
    // Entries 2 and 5 are the same server: each answer is validly signed.
    // The last entry has no next link, so its answer's own check refuses it.
    let bundle = rebuilt(&proof, |r| {
        r.entries[5].response = r.entries[2].response.clone();
    });
    assert_eq!(verify(&bundle, D, &keys), Err(ProofError::NotForRequest(5)));
    // Swapped: request 1 was chained from the answer that was at 0, and
    // links are checked before any answer (it was NotForRequest(0) when the
    // answers came first).
    let bundle = rebuilt(&proof, |r| {
        let a = r.entries[0].response.clone();
        r.entries[0].response = r.entries[3].response.clone();
        r.entries[3].response = a;
    });
    assert_eq!(verify(&bundle, D, &keys), Err(ProofError::Link(1)));
    // From another bundle, for another device: last, and in the middle
    // (where the next link breaks first; it was NotForRequest(2)).
    let other = relay::proof(&servers, OTHER, &relay::honest(3, T0, GAP_US), 7);
    let bundle = rebuilt(&proof, |r| {
        r.entries[5].response = other.report().entries[5].response.clone();
    });
    assert_eq!(verify(&bundle, D, &keys), Err(ProofError::NotForRequest(5)));
    let bundle = rebuilt(&proof, |r| {
        r.entries[2].response = other.report().entries[2].response.clone();
    });
    assert_eq!(verify(&bundle, D, &keys), Err(ProofError::Link(3)));
}

#[test]
fn a_broken_link_or_reordered_entries_are_link_errors() {
    let (servers, proof) = honest();
    let keys = rfc_keys(&servers);
    let bundle = rebuilt(&proof, |r| r.entries[4].rand.as_mut().unwrap()[0] ^= 1);
    assert_eq!(verify(&bundle, D, &keys), Err(ProofError::Link(4)));
    let bundle = rebuilt(&proof, |r| r.entries.swap(2, 3));
    assert_eq!(verify(&bundle, D, &keys), Err(ProofError::Link(2)));
    // A dropped middle entry breaks the link after the gap.
    let bundle = rebuilt(&proof, |r| {
        r.entries.remove(2);
    });
    assert_eq!(verify(&bundle, D, &keys), Err(ProofError::Link(2)));
    // A duplicated entry does not chain from itself.
    let bundle = rebuilt(&proof, |r| {
        let e = r.entries[1].clone();
        r.entries.insert(1, e);
    });
    assert_eq!(verify(&bundle, D, &keys), Err(ProofError::Link(2)));
    // A dropped head breaks the binding.
    let bundle = rebuilt(&proof, |r| {
        r.entries.remove(0);
    });
    assert_eq!(verify(&bundle, D, &keys), Err(ProofError::Binding));
}

#[test]
fn a_dropped_tail_leaves_too_few_keys_or_a_valid_shorter_proof() {
    let (servers, proof) = honest();
    let keys = rfc_keys(&servers);
    // Two of three keys left: the default (one of three may lie) wants all
    // three, since a relay that drops answers picks which keys vote.
    let bundle = rebuilt(&proof, |r| r.entries.truncate(2));
    assert_eq!(
        verify(&bundle, D, &keys),
        Err(ProofError::TooFewKeys {
            present: 2,
            needed: 3,
            assumption: Assumption::new(3, 1),
        })
    );
    let two = ProofPolicy {
        max_liars: Some(0),
        ..ProofPolicy::default()
    };
    let mut ws = ProofWorkspace::new();
    let p = verify_proof(&bundle, D, &keys, ELAPSED_US, &two, &mut ws).unwrap();
    assert!(holds_true_now(&p));
    assert_eq!(p.answering_keys, 2);
    // Assuming nobody lies, one key is enough; a quorum of two is not met.
    let bundle = rebuilt(&proof, |r| r.entries.truncate(1));
    let p = verify_proof(&bundle, D, &keys, ELAPSED_US, &two, &mut ws).unwrap();
    assert_eq!(p.answering_keys, 1);
    let quorum = ProofPolicy { quorum: 2, ..two };
    assert_eq!(
        verify_proof(&bundle, D, &keys, ELAPSED_US, &quorum, &mut ws),
        Err(ProofError::NoQuorum {
            agreeing: 1,
            needed: 2
        })
    );
    // Two liars assumed of three pinned: no bundle can ever be enough.
    let never = ProofPolicy {
        max_liars: Some(2),
        ..ProofPolicy::default()
    };
    assert_eq!(
        verify_proof(&proof.to_binary(), D, &keys, ELAPSED_US, &never, &mut ws),
        Err(ProofError::TooFewKeys {
            present: 3,
            needed: 5,
            assumption: Assumption::new(3, 2),
        })
    );
}

#[test]
fn every_truncation_is_truncated_never_a_panic() {
    let (servers, proof) = honest();
    let bundle = proof.to_binary();
    let keys = rfc_keys(&servers);
    for len in 0..bundle.len() {
        match verify(&bundle[..len], D, &keys) {
            Err(ProofError::Truncated) | Err(ProofError::Malformed(_)) => {}
            other => panic!("cut at {len}: {other:?}"),
        }
    }
}

#[test]
fn trailing_bytes_bad_magic_and_unknown_versions_are_refused() {
    let (servers, proof) = honest();
    let keys = rfc_keys(&servers);
    let bundle = proof.to_binary();
    let mut longer = bundle.clone();
    longer.push(0);
    assert_eq!(
        verify(&longer, D, &keys),
        Err(ProofError::Malformed("trailing bytes"))
    );
    let mut magic = bundle.clone();
    magic[0] = b'X';
    assert_eq!(
        verify(&magic, D, &keys),
        Err(ProofError::Malformed("magic"))
    );
    let mut version = bundle.clone();
    version[4] = 2;
    assert_eq!(
        verify(&version, D, &keys),
        Err(ProofError::UnknownFormat(2))
    );
    for n in [0, MAX_PROOF_ENTRIES as u8 + 1] {
        let mut count = bundle.clone();
        count[5] = n;
        assert_eq!(
            verify(&count, D, &keys),
            Err(ProofError::Malformed("entry count"))
        );
    }
    for d in [0, MAX_DEVICE_VALUE as u8 + 1] {
        let mut device = bundle.clone();
        device[6] = d;
        assert_eq!(
            verify(&device, D, &keys),
            Err(ProofError::DeviceValueLength(usize::from(d)))
        );
    }
    // A stored request head that ends in zero: not the writer's encoding.
    let view = ProofView::parse(&bundle).unwrap();
    let head = view.entries()[0].request_head;
    let at = find(&bundle, head) - 2;
    let mut untrimmed = bundle.clone();
    let stored = u16::from_le_bytes([bundle[at], bundle[at + 1]]) + 1;
    untrimmed[at..at + 2].copy_from_slice(&stored.to_le_bytes());
    untrimmed.insert(at + 2 + head.len(), 0);
    assert_eq!(
        verify(&untrimmed, D, &keys),
        Err(ProofError::Malformed("stored request not trimmed"))
    );
}

#[test]
fn any_other_verification_failure_is_a_response_error() {
    // INDX is outside the signature: one past a batch of one has bits past
    // PATH's depth. In the last answer (no next link to break first: in
    // entry 1 it is Link(2), it was Response(1, _) when answers came
    // first; tests/proof/order.rs has one chained from).
    let (servers, proof) = honest();
    for (k, link) in [(5, None), (1, Some(2))] {
        let mut bundle = proof.to_binary();
        let response = &proof.report().entries[k].response;
        let body = wire::unframe(response).unwrap();
        let indx = Message::parse(body).unwrap().get(Tag::INDX).unwrap();
        let at = find(&bundle, response) + (indx.as_ptr() as usize - response.as_ptr() as usize);
        bundle[at] = 1;
        let got = verify(&bundle, D, &rfc_keys(&servers));
        match link {
            None => assert!(
                matches!(got, Err(ProofError::Response(i, VerifyError::Path(_))) if i == k),
                "{got:?}"
            ),
            Some(i) => assert_eq!(got, Err(ProofError::Link(i))),
        }
    }
}

#[test]
fn the_workspace_and_the_view_are_small() {
    // docs/PROOF.md states these sizes for firmware builds (64-bit host).
    let ws = size_of::<ProofWorkspace>();
    let view = size_of::<ProofView<'_>>();
    assert!(ws <= 2_600, "{ws}");
    assert!(view <= 1_400, "{view}");
}

#[test]
fn a_chain_with_a_post_quantum_answer_verifies() {
    // ML-DSA-44 answers (1312-byte keys, 6 KB responses, served over TCP)
    // chain like any other; each identity is its own key.
    let servers = relay::servers(3);
    let pq = Profile::by_name("ml-dsa-44").unwrap();
    let asks: Vec<Ask> = (0..6)
        .map(|k| Ask {
            server: k % 3,
            profile: if k % 3 == 1 { pq } else { Profile::rfc() },
            midpoint_us: T0 + (k as u64 + 1) * GAP_US,
            radius_us: RADIUS_US,
        })
        .collect();
    let proof = relay::proof(&servers, D, &asks, 0);
    let bundle = proof.to_binary();
    assert_eq!(Proof::from_binary(&bundle).unwrap(), proof);
    let keys = [
        servers[0].public(Profile::rfc()),
        servers[1].public(pq),
        servers[2].public(Profile::rfc()),
    ];
    assert_eq!(keys[1].bytes().len(), 1312);
    let p = verify(&bundle, D, &keys).unwrap();
    assert!(holds_true_now(&p));
    assert_eq!(p.agreeing_keys, 3);
    // The server's Ed25519 key does not vouch for its ML-DSA-44 answers.
    let ed_only = rfc_keys(&servers);
    assert_eq!(verify(&bundle, D, &ed_only), Err(ProofError::UnknownKey(1)));
}
