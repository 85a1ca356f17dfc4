//! Relayed proofs: bundles made by a relay over the test servers, verified
//! as the device would, with every failure its own error.

mod common;

use common::relay::{self, Ask};
use common::*;
use gnomon_protocol::proof::{EntrySet, ProofView, MAX_PROOF_ENTRIES, PROOF_MAGIC};
use gnomon_protocol::report::Link;
use gnomon_protocol::wire::{self, Message};
use gnomon_protocol::{
    chain_nonce, parse_report, verify_proof, ParsedReport, Profile, Proof, ProofError, ProofPolicy,
    ProofWorkspace, Proven, PublicKey, Tag, VerifyError,
};

const D: &[u8] = b"device nonce: 32 random bytes...";
const OTHER: &[u8] = b"another device's nonce, 32 bytes";
/// When the device made D.
const T0: u64 = NOW_US;
const GAP_US: u64 = 100_000;
/// What the device's clock says has passed when it verifies (an upper
/// bound on the true time passed, which is this too).
const ELAPSED_US: u64 = 2_000_000;
const TRUE_NOW: i128 = (T0 + ELAPSED_US) as i128;
const HOUR_US: u64 = 3_600_000_000;

fn verify(bundle: &[u8], device: &[u8], keys: &[PublicKey<'_>]) -> Result<Proven, ProofError> {
    let mut ws = ProofWorkspace::new();
    verify_proof(
        bundle,
        device,
        keys,
        ELAPSED_US,
        &ProofPolicy::default(),
        &mut ws,
    )
}

fn holds_true_now(p: &Proven) -> bool {
    p.earliest_us <= TRUE_NOW && TRUE_NOW <= p.latest_us
}

/// Three honest servers, the RFC's two passes.
fn honest() -> (Vec<Server>, Proof) {
    let servers = relay::servers(3);
    let proof = relay::proof(&servers, D, &relay::honest(3, T0, GAP_US), 0);
    (servers, proof)
}

fn rfc_keys(servers: &[Server]) -> Vec<PublicKey<'_>> {
    relay::keys(servers, Profile::rfc())
}

fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len())
        .position(|w| w == needle)
        .expect("present")
}

/// Offset of the SREP signature in a response.
fn srep_sig_offset(response: &[u8]) -> usize {
    let body = wire::unframe(response).unwrap();
    let msg = Message::parse(body).unwrap();
    let sig = msg.get(Tag::SIG).unwrap();
    sig.as_ptr() as usize - response.as_ptr() as usize
}

fn rebuilt(proof: &Proof, edit: impl FnOnce(&mut gnomon_protocol::Report)) -> Vec<u8> {
    let mut report = proof.report().clone();
    edit(&mut report);
    Proof::new(proof.device().to_vec(), report)
        .unwrap()
        .to_binary()
}

#[test]
fn a_valid_bundle_proves_an_interval_holding_the_true_now() {
    let (servers, proof) = honest();
    let p = verify(&proof.to_binary(), D, &rfc_keys(&servers)).unwrap();
    assert!(holds_true_now(&p), "{p:?}");
    assert_eq!((p.agreeing_keys, p.answering_keys), (3, 3));
    // Every answer i gives [MIDPᵢ − RADIᵢ, MIDPᵢ + RADIᵢ + elapsed]. Each key
    // intersects its two answers, and two of three keys must hold a point:
    // the hull runs from the second-lowest key low end to the second-highest
    // key high end.
    let v: Vec<_> = proof
        .report()
        .verify()
        .entries
        .iter()
        .map(|e| e.response.unwrap())
        .collect();
    let e = i128::from(ELAPSED_US);
    let mut lows: Vec<i128> = (0..3)
        .map(|k| v[k].earliest_us().max(v[k + 3].earliest_us()))
        .collect();
    let mut highs: Vec<i128> = (0..3)
        .map(|k| v[k].latest_us().min(v[k + 3].latest_us()) + e)
        .collect();
    lows.sort();
    highs.sort();
    assert_eq!(p.earliest_us, lows[1]);
    assert_eq!(p.latest_us, highs[1]);
}

#[test]
fn with_two_keys_the_interval_is_the_issues_formula() {
    // "No earlier than the latest answer's lower bound, no later than the
    // first answer's upper bound plus the elapsed time."
    let servers = relay::servers(2);
    let asks = relay::honest(2, T0, GAP_US);
    let proof = relay::proof(&servers, D, &asks, 0);
    let two = ProofPolicy {
        min_keys: 2,
        ..ProofPolicy::default()
    };
    let keys = rfc_keys(&servers);
    let mut ws = ProofWorkspace::new();
    let p = verify_proof(&proof.to_binary(), D, &keys, ELAPSED_US, &two, &mut ws).unwrap();
    // The default asks for three keys: two are what a relay that dropped
    // the third would leave.
    assert_eq!(
        verify(&proof.to_binary(), D, &keys),
        Err(ProofError::TooFewKeys {
            present: 2,
            needed: 3
        })
    );
    let check = proof.report().verify();
    let first = check.entries[0].response.unwrap();
    let last = check.entries[3].response.unwrap();
    assert_eq!(p.earliest_us, last.earliest_us());
    assert_eq!(p.latest_us, first.latest_us() + i128::from(ELAPSED_US));
    assert!(holds_true_now(&p));
}

#[test]
fn a_delay_widens_the_interval_by_the_delay_and_no_more() {
    let (servers, proof) = honest();
    let bundle = proof.to_binary();
    let keys = rfc_keys(&servers);
    let mut ws = ProofWorkspace::new();
    let policy = ProofPolicy::default();
    let on_time = verify_proof(&bundle, D, &keys, ELAPSED_US, &policy, &mut ws).unwrap();
    let delay = 3_000_000;
    let late = verify_proof(&bundle, D, &keys, ELAPSED_US + delay, &policy, &mut ws).unwrap();
    assert_eq!(late.earliest_us, on_time.earliest_us);
    assert_eq!(late.latest_us, on_time.latest_us + i128::from(delay));
    // A long delay is refused by the radius limit.
    assert!(matches!(
        verify_proof(&bundle, D, &keys, ELAPSED_US + 60_000_000, &policy, &mut ws),
        Err(ProofError::TooWide { radius_us }) if radius_us > 10_000_000
    ));
}

#[test]
fn a_chain_across_versions_binds_and_verifies() {
    let servers = relay::servers(3);
    let names = ["google", "draft-14", "rfc-10049"];
    let asks: Vec<Ask> = (0..6)
        .map(|k| Ask {
            server: k % 3,
            profile: Profile::by_name(names[k % 3]).unwrap(),
            midpoint_us: T0 + (k as u64 + 1) * GAP_US,
            radius_us: RADIUS_US,
        })
        .collect();
    let proof = relay::proof(&servers, D, &asks, 0);
    let p = verify(&proof.to_binary(), D, &rfc_keys(&servers)).unwrap();
    assert!(holds_true_now(&p));
    assert_eq!(p.agreeing_keys, 3);
}

#[test]
fn bound_measurement_derives_the_first_nonce_from_the_device_value() {
    let servers = relay::servers(2);
    let m = relay::measure(&servers, D, &relay::honest(2, T0, GAP_US), 0);
    assert_eq!(m.device(), Some(D));
    let first = &m.exchanges()[0];
    let rand = first
        .rand
        .as_deref()
        .expect("the first exchange keeps its rand");
    let mut nonce = [0u8; 64];
    let n = chain_nonce(Profile::rfc(), D, rand, &mut nonce).unwrap();
    let body = wire::unframe(&first.request).unwrap();
    assert_eq!(
        Message::parse(body).unwrap().get(Tag::NONC),
        Some(&nonce[..n])
    );
    // An unbound sequence has no proof and keeps no first rand.
    assert!(gnomon_protocol::Measurement::new().proof().is_none());
    assert!(gnomon_protocol::Measurement::bound(&[]).is_err());
    assert!(gnomon_protocol::Measurement::bound(&[1; 65]).is_err());
}

#[test]
fn the_binary_form_round_trips() {
    let (_, proof) = honest();
    let bundle = proof.to_binary();
    assert_eq!(&bundle[..4], &PROOF_MAGIC);
    assert_eq!(Proof::from_binary(&bundle).unwrap(), proof);
    let view = ProofView::parse(&bundle).unwrap();
    assert_eq!(view.device(), D);
    assert_eq!(view.entries().len(), 6);
    // The request's zero padding is not stored.
    let e = view.entries()[0];
    assert_eq!(e.request_len, 1024);
    assert!(e.request_head.len() < 200, "{}", e.request_head.len());
    assert!(bundle.len() < 6 * 1024);
}

#[test]
fn the_json_form_round_trips_and_is_a_verifiable_report() {
    let (servers, proof) = honest();
    let json = proof.to_json();
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(doc["deviceNonce"].is_string());
    assert!(doc["responses"][0]["rand"].is_string());
    assert_eq!(Proof::from_json(json.as_bytes()).unwrap(), proof);
    // The report tools read it as a chained report whose first link is
    // unchecked, and Report::verify accepts a first entry with a rand.
    let ParsedReport::Current(report) = parse_report(json.as_bytes()).unwrap() else {
        panic!("legacy form")
    };
    assert!(report.entries[0].rand.is_some());
    let check = report.verify();
    assert!(check.all_valid(), "{check:?}");
    assert_eq!(check.entries[0].link, Ok(Link::First));
    assert!(check.contradictions.is_empty());
    // Both forms carry the same proof.
    let from_json = Proof::from_json(json.as_bytes()).unwrap().to_binary();
    assert_eq!(from_json, proof.to_binary());
    assert!(verify(&from_json, D, &rfc_keys(&servers)).is_ok());
}

#[test]
fn json_without_device_nonce_or_first_rand_is_refused() {
    let (_, proof) = honest();
    let mut doc: serde_json::Value = serde_json::from_str(&proof.to_json()).unwrap();
    doc.as_object_mut().unwrap().remove("deviceNonce");
    assert_eq!(
        Proof::from_json(doc.to_string().as_bytes()),
        Err(gnomon_protocol::proof::ProofFormError::MissingDeviceNonce)
    );
    let mut doc: serde_json::Value = serde_json::from_str(&proof.to_json()).unwrap();
    doc["responses"][0].as_object_mut().unwrap().remove("rand");
    assert_eq!(
        Proof::from_json(doc.to_string().as_bytes()),
        Err(gnomon_protocol::proof::ProofFormError::MissingRand(0))
    );
}

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
    for k in [0, 3, 5] {
        let mut bundle = proof.to_binary();
        let response = &proof.report().entries[k].response;
        let at = find(&bundle, response) + srep_sig_offset(response) + 9;
        bundle[at] ^= 0x20;
        assert_eq!(
            verify(&bundle, D, &rfc_keys(&servers)),
            Err(ProofError::Signature(k)),
            "entry {k}"
        );
    }
    // A valid answer under an unpinned identity that claims a pinned key.
    let impostor = relay::servers(4).pop().unwrap();
    let bundle = rebuilt(&proof, |r| {
        let request = r.entries[1].request.clone();
        let ask = Ask {
            server: 0,
            profile: Profile::rfc(),
            midpoint_us: T0,
            radius_us: RADIUS_US,
        };
        r.entries[1].response = relay::answer(&impostor, &ask, &request);
    });
    assert_eq!(
        verify(&bundle, D, &rfc_keys(&servers)),
        Err(ProofError::Signature(1))
    );
}

#[test]
fn a_swapped_or_transplanted_answer_is_not_for_the_request() {
    let (servers, proof) = honest();
    let keys = rfc_keys(&servers);
    // Entries 0 and 3 are the same server: each answer is validly signed.
    let bundle = rebuilt(&proof, |r| {
        let a = r.entries[0].response.clone();
        r.entries[0].response = r.entries[3].response.clone();
        r.entries[3].response = a;
    });
    assert_eq!(verify(&bundle, D, &keys), Err(ProofError::NotForRequest(0)));
    // From another bundle, for another device.
    let other = relay::proof(&servers, OTHER, &relay::honest(3, T0, GAP_US), 7);
    let bundle = rebuilt(&proof, |r| {
        r.entries[2].response = other.report().entries[2].response.clone();
    });
    assert_eq!(verify(&bundle, D, &keys), Err(ProofError::NotForRequest(2)));
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
    // Two of three keys left: the default policy wants all three, since a
    // relay that drops answers picks which keys vote.
    let bundle = rebuilt(&proof, |r| r.entries.truncate(2));
    assert_eq!(
        verify(&bundle, D, &keys),
        Err(ProofError::TooFewKeys {
            present: 2,
            needed: 3
        })
    );
    let two = ProofPolicy {
        min_keys: 2,
        ..ProofPolicy::default()
    };
    let mut ws = ProofWorkspace::new();
    let p = verify_proof(&bundle, D, &keys, ELAPSED_US, &two, &mut ws).unwrap();
    assert!(holds_true_now(&p));
    assert_eq!(p.answering_keys, 2);
    let bundle = rebuilt(&proof, |r| r.entries.truncate(1));
    assert_eq!(
        verify_proof(&bundle, D, &keys, ELAPSED_US, &two, &mut ws),
        Err(ProofError::TooFewKeys {
            present: 1,
            needed: 2
        })
    );
    let one = ProofPolicy {
        min_keys: 1,
        ..ProofPolicy::default()
    };
    assert_eq!(
        verify_proof(&bundle, D, &keys, ELAPSED_US, &one, &mut ws),
        Err(ProofError::NoQuorum {
            agreeing: 1,
            needed: 2
        })
    );
}

/// The attack `min_keys` is for: one liar among three pinned keys, and a
/// relay that drops the honest answer the liar's interval misses. The two
/// keys left agree on the liar's side of an honest wide interval; with
/// `min_keys` 2 the device would take it, with the default it refuses.
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
        min_keys: 2,
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
            needed: 3
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
    let mut device = bundle.clone();
    device[6] = 0;
    assert_eq!(
        verify(&device, D, &keys),
        Err(ProofError::Malformed("device value length"))
    );
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
    // PATH's depth.
    let (servers, proof) = honest();
    let mut bundle = proof.to_binary();
    let response = &proof.report().entries[1].response;
    let body = wire::unframe(response).unwrap();
    let indx = Message::parse(body).unwrap().get(Tag::INDX).unwrap();
    let at = find(&bundle, response) + (indx.as_ptr() as usize - response.as_ptr() as usize);
    bundle[at] = 1;
    assert!(matches!(
        verify(&bundle, D, &rfc_keys(&servers)),
        Err(ProofError::Response(1, VerifyError::Path(_)))
    ));
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
