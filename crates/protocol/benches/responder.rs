//! In-process responder cost per request: parse a batch of 1024-byte
//! requests and answer it (leaf hashes, tree, one signature, every response).
//! `cargo bench -p gnomon-protocol --bench responder`; figures go to
//! docs/COST.md.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use gnomon_protocol::responder::RespondError;
use gnomon_protocol::{
    Acceptor, BatchContext, Certificate, KeyPair, Offer, Profile, Request, Responder,
    ResponderOptions, ResponseSink, Version,
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

criterion_group!(benches, responder);
criterion_main!(benches);
