//! SHA-512 across eight lanes: word `k` of eight messages' states lives in
//! one `__m512i`. AVX-512F has what AVX2 lacks for SHA-512: a 64-bit rotate
//! (`vprorq`, one instruction instead of two shifts and an OR) and a
//! three-input logic instruction (`vpternlogq`), which computes Ch, Maj and
//! each three-way XOR of Σ and σ in one instruction. A round is 17 vector
//! instructions for eight lanes; AVX2's is about 30 for four.
//!
//! Like the AVX2 path, everything here is safe code: vectors are built from
//! words with `_mm512_set_epi64` and read back through their 256-bit halves,
//! no pointer is dereferenced. Blocks the same in every lane share one
//! scalar schedule ([`Shared`]), as there.

use core::arch::x86_64::{
    __m512i, _mm256_extract_epi64, _mm512_add_epi64, _mm512_broadcastq_epi64,
    _mm512_castsi512_si128, _mm512_castsi512_si256, _mm512_cmpeq_epi64_mask,
    _mm512_extracti64x4_epi64, _mm512_ror_epi64, _mm512_set1_epi64, _mm512_set_epi64,
    _mm512_srli_epi64, _mm512_ternarylogic_epi64,
};

use crate::consts::{IV_512, IV_512_256, K};
use crate::pad::{blocks, same_in_place, Padded};
use crate::shared::Shared;
use crate::{avx2, portable, Digest, Message, Variant};

macro_rules! add {
    ($x:expr, $y:expr) => {
        _mm512_add_epi64($x, $y)
    };
}

/// `vpternlogq` truth tables: bit `4a + 2b + c` of the constant is the
/// result for input bits a, b, c (the three operands in order).
const XOR3: i32 = 0x96;
/// Ch(e, f, g): f where e is set, else g.
const CH: i32 = 0xca;
/// Maj(a, b, c): the majority of the three bits.
const MAJ: i32 = 0xe8;

macro_rules! logic {
    ($imm:expr, $a:expr, $b:expr, $c:expr) => {
        _mm512_ternarylogic_epi64::<$imm>($a, $b, $c)
    };
}

macro_rules! rotr {
    ($x:expr, $n:literal) => {
        _mm512_ror_epi64::<$n>($x)
    };
}

/// Hash every message: runs of equal padded length go through sixteen
/// lanes (two register sets; only when `wide`) if 10–16 long, eight if
/// 5–9, AVX2's four if 3–4, sha2 otherwise. Missing lanes repeat the last
/// message and are thrown away. Each cut is where the wider group became
/// cheaper than the narrower ones plus single hashes, for 1 KiB leaves and
/// one- and two-block messages alike (docs/COST.md, "Multi-buffer leaf
/// hashing").
#[target_feature(enable = "avx2,fma,avx512f")]
pub(crate) fn digest_many(variant: Variant, wide: bool, msgs: &[Message<'_>], out: &mut [Digest]) {
    let len = |m: &Message<'_>| m.iter().map(|p| p.len()).sum::<usize>();
    let mut shared = Shared::new();
    let mut shared_avx2 = Shared::new();
    let mut i = 0;
    while i < msgs.len() {
        let b = blocks(len(&msgs[i]));
        let same = msgs[i..]
            .iter()
            .take(if wide { 16 } else { 8 })
            .take_while(|m| blocks(len(m)) == b)
            .count();
        let (m, o) = (&msgs[i..], &mut out[i..]);
        i += if same >= 10 {
            padded_group::<2>(variant, &m[..same], &mut o[..same], &mut shared);
            same
        } else if same >= 5 {
            let n = same.min(8);
            padded_group::<1>(variant, &m[..n], &mut o[..n], &mut shared);
            n
        } else if same >= 3 {
            let n = same.min(4);
            avx2::padded_group::<1>(variant, &m[..n], &mut o[..n], &mut shared_avx2);
            n
        } else {
            portable::digest_one(variant, &m[0], &mut o[0]);
            1
        };
    }
}

/// [`group`] for 1 to `8 × G` messages; missing lanes repeat the last one.
#[target_feature(enable = "avx2,fma,avx512f")]
fn padded_group<const G: usize>(
    variant: Variant,
    msgs: &[Message<'_>],
    out: &mut [Digest],
    shared: &mut Shared<true>,
) {
    let n = msgs.len();
    if n == 8 * G {
        return group::<G>(variant, msgs, out, shared);
    }
    let mut m = [msgs[n - 1]; 16];
    m[..n].copy_from_slice(msgs);
    let mut scratch = [[0u8; 64]; 16];
    group::<G>(variant, &m[..8 * G], &mut scratch[..8 * G], shared);
    out.copy_from_slice(&scratch[..n]);
}

/// Hash `8 × G` messages of the same padded block count.
#[target_feature(enable = "avx2,fma,avx512f")]
fn group<const G: usize>(
    variant: Variant,
    msgs: &[Message<'_>],
    out: &mut [Digest],
    shared: &mut Shared<true>,
) {
    let padded: [[Padded<'_>; 8]; G] =
        core::array::from_fn(|g| core::array::from_fn(|l| Padded::new(&msgs[8 * g + l])));
    let iv = match variant {
        Variant::Sha512 => IV_512,
        Variant::Sha512_256 => IV_512_256,
    };
    let mut state: [[__m512i; G]; 8] = core::array::from_fn(|k| [splat(iv[k]); G]);
    let mut w = [[splat(0); G]; 80];
    for b in 0..padded[0][0].blocks() {
        if let Some(words) = same_in_place(padded.as_flattened(), b) {
            // The same bytes in every lane (a request's zero padding),
            // seen before any vector is built: one scalar schedule,
            // likely computed already, broadcast round by round.
            let wk = shared.schedule(&words);
            compress(&mut state, |t| [splat(wk[t]); G]);
            continue;
        }
        for g in 0..G {
            let l: [[u64; 16]; 8] = core::array::from_fn(|l| padded[g][l].block(b));
            for (t, wt) in w.iter_mut().take(16).enumerate() {
                wt[g] = _mm512_set_epi64(
                    l[7][t] as i64,
                    l[6][t] as i64,
                    l[5][t] as i64,
                    l[4][t] as i64,
                    l[3][t] as i64,
                    l[2][t] as i64,
                    l[1][t] as i64,
                    l[0][t] as i64,
                );
            }
        }
        if same_in_every_lane(&w) {
            // The same block assembled in every lane (a request's last
            // bytes with the length).
            let first: [u64; 16] = core::array::from_fn(|t| lane(w[t][0], 0));
            let wk = shared.schedule(&first);
            compress(&mut state, |t| [splat(wk[t]); G]);
        } else {
            schedule(&mut w);
            compress(&mut state, |t| {
                let k = splat(K[t]);
                core::array::from_fn(|i| add!(w[t][i], k))
            });
        }
    }
    let words = match variant {
        Variant::Sha512 => 8,
        Variant::Sha512_256 => 4,
    };
    for g in 0..G {
        for l in 0..8 {
            let o = &mut out[8 * g + l];
            o.fill(0);
            for k in 0..words {
                o[8 * k..8 * k + 8].copy_from_slice(&lane(state[k][g], l).to_be_bytes());
            }
        }
    }
}

/// Whether W[0..16] holds the same block in all `8 × G` lanes.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f")]
fn same_in_every_lane<const G: usize>(w: &[[__m512i; G]; 80]) -> bool {
    let mut eq = 0xffu8;
    for wt in w.iter().take(16) {
        let first = _mm512_broadcastq_epi64(_mm512_castsi512_si128(wt[0]));
        for v in wt {
            eq &= _mm512_cmpeq_epi64_mask(*v, first);
        }
    }
    eq == 0xff
}

#[inline]
#[target_feature(enable = "avx2,fma,avx512f")]
fn splat(x: u64) -> __m512i {
    _mm512_set1_epi64(x as i64)
}

#[inline]
#[target_feature(enable = "avx2,fma,avx512f")]
fn lane(v: __m512i, l: usize) -> u64 {
    let half = if l < 4 {
        _mm512_castsi512_si256(v)
    } else {
        _mm512_extracti64x4_epi64::<1>(v)
    };
    (match l % 4 {
        0 => _mm256_extract_epi64::<0>(half),
        1 => _mm256_extract_epi64::<1>(half),
        2 => _mm256_extract_epi64::<2>(half),
        _ => _mm256_extract_epi64::<3>(half),
    }) as u64
}

/// W[16..80] from W[0..16] (FIPS 180-4 §6.4.2 step 1).
#[allow(clippy::needless_range_loop)] // `g` indexes rows of `w`
#[inline]
#[target_feature(enable = "avx2,fma,avx512f")]
fn schedule<const G: usize>(w: &mut [[__m512i; G]; 80]) {
    for t in 16..80 {
        for g in 0..G {
            let x = w[t - 15][g];
            let s0 = logic!(XOR3, rotr!(x, 1), rotr!(x, 8), _mm512_srli_epi64::<7>(x));
            let y = w[t - 2][g];
            let s1 = logic!(XOR3, rotr!(y, 19), rotr!(y, 61), _mm512_srli_epi64::<6>(y));
            w[t][g] = add!(add!(s1, w[t - 7][g]), add!(s0, w[t - 16][g]));
        }
    }
}

/// One round for every register set: updates d and h (the caller renames
/// the rest, §6.4.2 step 3). `wk` is W[t] + K[t].
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,fma,avx512f")]
fn round<const G: usize>(
    a: [__m512i; G],
    b: [__m512i; G],
    c: [__m512i; G],
    d: &mut [__m512i; G],
    e: [__m512i; G],
    f: [__m512i; G],
    g: [__m512i; G],
    h: &mut [__m512i; G],
    wk: [__m512i; G],
) {
    for i in 0..G {
        let e_ = e[i];
        let s1 = logic!(XOR3, rotr!(e_, 14), rotr!(e_, 18), rotr!(e_, 41));
        let ch = logic!(CH, e_, f[i], g[i]);
        let t1 = add!(add!(h[i], wk[i]), add!(s1, ch));
        let a_ = a[i];
        let s0 = logic!(XOR3, rotr!(a_, 28), rotr!(a_, 34), rotr!(a_, 39));
        let maj = logic!(MAJ, a_, b[i], c[i]);
        d[i] = add!(d[i], t1);
        h[i] = add!(t1, add!(s0, maj));
    }
}

/// The 80 rounds over one block, and the feed-forward; `wk(t)` gives
/// W[t] + K[t] for every register set.
#[inline]
#[target_feature(enable = "avx2,fma,avx512f")]
fn compress<const G: usize>(state: &mut [[__m512i; G]; 8], wk: impl Fn(usize) -> [__m512i; G]) {
    let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = *state;
    for t in (0..80).step_by(8) {
        round(a, b, c, &mut d, e, f, g, &mut h, wk(t));
        round(h, a, b, &mut c, d, e, f, &mut g, wk(t + 1));
        round(g, h, a, &mut b, c, d, e, &mut f, wk(t + 2));
        round(f, g, h, &mut a, b, c, d, &mut e, wk(t + 3));
        round(e, f, g, &mut h, a, b, c, &mut d, wk(t + 4));
        round(d, e, f, &mut g, h, a, b, &mut c, wk(t + 5));
        round(c, d, e, &mut f, g, h, a, &mut b, wk(t + 6));
        round(b, c, d, &mut e, f, g, h, &mut a, wk(t + 7));
    }
    for (s, v) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
        for i in 0..G {
            s[i] = add!(s[i], v[i]);
        }
    }
}
