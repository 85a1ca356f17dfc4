//! In-process responder cost per request: parse a batch of 1024-byte
//! requests and answer it (leaf hashes, tree, one signature, every response).
//! `cargo bench -p gnomon-protocol --bench responder`; figures go to
//! docs/COST.md. The `respond-stream` group answers as the TCP transport
//! does, which is the only one ML-DSA-44 (version 0x90000001) is served on.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use gnomon_protocol::responder::RespondError;
use gnomon_protocol::{
    Acceptor, BatchContext, Certificate, KeyPair, MlDsa44KeyPair, Offer, Profile, Request,
    Responder, ResponderOptions, ResponseSink, Sign, Version,
};

const NOW_US: u64 = 1_791_158_400_000_000;

struct Sink {
    bufs: Vec<[u8; 1024]>,
}

impl ResponseSink for Sink {
    fn buffer(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i]
    }
    fn finish(&mut self, _i: usize, result: Result<usize, RespondError>) {
        assert!(result.is_ok());
    }
}

fn requests(profile: &'static Profile, n: usize) -> Vec<Vec<u8>> {
    let offer = Offer::single(profile);
    (0..n)
        .map(|i| {
            let mut nonce = vec![0u8; profile.nonce_len];
            nonce[..8].copy_from_slice(&(i as u64).to_le_bytes());
            let mut out = vec![0u8; 1024];
            offer.build(&nonce, None, 1024, &mut out).unwrap();
            out
        })
        .collect()
}

fn responder(c: &mut Criterion) {
    let long_term = KeyPair::from_seed(&[1; 32]);
    let online = KeyPair::from_seed(&[2; 32]);
    let vers = [Version::RFC, Version::DRAFT_12_TO_19];
    let acceptor = Acceptor::default();
    let mut group = c.benchmark_group("respond");
    for name in ["google", "draft-11", "draft-14", "rfc-10049"] {
        let profile = Profile::by_name(name).unwrap();
        let cert = Certificate::mint(&long_term, &online.public(), 0, u64::MAX, profile);
        let ctx = BatchContext {
            profile,
            now_us: NOW_US,
            radius_us: 3_000_000,
            online: &online,
            cert: &cert,
            vers: &vers,
        };
        for batch in [1usize, 8, 64, 256, 1024] {
            let datagrams = requests(profile, batch);
            // Disputed-orientation versions batch only when the operator
            // opts in; measure the batched cost.
            let opts = ResponderOptions {
                batch_disputed: true,
                google_nonce: false,
            };
            let mut r = Responder::new(batch, opts);
            let mut sink = Sink {
                bufs: vec![[0; 1024]; batch],
            };
            let mut parsed: Vec<Request<'_>> = Vec::with_capacity(batch);
            group.throughput(Throughput::Elements(batch as u64));
            group.bench_with_input(BenchmarkId::new(name, batch), &batch, |b, _| {
                b.iter(|| {
                    parsed.clear();
                    parsed.extend(datagrams.iter().map(|d| acceptor.parse(d).unwrap()));
                    let stats = r.respond(&ctx, &parsed, &mut sink);
                    assert_eq!(stats.signatures, 1);
                })
            });
        }
    }
    group.finish();
}

/// Output room per response on the stream path: an ML-DSA-44 response is
/// about 6.4 KB, and the TCP handler keeps 8 KiB for each.
const STREAM_ROOM: usize = 8 * 1024;

struct StreamSink {
    bufs: Vec<Vec<u8>>,
}

impl ResponseSink for StreamSink {
    fn buffer(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i]
    }
    fn finish(&mut self, _i: usize, result: Result<usize, RespondError>) {
        assert!(result.is_ok());
    }
}

/// One identity of the stream group.
struct StreamCase<'a> {
    name: &'static str,
    long_term: &'a dyn Sign,
    online: &'a dyn Sign,
    online_public: Vec<u8>,
    vers: &'a [Version],
}

/// The responder as the TCP handler drives it (`Responder::for_stream`,
/// responses not bounded by their requests), for ML-DSA-44 beside version
/// 1's Ed25519, so the post-quantum cost is read against the same path.
/// Batch 4 is the most the TCP handler answers under one ML-DSA signature
/// (its output buffer holds four 8 KiB responses).
fn stream(c: &mut Criterion) {
    let ed_long = KeyPair::from_seed(&[1; 32]);
    let ed_online = KeyPair::from_seed(&[2; 32]);
    let pq_long = MlDsa44KeyPair::from_seed(&[3; 32]);
    let pq_online = MlDsa44KeyPair::from_seed(&[4; 32]);
    let ed_vers = [Version::RFC];
    let pq_vers = [Version::ML_DSA_44];
    let cases = [
        StreamCase {
            name: "rfc-10049",
            long_term: &ed_long,
            online: &ed_online,
            online_public: ed_online.public().to_vec(),
            vers: &ed_vers,
        },
        StreamCase {
            name: "ml-dsa-44",
            long_term: &pq_long,
            online: &pq_online,
            online_public: pq_online.public().to_vec(),
            vers: &pq_vers,
        },
    ];
    let acceptor = Acceptor::default();
    let mut group = c.benchmark_group("respond-stream");
    for case in &cases {
        let profile = Profile::by_name(case.name).unwrap();
        let cert = Certificate::mint(case.long_term, &case.online_public, 0, u64::MAX, profile);
        let ctx = BatchContext {
            profile,
            now_us: NOW_US,
            radius_us: 3_000_000,
            online: case.online,
            cert: &cert,
            vers: case.vers,
        };
        for batch in [1usize, 4, 64] {
            let requests = requests(profile, batch);
            let mut r = Responder::for_stream(batch, ResponderOptions::default());
            let mut sink = StreamSink {
                bufs: vec![vec![0; STREAM_ROOM]; batch],
            };
            let mut parsed: Vec<Request<'_>> = Vec::with_capacity(batch);
            group.throughput(Throughput::Elements(batch as u64));
            let mut tick = 0u64;
            group.bench_with_input(BenchmarkId::new(case.name, batch), &batch, |b, _| {
                b.iter(|| {
                    // A new MIDP (whole seconds, for the encodings that
                    // count them) gives a new SREP to sign each time:
                    // ML-DSA's rejection sampling takes a message-dependent
                    // number of rounds, so one fixed message would measure
                    // one draw of it rather than the mean.
                    tick += 1;
                    let ctx = BatchContext {
                        now_us: NOW_US + tick * 1_000_000,
                        ..ctx
                    };
                    parsed.clear();
                    parsed.extend(requests.iter().map(|d| acceptor.parse(d).unwrap()));
                    let stats = r.respond(&ctx, &parsed, &mut sink);
                    assert_eq!(stats.signatures, 1);
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, responder, stream);
criterion_main!(benches);
