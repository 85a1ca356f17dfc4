//! ML-DSA-44 as gnomon uses it: NIST's known-answer vectors (a subset of
//! the ACVP files, `tests/data/mldsa44-acvp/`, README there), and a second,
//! independent implementation (the `fips204` crate) that must accept what
//! gnomon signs, so that the key, context and message handling are not
//! checked only against themselves.

use crate::common;

use common::{request, Server, NOW_US};
use fips204::traits::{KeyGen, SerDes, Verifier};
use gnomon_protocol::scheme::{MlDsa44KeyPair, Scheme};
use gnomon_protocol::wire::Message;
use gnomon_protocol::{verify_response, Profile, ResponderOptions, Tag};
use serde_json::Value;

fn vectors(name: &str) -> Vec<Value> {
    let path = format!(
        "{}/tests/data/mldsa44-acvp/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(doc["parameterSet"], "ML-DSA-44", "{path}");
    let tests = doc["tests"].as_array().expect("tests").clone();
    assert!(!tests.is_empty(), "{path}: no cases");
    tests
}

fn bytes(case: &Value, field: &str) -> Vec<u8> {
    hex::decode(case[field].as_str().unwrap_or_else(|| panic!("no {field}")))
        .unwrap_or_else(|e| panic!("{field}: {e}"))
}

fn tc(case: &Value) -> u64 {
    case["tcId"].as_u64().expect("tcId")
}

#[test]
fn key_pairs_from_seeds_match_nist() {
    for case in vectors("keygen.json") {
        let seed: [u8; 32] = bytes(&case, "seed").try_into().unwrap();
        let pair = MlDsa44KeyPair::from_seed(&seed);
        assert_eq!(
            pair.public()[..],
            bytes(&case, "pk")[..],
            "tcId {}",
            tc(&case)
        );
        assert_eq!(*pair.seed(), seed);
    }
}

#[test]
fn signatures_match_nist_for_the_deterministic_and_hedged_cases() {
    use libcrux_ml_dsa::ml_dsa_44::{sign, MLDSA44SigningKey};
    let det = vectors("siggen-deterministic.json");
    let hedged = vectors("siggen-hedged.json");
    for (case, rnd) in det.iter().map(|c| (c, [0u8; 32])).chain(
        hedged
            .iter()
            .map(|c| (c, bytes(c, "rnd").try_into().unwrap())),
    ) {
        // NIST gives the expanded private key, not a seed: the crate's own
        // signing call, which `MlDsa44KeyPair::sign_with` makes too.
        let sk = MLDSA44SigningKey::new(bytes(case, "sk").try_into().unwrap());
        let sig = sign(&sk, &bytes(case, "message"), &bytes(case, "context"), rnd)
            .unwrap_or_else(|e| panic!("tcId {}: {e:?}", tc(case)));
        assert_eq!(
            sig.as_ref()[..],
            bytes(case, "signature")[..],
            "tcId {}",
            tc(case)
        );
    }
}

#[test]
fn verification_agrees_with_nist_on_good_and_bad_signatures() {
    let (mut pass, mut fail) = (0, 0);
    for case in vectors("sigver.json") {
        let want = case["testPassed"].as_bool().expect("testPassed");
        let got = Scheme::MlDsa44.verify(
            &bytes(&case, "pk"),
            &bytes(&case, "context"),
            &bytes(&case, "message"),
            &bytes(&case, "signature"),
        );
        assert_eq!(got, want, "tcId {}", tc(&case));
        if want {
            pass += 1
        } else {
            fail += 1
        }
    }
    assert!(
        pass > 0 && fail > 0,
        "{pass} passing and {fail} failing cases"
    );
}

#[test]
fn the_same_seed_gives_the_same_key_in_another_implementation() {
    for seed in [[0u8; 32], [0x5a; 32], *b"gnomon post-quantum root key 01!"] {
        let (pk, _) = fips204::ml_dsa_44::KG::keygen_from_seed(&seed);
        assert_eq!(pk.into_bytes(), *MlDsa44KeyPair::from_seed(&seed).public());
    }
}

#[test]
fn what_gnomon_signs_verifies_in_another_implementation() {
    let server = Server::new(21);
    let pq = Profile::by_name("ml-dsa-44").unwrap();
    let reqs: Vec<Vec<u8>> = (0..5).map(|i| request(pq, i, 1024)).collect();
    let sink = server.answer(pq, &reqs, ResponderOptions::default(), NOW_US);
    let other = |key: &[u8]| {
        fips204::ml_dsa_44::PublicKey::try_from_bytes(key.try_into().unwrap()).unwrap()
    };
    let root = other(server.pq_long_term.public());
    for (i, req) in reqs.iter().enumerate() {
        let resp = sink.response(i).expect("answered");
        assert!(resp.len() > 6000, "an ML-DSA-44 answer is about 6.4 KB");
        verify_response(req, resp, server.public(pq)).expect("gnomon accepts its own");
        let msg = Message::parse(&resp[12..]).unwrap();
        let cert = msg.nested(Tag::CERT).unwrap();
        let dele = cert.require(Tag::DELE).unwrap();
        let online = Message::parse(dele).unwrap().require(Tag::PUBK).unwrap();
        let sig =
            |m: &Message<'_>| -> [u8; 2420] { m.require(Tag::SIG).unwrap().try_into().unwrap() };
        assert!(
            root.verify(dele, &sig(&cert), pq.contexts.dele),
            "DELE #{i}"
        );
        let srep = msg.require(Tag::SREP).unwrap();
        assert!(
            other(online).verify(srep, &sig(&msg), pq.contexts.srep),
            "SREP #{i}"
        );
        // And not with the context prefixed, Ed25519's way.
        let prefixed = [pq.contexts.srep, srep].concat();
        assert!(!other(online).verify(&prefixed, &sig(&msg), b""));
    }
}

#[test]
fn a_datagram_never_carries_an_ml_dsa_answer() {
    // The responder for datagrams bounds each answer by its request; an
    // ML-DSA-44 answer never fits one (here, even a 4 KB request).
    let server = Server::new(22);
    let pq = Profile::by_name("ml-dsa-44").unwrap();
    let req = request(pq, 0, 4096);
    let parsed = gnomon_protocol::Acceptor::default().parse(&req).unwrap();
    let cert = server.cert(pq);
    let ctx = server.context(pq, &cert, NOW_US);
    let mut sink = common::VecSink::new(1);
    gnomon_protocol::Responder::new(8, ResponderOptions::default()).respond(
        &ctx,
        &[parsed],
        &mut sink,
    );
    assert_eq!(
        sink.results[0],
        Some(Err(gnomon_protocol::responder::RespondError::TooSmall))
    );
}
