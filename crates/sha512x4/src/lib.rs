//! # gnomon-sha512x4
//!
//! Multi-buffer SHA-512: several independent messages hashed at once, one
//! message per 64-bit lane of AVX2 registers. A Roughtime server hashes one
//! Merkle leaf per request (for version 1, the whole 1 KiB request), and a
//! batch holds many requests of the same length: their compressions run in
//! lock-step. Measured on AMD Zen 3, four cost about two single sha2
//! hashes and eight about three and a half (docs/COST.md, "Multi-buffer
//! leaf hashing"); AVX2 has no 64-bit rotate, so this is not 4×.
//!
//! ```text
//!  messages (each up to three slices, e.g. prefix ‖ data; no copy)
//!     │ runs with the same padded block count
//!     ├─ 6–8 ──▶ AVX2 ×8: two register sets of 4 lanes (__m256i), interleaved
//!     ├─ 3–5 ──▶ AVX2 ×4: one set
//!     └─ rest ─▶ portable: sha2, one message at a time
//!  (a short group repeats its last lane and discards the copies)
//! ```
//!
//! The AVX2 path is chosen at run time (`cpufeatures`); every other CPU and
//! architecture gets the portable path, which gives the same digests. The
//! crate is `no_std` and denies `unsafe` except for one block: the call of
//! the AVX2 entry point once the CPU has been seen to support it.
#![no_std]
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg(target_arch = "x86_64")]
mod avx2;
mod consts;
mod pad;
mod portable;

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
}

/// The backend is not available on this CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unsupported;

impl Backend {
    /// The backend [`digest_many`] uses on this CPU.
    pub fn best() -> Backend {
        if Backend::Avx2x8.available() {
            Backend::Avx2x8
        } else {
            Backend::Portable
        }
    }

    /// Whether this CPU can run the backend.
    pub fn available(self) -> bool {
        match self {
            Backend::Portable => true,
            Backend::Avx2x4 | Backend::Avx2x8 => avx2_detected(),
        }
    }
}

#[cfg(target_arch = "x86_64")]
cpufeatures::new!(cpu_avx2, "avx2");

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

/// Hash `msgs[i]` into `out[i]` for every `i` below the shorter of the two,
/// with the fastest backend this CPU has.
pub fn digest_many(variant: Variant, msgs: &[Message<'_>], out: &mut [Digest]) {
    // Cannot fail: `best` only names an available backend.
    let _ = digest_many_with(Backend::best(), variant, msgs, out);
}

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
    }
}

/// SHA-512 (or /256) of the concatenation of `parts` (any number of them),
/// with the portable backend.
pub fn digest_one(variant: Variant, parts: &[&[u8]], out: &mut Digest) {
    portable::digest_one(variant, parts, out);
}
