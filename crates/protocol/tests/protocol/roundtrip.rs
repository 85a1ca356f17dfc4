//! Request → batched responses → verification, for every profile.

use crate::common;
use common::*;
use gnomon_protocol::merkle::Orientation;
use gnomon_protocol::profile::Batching;
use gnomon_protocol::{verify_response, Profile, ResponderOptions, PROFILES};

#[test]
fn every_profile_round_trips_in_batches() {
    let server = Server::new(7);
    let opts = ResponderOptions {
        batch_disputed: true,
        google_nonce: false,
    };
    for profile in PROFILES.iter() {
        for batch in [1usize, 2, 3, 64, 100] {
            let reqs: Vec<Vec<u8>> = (0..batch).map(|i| request(profile, i, 1024)).collect();
            let sink = server.answer(profile, &reqs, opts, NOW_US);
            let mut max_depth = 0;
            for (i, req) in reqs.iter().enumerate() {
                let resp = sink.response(i).unwrap_or_else(|| {
                    panic!(
                        "{} batch {batch}: no response {i}: {:?}",
                        profile.name, sink.results[i]
                    )
                });
                assert!(!profile.udp || resp.len() <= req.len(), "amplification");
                let v = verify_response(req, resp, server.public(profile))
                    .unwrap_or_else(|e| panic!("{} batch {batch} #{i}: {e:?}", profile.name));
                assert_eq!(v.profile.id, profile.id);
                assert_eq!(v.orientation, Orientation::HashFirst);
                assert!(v.earliest_us() <= i128::from(NOW_US) - i128::from(RADIUS_US));
                assert!(v.latest_us() >= i128::from(NOW_US) + i128::from(RADIUS_US));
                assert!(!v.legacy_context);
                max_depth = max_depth.max(v.path_depth);
            }
            let expect_batched = batch > 1 && profile.batching != Batching::Never;
            assert_eq!(
                max_depth > 0,
                expect_batched,
                "{} batch {batch}",
                profile.name
            );
        }
    }
}

#[test]
fn disputed_versions_answer_alone_by_default() {
    let server = Server::new(9);
    for profile in PROFILES.iter() {
        let reqs: Vec<Vec<u8>> = (0..8).map(|i| request(profile, i, 1024)).collect();
        let sink = server.answer(profile, &reqs, ResponderOptions::default(), NOW_US);
        for (i, req) in reqs.iter().enumerate() {
            let v =
                verify_response(req, sink.response(i).unwrap(), server.public(profile)).unwrap();
            let alone = profile.batching != Batching::Free;
            assert_eq!(v.path_depth == 0, alone, "{}", profile.name);
        }
    }
}

#[test]
fn one_certificate_set_serves_every_profile() {
    let server = Server::new(11);
    let set = gnomon_protocol::CertificateSet::mint_all(
        &server.long_term,
        &server.online.public(),
        NOW_US - 60_000_000,
        NOW_US + 60_000_000,
    );
    // Google, 01–06, 07, 08–11, 12–19, version 1; the ML-DSA-44 row is
    // another key's.
    assert_eq!(set.distinct(), 6);
    assert!(set.covers(NOW_US));
    assert!(!set.covers(NOW_US + 61_000_000));
    let pq = Profile::by_name("ml-dsa-44").unwrap();
    assert!(set.for_profile(pq).is_none());
    let pq_set = gnomon_protocol::CertificateSet::mint_all(
        &server.pq_long_term,
        server.pq_online.public(),
        NOW_US - 60_000_000,
        NOW_US + 60_000_000,
    );
    assert_eq!(pq_set.distinct(), 1);
    assert!(pq_set.for_profile(Profile::rfc()).is_none());
    for profile in PROFILES.iter() {
        let req = request(profile, 0, 1024);
        let parsed = gnomon_protocol::Acceptor::default().parse(&req).unwrap();
        let cert = set.for_profile(profile).or(pq_set.for_profile(profile));
        let ctx = server.context(profile, cert.unwrap(), NOW_US);
        let mut sink = VecSink::new(1);
        gnomon_protocol::Responder::for_stream(1, ResponderOptions::default()).respond(
            &ctx,
            &[parsed],
            &mut sink,
        );
        verify_response(&req, sink.response(0).unwrap(), server.public(profile))
            .unwrap_or_else(|e| panic!("{}: {e:?}", profile.name));
    }
}

#[test]
fn a_stream_responder_answers_short_requests_in_full() {
    // Over TCP a response may exceed its request; over UDP it may not.
    let server = Server::new(13);
    let acceptor = gnomon_protocol::Acceptor {
        min_size: 0,
        ..Default::default()
    };
    for profile in PROFILES.iter().filter(|p| p.tcp) {
        let reqs: Vec<Vec<u8>> = (0..5).map(|i| request(profile, i, 256)).collect();
        let parsed: Vec<_> = reqs.iter().map(|r| acceptor.parse(r).unwrap()).collect();
        let cert = server.cert(profile);
        let ctx = server.context(profile, &cert, NOW_US);
        let opts = ResponderOptions::default();

        let mut datagram = VecSink::new(reqs.len());
        gnomon_protocol::Responder::new(64, opts).respond(&ctx, &parsed, &mut datagram);
        let mut stream = VecSink::new(reqs.len());
        gnomon_protocol::Responder::for_stream(64, opts).respond(&ctx, &parsed, &mut stream);
        for (i, req) in reqs.iter().enumerate() {
            assert!(
                datagram.response(i).is_none_or(|r| r.len() <= req.len()),
                "{}: amplified",
                profile.name
            );
            let resp = stream
                .response(i)
                .unwrap_or_else(|| panic!("{}: {:?}", profile.name, stream.results[i]));
            verify_response(req, resp, server.public(profile))
                .unwrap_or_else(|e| panic!("{} #{i}: {e:?}", profile.name));
        }
        // At 256 bytes no profile's response fits its request.
        assert!(
            (0..reqs.len()).all(|i| datagram.response(i).is_none()),
            "{}",
            profile.name
        );
    }
}
