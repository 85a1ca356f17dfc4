//! Signature schemes: what signs DELE and SREP, and how a version's context
//! string enters the signature.
//!
//! Every deployed version signs with Ed25519 over `context ‖ message`. The
//! experimental post-quantum variant (version 0x90000001, served by
//! tannerryan/roughtime) signs with ML-DSA-44 (FIPS 204) and passes the same
//! context strings as FIPS 204's context parameter instead of prefixing them.
//! The scheme is a field of each profile (a row of the version table) and
//! a property of each key; code that signs or verifies asks the scheme,
//! never the version.
//!
//! This module is a leaf: it signs and verifies bytes ([`Sign`], the key
//! pairs of both schemes, [`Scheme::verify`]) and names keys ([`srv_for`]),
//! and reads nothing of the crate but the hash. The profile table, the
//! certificates, the requests and the verifier read it, never the other way.
//! Randomness is never drawn here: keys are made from seeds the caller got
//! from its own RNG.

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use libcrux_ml_dsa::ml_dsa_44::{
    self, MLDSA44Signature, MLDSA44SigningKey, MLDSA44VerificationKey,
};
use zeroize::{Zeroize, Zeroizing};

use alloc::vec::Vec;

use crate::hash::HashAlg;

/// Bytes of an ML-DSA-44 public key.
pub const ML_DSA_44_PUBLIC_LEN: usize = 1312;
/// Bytes of an ML-DSA-44 signature.
pub const ML_DSA_44_SIGNATURE_LEN: usize = 2420;
/// Longest signature of any scheme.
pub const MAX_SIGNATURE: usize = ML_DSA_44_SIGNATURE_LEN;
/// Longest public key of any scheme.
pub const MAX_PUBLIC: usize = ML_DSA_44_PUBLIC_LEN;

/// A signature algorithm, with the way it takes a context string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    /// Ed25519 (RFC 8032) over `context ‖ message`.
    Ed25519,
    /// ML-DSA-44 (FIPS 204), pure, with the context as FIPS 204's context
    /// parameter; hedged signing.
    MlDsa44,
}

impl Scheme {
    /// Every scheme, in the order lists and help texts show them.
    pub const ALL: [Scheme; 2] = [Scheme::Ed25519, Scheme::MlDsa44];

    /// Length of a public key.
    pub const fn public_len(self) -> usize {
        match self {
            Scheme::Ed25519 => 32,
            Scheme::MlDsa44 => ML_DSA_44_PUBLIC_LEN,
        }
    }

    /// Length of a signature.
    pub const fn signature_len(self) -> usize {
        match self {
            Scheme::Ed25519 => 64,
            Scheme::MlDsa44 => ML_DSA_44_SIGNATURE_LEN,
        }
    }

    /// The name server lists use in `publicKeyType` (and the CLI in
    /// `--scheme`).
    pub const fn name(self) -> &'static str {
        match self {
            Scheme::Ed25519 => "ed25519",
            Scheme::MlDsa44 => "ml-dsa-44",
        }
    }

    /// The scheme called `name` (case-insensitive).
    pub fn by_name(name: &str) -> Option<Scheme> {
        Scheme::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }

    /// The scheme whose public keys are `len` bytes long: keys carry no
    /// type, and the lengths differ (as tannerryan/roughtime's client
    /// tells them apart).
    pub fn by_public_len(len: usize) -> Option<Scheme> {
        Scheme::ALL.into_iter().find(|s| s.public_len() == len)
    }

    /// Length of a CERT value delegating to one online key: SIG and DELE
    /// (PUBK, MINT, MAXT), with their headers.
    pub const fn cert_len(self) -> usize {
        16 + self.signature_len() + self.dele_len()
    }

    /// Length of a DELE value: PUBK, MINT and MAXT with a 3-tag header.
    pub const fn dele_len(self) -> usize {
        24 + self.public_len() + 16
    }

    /// Whether `sig` is `public`'s signature of `message` under `context`,
    /// joined as this scheme joins them. False for a malformed key or
    /// signature, or lengths that are not this scheme's.
    pub fn verify(self, public: &[u8], context: &[u8], message: &[u8], sig: &[u8]) -> bool {
        match self {
            Scheme::Ed25519 => match (public.try_into(), sig.try_into()) {
                (Ok(public), Ok(sig)) => ed25519_ok(public, context, message, sig),
                _ => false,
            },
            Scheme::MlDsa44 => {
                let (Ok(public), Ok(sig)) = (
                    <[u8; ML_DSA_44_PUBLIC_LEN]>::try_from(public),
                    <[u8; ML_DSA_44_SIGNATURE_LEN]>::try_from(sig),
                ) else {
                    return false;
                };
                ml_dsa_44::verify(
                    &MLDSA44VerificationKey::new(public),
                    message,
                    context,
                    &MLDSA44Signature::new(sig),
                )
                .is_ok()
            }
        }
    }
}

impl core::fmt::Display for Scheme {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Scheme::Ed25519 => "Ed25519",
            Scheme::MlDsa44 => "ML-DSA-44",
        })
    }
}

/// Ed25519 over `context ‖ message`, using the strict verification rules.
/// False for a malformed key or a message too long to be a Roughtime
/// SREP or DELE.
pub fn ed25519_ok(public: &[u8; 32], context: &[u8], message: &[u8], sig: &[u8; 64]) -> bool {
    let Ok(key) = VerifyingKey::from_bytes(public) else {
        return false;
    };
    let sig = Signature::from_bytes(sig);
    // Streaming pre-image without a heap copy: dalek's verify takes one
    // slice, so the context and message are joined in a bounded buffer.
    let mut buf = [0u8; 1024];
    let total = context.len() + message.len();
    if total > buf.len() {
        return false;
    }
    buf[..context.len()].copy_from_slice(context);
    buf[context.len()..total].copy_from_slice(message);
    key.verify_strict(&buf[..total], &sig).is_ok()
}

/// SRV for a long-term public key of any scheme: the first 32 bytes of
/// SHA-512(0xff ‖ key), over the key as on the wire.
pub fn srv_for(long_term_public: &[u8]) -> [u8; 32] {
    let mut d = [0u8; 64];
    HashAlg::Sha512.digest(&[&[0xff], long_term_public], &mut d);
    let mut out = [0u8; 32];
    out.copy_from_slice(&d[..32]);
    out
}

/// What signs with a key (a batch's SREP with the online key, a DELE with
/// the long-term key), into a caller's buffer, without allocating (the
/// server's workers must not). [`KeyPair`] and
/// [`MlDsa44KeyPair`] are the portable signers; a server may
/// pass a faster one for the same key (gnomon-server's `signer` module).
pub trait Sign: core::fmt::Debug + Sync {
    /// The key's scheme, which says how long the signature is and how the
    /// context enters it.
    fn scheme(&self) -> Scheme;

    /// Sign `signed[context_len..]` under the context
    /// `signed[..context_len]`, joined as the scheme joins them (Ed25519:
    /// the whole of `signed`, context as prefix). The signature goes to
    /// the front of `out`, which holds at least
    /// `self.scheme().signature_len()` bytes.
    fn sign_into(&self, signed: &[u8], context_len: usize, out: &mut [u8]);
}

impl Sign for KeyPair {
    fn scheme(&self) -> Scheme {
        Scheme::Ed25519
    }

    fn sign_into(&self, signed: &[u8], _context_len: usize, out: &mut [u8]) {
        out[..64].copy_from_slice(&self.0.sign(signed).to_bytes());
    }
}

/// An Ed25519 key pair, as the long-term identity or as an online key.
#[derive(Clone)]
pub struct KeyPair(SigningKey);

impl KeyPair {
    /// The key with this 32-byte seed.
    pub fn from_seed(seed: &[u8; 32]) -> KeyPair {
        KeyPair(SigningKey::from_bytes(seed))
    }

    /// The public key.
    pub fn public(&self) -> [u8; 32] {
        self.0.verifying_key().to_bytes()
    }

    /// The seed (for writing key files), wiped from memory when dropped.
    pub fn seed(&self) -> Zeroizing<[u8; 32]> {
        Zeroizing::new(self.0.to_bytes())
    }
}

impl core::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Never print secret material.
        write!(f, "KeyPair(public {:02x?})", &self.public()[..4])
    }
}

/// A public key of some scheme, borrowed: what a client pins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublicKey<'a> {
    scheme: Scheme,
    bytes: &'a [u8],
}

impl<'a> PublicKey<'a> {
    /// `bytes` as a key of the scheme its length says; None for a length
    /// no scheme has.
    pub fn from_bytes(bytes: &'a [u8]) -> Option<PublicKey<'a>> {
        Scheme::by_public_len(bytes.len()).map(|scheme| PublicKey { scheme, bytes })
    }

    /// The scheme.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The key as on the wire.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

impl<'a> From<&'a [u8; 32]> for PublicKey<'a> {
    fn from(key: &'a [u8; 32]) -> PublicKey<'a> {
        PublicKey {
            scheme: Scheme::Ed25519,
            bytes: key,
        }
    }
}

impl<'a> From<&'a [u8; ML_DSA_44_PUBLIC_LEN]> for PublicKey<'a> {
    fn from(key: &'a [u8; ML_DSA_44_PUBLIC_LEN]) -> PublicKey<'a> {
        PublicKey {
            scheme: Scheme::MlDsa44,
            bytes: key,
        }
    }
}

/// A long-term public key of any scheme, owned: what server lists,
/// configurations and reports hold. The length is checked on the way in,
/// so every value is a key of its scheme's size.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LongTermKey {
    scheme: Scheme,
    bytes: Vec<u8>,
}

impl LongTermKey {
    /// `bytes` as a key of the scheme its length says; None for a length
    /// no scheme has.
    pub fn from_bytes(bytes: &[u8]) -> Option<LongTermKey> {
        Scheme::by_public_len(bytes.len()).map(|scheme| LongTermKey {
            scheme,
            bytes: bytes.to_vec(),
        })
    }

    /// The scheme.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The key as on the wire.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The key, borrowed, for verifying.
    pub fn as_public(&self) -> PublicKey<'_> {
        PublicKey {
            scheme: self.scheme,
            bytes: &self.bytes,
        }
    }

    /// The Ed25519 key, if it is one.
    pub fn ed25519(&self) -> Option<[u8; 32]> {
        self.bytes.as_slice().try_into().ok()
    }

    /// SRV: the first 32 bytes of SHA-512(0xff ‖ key).
    pub fn srv(&self) -> [u8; 32] {
        srv_for(&self.bytes)
    }
}

impl From<[u8; 32]> for LongTermKey {
    fn from(key: [u8; 32]) -> LongTermKey {
        LongTermKey {
            scheme: Scheme::Ed25519,
            bytes: key.to_vec(),
        }
    }
}

impl AsRef<[u8]> for LongTermKey {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl From<PublicKey<'_>> for LongTermKey {
    fn from(key: PublicKey<'_>) -> LongTermKey {
        LongTermKey {
            scheme: key.scheme,
            bytes: key.bytes.to_vec(),
        }
    }
}

impl<'a> From<&'a LongTermKey> for PublicKey<'a> {
    fn from(key: &'a LongTermKey) -> PublicKey<'a> {
        key.as_public()
    }
}

impl core::fmt::Debug for LongTermKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "LongTermKey({}, {:02x?}…)",
            self.scheme,
            &self.bytes[..4]
        )
    }
}

/// An ML-DSA-44 key pair made from a 32-byte seed (FIPS 204's ξ, as
/// ML-DSA.KeyGen_internal takes it; tannerryan/roughtime's key files hold
/// the same seed).
#[derive(Clone)]
pub struct MlDsa44KeyPair {
    seed: Zeroizing<[u8; 32]>,
    private: MLDSA44SigningKey,
    public: [u8; ML_DSA_44_PUBLIC_LEN],
}

impl Drop for MlDsa44KeyPair {
    fn drop(&mut self) {
        // The crate does not wipe its expanded key; the seed wipes itself.
        self.private.as_mut_slice().zeroize();
    }
}

impl MlDsa44KeyPair {
    /// The key with this seed.
    pub fn from_seed(seed: &[u8; 32]) -> MlDsa44KeyPair {
        let pair = ml_dsa_44::generate_key_pair(*seed);
        MlDsa44KeyPair {
            seed: Zeroizing::new(*seed),
            public: *pair.verification_key.as_ref(),
            private: pair.signing_key,
        }
    }

    /// The public key.
    pub fn public(&self) -> &[u8; ML_DSA_44_PUBLIC_LEN] {
        &self.public
    }

    /// The seed (for writing key files), wiped from memory when dropped.
    pub fn seed(&self) -> Zeroizing<[u8; 32]> {
        self.seed.clone()
    }

    /// Sign `message` under `context`, hedged with the 32 random bytes
    /// `rnd` (FIPS 204's rnd; all zeros gives the deterministic variant).
    /// Randomness is the caller's: this crate never draws any.
    pub fn sign_with(
        &self,
        context: &[u8],
        message: &[u8],
        rnd: &[u8; 32],
    ) -> [u8; ML_DSA_44_SIGNATURE_LEN] {
        // Fails only for a context over 255 bytes (ours are at most 36) or
        // after the crate's bound on rejection rounds, which FIPS 204 puts
        // far beyond any real message: an all-zero signature then fails
        // every verifier rather than panicking a server.
        match ml_dsa_44::sign(&self.private, message, context, *rnd) {
            Ok(sig) => *sig.as_ref(),
            Err(_) => [0; ML_DSA_44_SIGNATURE_LEN],
        }
    }
}

impl Sign for MlDsa44KeyPair {
    fn scheme(&self) -> Scheme {
        Scheme::MlDsa44
    }

    fn sign_into(&self, signed: &[u8], context_len: usize, out: &mut [u8]) {
        let (context, message) = signed.split_at(context_len.min(signed.len()));
        // Deterministic: FIPS 204 allows it, and the protocol crate draws
        // no randomness. The hedged form needs the caller's random bytes
        // (`sign_with`); a server that wants it passes its own signer.
        let sig = self.sign_with(context, message, &[0; 32]);
        out[..sig.len()].copy_from_slice(&sig);
    }
}

impl core::fmt::Debug for MlDsa44KeyPair {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "MlDsa44KeyPair(public {:02x?})", &self.public[..4])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_name_each_scheme() {
        assert_eq!(Scheme::by_public_len(32), Some(Scheme::Ed25519));
        assert_eq!(Scheme::by_public_len(1312), Some(Scheme::MlDsa44));
        assert_eq!(Scheme::by_public_len(33), None);
        assert_eq!(Scheme::Ed25519.cert_len(), 152);
        // The captured tannerryan response's CERT is 3788 bytes.
        assert_eq!(Scheme::MlDsa44.cert_len(), 3788);
        assert_eq!(Scheme::by_name("ML-DSA-44"), Some(Scheme::MlDsa44));
    }

    #[test]
    fn ml_dsa_signs_with_the_context_as_a_parameter_not_a_prefix() {
        let k = MlDsa44KeyPair::from_seed(&[5; 32]);
        let ctx = b"RoughTime v1 response signature\0";
        let mut signed = [0u8; 32 + 10];
        signed[..32].copy_from_slice(ctx);
        signed[32..].copy_from_slice(b"0123456789");
        let mut sig = [0u8; MAX_SIGNATURE];
        k.sign_into(&signed, 32, &mut sig);
        let s = Scheme::MlDsa44;
        assert!(s.verify(k.public(), ctx, b"0123456789", &sig));
        // The same bytes as one prefixed message, no context: another signature.
        assert!(!s.verify(k.public(), b"", &signed, &sig));
        assert!(!s.verify(k.public(), &ctx[..31], b"0123456789", &sig));
        let mut forged = sig;
        forged[100] ^= 1;
        assert!(!s.verify(k.public(), ctx, b"0123456789", &forged));
        assert!(!s.verify(k.public(), ctx, b"0123456789", &sig[..2419]));
    }
}
