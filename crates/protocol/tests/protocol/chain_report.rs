//! Nonce chains across versions and malfeasance reports: the draft-19
//! Appendix B report, and chains of our own built with the test server.

use crate::common;

use std::path::PathBuf;

use common::*;
use gnomon_protocol::chain::{ChainError, RecordError};
use gnomon_protocol::report::{EntryError, Link, LinkError};
use gnomon_protocol::request::srv_for;
use gnomon_protocol::wire::{self, Message};
use gnomon_protocol::{
    chain_nonce, parse_report, Measurement, Offer, ParsedReport, Profile, Report, ResponderOptions,
    VerifyError,
};

fn vectors() -> PathBuf {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/external-vectors"
    ));
    assert!(dir.is_dir(), "vector directory missing: {}", dir.display());
    dir
}

fn appendix_b() -> Vec<u8> {
    let path = vectors()
        .join("ietf-draft-19/draft-ietf-ntp-roughtime-19-appendix-b-malfeasance-report.json");
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn current(json: &[u8]) -> Report {
    match parse_report(json).expect("report parses") {
        ParsedReport::Current(r) => r,
        ParsedReport::Legacy(_) => panic!("parsed as the pre-12 form"),
    }
}

#[test]
fn draft19_appendix_b_report_proves_malfeasance() {
    let report = current(&appendix_b());
    assert_eq!(report.entries.len(), 3);
    assert!(report.entries[0].rand.is_none());
    let check = report.verify();
    for (i, e) in check.entries.iter().enumerate() {
        let v = e
            .response
            .unwrap_or_else(|err| panic!("entry {i}: {err:?}"));
        assert_eq!(v.profile.name, "rfc-10049", "entry {i}");
        // The example says VER = 1 but was signed with the draft's capital-T
        // "RoughTime v1 …" strings, not RFC 10049's "Roughtime v1 …".
        // Our verifier accepts those for version 1 and flags it.
        assert!(v.legacy_context, "entry {i}");
    }
    let links: Vec<_> = check.entries.iter().map(|e| e.link).collect();
    assert_eq!(
        links,
        [Ok(Link::First), Ok(Link::Chained), Ok(Link::Chained)]
    );
    // The first response is a day ahead of the other two. Which server is
    // to blame is not tested: the draft's prose and its data disagree.
    assert_eq!(check.contradictions, [(0, 1), (0, 2)]);
    assert!(check.is_proof_of_malfeasance());
}

#[test]
fn draft19_appendix_b_chain_links_recompute() {
    let report = current(&appendix_b());
    for k in 1..3 {
        let rand = report.entries[k].rand.as_deref().unwrap();
        let mut nonce = [0u8; 64];
        let n = chain_nonce(
            Profile::rfc(),
            &report.entries[k - 1].response,
            rand,
            &mut nonce,
        )
        .unwrap();
        let body = wire::unframe(&report.entries[k].request).unwrap();
        let sent = Message::parse(body).unwrap();
        assert_eq!(sent.get(gnomon_protocol::Tag::NONC), Some(&nonce[..n]));
    }
}

#[test]
fn draft19_appendix_b_round_trips_through_json() {
    let original = appendix_b();
    let report = current(&original);
    let written = report.to_json();
    assert_eq!(current(written.as_bytes()), report);
    let a: serde_json::Value = serde_json::from_slice(&original).unwrap();
    let b: serde_json::Value = serde_json::from_str(&written).unwrap();
    assert_eq!(a, b, "same document up to whitespace");
}

const CHAIN: [&str; 5] = ["google", "draft-07", "draft-11", "draft-14", "rfc-10049"];
const LIAR: usize = 2;
const HOUR_US: u64 = 3_600_000_000;

/// The measurement sequence run twice in the same order (the measurement sequence of RFC 10049),
/// one server per profile; the draft-11 server is an hour ahead if `lie`.
fn measure(lie: bool) -> (Measurement, Vec<Server>) {
    let servers: Vec<Server> = (0..CHAIN.len())
        .map(|i| Server::new(10 + 2 * i as u8))
        .collect();
    let mut m = Measurement::new();
    for round in 0..2 {
        for (i, name) in CHAIN.iter().enumerate() {
            let k = round * CHAIN.len() + i;
            let profile = Profile::by_name(name).unwrap();
            let server = &servers[i];
            let public = server.long_term.public();
            let rand: Vec<u8> = (0..profile.nonce_len).map(|b| (k * 37 + b) as u8).collect();
            let mut nonce = [0u8; 64];
            let n = m.next_nonce(profile, &rand, &mut nonce).unwrap();
            let mut request = vec![0u8; 1024];
            let len = Offer::single(profile)
                .build(&nonce[..n], Some(&srv_for(&public)), 1024, &mut request)
                .unwrap();
            request.truncate(len);
            // The test delegation ends at NOW + 1 h, rounded down to the
            // second in seconds-encoded versions: lie by a second less.
            let now = if lie && i == LIAR {
                NOW_US + HOUR_US - 1_000_000
            } else {
                NOW_US + k as u64 * 1_000_000
            };
            let sink = server.answer(
                profile,
                std::slice::from_ref(&request),
                ResponderOptions::default(),
                now,
            );
            let response = sink
                .response(0)
                .unwrap_or_else(|| panic!("{name} k={k}: {:?}", sink.results[0]))
                .to_vec();
            let e = m
                .record(&request, &response, &rand, &public)
                .unwrap_or_else(|err| panic!("{name} round {round}: {err:?}"));
            assert_eq!(e.verified.profile.name, *name);
            assert_eq!(e.rand.is_some(), k > 0);
        }
    }
    (m, servers)
}

/// Pairs the liar's entries must produce: each liar entry against every
/// later honest entry.
fn liar_pairs() -> Vec<(usize, usize)> {
    let n = 2 * CHAIN.len();
    let liar = |k: usize| k % CHAIN.len() == LIAR;
    let mut pairs = Vec::new();
    for i in (0..n).filter(|&i| liar(i)) {
        for j in (i + 1..n).filter(|&j| !liar(j)) {
            pairs.push((i, j));
        }
    }
    pairs
}

fn reparsed(m: &Measurement) -> Report {
    let report = m.report();
    let json = report.to_json();
    let back = current(json.as_bytes());
    assert_eq!(back, report);
    back
}

#[test]
fn chain_across_versions_flags_the_liar() {
    let (m, _) = measure(true);
    assert_eq!(m.contradictions(), liar_pairs());
    let check = reparsed(&m).verify();
    assert!(check.all_valid(), "{check:#?}");
    assert_eq!(check.entries[0].link, Ok(Link::First));
    assert!(check.entries[1..]
        .iter()
        .all(|e| e.link == Ok(Link::Chained)));
    assert_eq!(check.contradictions, liar_pairs());
    assert!(check.is_proof_of_malfeasance());
}

#[test]
fn honest_chain_is_consistent_and_no_proof() {
    let (m, _) = measure(false);
    assert!(m.contradictions().is_empty());
    let check = reparsed(&m).verify();
    assert!(check.all_valid());
    assert!(check.contradictions.is_empty());
    assert!(!check.is_proof_of_malfeasance());
}

/// Offset of the top-level SIG value (the SREP signature) in a response.
fn srep_sig_offset(response: &[u8]) -> usize {
    let framed = wire::has_magic(response);
    let body = if framed {
        wire::unframe(response).unwrap()
    } else {
        response
    };
    let msg = Message::parse(body).unwrap();
    let sig = msg.get(gnomon_protocol::Tag::SIG).unwrap();
    sig.as_ptr() as usize - response.as_ptr() as usize
}

#[test]
fn flipped_signature_fails_that_entry_and_the_next_link() {
    let (m, _) = measure(true);
    let report = m.report();
    for k in [0, LIAR, 9] {
        let mut r = report.clone();
        let at = srep_sig_offset(&r.entries[k].response) + 5;
        r.entries[k].response[at] ^= 0x40;
        let check = current(r.to_json().as_bytes()).verify();
        assert_eq!(
            check.entries[k].response.unwrap_err(),
            EntryError::Verify(VerifyError::ResponseSignature),
            "entry {k}"
        );
        // The next request was chained from the bytes as received.
        if let Some(next) = check.entries.get(k + 1) {
            assert_eq!(next.link, Err(LinkError::Mismatch));
        }
        assert!(check.contradictions.iter().all(|&(i, j)| i != k && j != k));
        assert!(!check.is_proof_of_malfeasance(), "entry {k}");
    }
    // Untouched, the same report is proof.
    assert!(report.verify().is_proof_of_malfeasance());
}

#[test]
fn changed_or_missing_rand_breaks_the_link() {
    let (m, _) = measure(true);
    let mut r = m.report();
    r.entries[3].rand.as_mut().unwrap()[0] ^= 1;
    let check = r.verify();
    assert_eq!(check.entries[3].link, Err(LinkError::Mismatch));
    assert!(check.entries.iter().all(|e| e.response.is_ok()));
    assert_eq!(check.contradictions, liar_pairs());
    assert!(!check.is_proof_of_malfeasance());

    let mut r = m.report();
    r.entries[6].rand = None;
    let check = current(r.to_json().as_bytes()).verify();
    assert_eq!(check.entries[6].link, Err(LinkError::MissingRand));
    assert!(!check.is_proof_of_malfeasance());
}

#[test]
fn wrong_key_or_garbage_entry_is_a_distinct_error() {
    let (m, servers) = measure(true);
    let mut r = m.report();
    r.entries[4].public_key = servers[0].long_term.public().to_vec();
    r.entries[5].request = vec![1, 2, 3];
    r.entries[7].public_key.pop();
    let check = r.verify();
    assert_eq!(
        check.entries[4].response,
        Err(EntryError::Verify(VerifyError::DelegationSignature))
    );
    assert!(matches!(
        check.entries[5].response,
        Err(EntryError::Verify(VerifyError::Request(_)))
    ));
    assert!(matches!(check.entries[5].link, Err(LinkError::Request(_))));
    assert_eq!(
        check.entries[7].response,
        Err(EntryError::PublicKeyLength(31))
    );
    assert!(!check.is_proof_of_malfeasance());
}

#[test]
fn measurement_refuses_bad_exchanges() {
    let server = Server::new(40);
    let public = server.long_term.public();
    let p = Profile::rfc();
    let mut m = Measurement::new();
    let mut nonce = [0u8; 64];
    assert_eq!(
        m.next_nonce(p, &[1; 31], &mut nonce),
        Err(ChainError::RandLength { need: 32 })
    );
    let rand = [5u8; 32];
    assert_eq!(m.next_nonce(p, &rand, &mut nonce), Ok(32));
    assert_eq!(nonce[..32], rand, "the first nonce is the rand itself");

    let build = |nonce: &[u8]| {
        let mut out = vec![0u8; 1024];
        Offer::single(p).build(nonce, None, 1024, &mut out).unwrap();
        out
    };
    let req = build(&nonce[..32]);
    let resp = server
        .answer(
            p,
            std::slice::from_ref(&req),
            ResponderOptions::default(),
            NOW_US,
        )
        .response(0)
        .unwrap()
        .to_vec();
    // A request whose nonce is not the chain's.
    let other = build(&[6u8; 32]);
    assert_eq!(
        m.record(&other, &resp, &rand, &public).unwrap_err(),
        RecordError::Nonce
    );
    // A response that does not verify is not recorded.
    let mut bad = resp.clone();
    let at = srep_sig_offset(&bad);
    bad[at] ^= 1;
    assert_eq!(
        m.record(&req, &bad, &rand, &public).unwrap_err(),
        RecordError::Verify(VerifyError::ResponseSignature)
    );
    assert!(m.exchanges().is_empty());
    assert!(matches!(
        m.record(&[0u8; 7], &resp, &rand, &public),
        Err(RecordError::Request(_))
    ));
    m.record(&req, &resp, &rand, &public).unwrap();
    assert_eq!(m.exchanges().len(), 1);
    // The second nonce chains from the recorded response.
    let rand2 = [8u8; 32];
    let mut next = [0u8; 64];
    m.next_nonce(p, &rand2, &mut next).unwrap();
    let mut expect = [0u8; 64];
    chain_nonce(p, &resp, &rand2, &mut expect).unwrap();
    assert_eq!(next, expect);
}

/// A measurement sequence over an Ed25519 server (rfc-10049) and two
/// ML-DSA-44 servers (0x90000001), twice round; the second ML-DSA server is
/// an hour ahead if `lie`.
fn measure_pq(lie: bool) -> Measurement {
    let plan: [(&str, u8, bool); 3] = [
        ("rfc-10049", 70, false),
        ("ml-dsa-44", 72, false),
        ("ml-dsa-44", 74, lie),
    ];
    let servers: Vec<Server> = plan.iter().map(|(_, seed, _)| Server::new(*seed)).collect();
    let mut m = Measurement::new();
    for round in 0..2 {
        for (i, (name, _, liar)) in plan.iter().enumerate() {
            let k = round * plan.len() + i;
            let profile = Profile::by_name(name).unwrap();
            let public = servers[i].public(profile);
            let rand: Vec<u8> = (0..profile.nonce_len).map(|b| (k * 41 + b) as u8).collect();
            let mut nonce = [0u8; 64];
            let n = m.next_nonce(profile, &rand, &mut nonce).unwrap();
            let mut request = vec![0u8; 1024];
            let len = Offer::single(profile)
                .build(
                    &nonce[..n],
                    Some(&srv_for(public.bytes())),
                    1024,
                    &mut request,
                )
                .unwrap();
            request.truncate(len);
            let now = if *liar {
                NOW_US + HOUR_US - 1_000_000
            } else {
                NOW_US + k as u64 * 1_000_000
            };
            let sink = servers[i].answer(
                profile,
                std::slice::from_ref(&request),
                ResponderOptions::default(),
                now,
            );
            let response = sink.response(0).expect("answered").to_vec();
            let e = m
                .record(&request, &response, &rand, public)
                .unwrap_or_else(|err| panic!("{name} round {round}: {err:?}"));
            assert_eq!(e.verified.profile.name, *name);
            assert_eq!(e.public_key.scheme(), profile.scheme);
        }
    }
    m
}

#[test]
fn chains_and_reports_carry_ml_dsa_answers() {
    let m = measure_pq(false);
    assert!(m.contradictions().is_empty());
    let report = reparsed(&m);
    assert_eq!(report.entries[1].public_key.len(), 1312);
    assert_eq!(report.entries[0].public_key.len(), 32);
    let check = report.verify();
    assert!(check.all_valid(), "{check:#?}");
    assert!(check.entries[1..]
        .iter()
        .all(|e| e.link == Ok(Link::Chained)));
    assert!(!check.is_proof_of_malfeasance());
}

#[test]
fn an_ml_dsa_liar_is_proven_by_its_report() {
    let m = measure_pq(true);
    let liar = [2, 5];
    let pairs = m.contradictions();
    assert!(!pairs.is_empty());
    assert!(pairs
        .iter()
        .all(|(a, b)| liar.contains(a) && !liar.contains(b)));
    let check = reparsed(&m).verify();
    assert!(check.all_valid(), "{check:#?}");
    assert_eq!(check.contradictions, pairs);
    assert!(check.is_proof_of_malfeasance());
}

#[test]
fn a_report_entry_with_the_wrong_ml_dsa_key_fails() {
    let mut report = m_report(measure_pq(false));
    // Another ML-DSA-44 key, an Ed25519 key, and a key of no scheme.
    report.entries[1].public_key = Server::new(99).pq_long_term.public().to_vec();
    report.entries[2].public_key = Server::new(99).long_term.public().to_vec();
    report.entries[4].public_key.pop();
    let check = report.verify();
    assert!(matches!(
        check.entries[1].response,
        Err(EntryError::Verify(_))
    ));
    assert!(matches!(
        check.entries[2].response,
        Err(EntryError::Verify(VerifyError::KeyScheme { .. }))
    ));
    assert_eq!(
        check.entries[4].response.unwrap_err(),
        EntryError::PublicKeyLength(1311)
    );
    assert!(check.entries[0].response.is_ok() && check.entries[3].response.is_ok());
}

fn m_report(m: Measurement) -> Report {
    m.report()
}
