//! The responder's hot path allocates nothing: after warm-up, parsing a batch
//! and answering it (tree, signature, every response) makes zero allocations.

use crate::common;

use common::*;
use gnomon_protocol::{
    Acceptor, Profile, Request, Responder, ResponderOptions, ResponseSink, PROFILES,
};

struct FixedSink {
    // Room for an ML-DSA-44 answer (6.4 KB and its path) from a stream.
    bufs: [[u8; 8192]; 64],
    ok: usize,
}

impl ResponseSink for FixedSink {
    fn buffer(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i]
    }
    fn finish(
        &mut self,
        _i: usize,
        result: Result<usize, gnomon_protocol::responder::RespondError>,
    ) {
        self.ok += usize::from(result.is_ok());
    }
}

#[test]
fn the_counter_sees_allocations() {
    let info = allocation_counter::measure(|| {
        std::hint::black_box(vec![1u8; 10]);
    });
    assert_eq!(info.count_total, 1);
}

#[test]
fn parse_and_respond_make_no_allocations() {
    let server = Server::new(3);
    let acceptor = Acceptor::default();
    let options = ResponderOptions {
        batch_disputed: true,
        google_nonce: false,
    };
    let mut datagrams_responder = Responder::new(64, options);
    let mut stream_responder = Responder::for_stream(64, options);
    let mut sink = Box::new(FixedSink {
        bufs: [[0; 8192]; 64],
        ok: 0,
    });
    for profile in PROFILES.iter() {
        // Each profile as its transport serves it.
        let responder = if profile.udp {
            &mut datagrams_responder
        } else {
            &mut stream_responder
        };
        let datagrams: Vec<Vec<u8>> = (0..64).map(|i| request(profile, i, 1024)).collect();
        let cert = server.cert(profile);
        let ctx = server.context(profile, &cert, NOW_US);
        let mut reqs: [Option<Request<'_>>; 64] = [None; 64];
        let mut parsed: Vec<Request<'_>> = Vec::with_capacity(64);
        // Warm-up outside the measured window.
        for d in &datagrams {
            parsed.push(acceptor.parse(d).unwrap());
        }
        responder.respond(&ctx, &parsed, &mut *sink);
        sink.ok = 0;
        parsed.clear();
        let info = allocation_counter::measure(|| {
            for (slot, d) in reqs.iter_mut().zip(&datagrams) {
                *slot = acceptor.parse(d).ok();
            }
            for r in reqs.iter().flatten() {
                parsed.push(*r);
            }
            responder.respond(&ctx, &parsed, &mut *sink);
        });
        assert_eq!(sink.ok, 64, "{}", profile.name);
        assert_eq!(
            info.count_total, 0,
            "{} allocated {} times",
            profile.name, info.count_total
        );
        let _: &Profile = profile;
    }
}

#[test]
fn verifying_a_proof_makes_no_allocations() {
    use common::relay;
    use gnomon_protocol::{verify_proof, ProofError, ProofPolicy, ProofWorkspace};

    let device = [7u8; 32];
    let servers = relay::servers(3);
    let mut asks = relay::honest(3, NOW_US, 100_000);
    let bundle = relay::proof(&servers, &device, &asks, 0).to_binary();
    asks.truncate(3);
    asks[0].midpoint_us -= 600_000_000;
    let liar = relay::proof(&servers, &device, &asks, 0).to_binary();
    let mut broken_link = bundle.clone();
    // The second entry's rand: after the header, D and the first entry.
    let first = gnomon_protocol::proof::ProofView::parse(&bundle)
        .unwrap()
        .entries()[0];
    let at = 7
        + device.len()
        + 2
        + 32
        + 1
        + 32
        + 4
        + first.request_head.len()
        + 2
        + first.response.len()
        + 2
        + 32
        + 1;
    broken_link[at] ^= 1;
    let keys = relay::keys(&servers, Profile::rfc());
    // Every answer in ML-DSA-44 (its own signature code path).
    let pq = Profile::by_name("ml-dsa-44").unwrap();
    let mut pq_asks = relay::honest(3, NOW_US, 100_000);
    for a in &mut pq_asks {
        a.profile = pq;
    }
    let pq_bundle = relay::proof(&servers, &device, &pq_asks, 0).to_binary();
    let pq_keys = relay::keys(&servers, pq);
    let policy = ProofPolicy::default();
    let mut ws = Box::new(ProofWorkspace::new());
    let mut results = [None; 6];
    let info = allocation_counter::measure(|| {
        let mut run = |i: usize, b: &[u8], d: &[u8]| {
            results[i] = Some(verify_proof(b, d, &keys, 2_000_000, &policy, &mut ws));
        };
        run(0, &bundle, &device);
        run(1, &liar, &device);
        run(2, &broken_link, &device);
        run(3, &bundle[..bundle.len() - 1], &device);
        run(4, &bundle, &[8u8; 32]);
        results[5] = Some(verify_proof(
            &pq_bundle, &device, &pq_keys, 2_000_000, &policy, &mut ws,
        ));
    });
    assert!(results[0].unwrap().is_ok(), "{:?}", results[0]);
    assert!(
        matches!(results[1], Some(Err(ProofError::Liar { .. }))),
        "{:?}",
        results[1]
    );
    assert_eq!(results[2], Some(Err(ProofError::Link(1))));
    assert_eq!(results[3], Some(Err(ProofError::Truncated)));
    assert_eq!(results[4], Some(Err(ProofError::WrongNonce)));
    assert!(results[5].unwrap().is_ok(), "{:?}", results[5]);
    assert_eq!(info.count_total, 0, "allocated {} times", info.count_total);
}

#[test]
fn a_forged_proof_allocates_only_what_dalek_boxes_in_its_error() {
    // ed25519-dalek boxes the cause of a failed check when a crate in the
    // build turns on its std feature: the tests do (the dev-dependency),
    // the protocol crate alone does not (`cargo tree -e features`). The
    // verifier adds nothing to that: one failed check per context set.
    use common::relay;
    use ed25519_dalek::{Signature, Signer, SigningKey};
    use gnomon_protocol::{verify_proof, ProofError, ProofPolicy, ProofWorkspace};

    let key = SigningKey::from_bytes(&[3; 32]);
    let sig: Signature = key.sign(b"message");
    let dalek = allocation_counter::measure(|| {
        assert!(key.verifying_key().verify_strict(b"massage", &sig).is_err());
    });
    let device = [7u8; 32];
    let servers = relay::servers(3);
    let mut bundle =
        relay::proof(&servers, &device, &relay::honest(3, NOW_US, 100_000), 0).to_binary();
    let last = bundle.len() - 40;
    bundle[last] ^= 1;
    let keys = relay::keys(&servers, Profile::rfc());
    let mut ws = Box::new(ProofWorkspace::new());
    let mut result = None;
    let info = allocation_counter::measure(|| {
        result = Some(verify_proof(
            &bundle,
            &device,
            &keys,
            2_000_000,
            &ProofPolicy::default(),
            &mut ws,
        ));
    });
    assert!(
        matches!(result, Some(Err(ProofError::Signature(5)))),
        "{result:?}"
    );
    // RFC 10049 answers are tried with the draft's context strings too.
    assert_eq!(info.count_total, 2 * dalek.count_total);
}
