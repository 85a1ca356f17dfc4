//! # gnomon-sha512x4
//!
//! Multi-buffer SHA-512: several independent messages hashed at once, one
//! message per 64-bit lane of vector registers. A Roughtime server hashes
//! one Merkle leaf per request (for version 1, the whole 1 KiB request),
//! and a batch holds many requests of the same length: their compressions
//! run in lock-step. Measured (docs/COST.md, "Multi-buffer leaf hashing"):
//! with AVX2, four cost about two single sha2 hashes and eight about three,
//! as AVX2 has no 64-bit rotate; with AVX-512, which has one and a
//! three-input logic instruction, eight cost about two and a half to three
//! and sixteen about four to four and a half (on AMD Zen 4, which executes
//! 512-bit instructions in two 256-bit halves).
//!
//! ```text
//!  messages (each up to three slices, e.g. prefix ‖ data; no copy)
//!     │ runs with the same padded block count
//!     │  AVX-512 (Avx512x16, the default where the CPU has AVX-512F)
//!     ├─ 10–16 ─▶ ×16: two register sets of 8 lanes (__m512i), interleaved
//!     ├─  5–9 ──▶ ×8: one set
//!     ├─  3–4 ──▶ AVX2 ×4
//!     │  AVX2 (Avx2x8, the default where the CPU has AVX2 only)
//!     ├─  6–8 ──▶ ×8: two register sets of 4 lanes (__m256i), interleaved
//!     ├─  3–5 ──▶ ×4: one set
//!     └─ rest ──▶ portable: sha2, one message at a time
//!  (a short group repeats its last lane and discards the copies)
//! ```
//!
//! The vector paths are chosen at run time (`cpufeatures`: CPUID, and XCR0
//! for the operating system's support of the registers); every other CPU
//! and architecture gets the portable path, which gives the same digests.
//! [`pin`] fixes the choice for measurements. The crate is `no_std` and
//! denies `unsafe` except for two blocks: the calls of the AVX2 and AVX-512
//! entry points once the CPU has been seen to support them.
#![no_std]
#![deny(unsafe_code)]
#![warn(missing_docs)]

use core::sync::atomic::{AtomicU8, Ordering};

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod consts;
mod pad;
mod portable;
#[cfg(target_arch = "x86_64")]
mod shared;

/// A digest slot: 64 bytes; SHA-512/256 fills the first 32 and zeroes the rest.
pub type Digest = [u8; 64];

/// One message: the concatenation of its three slices (for a Merkle leaf,
/// `[&[0x00], input, &[]]`; for a node, `[&[0x01], left, right]`).
pub type Message<'a> = [&'a [u8]; 3];

/// Which SHA-512 family member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// SHA-512, 64-byte digest.
    Sha512,
    /// SHA-512/256 (its own initial value), 32-byte digest.
    Sha512_256,
}

/// An implementation of [`digest_many`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// sha2, one message at a time.
    Portable,
    /// AVX2, four messages per group.
    Avx2x4,
    /// AVX2, eight messages per group (two register sets interleaved).
    Avx2x8,
    /// AVX-512F, eight messages per group (one `__m512i` per word); runs
    /// too short for it go to AVX2's four lanes.
    Avx512x8,
    /// AVX-512F, sixteen messages per group (two register sets
    /// interleaved), eight or four for shorter runs.
    Avx512x16,
}

/// The backend is not available on this CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unsupported;

impl Backend {
    /// Every backend, available here or not (also the numbering of the private `PINNED`:
    /// 1-based, 0 is none).
    pub const ALL: [Backend; 5] = [
        Backend::Portable,
        Backend::Avx2x4,
        Backend::Avx2x8,
        Backend::Avx512x8,
        Backend::Avx512x16,
    ];

    /// The backend [`digest_many`] uses on this CPU.
    pub fn best() -> Backend {
        if Backend::Avx512x16.available() {
            Backend::Avx512x16
        } else if Backend::Avx2x8.available() {
            Backend::Avx2x8
        } else {
            Backend::Portable
        }
    }

    /// The backend [`digest_many`] uses now: the pinned one, else [`Backend::best`].
    pub fn chosen() -> Backend {
        match PINNED.load(Ordering::Relaxed) {
            0 => Backend::best(),
            i => Backend::ALL[usize::from(i) - 1],
        }
    }

    /// Whether this CPU can run the backend.
    pub fn available(self) -> bool {
        match self {
            Backend::Portable => true,
            Backend::Avx2x4 | Backend::Avx2x8 => avx2_detected(),
            Backend::Avx512x8 | Backend::Avx512x16 => avx512_detected(),
        }
    }
}

#[cfg(target_arch = "x86_64")]
cpufeatures::new!(cpu_avx2, "avx2");
// `avx512f` implies `avx2`, `fma` and `f16c` to the compiler, so the
// functions compiled with it may use them: all but `f16c` (which
// cpufeatures 0.2 cannot probe, and which no AVX-512 CPU lacks; the code
// converts no floats) are checked too.
#[cfg(target_arch = "x86_64")]
cpufeatures::new!(cpu_avx512, "avx2", "fma", "avx512f");

fn avx2_detected() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        cpu_avx2::get()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn avx512_detected() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        cpu_avx512::get()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Hash `msgs[i]` into `out[i]` for every `i` below the shorter of the two,
/// with the fastest backend this CPU has, or the one [`pin`] chose.
pub fn digest_many(variant: Variant, msgs: &[Message<'_>], out: &mut [Digest]) {
    // Cannot fail: `best` and `pin` only name available backends.
    let _ = digest_many_with(Backend::chosen(), variant, msgs, out);
}

/// Make [`digest_many`] use `backend` in this whole process from now on
/// (`None`: the fastest again). For measurements that must not depend on
/// the CPU: the instruction-count gate pins AVX2, which valgrind runs and
/// every machine it measures on has (docs/COST.md, "The gate"), and the
/// benchmarks compare backends through the callers' own code. A server
/// never pins.
pub fn pin(backend: Option<Backend>) -> Result<(), Unsupported> {
    let i = match backend {
        None => 0,
        Some(b) if !b.available() => return Err(Unsupported),
        Some(b) => Backend::ALL
            .iter()
            .position(|&x| x == b)
            .map_or(0, |i| i + 1),
    };
    PINNED.store(i as u8, Ordering::Relaxed);
    Ok(())
}

static PINNED: AtomicU8 = AtomicU8::new(0);

/// [`digest_many`] with a chosen backend (for tests and benchmarks).
pub fn digest_many_with(
    backend: Backend,
    variant: Variant,
    msgs: &[Message<'_>],
    out: &mut [Digest],
) -> Result<(), Unsupported> {
    let n = msgs.len().min(out.len());
    let (msgs, out) = (&msgs[..n], &mut out[..n]);
    match backend {
        Backend::Portable => {
            portable::digest_many(variant, msgs, out);
            Ok(())
        }
        Backend::Avx2x4 | Backend::Avx2x8 => {
            if !avx2_detected() {
                return Err(Unsupported);
            }
            #[cfg(target_arch = "x86_64")]
            {
                let wide = backend == Backend::Avx2x8;
                #[allow(unsafe_code)]
                // SAFETY: `avx2::digest_many` is compiled with AVX2 enabled;
                // calling it is sound exactly when the CPU executes AVX2, which
                // `avx2_detected` (CPUID, through cpufeatures) has just confirmed.
                // It is otherwise safe code: no pointers, no raw loads or stores.
                unsafe {
                    avx2::digest_many(variant, wide, msgs, out)
                };
            }
            Ok(())
        }
        Backend::Avx512x8 | Backend::Avx512x16 => {
            if !avx512_detected() {
                return Err(Unsupported);
            }
            #[cfg(target_arch = "x86_64")]
            {
                let wide = backend == Backend::Avx512x16;
                #[allow(unsafe_code)]
                // SAFETY: `avx512::digest_many` is compiled with AVX2, FMA and
                // AVX-512F enabled (and what they imply); calling it is sound
                // exactly when the CPU executes those, which
                // `avx512_detected` (CPUID and XCR0, through cpufeatures) has
                // just confirmed. Inside is safe code only, as for AVX2.
                unsafe {
                    avx512::digest_many(variant, wide, msgs, out)
                };
            }
            Ok(())
        }
    }
}

/// SHA-512 (or /256) of the concatenation of `parts` (any number of them),
/// with the portable backend.
pub fn digest_one(variant: Variant, parts: &[&[u8]], out: &mut Digest) {
    portable::digest_one(variant, parts, out);
}
