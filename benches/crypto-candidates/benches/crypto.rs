//! Micro-benchmarks of hot-path primitives for a Roughtime server.
//! Inputs are built once outside the timed closure; only the primitive is timed.
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

const LEAF_LEN: usize = 1024;

fn buf(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// SHA-512(prefix || data) with every candidate, streaming the 1-byte prefix
/// then the data (no concatenation copy), returning the 64-byte digest.
macro_rules! sha512_group {
    ($c:expr, $group:expr, $prefix:expr, $data:expr) => {{
        let prefix: &[u8] = $prefix;
        let data: &[u8] = $data;
        let mut g = $c.benchmark_group($group);
        g.bench_function("sha2-0.11", |b| {
            use sha2::Digest;
            b.iter(|| {
                let mut h = sha2::Sha512::new();
                h.update(black_box(prefix));
                h.update(black_box(data));
                h.finalize()
            })
        });
        let label10 = if cfg!(feature = "sha2-asm") { "sha2-0.10+asm" } else { "sha2-0.10" };
        g.bench_function(label10, |b| {
            use sha2_10::Digest;
            b.iter(|| {
                let mut h = sha2_10::Sha512::new();
                h.update(black_box(prefix));
                h.update(black_box(data));
                h.finalize()
            })
        });
        g.bench_function("ring", |b| {
            b.iter(|| {
                let mut h = ring::digest::Context::new(&ring::digest::SHA512);
                h.update(black_box(prefix));
                h.update(black_box(data));
                h.finish()
            })
        });
        g.bench_function("aws-lc-rs", |b| {
            b.iter(|| {
                let mut h = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA512);
                h.update(black_box(prefix));
                h.update(black_box(data));
                h.finish()
            })
        });
        g.finish();
    }};
}

fn sha512(c: &mut Criterion) {
    let leaf = buf(LEAF_LEN, 7);
    sha512_group!(c, "sha512_leaf_1+1024B", &[0x00], &leaf);
    let node = buf(64, 9);
    sha512_group!(c, "sha512_node_1+64B", &[0x01], &node);
    let small = buf(32, 11);
    sha512_group!(c, "sha512_1+32B", &[0x00], &small);
}

fn sha512_256(c: &mut Criterion) {
    let prefix: &[u8] = &[0x00];
    let data = buf(32, 13);
    let data: &[u8] = &data;
    let mut g = c.benchmark_group("sha512_256_1+32B");
    g.bench_function("sha2-0.11", |b| {
        use sha2::Digest;
        b.iter(|| {
            let mut h = sha2::Sha512_256::new();
            h.update(black_box(prefix));
            h.update(black_box(data));
            h.finalize()
        })
    });
    let label10 = if cfg!(feature = "sha2-asm") { "sha2-0.10+asm" } else { "sha2-0.10" };
    g.bench_function(label10, |b| {
        use sha2_10::Digest;
        b.iter(|| {
            let mut h = sha2_10::Sha512_256::new();
            h.update(black_box(prefix));
            h.update(black_box(data));
            h.finalize()
        })
    });
    g.bench_function("ring", |b| {
        b.iter(|| {
            let mut h = ring::digest::Context::new(&ring::digest::SHA512_256);
            h.update(black_box(prefix));
            h.update(black_box(data));
            h.finish()
        })
    });
    g.bench_function("aws-lc-rs", |b| {
        b.iter(|| {
            let mut h = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA512_256);
            h.update(black_box(prefix));
            h.update(black_box(data));
            h.finish()
        })
    });
    g.finish();
}

fn ed25519(c: &mut Criterion) {
    // ~100-byte message, roughly the size of a signed SREP with context prefix.
    let msg = buf(100, 17);
    let msg: &[u8] = &msg;
    let seed: [u8; 32] = core::array::from_fn(|i| (i as u8).wrapping_mul(73).wrapping_add(5));

    // ed25519-dalek
    let dalek_sk = ed25519_dalek::SigningKey::from_bytes(&seed);
    let dalek_vk = dalek_sk.verifying_key();
    // ring
    let ring_kp = ring::signature::Ed25519KeyPair::from_seed_unchecked(&seed).unwrap();
    // aws-lc-rs
    let aws_kp = aws_lc_rs::signature::Ed25519KeyPair::from_seed_unchecked(&seed).unwrap();

    // Cross-check: Ed25519 is deterministic, all three must agree.
    use ed25519_dalek::Signer;
    use ring::signature::KeyPair as _;
    let sig_d = dalek_sk.sign(msg).to_bytes();
    let sig_r = ring_kp.sign(msg);
    let sig_a = aws_kp.sign(msg);
    assert_eq!(&sig_d[..], sig_r.as_ref());
    assert_eq!(&sig_d[..], sig_a.as_ref());
    assert_eq!(dalek_vk.as_bytes(), ring_kp.public_key().as_ref());
    {
        use aws_lc_rs::signature::KeyPair as _;
        assert_eq!(dalek_vk.as_bytes(), aws_kp.public_key().as_ref());
    }
    let pk = *dalek_vk.as_bytes();
    let dalek_sig = ed25519_dalek::Signature::from_bytes(&sig_d);

    let mut g = c.benchmark_group("ed25519_sign_100B");
    g.bench_function("ed25519-dalek", |b| b.iter(|| dalek_sk.sign(black_box(msg))));
    g.bench_function("ring", |b| b.iter(|| ring_kp.sign(black_box(msg))));
    g.bench_function("aws-lc-rs", |b| b.iter(|| aws_kp.sign(black_box(msg))));
    g.finish();

    let mut g = c.benchmark_group("ed25519_verify_100B");
    g.bench_function("ed25519-dalek", |b| {
        use ed25519_dalek::Verifier;
        b.iter(|| dalek_vk.verify(black_box(msg), black_box(&dalek_sig)).unwrap())
    });
    g.bench_function("ed25519-dalek(verify_strict)", |b| {
        b.iter(|| dalek_vk.verify_strict(black_box(msg), black_box(&dalek_sig)).unwrap())
    });
    // ring/aws-lc-rs take raw public-key bytes and decompress the point on
    // every verify; this dalek variant does the same, for a like-for-like number.
    g.bench_function("ed25519-dalek(from_bytes+verify)", |b| {
        use ed25519_dalek::Verifier;
        b.iter(|| {
            ed25519_dalek::VerifyingKey::from_bytes(black_box(&pk))
                .unwrap()
                .verify(black_box(msg), black_box(&dalek_sig))
                .unwrap()
        })
    });
    g.bench_function("ring", |b| {
        b.iter(|| {
            ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, black_box(&pk))
                .verify(black_box(msg), black_box(&sig_d))
                .unwrap()
        })
    });
    g.bench_function("aws-lc-rs", |b| {
        b.iter(|| {
            aws_lc_rs::signature::UnparsedPublicKey::new(&aws_lc_rs::signature::ED25519, black_box(&pk))
                .verify(black_box(msg), black_box(&sig_d))
                .unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, sha512, sha512_256, ed25519);
criterion_main!(benches);
