//! The online key's signer in the workers: one Ed25519 signature per batch.
//!
//! On x86_64 and aarch64 CPUs that graviola supports (x86_64: ADX, BMI1/2,
//! AVX2, AES, PCLMULQDQ; aarch64: AES, SHA2, PMULL, NEON) the signature is
//! made by graviola, whose scalar multiplication is s2n-bignum's formally
//! verified assembly: 2.2× faster than ed25519-dalek here, through a safe
//! API, no allocation, no C toolchain. Everywhere else, and on older CPUs,
//! the protocol crate's [`KeyPair`] (ed25519-dalek) signs. Both give the same
//! bytes: Ed25519 is deterministic. Figures and the other candidates:
//! docs/COST.md, "Crypto crates".

use gnomon_protocol::{KeyPair, Scheme, Sign};

/// The online key as the workers sign with it.
pub struct Signer {
    inner: Inner,
}

enum Inner {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    Graviola(graviola::signing::eddsa::Ed25519SigningKey),
    Portable(KeyPair),
}

impl Signer {
    /// The fastest signer this CPU supports for `key`.
    pub fn new(key: &KeyPair) -> Signer {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        if graviola::util::is_cpu_supported() {
            let seed = key.seed();
            // A 32-byte seed is always a valid key; the fallback is unreachable.
            if let Ok(k) = graviola::signing::eddsa::Ed25519SigningKey::from_bytes(&*seed) {
                return Signer {
                    inner: Inner::Graviola(k),
                };
            }
        }
        Signer::portable(key)
    }

    /// The protocol crate's own signer (ed25519-dalek), on any CPU.
    pub fn portable(key: &KeyPair) -> Signer {
        Signer {
            inner: Inner::Portable(key.clone()),
        }
    }

    /// Which implementation signs: "graviola" or "ed25519-dalek".
    pub fn backend(&self) -> &'static str {
        match self.inner {
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
            Inner::Graviola(_) => "graviola",
            Inner::Portable(_) => "ed25519-dalek",
        }
    }
}

impl Sign for Signer {
    fn scheme(&self) -> Scheme {
        Scheme::Ed25519
    }

    fn sign_into(&self, signed: &[u8], context_len: usize, out: &mut [u8]) {
        match &self.inner {
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
            Inner::Graviola(k) => out[..64].copy_from_slice(&k.sign(signed)),
            Inner::Portable(k) => k.sign_into(signed, context_len, out),
        }
    }
}

impl core::fmt::Debug for Signer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Never print secret material.
        write!(f, "Signer({})", self.backend())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every message length up to past two SHA-512 blocks, several keys:
    /// the fast signer gives the portable signer's bytes, and they verify.
    #[test]
    fn the_fast_signer_gives_the_portable_signers_bytes() {
        let message: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for seed in [
            [0u8; 32],
            [0x5a; 32],
            [0xff; 32],
            core::array::from_fn(|i| i as u8),
        ] {
            let key = KeyPair::from_seed(&seed);
            let (fast, portable) = (Signer::new(&key), Signer::portable(&key));
            for len in 0..=message.len() {
                let m = &message[..len];
                let sign = |s: &Signer| {
                    let mut out = [0u8; 64];
                    s.sign_into(m, 0, &mut out);
                    out
                };
                let sig = sign(&fast);
                assert_eq!(sig, sign(&portable), "{} at length {len}", fast.backend());
                assert!(gnomon_protocol::verify::ed25519_ok(
                    &key.public(),
                    &[],
                    m,
                    &sig
                ));
            }
        }
    }

    /// On a CPU graviola supports (every x86_64 CI machine of this project
    /// and any Zen or Haswell-or-later server), the fast path is the one
    /// taken; elsewhere the test says which signer it compared and why.
    #[test]
    fn the_fast_signer_is_chosen_where_the_cpu_supports_it() {
        let signer = Signer::new(&KeyPair::from_seed(&[1; 32]));
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        if graviola::util::is_cpu_supported() {
            assert_eq!(signer.backend(), "graviola");
            return;
        }
        assert_eq!(signer.backend(), "ed25519-dalek");
        gnomon_testkit::skip(
            "signer::the_fast_signer_is_chosen_where_the_cpu_supports_it",
            "this CPU lacks what graviola needs; the portable signer was checked instead",
        );
    }
}
