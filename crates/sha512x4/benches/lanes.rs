//! Per-message cost of each backend: 8 messages of the same length, hashed
//! as Merkle leaves (0x00 ‖ message). `cargo bench -p gnomon-sha512x4`;
//! figures go to docs/COST.md ("Multi-buffer leaf hashing").

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use gnomon_sha512x4::{digest_many_with, Backend, Digest, Message, Variant};

fn lanes(c: &mut Criterion) {
    let mut group = c.benchmark_group("leaf");
    // 1024-byte request (version 1 leaf: 1025 bytes, 9 blocks); 64-byte
    // nonce (Google leaf: 65 bytes, 1 block); node (0x01 ‖ 64 ‖ 64: 2 blocks).
    // "padded": a request's 64-byte head differs per message, the rest is
    // zero padding, as in real requests; the others differ in every byte.
    for (len, padded) in [(1024usize, true), (1024, false), (64, false), (128, false)] {
        let data: Vec<Vec<u8>> = (0..8u8)
            .map(|i| {
                let mut d = vec![i; len];
                if padded {
                    d[64..].fill(0);
                }
                d
            })
            .collect();
        let msgs: Vec<Message<'_>> = data.iter().map(|d| [&[0u8][..], &d[..], &[][..]]).collect();
        let mut out = [[0u8; 64]; 8];
        group.throughput(Throughput::Elements(8));
        for backend in Backend::ALL {
            if !backend.available() {
                continue;
            }
            let size = format!("{}{}", len + 1, if padded { "-padded" } else { "" });
            let id = BenchmarkId::new(format!("{backend:?}"), size);
            group.bench_function(id, |b| {
                b.iter(|| {
                    digest_many_with(backend, Variant::Sha512, &msgs, &mut out as &mut [Digest])
                        .unwrap();
                    criterion::black_box(&out);
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, lanes);
criterion_main!(benches);
