//! The responder's hot path allocates nothing: after warm-up, parsing a batch
//! and answering it (tree, signature, every response) makes zero allocations.

mod common;

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
