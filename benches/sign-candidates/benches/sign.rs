//! ns per Ed25519 signature of a 100-byte message, every candidate.
use criterion::{criterion_group, criterion_main, Criterion};
use sign_candidates::{message, Candidates, NAMES};
use std::hint::black_box;

fn sign(c: &mut Criterion) {
    let keys = Candidates::new();
    let msg = message();
    // Ed25519 is deterministic: every candidate must give the same bytes.
    let first = keys.sign(0, &msg);
    for (i, name) in NAMES.iter().enumerate() {
        assert_eq!(keys.sign(i, &msg), first, "{name} disagrees");
    }
    let mut g = c.benchmark_group("ed25519_sign_100B");
    for (i, name) in NAMES.iter().enumerate() {
        g.bench_function(*name, |b| b.iter(|| keys.sign(black_box(i), black_box(&msg))));
    }
    g.finish();
}

criterion_group!(benches, sign);
criterion_main!(benches);
