//! SHA-512 across lanes: word `k` of four messages' states lives in one
//! `__m256i`, so every instruction of the compression function works on
//! four messages. `G` register sets (one or two) are interleaved per round
//! so that independent work hides the latency of each round's chain.
//!
//! Everything here is safe code compiled with AVX2: vectors are built from
//! words with `_mm256_set_epi64x` and read back with `_mm256_extract_epi64`,
//! so no pointer is ever dereferenced. AVX2 has no 64-bit rotate: a rotate
//! is two shifts and an OR.

use core::arch::x86_64::{
    __m256i, _mm256_add_epi64, _mm256_and_si256, _mm256_andnot_si256, _mm256_extract_epi64,
    _mm256_or_si256, _mm256_set1_epi64x, _mm256_set_epi64x, _mm256_slli_epi64, _mm256_srli_epi64,
    _mm256_xor_si256,
};

use crate::consts::{IV_512, IV_512_256, K};
use crate::pad::{blocks, Padded};
use crate::{portable, Digest, Message, Variant};

/// Hash every message: runs of eight (if `wide`) or four with the same
/// padded length go through the lanes, the rest through the portable path.
#[target_feature(enable = "avx2")]
pub(crate) fn digest_many(variant: Variant, wide: bool, msgs: &[Message<'_>], out: &mut [Digest]) {
    let len = |m: &Message<'_>| m.iter().map(|p| p.len()).sum::<usize>();
    let mut i = 0;
    while i < msgs.len() {
        let b = blocks(len(&msgs[i]));
        let same = msgs[i..]
            .iter()
            .take(if wide { 8 } else { 4 })
            .take_while(|m| blocks(len(m)) == b)
            .count();
        if same == 8 {
            group::<2>(variant, &msgs[i..i + 8], &mut out[i..i + 8]);
            i += 8;
        } else if same >= 4 {
            group::<1>(variant, &msgs[i..i + 4], &mut out[i..i + 4]);
            i += 4;
        } else {
            portable::digest_one(variant, &msgs[i], &mut out[i]);
            i += 1;
        }
    }
}

/// Hash `4 × G` messages of the same padded block count.
#[target_feature(enable = "avx2")]
fn group<const G: usize>(variant: Variant, msgs: &[Message<'_>], out: &mut [Digest]) {
    let padded: [[Padded<'_>; 4]; G] =
        core::array::from_fn(|g| core::array::from_fn(|l| Padded::new(&msgs[4 * g + l])));
    let iv = match variant {
        Variant::Sha512 => IV_512,
        Variant::Sha512_256 => IV_512_256,
    };
    let mut state: [[__m256i; G]; 8] = core::array::from_fn(|k| [splat(iv[k]); G]);
    let mut w = [[splat(0); G]; 80];
    for b in 0..padded[0][0].blocks() {
        for g in 0..G {
            let lanes: [[u64; 16]; 4] = core::array::from_fn(|l| padded[g][l].block(b));
            for (t, wt) in w.iter_mut().take(16).enumerate() {
                wt[g] = lanes4(lanes[0][t], lanes[1][t], lanes[2][t], lanes[3][t]);
            }
        }
        schedule(&mut w);
        compress(&mut state, &w);
    }
    let words = match variant {
        Variant::Sha512 => 8,
        Variant::Sha512_256 => 4,
    };
    for g in 0..G {
        for l in 0..4 {
            let o = &mut out[4 * g + l];
            o.fill(0);
            for k in 0..words {
                o[8 * k..8 * k + 8].copy_from_slice(&lane(state[k][g], l).to_be_bytes());
            }
        }
    }
}

#[inline]
#[target_feature(enable = "avx2")]
fn splat(x: u64) -> __m256i {
    _mm256_set1_epi64x(x as i64)
}

#[inline]
#[target_feature(enable = "avx2")]
fn lanes4(l0: u64, l1: u64, l2: u64, l3: u64) -> __m256i {
    _mm256_set_epi64x(l3 as i64, l2 as i64, l1 as i64, l0 as i64)
}

#[inline]
#[target_feature(enable = "avx2")]
fn lane(v: __m256i, l: usize) -> u64 {
    (match l {
        0 => _mm256_extract_epi64::<0>(v),
        1 => _mm256_extract_epi64::<1>(v),
        2 => _mm256_extract_epi64::<2>(v),
        _ => _mm256_extract_epi64::<3>(v),
    }) as u64
}

macro_rules! add {
    ($x:expr, $y:expr) => {
        _mm256_add_epi64($x, $y)
    };
}

macro_rules! xor {
    ($x:expr, $y:expr) => {
        _mm256_xor_si256($x, $y)
    };
}

macro_rules! rotr {
    ($x:expr, $n:literal) => {
        _mm256_or_si256(
            _mm256_srli_epi64::<$n>($x),
            _mm256_slli_epi64::<{ 64 - $n }>($x),
        )
    };
}

/// W[16..80] from W[0..16] (FIPS 180-4 §6.4.2 step 1).
#[allow(clippy::needless_range_loop)] // `g` indexes four rows of `w`
#[inline]
#[target_feature(enable = "avx2")]
fn schedule<const G: usize>(w: &mut [[__m256i; G]; 80]) {
    for t in 16..80 {
        for g in 0..G {
            let x = w[t - 15][g];
            let s0 = xor!(xor!(rotr!(x, 1), rotr!(x, 8)), _mm256_srli_epi64::<7>(x));
            let y = w[t - 2][g];
            let s1 = xor!(xor!(rotr!(y, 19), rotr!(y, 61)), _mm256_srli_epi64::<6>(y));
            w[t][g] = add!(add!(s1, w[t - 7][g]), add!(s0, w[t - 16][g]));
        }
    }
}

/// One round for every register set: returns the new d and h; the caller
/// renames the rest (§6.4.2 step 3).
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2")]
fn round<const G: usize>(
    a: [__m256i; G],
    b: [__m256i; G],
    c: [__m256i; G],
    d: &mut [__m256i; G],
    e: [__m256i; G],
    f: [__m256i; G],
    g: [__m256i; G],
    h: &mut [__m256i; G],
    w: [__m256i; G],
    k: u64,
) {
    let k = splat(k);
    for i in 0..G {
        let (a, b, c, e, f, g) = (a[i], b[i], c[i], e[i], f[i], g[i]);
        let s1 = xor!(xor!(rotr!(e, 14), rotr!(e, 18)), rotr!(e, 41));
        // Ch(e, f, g) = (e ∧ f) ⊕ (¬e ∧ g)
        let ch = xor!(_mm256_and_si256(e, f), _mm256_andnot_si256(e, g));
        let t1 = add!(add!(h[i], add!(w[i], k)), add!(s1, ch));
        let s0 = xor!(xor!(rotr!(a, 28), rotr!(a, 34)), rotr!(a, 39));
        // Maj(a, b, c) = (a ∧ b) ∨ (c ∧ (a ∨ b))
        let maj = _mm256_or_si256(
            _mm256_and_si256(a, b),
            _mm256_and_si256(c, _mm256_or_si256(a, b)),
        );
        d[i] = add!(d[i], t1);
        h[i] = add!(t1, add!(s0, maj));
    }
}

/// The 80 rounds over one block, and the feed-forward.
#[inline]
#[target_feature(enable = "avx2")]
fn compress<const G: usize>(state: &mut [[__m256i; G]; 8], w: &[[__m256i; G]; 80]) {
    let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = *state;
    for t in (0..80).step_by(8) {
        round(a, b, c, &mut d, e, f, g, &mut h, w[t], K[t]);
        round(h, a, b, &mut c, d, e, f, &mut g, w[t + 1], K[t + 1]);
        round(g, h, a, &mut b, c, d, e, &mut f, w[t + 2], K[t + 2]);
        round(f, g, h, &mut a, b, c, d, &mut e, w[t + 3], K[t + 3]);
        round(e, f, g, &mut h, a, b, c, &mut d, w[t + 4], K[t + 4]);
        round(d, e, f, &mut g, h, a, b, &mut c, w[t + 5], K[t + 5]);
        round(c, d, e, &mut f, g, h, a, &mut b, w[t + 6], K[t + 6]);
        round(b, c, d, &mut e, f, g, h, &mut a, w[t + 7], K[t + 7]);
    }
    for (s, v) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
        for i in 0..G {
            s[i] = add!(s[i], v[i]);
        }
    }
}
