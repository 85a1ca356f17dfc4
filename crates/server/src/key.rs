//! One key of either scheme, as plain data: the secret with its public key
//! ([`SecretKey`]), a seed from the OS ([`random_seed`]), a public key by
//! value ([`PublicBytes`]) and a key as a label ([`key_label`]).
//!
//! A leaf: it imports nothing of the crate. Key files (`keyfile`),
//! delegation files (`offline`), the workers' signer (`signer`) and the key
//! epochs (`keys`) all read it; `keys` re-exports what it always offered
//! (`keys::SecretKey`, `keys::random_seed`, …).

use gnomon_protocol::scheme::{MAX_PUBLIC, ML_DSA_44_SIGNATURE_LEN};
use gnomon_protocol::{KeyPair, LongTermKey, MlDsa44KeyPair, Scheme, Sign};
use zeroize::Zeroizing;

/// A public key of either scheme by value: `Copy`, as the `[u8; 32]` it
/// replaces was, and read as the bytes on the wire (`Deref<Target = [u8]>`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PublicBytes {
    len: usize,
    bytes: [u8; MAX_PUBLIC],
}

impl PublicBytes {
    fn of(key: &[u8]) -> PublicBytes {
        let mut bytes = [0u8; MAX_PUBLIC];
        bytes[..key.len()].copy_from_slice(key);
        PublicBytes {
            len: key.len(),
            bytes,
        }
    }
}

impl std::ops::Deref for PublicBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl AsRef<[u8]> for PublicBytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::fmt::Debug for PublicBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PublicBytes({} bytes, {:02x?}…)",
            self.len,
            &self.bytes[..4]
        )
    }
}

impl PartialEq<[u8]> for PublicBytes {
    fn eq(&self, other: &[u8]) -> bool {
        **self == *other
    }
}

impl PartialEq<&[u8]> for PublicBytes {
    fn eq(&self, other: &&[u8]) -> bool {
        **self == **other
    }
}

impl<const N: usize> PartialEq<[u8; N]> for PublicBytes {
    fn eq(&self, other: &[u8; N]) -> bool {
        **self == other[..]
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for PublicBytes {
    fn eq(&self, other: &&[u8; N]) -> bool {
        **self == other[..]
    }
}

impl PartialEq<PublicBytes> for Vec<u8> {
    fn eq(&self, other: &PublicBytes) -> bool {
        self[..] == **other
    }
}

/// A secret key of either scheme, made from a 32-byte seed (long-term keys
/// in key files, online keys minted here or read from delegation files),
/// with its public key.
#[derive(Clone, Debug)]
pub struct SecretKey {
    secret: Secret,
    public: LongTermKey,
}

/// The key itself.
// The Ed25519 key is held inline (the usual case, and small); the ML-DSA-44
// one is boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Secret {
    /// Ed25519.
    Ed25519(KeyPair),
    /// ML-DSA-44 (boxed: its expanded key is 2.5 KB).
    MlDsa44(Box<MlDsa44KeyPair>),
}

impl SecretKey {
    /// The key of `scheme` with this seed.
    pub fn from_seed(scheme: Scheme, seed: &[u8; 32]) -> SecretKey {
        match scheme {
            Scheme::Ed25519 => KeyPair::from_seed(seed).into(),
            Scheme::MlDsa44 => MlDsa44KeyPair::from_seed(seed).into(),
        }
    }

    /// The scheme.
    pub fn scheme(&self) -> Scheme {
        self.public.scheme()
    }

    /// The public key as on the wire (32 or 1312 bytes), by value.
    pub fn public(&self) -> PublicBytes {
        PublicBytes::of(self.public.bytes())
    }

    /// The public key with its scheme.
    pub fn public_key(&self) -> &LongTermKey {
        &self.public
    }

    /// The seed (for key and delegation files), wiped when dropped.
    pub fn seed(&self) -> Zeroizing<[u8; 32]> {
        match &self.secret {
            Secret::Ed25519(k) => k.seed(),
            Secret::MlDsa44(k) => k.seed(),
        }
    }

    /// The key itself.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }

    /// The Ed25519 key, if it is one.
    pub fn ed25519(&self) -> Option<&KeyPair> {
        match &self.secret {
            Secret::Ed25519(k) => Some(k),
            Secret::MlDsa44(_) => None,
        }
    }
}

impl From<KeyPair> for SecretKey {
    fn from(k: KeyPair) -> SecretKey {
        SecretKey {
            public: LongTermKey::from(k.public()),
            secret: Secret::Ed25519(k),
        }
    }
}

impl From<MlDsa44KeyPair> for SecretKey {
    fn from(k: MlDsa44KeyPair) -> SecretKey {
        SecretKey {
            public: LongTermKey::from_bytes(k.public())
                .unwrap_or_else(|| unreachable!("an ML-DSA-44 key is 1312 bytes")),
            secret: Secret::MlDsa44(Box::new(k)),
        }
    }
}

/// Signs delegations (minting certificates): Ed25519 as the protocol crate
/// does, ML-DSA-44 hedged.
impl Sign for SecretKey {
    fn scheme(&self) -> Scheme {
        self.public.scheme()
    }

    fn sign_into(&self, signed: &[u8], context_len: usize, out: &mut [u8]) {
        match &self.secret {
            Secret::Ed25519(k) => k.sign_into(signed, context_len, out),
            Secret::MlDsa44(k) => hedged_sign(k, signed, context_len, out),
        }
    }
}

/// A fresh 32-byte seed from the OS, wiped from memory when dropped.
pub fn random_seed() -> std::io::Result<Zeroizing<[u8; 32]>> {
    let mut s = Zeroizing::new([0u8; 32]);
    getrandom::getrandom(&mut *s).map_err(std::io::Error::other)?;
    Ok(s)
}

/// `key`'s hedged signature of `signed[context_len..]` under the context
/// `signed[..context_len]`, into `out[..2420]` (the workers' `MlDsaSigner`
/// in `signer` signs with it too).
pub(crate) fn hedged_sign(key: &MlDsa44KeyPair, signed: &[u8], context_len: usize, out: &mut [u8]) {
    let (context, message) = signed.split_at(context_len.min(signed.len()));
    let mut rnd = [0u8; 32];
    if getrandom::getrandom(&mut rnd).is_err() {
        rnd = [0; 32];
    }
    let sig = key.sign_with(context, message, &rnd);
    out[..ML_DSA_44_SIGNATURE_LEN].copy_from_slice(&sig);
}

/// A key as a label value: an Ed25519 key in base64 (44 characters), an
/// ML-DSA-44 key (1752 characters in base64) as `ml-dsa-44:` and the first
/// 8 bytes of its SRV in hex, which tells keys apart and matches what
/// clients send to choose the key.
pub fn key_label(key: &LongTermKey) -> String {
    use base64::engine::general_purpose::STANDARD as B64;
    use base64::Engine as _;
    match key.scheme() {
        Scheme::Ed25519 => B64.encode(key.bytes()),
        Scheme::MlDsa44 => {
            let srv = key.srv();
            let hex: String = srv[..8].iter().map(|b| format!("{b:02x}")).collect();
            format!("{}:{hex}", key.scheme().name())
        }
    }
}
