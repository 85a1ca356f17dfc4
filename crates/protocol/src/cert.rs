//! Keys and delegation certificates (the CERT and DELE layout; the signature contexts).
//!
//! Randomness is never drawn here: keys are made from seeds the caller got
//! from its own RNG.

use ed25519_dalek::{Signer, SigningKey};
use zeroize::Zeroizing;

use crate::error::WireError;
use crate::profile::Profile;
use crate::tag::Tag;
use crate::wire::{self, Message};

/// Length of a CERT value with one online key: 16 + 64 + 72.
pub const CERT_LEN: usize = 152;
const DELE_LEN: usize = 72;
/// Longest context string of any version.
pub(crate) const MAX_CONTEXT: usize = 36;

/// What signs a batch's SREP with the online key: Ed25519 over the bytes
/// given, into a returned array, without allocating (the server's workers
/// must not). [`KeyPair`] is the portable signer; a server may pass a faster
/// one for the same key (gnomon-server's `signer` module), which must give
/// the same bytes: Ed25519 signatures are deterministic.
pub trait Sign: core::fmt::Debug + Sync {
    /// The signature of `message` as it is.
    fn sign(&self, message: &[u8]) -> [u8; 64];
}

impl Sign for KeyPair {
    fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.0.sign(message).to_bytes()
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

    /// Sign `context ‖ message` without allocating (contexts are short and
    /// messages bounded by `buf`).
    pub(crate) fn sign_with_context(
        &self,
        context: &[u8],
        message: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; 64], WireError> {
        let total = context.len() + message.len();
        let buf = buf.get_mut(..total).ok_or(WireError::NoRoom)?;
        buf[..context.len()].copy_from_slice(context);
        buf[context.len()..].copy_from_slice(message);
        Ok(self.0.sign(buf).to_bytes())
    }
}

impl core::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Never print secret material.
        write!(f, "KeyPair(public {:02x?})", &self.public()[..4])
    }
}

/// A signed delegation in one profile's encoding: the CERT value bytes, and
/// the validity window in Unix µs as it was encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Certificate {
    bytes: [u8; CERT_LEN],
    /// MINT as Unix µs.
    pub mint_us: u64,
    /// MAXT as Unix µs (`u64::MAX` for "no limit").
    pub maxt_us: u64,
    /// The online public key delegated to.
    pub online_public: [u8; 32],
}

impl Certificate {
    /// Delegate to `online_public` for [mint_us, maxt_us], signed by
    /// `long_term` in `profile`'s context and time encoding. Seconds-encoded
    /// windows are narrowed inwards, never widened.
    pub fn mint(
        long_term: &KeyPair,
        online_public: &[u8; 32],
        mint_us: u64,
        maxt_us: u64,
        profile: &Profile,
    ) -> Certificate {
        let t = profile.time;
        let (mint, maxt) = (t.encode_start(mint_us), t.encode_end(maxt_us));
        let mut dele = [0u8; DELE_LEN];
        let written = wire::write_message(
            &mut dele,
            &[
                (Tag::PUBK, online_public),
                (Tag::MINT, &mint.to_le_bytes()),
                (Tag::MAXT, &maxt.to_le_bytes()),
            ],
        );
        debug_assert_eq!(written, Ok(DELE_LEN));
        let mut buf = [0u8; MAX_CONTEXT + DELE_LEN];
        let sig = long_term
            .sign_with_context(profile.contexts.dele, &dele, &mut buf)
            .unwrap_or([0; 64]);
        let mut bytes = [0u8; CERT_LEN];
        let written = wire::write_message(&mut bytes, &[(Tag::SIG, &sig), (Tag::DELE, &dele)]);
        debug_assert_eq!(written, Ok(CERT_LEN));
        Certificate {
            bytes,
            mint_us: t.decode(mint).unwrap_or(u64::MAX),
            maxt_us: t.decode(maxt).unwrap_or(0),
            online_public: *online_public,
        }
    }

    /// Load CERT bytes made elsewhere (an offline delegation) for `profile`.
    /// The signature is not checked here; a server checks it against its
    /// long-term public key with [`crate::verify::check_certificate`].
    pub fn from_bytes(bytes: &[u8], profile: &Profile) -> Result<Certificate, WireError> {
        let arr: [u8; CERT_LEN] = bytes
            .try_into()
            .map_err(|_| WireError::ValueLength(Tag::CERT))?;
        let cert = Message::parse(&arr)?;
        cert.fixed::<64>(Tag::SIG)?;
        let dele = cert.nested(Tag::DELE)?;
        let online_public = *dele.fixed::<32>(Tag::PUBK)?;
        let t = profile.time;
        let bad = WireError::ValueLength(Tag::MINT);
        let mint_us = t.decode(dele.u64(Tag::MINT)?).ok_or(bad)?;
        let maxt_us = t.decode(dele.u64(Tag::MAXT)?).ok_or(bad)?;
        Ok(Certificate {
            bytes: arr,
            mint_us,
            maxt_us,
            online_public,
        })
    }

    /// The CERT value.
    pub fn bytes(&self) -> &[u8; CERT_LEN] {
        &self.bytes
    }

    /// Whether a response made at `now_us` would satisfy MINT ≤ MIDP ≤ MAXT.
    pub fn covers(&self, now_us: u64) -> bool {
        self.mint_us <= now_us && now_us <= self.maxt_us
    }
}

/// One delegation minted for every profile: a multi-version server needs up
/// to six different CERT encodings of the same online key (variants
/// A–E plus version 1's strings). Profiles that share an encoding share the
/// bytes; each is signed once.
#[derive(Clone, Debug)]
pub struct CertificateSet {
    certs: alloc::vec::Vec<Certificate>,
    /// For each profile id, the index into `certs`.
    index: [u8; crate::profile::PROFILES.len()],
}

impl CertificateSet {
    /// Delegate to `online_public` for [mint_us, maxt_us] in every profile.
    pub fn mint_all(
        long_term: &KeyPair,
        online_public: &[u8; 32],
        mint_us: u64,
        maxt_us: u64,
    ) -> CertificateSet {
        use crate::profile::PROFILES;
        let mut certs = alloc::vec::Vec::new();
        let mut reps: alloc::vec::Vec<&Profile> = alloc::vec::Vec::new();
        let mut index = [0u8; PROFILES.len()];
        for p in PROFILES.iter() {
            let at = match reps.iter().position(|r| r.same_cert(p)) {
                Some(at) => at,
                None => {
                    reps.push(p);
                    certs.push(Certificate::mint(
                        long_term,
                        online_public,
                        mint_us,
                        maxt_us,
                        p,
                    ));
                    certs.len() - 1
                }
            };
            index[usize::from(p.id.0)] = at as u8;
        }
        CertificateSet { certs, index }
    }

    /// A set from certificates made elsewhere (offline delegations read
    /// back from disk): `cert_for` is asked once per profile, in table
    /// order. Equal certificates share one slot, as in [`Self::mint_all`].
    /// The caller checks the signatures ([`crate::verify::check_certificate`]).
    pub fn from_fn(mut cert_for: impl FnMut(&'static Profile) -> Certificate) -> CertificateSet {
        use crate::profile::PROFILES;
        let mut certs: alloc::vec::Vec<Certificate> = alloc::vec::Vec::new();
        let mut index = [0u8; PROFILES.len()];
        for p in PROFILES.iter() {
            let cert = cert_for(p);
            let at = match certs.iter().position(|c| *c == cert) {
                Some(at) => at,
                None => {
                    certs.push(cert);
                    certs.len() - 1
                }
            };
            index[usize::from(p.id.0)] = at as u8;
        }
        CertificateSet { certs, index }
    }

    /// The certificate for `profile`.
    pub fn for_profile(&self, profile: &Profile) -> &Certificate {
        &self.certs[usize::from(self.index[usize::from(profile.id.0)])]
    }

    /// Distinct encodings signed.
    pub fn distinct(&self) -> usize {
        self.certs.len()
    }

    /// Whether every encoding covers `now_us`.
    pub fn covers(&self, now_us: u64) -> bool {
        self.certs.iter().all(|c| c.covers(now_us))
    }
}
