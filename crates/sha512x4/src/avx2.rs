//! SHA-512 across lanes: word `k` of four messages' states lives in one
//! `__m256i`, so every instruction of the compression function works on
//! four messages. `G` register sets (one or two) are interleaved per round
//! so that independent work hides the latency of each round's chain.
//!
//! Everything here is safe code compiled with AVX2: vectors are built from
//! words with `_mm256_set_epi64x` and read back with `_mm256_extract_epi64`,
//! so no pointer is ever dereferenced. AVX2 has no 64-bit rotate: a rotate
//! is two shifts and an OR.
//!
//! A block that is the same in every lane (a request's zero padding) has
//! the same message schedule in every lane: it is computed once, scalar,
//! kept for the call, and broadcast ([`Shared`]). Such a block is found by
//! comparing the lanes' bytes in place before any vector is built, or, if
//! assembled (the length block), by one vector compare per word; measured,
//! that takes a fifth off a padded 1 KiB request leaf and adds 2–5 % to
//! other messages (docs/COST.md).

use core::arch::x86_64::{
    __m256i, _mm256_add_epi64, _mm256_and_si256, _mm256_andnot_si256, _mm256_cmpeq_epi64,
    _mm256_extract_epi64, _mm256_movemask_epi8, _mm256_or_si256, _mm256_permute4x64_epi64,
    _mm256_set1_epi64x, _mm256_set_epi64x, _mm256_shuffle_epi8, _mm256_slli_epi64,
    _mm256_srli_epi64, _mm256_xor_si256,
};

use crate::consts::{IV_512, IV_512_256, K};
use crate::pad::{blocks, same_in_place, Padded};
use crate::shared::Shared;
use crate::{portable, Digest, Message, Variant};

/// Hash every message: runs of equal padded length go through the lanes,
/// the rest through the portable path. A group may be started with one or
/// two lanes short (they repeat the last message and are thrown away):
/// measured, a group of four costs about two single hashes, one of eight
/// about three and a half (docs/COST.md, "Multi-buffer leaf hashing").
#[target_feature(enable = "avx2")]
pub(crate) fn digest_many(variant: Variant, wide: bool, msgs: &[Message<'_>], out: &mut [Digest]) {
    let len = |m: &Message<'_>| m.iter().map(|p| p.len()).sum::<usize>();
    let mut shared = Shared::new();
    let mut i = 0;
    while i < msgs.len() {
        let b = blocks(len(&msgs[i]));
        let same = msgs[i..]
            .iter()
            .take(if wide { 8 } else { 4 })
            .take_while(|m| blocks(len(m)) == b)
            .count();
        let n = if same >= 6 {
            padded_group::<2>(
                variant,
                &msgs[i..i + same],
                &mut out[i..i + same],
                &mut shared,
            );
            same
        } else if same >= 3 {
            let n = same.min(4);
            padded_group::<1>(variant, &msgs[i..i + n], &mut out[i..i + n], &mut shared);
            n
        } else {
            portable::digest_one(variant, &msgs[i], &mut out[i]);
            1
        };
        i += n;
    }
}

/// [`group`] for 1 to `4 × G` messages; missing lanes repeat the last one.
#[target_feature(enable = "avx2")]
pub(crate) fn padded_group<const G: usize>(
    variant: Variant,
    msgs: &[Message<'_>],
    out: &mut [Digest],
    shared: &mut Shared<false>,
) {
    let n = msgs.len();
    if n == 4 * G {
        return group::<G>(variant, msgs, out, shared);
    }
    let mut m = [msgs[n - 1]; 8];
    m[..n].copy_from_slice(msgs);
    let mut scratch = [[0u8; 64]; 8];
    group::<G>(variant, &m[..4 * G], &mut scratch[..4 * G], shared);
    out.copy_from_slice(&scratch[..n]);
}

/// Hash `4 × G` messages of the same padded block count.
#[target_feature(enable = "avx2")]
fn group<const G: usize>(
    variant: Variant,
    msgs: &[Message<'_>],
    out: &mut [Digest],
    shared: &mut Shared<false>,
) {
    let padded: [[Padded<'_>; 4]; G] =
        core::array::from_fn(|g| core::array::from_fn(|l| Padded::new(&msgs[4 * g + l])));
    let iv = match variant {
        Variant::Sha512 => IV_512,
        Variant::Sha512_256 => IV_512_256,
    };
    let mut state: [[__m256i; G]; 8] = core::array::from_fn(|k| [splat(iv[k]); G]);
    let mut w = [[splat(0); G]; 80];
    for b in 0..padded[0][0].blocks() {
        if let Some(words) = same_in_place(padded.as_flattened(), b) {
            // The same bytes in every lane (a request's zero padding), seen
            // before any vector is built.
            let sw = shared.schedule(&words);
            for (t, wt) in w.iter_mut().enumerate() {
                *wt = [splat(sw[t]); G];
            }
        } else {
            for g in 0..G {
                let lanes: [[u64; 16]; 4] = core::array::from_fn(|l| padded[g][l].block(b));
                for (t, wt) in w.iter_mut().take(16).enumerate() {
                    wt[g] = lanes4(lanes[0][t], lanes[1][t], lanes[2][t], lanes[3][t]);
                }
            }
            if same_in_every_lane(&w) {
                // The same block assembled in every lane (a request's
                // length block): so is its schedule, likely computed
                // already.
                let first: [u64; 16] = core::array::from_fn(|t| lane(w[t][0], 0));
                let sw = shared.schedule(&first);
                for t in 16..80 {
                    w[t] = [splat(sw[t]); G];
                }
            } else {
                schedule(&mut w);
            }
        }
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

/// Whether W[0..16] holds the same block in all `4 × G` lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn same_in_every_lane<const G: usize>(w: &[[__m256i; G]; 80]) -> bool {
    let mut eq = _mm256_set1_epi64x(-1);
    for wt in w.iter().take(16) {
        let first = _mm256_permute4x64_epi64::<0>(wt[0]);
        for v in wt {
            eq = _mm256_and_si256(eq, _mm256_cmpeq_epi64(*v, first));
        }
    }
    _mm256_movemask_epi8(eq) == -1
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
    // A rotation by whole bytes is one byte shuffle: byte i of each word
    // takes byte i + 1 (mod 8).
    let rotr8 = _mm256_set_epi64x(
        0x080f_0e0d_0c0b_0a09,
        0x0007_0605_0403_0201,
        0x080f_0e0d_0c0b_0a09,
        0x0007_0605_0403_0201,
    );
    for t in 16..80 {
        for g in 0..G {
            let x = w[t - 15][g];
            let s0 = xor!(
                xor!(rotr!(x, 1), _mm256_shuffle_epi8(x, rotr8)),
                _mm256_srli_epi64::<7>(x)
            );
            let y = w[t - 2][g];
            let s1 = xor!(xor!(rotr!(y, 19), rotr!(y, 61)), _mm256_srli_epi64::<6>(y));
            w[t][g] = add!(add!(s1, w[t - 7][g]), add!(s0, w[t - 16][g]));
        }
    }
}

/// One round for every register set: updates d and h (the caller renames
/// the rest, §6.4.2 step 3). `bc` is b ⊕ c, which the previous round
/// computed as its a ⊕ b; this round's a ⊕ b is returned for the next.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2")]
fn round<const G: usize>(
    a: [__m256i; G],
    b: [__m256i; G],
    bc: [__m256i; G],
    d: &mut [__m256i; G],
    e: [__m256i; G],
    f: [__m256i; G],
    g: [__m256i; G],
    h: &mut [__m256i; G],
    w: [__m256i; G],
    k: u64,
) -> [__m256i; G] {
    let k = splat(k);
    let mut ab_out = bc;
    for i in 0..G {
        let (a, b, e, f, g) = (a[i], b[i], e[i], f[i], g[i]);
        let s1 = xor!(xor!(rotr!(e, 14), rotr!(e, 18)), rotr!(e, 41));
        // Ch(e, f, g) = (e ∧ f) ⊕ (¬e ∧ g)
        let ch = xor!(_mm256_and_si256(e, f), _mm256_andnot_si256(e, g));
        let t1 = add!(add!(h[i], add!(w[i], k)), add!(s1, ch));
        let s0 = xor!(xor!(rotr!(a, 28), rotr!(a, 34)), rotr!(a, 39));
        // Maj(a, b, c) = b ⊕ ((a ⊕ b) ∧ (b ⊕ c)): where a = b that is b,
        // elsewhere c.
        let ab = xor!(a, b);
        let maj = xor!(b, _mm256_and_si256(ab, bc[i]));
        ab_out[i] = ab;
        d[i] = add!(d[i], t1);
        h[i] = add!(t1, add!(s0, maj));
    }
    ab_out
}

/// The 80 rounds over one block, and the feed-forward.
#[inline]
#[target_feature(enable = "avx2")]
fn compress<const G: usize>(state: &mut [[__m256i; G]; 8], w: &[[__m256i; G]; 80]) {
    let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = *state;
    let mut x: [__m256i; G] = core::array::from_fn(|i| xor!(b[i], c[i]));
    for t in (0..80).step_by(8) {
        x = round(a, b, x, &mut d, e, f, g, &mut h, w[t], K[t]);
        x = round(h, a, x, &mut c, d, e, f, &mut g, w[t + 1], K[t + 1]);
        x = round(g, h, x, &mut b, c, d, e, &mut f, w[t + 2], K[t + 2]);
        x = round(f, g, x, &mut a, b, c, d, &mut e, w[t + 3], K[t + 3]);
        x = round(e, f, x, &mut h, a, b, c, &mut d, w[t + 4], K[t + 4]);
        x = round(d, e, x, &mut g, h, a, b, &mut c, w[t + 5], K[t + 5]);
        x = round(c, d, x, &mut f, g, h, a, &mut b, w[t + 6], K[t + 6]);
        x = round(b, c, x, &mut e, f, g, h, &mut a, w[t + 7], K[t + 7]);
    }
    for (s, v) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
        for i in 0..G {
            s[i] = add!(s[i], v[i]);
        }
    }
}
