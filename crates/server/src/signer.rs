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
//!
//! An ML-DSA-44 online key (version 0x90000001, docs/PQ.md) signs through
//! [`MlDsaSigner`]: hedged signatures, 32 fresh bytes from the OS per
//! signature. [`OnlineSigner`] is either.

use gnomon_protocol::{KeyPair, MlDsa44KeyPair, Scheme, Sign};

use crate::key::{hedged_sign, Secret, SecretKey};

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

/// An ML-DSA-44 online key as the workers sign with it: hedged (FIPS 204
/// §3.4, the default there), with FIPS 204's `rnd` drawn from the OS for
/// every signature by one `getrandom` call into a stack buffer: no
/// allocation, one syscall next to a signature that costs a few hundred
/// microseconds. Should the OS refuse, that signature is the deterministic
/// variant (`rnd` all zeros), which FIPS 204 equally allows.
pub struct MlDsaSigner {
    key: Box<MlDsa44KeyPair>,
}

impl MlDsaSigner {
    /// A signer for `key`.
    pub fn new(key: &MlDsa44KeyPair) -> MlDsaSigner {
        MlDsaSigner {
            key: Box::new(key.clone()),
        }
    }
}

impl Sign for MlDsaSigner {
    fn scheme(&self) -> Scheme {
        Scheme::MlDsa44
    }

    fn sign_into(&self, signed: &[u8], context_len: usize, out: &mut [u8]) {
        hedged_sign(&self.key, signed, context_len, out);
    }
}

impl core::fmt::Debug for MlDsaSigner {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "MlDsaSigner(libcrux-ml-dsa, hedged)")
    }
}

/// The online key of an identity of either scheme, as workers sign with it.
// Ed25519, the hot path, inline: no pointer to follow per batch.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum OnlineSigner {
    /// Ed25519: the fastest signer this CPU supports.
    Ed25519(Signer),
    /// ML-DSA-44, hedged.
    MlDsa44(MlDsaSigner),
}

impl OnlineSigner {
    /// The signer for `key`, of its scheme.
    pub fn new(key: &SecretKey) -> OnlineSigner {
        match key.secret() {
            Secret::Ed25519(k) => OnlineSigner::Ed25519(Signer::new(k)),
            Secret::MlDsa44(k) => OnlineSigner::MlDsa44(MlDsaSigner::new(k)),
        }
    }

    /// Which implementation signs.
    pub fn backend(&self) -> &'static str {
        match self {
            OnlineSigner::Ed25519(s) => s.backend(),
            OnlineSigner::MlDsa44(_) => "libcrux-ml-dsa",
        }
    }
}

impl Sign for OnlineSigner {
    fn scheme(&self) -> Scheme {
        match self {
            OnlineSigner::Ed25519(s) => s.scheme(),
            OnlineSigner::MlDsa44(s) => s.scheme(),
        }
    }

    fn sign_into(&self, signed: &[u8], context_len: usize, out: &mut [u8]) {
        match self {
            OnlineSigner::Ed25519(s) => s.sign_into(signed, context_len, out),
            OnlineSigner::MlDsa44(s) => s.sign_into(signed, context_len, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use gnomon_protocol::scheme::ML_DSA_44_SIGNATURE_LEN;

    use super::*;

    /// ML-DSA signatures are hedged: two signatures of one message differ,
    /// and both verify under the key with the context as FIPS 204's
    /// context parameter.
    #[test]
    fn ml_dsa_signatures_are_hedged_and_verify() {
        let key = MlDsa44KeyPair::from_seed(&[3; 32]);
        let signer = OnlineSigner::new(&SecretKey::from(key.clone()));
        assert_eq!(signer.scheme(), Scheme::MlDsa44);
        let ctx = b"RoughTime v1 response signature\0";
        let mut signed = ctx.to_vec();
        signed.extend_from_slice(b"message");
        let sign = || {
            let mut out = vec![0u8; ML_DSA_44_SIGNATURE_LEN];
            signer.sign_into(&signed, ctx.len(), &mut out);
            out
        };
        let (a, b) = (sign(), sign());
        assert_ne!(a, b, "two signatures of one message are equal: not hedged");
        for sig in [&a, &b] {
            assert!(Scheme::MlDsa44.verify(key.public(), ctx, b"message", sig));
        }
        assert!(!Scheme::MlDsa44.verify(key.public(), b"", &signed, &a));
    }

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
