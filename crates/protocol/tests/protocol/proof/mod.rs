//! Relayed proofs: bundles made by a relay over the test servers, verified
//! as the device would, with every failure its own error.

use crate::common;

mod fresh;
mod liars;
mod order;
mod tampering;

use common::relay::{self, Ask};
use common::*;
use gnomon_protocol::proof::{
    EntrySet, ProofView, MAX_DEVICE_VALUE, MAX_PROOF_ENTRIES, PROOF_MAGIC,
};
use gnomon_protocol::quorum::Assumption;
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
    let keys = rfc_keys(&servers);
    // Two pinned: "fewer than half lie" is none, so both together prove
    // their intersection.
    let p = verify(&proof.to_binary(), D, &keys).unwrap();
    assert_eq!(p.assumption, Assumption::new(2, 0));
    // Assuming one of the two may lie, no bundle of them proves anything.
    let one_liar = ProofPolicy {
        max_liars: Some(1),
        ..ProofPolicy::default()
    };
    let mut ws = ProofWorkspace::new();
    assert_eq!(
        verify_proof(&proof.to_binary(), D, &keys, ELAPSED_US, &one_liar, &mut ws),
        Err(ProofError::TooFewKeys {
            present: 2,
            needed: 3,
            assumption: Assumption::new(2, 1),
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
