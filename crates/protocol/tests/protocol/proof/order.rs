//! Cheap checks first: the binding, every key and every link (lookups and
//! hashing) are checked before any signature, so a bundle broken there
//! costs no signature check; and a bundle with several faults gets the
//! first in docs/PROOF.md's order, whatever the entries' order.

use super::*;
use gnomon_protocol::report::{Report, ReportEntry};

/// A relay that alters each answer (`forge(k, request, response)`) before
/// it chains the next request from it, as a forging relay can: every link
/// holds over the bytes it forged, so only the signatures (or the nonce,
/// or the path) can refuse them.
fn forged_chain(
    servers: &[Server],
    asks: &[Ask],
    mut forge: impl FnMut(usize, &[u8], &mut Vec<u8>),
) -> Proof {
    let mut report = Report::default();
    let mut previous = D.to_vec();
    for (k, ask) in asks.iter().enumerate() {
        let public = servers[ask.server].public(ask.profile);
        let rand: Vec<u8> = (0..ask.profile.nonce_len)
            .map(|b| (k * 37 + b * 11) as u8)
            .collect();
        let mut nonce = [0u8; 64];
        let n = chain_nonce(ask.profile, &previous, &rand, &mut nonce).unwrap();
        let request = relay::request_for(ask, public, &nonce[..n]);
        let mut response = relay::answer(&servers[ask.server], ask, &request);
        forge(k, &request, &mut response);
        previous.clone_from(&response);
        report.entries.push(ReportEntry {
            rand: Some(rand),
            public_key: public.bytes().to_vec(),
            request,
            response,
        });
    }
    Proof::new(D.to_vec(), report).unwrap()
}

/// One bit of the SREP signature: the answer still parses, its signature
/// fails.
fn break_signature(response: &mut [u8]) {
    let at = srep_sig_offset(response) + 9;
    response[at] ^= 0x20;
}

/// `MAX_PROOF_ENTRIES` asks, the last from a fourth server.
fn sixteen() -> (Vec<Server>, Vec<Ask>) {
    let servers = relay::servers(4);
    let asks = (0..MAX_PROOF_ENTRIES)
        .map(|k| Ask {
            server: if k + 1 == MAX_PROOF_ENTRIES { 3 } else { k % 3 },
            profile: Profile::rfc(),
            midpoint_us: T0 + (k as u64 + 1) * GAP_US,
            radius_us: RADIUS_US,
        })
        .collect();
    (servers, asks)
}

#[test]
fn the_forging_relay_builds_chains_the_verifier_accepts() {
    // Not vacuous: untouched, its bundles verify; so each error below is
    // the forgery's.
    let (servers, asks) = sixteen();
    let proof = forged_chain(&servers, &asks, |_, _, _| {});
    let p = verify(&proof.to_binary(), D, &rfc_keys(&servers)).unwrap();
    assert!(holds_true_now(&p), "{p:?}");
    assert_eq!(p.answering_keys, 4);
}

#[test]
fn a_forged_answer_chained_from_fails_its_own_signature() {
    // A link hashes the previous response's raw bytes without trusting
    // them: a forged response the relay chained from passes the link
    // checks, and is refused at its own signature.
    let servers = relay::servers(3);
    let asks = relay::honest(3, T0, GAP_US);
    for k in [0, 1, 3] {
        let proof = forged_chain(&servers, &asks, |i, _, r| {
            if i == k {
                break_signature(r)
            }
        });
        assert_eq!(
            verify(&proof.to_binary(), D, &rfc_keys(&servers)),
            Err(ProofError::Signature(k)),
            "entry {k}"
        );
    }
    // A valid answer under an unpinned identity that claims a pinned key,
    // in the middle of the chain.
    let impostor = relay::servers(4).pop().unwrap();
    let proof = forged_chain(&servers, &asks, |i, request, r| {
        if i == 1 {
            *r = relay::answer(&impostor, &asks[1], request);
        }
    });
    assert_eq!(
        verify(&proof.to_binary(), D, &rfc_keys(&servers)),
        Err(ProofError::Signature(1))
    );
    // An answer to another request (the same server's, validly signed) and
    // one whose path is wrong, each chained from: the links hold, the
    // answer's own check refuses it.
    let other = relay::proof(&servers, OTHER, &asks, 7);
    let proof = forged_chain(&servers, &asks, |i, _, r| {
        if i == 2 {
            r.clone_from(&other.report().entries[2].response);
        }
    });
    assert_eq!(
        verify(&proof.to_binary(), D, &rfc_keys(&servers)),
        Err(ProofError::NotForRequest(2))
    );
    let proof = forged_chain(&servers, &asks, |i, _, r| {
        if i == 1 {
            let body = wire::unframe(r).unwrap();
            let indx = Message::parse(body).unwrap().get(Tag::INDX).unwrap();
            let at = indx.as_ptr() as usize - r.as_ptr() as usize;
            r[at] = 1;
        }
    });
    assert!(matches!(
        verify(&proof.to_binary(), D, &rfc_keys(&servers)),
        Err(ProofError::Response(1, VerifyError::Path(_)))
    ));
}

#[test]
fn a_broken_link_is_found_before_any_signature() {
    // Every one of the 16 signatures forged, every link chained over the
    // forgeries: the signatures are what refuses it...
    let (servers, asks) = sixteen();
    let keys = rfc_keys(&servers);
    let all = forged_chain(&servers, &asks, |_, _, r| break_signature(r));
    assert_eq!(
        verify(&all.to_binary(), D, &keys),
        Err(ProofError::Signature(0))
    );
    // ... until link 2 breaks too: it is found first (signatures first
    // gave Signature(0)).
    let link = |p: &Proof| rebuilt(p, |r| r.entries[2].rand.as_mut().unwrap()[0] ^= 1);
    assert_eq!(verify(&link(&all), D, &keys), Err(ProofError::Link(2)));
    // Only entry 0's signature broken, and link 2: the same.
    let first = forged_chain(&servers, &asks, |i, _, r| {
        if i == 0 {
            break_signature(r)
        }
    });
    assert_eq!(
        verify(&first.to_binary(), D, &keys),
        Err(ProofError::Signature(0))
    );
    assert_eq!(verify(&link(&first), D, &keys), Err(ProofError::Link(2)));
    // Every link is checked before any signature, the last too.
    let last = rebuilt(&all, |r| r.entries[15].rand.as_mut().unwrap()[0] ^= 1);
    assert_eq!(verify(&last, D, &keys), Err(ProofError::Link(15)));
}

#[test]
fn several_faults_give_the_first_in_the_documented_order() {
    // Structure, WrongNonce, Binding, UnknownKey(i) for every i, Link(i)
    // for every i, then each entry's own checks: a later fault at an
    // earlier entry does not come first.
    let (servers, asks) = sixteen();
    let keys = rfc_keys(&servers);
    let three = &keys[..3];
    let all = forged_chain(&servers, &asks, |_, _, r| break_signature(r));
    let link2 = rebuilt(&all, |r| r.entries[2].rand.as_mut().unwrap()[0] ^= 1);
    // Entry 15's key unpinned, link 2 broken, every signature forged.
    assert_eq!(verify(&link2, D, three), Err(ProofError::UnknownKey(15)));
    // And the binding broken too.
    let binding = rebuilt(&all, |r| {
        r.entries[0].rand.as_mut().unwrap()[0] ^= 1;
        r.entries[2].rand.as_mut().unwrap()[0] ^= 1;
    });
    assert_eq!(verify(&binding, D, three), Err(ProofError::Binding));
    // And for another device.
    assert_eq!(verify(&binding, OTHER, three), Err(ProofError::WrongNonce));
    // And truncated.
    assert_eq!(
        verify(&binding[..binding.len() - 1], OTHER, three),
        Err(ProofError::Truncated)
    );
    // Two broken links: the first.
    let links = rebuilt(&all, |r| {
        r.entries[9].rand.as_mut().unwrap()[0] ^= 1;
        r.entries[4].rand.as_mut().unwrap()[0] ^= 1;
    });
    assert_eq!(verify(&links, D, &keys), Err(ProofError::Link(4)));
    // Links whole: the first entry whose own check fails, whatever fails
    // at it (a signature at 5, another's answer at 3).
    let other = relay::proof(&servers, OTHER, &asks, 7);
    let mixed = forged_chain(&servers, &asks, |i, _, r| match i {
        5 => break_signature(r),
        3 => r.clone_from(&other.report().entries[3].response),
        _ => {}
    });
    assert_eq!(
        verify(&mixed.to_binary(), D, &keys),
        Err(ProofError::NotForRequest(3))
    );
}

#[test]
fn no_signature_is_checked_when_a_link_is_broken() {
    // A failed Ed25519 check allocates (ed25519-dalek boxes its error's
    // cause when the tests' build turns on its std feature, see
    // tests/no_alloc.rs) and the verifier itself allocates nothing, so the
    // allocations count the failed signature checks, independent of time.
    let (servers, asks) = sixteen();
    let keys = rfc_keys(&servers);
    let all = forged_chain(&servers, &asks, |_, _, r| break_signature(r));
    let link2 = rebuilt(&all, |r| r.entries[2].rand.as_mut().unwrap()[0] ^= 1);
    let whole = all.to_binary();
    let mut ws = Box::new(ProofWorkspace::new());
    let policy = ProofPolicy::default();
    let mut results = [None; 2];
    let checked = allocation_counter::measure(|| {
        results[0] = Some(verify_proof(&whole, D, &keys, ELAPSED_US, &policy, &mut ws));
    });
    let skipped = allocation_counter::measure(|| {
        results[1] = Some(verify_proof(&link2, D, &keys, ELAPSED_US, &policy, &mut ws));
    });
    // The counter sees a failed check (else this test proves nothing)...
    assert!(checked.count_total > 0, "{checked:?}");
    assert_eq!(results[0], Some(Err(ProofError::Signature(0))));
    // ... and none was made for the bundle with the broken link, whatever
    // error it then reports.
    assert_eq!(skipped.count_total, 0, "{skipped:?}");
    assert_eq!(results[1], Some(Err(ProofError::Link(2))));
}
