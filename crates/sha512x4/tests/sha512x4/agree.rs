//! Every backend gives sha2's digests: many lengths (block boundaries
//! included), lanes of different lengths in one call, with and without a
//! prefix, messages split across slices anywhere.

use crate::common;

use gnomon_sha512x4::{digest_many, digest_many_with, Backend, Digest, Message, Variant};
use proptest::prelude::*;

use common::bytes;
use sha2::{Digest as _, Sha512, Sha512_256};

const VARIANTS: [Variant; 2] = [Variant::Sha512, Variant::Sha512_256];

fn reference(variant: Variant, m: &Message<'_>) -> Digest {
    let mut out = [0u8; 64];
    let cat: Vec<u8> = m.concat();
    match variant {
        Variant::Sha512 => out.copy_from_slice(&Sha512::digest(&cat)),
        Variant::Sha512_256 => out[..32].copy_from_slice(&Sha512_256::digest(&cat)),
    }
    out
}

fn check(msgs: &[Message<'_>]) {
    for variant in VARIANTS {
        let want: Vec<Digest> = msgs.iter().map(|m| reference(variant, m)).collect();
        for backend in Backend::ALL {
            if !backend.available() {
                continue;
            }
            let mut out = vec![[0xaau8; 64]; msgs.len()];
            digest_many_with(backend, variant, msgs, &mut out).unwrap();
            for (i, (got, want)) in out.iter().zip(&want).enumerate() {
                assert_eq!(
                    got[..],
                    want[..],
                    "{backend:?} {variant:?} message {i} of {}, {} bytes",
                    msgs.len(),
                    msgs[i].iter().map(|p| p.len()).sum::<usize>()
                );
            }
        }
        let mut out = vec![[0u8; 64]; msgs.len()];
        digest_many(variant, msgs, &mut out);
        assert_eq!(out, want, "digest_many {variant:?}");
    }
}

/// Lengths around every place padding changes shape, up to 2100 bytes.
fn lengths() -> Vec<usize> {
    let mut v: Vec<usize> = (0..=300).collect();
    for k in 1..=16usize {
        for d in [-18isize, -17, -16, -15, -1, 0, 1] {
            let n = (128 * k) as isize + d;
            if (0..=2100).contains(&n) {
                v.push(n as usize);
            }
        }
    }
    v.extend((300..=2100).step_by(37));
    v.extend([1023, 1024, 1025, 2100]);
    v.sort_unstable();
    v.dedup();
    v
}

#[test]
fn every_length_in_groups_of_equal_lengths() {
    for len in lengths() {
        let data: Vec<Vec<u8>> = (0..9).map(|s| bytes(len as u64 * 16 + s, len)).collect();
        let leaves: Vec<Message<'_>> = data.iter().map(|d| [&[0u8][..], &d[..], &[][..]]).collect();
        let plain: Vec<Message<'_>> = data.iter().map(|d| [&d[..], &[][..], &[][..]]).collect();
        // 9 of the same length: one group of 8 (or two of 4) and a straggler.
        check(&leaves);
        check(&plain);
    }
}

#[test]
fn lanes_of_different_lengths() {
    let all = lengths();
    let data: Vec<Vec<u8>> = all.iter().map(|&n| bytes(n as u64, n)).collect();
    // Neighbouring lengths: some runs share a block count, some do not.
    for w in data.windows(11).step_by(5) {
        let msgs: Vec<Message<'_>> = w.iter().map(|d| [&[0u8][..], &d[..], &[][..]]).collect();
        check(&msgs);
    }
}

#[test]
fn nodes_split_across_slices() {
    let l = bytes(1, 64);
    let r = bytes(2, 64);
    for n in [32, 64] {
        let msgs: Vec<Message<'_>> = (0..8).map(|_| [&[1u8][..], &l[..n], &r[..n]]).collect();
        check(&msgs);
    }
}

#[test]
fn empty_and_mismatched_outputs() {
    check(&[]);
    let d = bytes(3, 100);
    let msgs: Vec<Message<'_>> = (0..5).map(|_| [&d[..], &[][..], &[][..]]).collect();
    // Only as many as there are slots are hashed.
    let mut out = vec![[7u8; 64]; 3];
    digest_many(Variant::Sha512, &msgs, &mut out);
    assert!(out
        .iter()
        .all(|o| *o == reference(Variant::Sha512, &msgs[0])));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn random_batches_agree(
        parts in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 0..3),
             proptest::collection::vec(any::<u8>(), 0..1100),
             proptest::collection::vec(any::<u8>(), 0..200)),
            0..13),
        same in any::<bool>(),
    ) {
        // Either as drawn, or all cut to the first message's middle length
        // so the lanes really run.
        let cut = parts.first().map_or(0, |p| p.1.len());
        let msgs: Vec<Message<'_>> = parts
            .iter()
            .map(|(a, b, c)| {
                if same {
                    [&[0u8][..], &b[..cut.min(b.len())], &[][..]]
                } else {
                    [&a[..], &b[..], &c[..]]
                }
            })
            .collect();
        check(&msgs);
    }
}

#[test]
fn every_count_of_equal_messages() {
    // Full groups, groups started short, and stragglers.
    for len in [64usize, 1024] {
        let data: Vec<Vec<u8>> = (0..17).map(|s| bytes(s, len)).collect();
        for n in 0..=17 {
            let msgs: Vec<Message<'_>> = data[..n]
                .iter()
                .map(|d| [&[0u8][..], &d[..], &[][..]])
                .collect();
            check(&msgs);
        }
    }
}

#[test]
fn shared_tails_like_padded_requests() {
    // Distinct heads, then a tail the lanes share (whole blocks equal in
    // every lane: zeros, or varying from block to block), with one lane
    // sometimes off by one byte, as in a batch of padded requests.
    let tail_patterns: Vec<Vec<u8>> = vec![
        vec![0; 1000],
        bytes(99, 1000),
        (0..1000).map(|i| (i / 128) as u8).collect(),
    ];
    for tail in &tail_patterns {
        for len in [1024usize, 1023, 1000, 900, 700, 257] {
            for odd in [None, Some(0usize), Some(5), Some(15)] {
                let data: Vec<Vec<u8>> = (0..16)
                    .map(|i| {
                        let mut d = bytes(i as u64 + 1000, 40);
                        d.extend_from_slice(&tail[..len - 40]);
                        if odd == Some(i) {
                            let k = d.len() - 3;
                            d[k] ^= 1;
                        }
                        d
                    })
                    .collect();
                let msgs: Vec<Message<'_>> =
                    data.iter().map(|d| [&[0u8][..], &d[..], &[][..]]).collect();
                check(&msgs);
                let plain: Vec<Message<'_>> =
                    data.iter().map(|d| [&d[..40], &d[40..], &[][..]]).collect();
                check(&plain);
            }
        }
    }
}
