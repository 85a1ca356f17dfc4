//! Delegation certificates (the CERT and DELE layout; the signature contexts).
//!
//! The keys that sign them ([`KeyPair`], [`Sign`]) live in [`crate::scheme`],
//! which knows nothing of certificates; they are re-exported here.

use alloc::vec::Vec;

use crate::error::WireError;
use crate::profile::Profile;
pub use crate::scheme::{KeyPair, Sign};
use crate::scheme::{Scheme, MAX_PUBLIC, MAX_SIGNATURE};
use crate::tag::Tag;
use crate::wire::{self, Message};

/// Length of a CERT value with one Ed25519 online key: 16 + 64 + 72.
pub const CERT_LEN: usize = Scheme::Ed25519.cert_len();
/// Longest context string of any version.
pub(crate) const MAX_CONTEXT: usize = 36;

/// A signed delegation in one profile's encoding: the CERT value bytes, and
/// the validity window in Unix µs as it was encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Certificate {
    bytes: Vec<u8>,
    /// MINT as Unix µs.
    pub mint_us: u64,
    /// MAXT as Unix µs (`u64::MAX` for "no limit").
    pub maxt_us: u64,
    /// The online public key delegated to.
    pub online_public: Vec<u8>,
    /// The scheme of both keys (a delegation never changes scheme).
    pub scheme: Scheme,
}

impl Certificate {
    /// Delegate to `online_public` for [mint_us, maxt_us], signed by
    /// `long_term` in `profile`'s context and time encoding. Seconds-encoded
    /// windows are narrowed inwards, never widened. The online key is of
    /// `long_term`'s scheme.
    pub fn mint(
        long_term: &dyn Sign,
        online_public: &[u8],
        mint_us: u64,
        maxt_us: u64,
        profile: &Profile,
    ) -> Certificate {
        let scheme = long_term.scheme();
        debug_assert_eq!(online_public.len(), scheme.public_len());
        let t = profile.time;
        let (mint, maxt) = (t.encode_start(mint_us), t.encode_end(maxt_us));
        let context = profile.contexts.dele;
        // Context ‖ DELE, as `Sign` takes them.
        let mut signed = [0u8; MAX_CONTEXT + 24 + MAX_PUBLIC + 16];
        signed[..context.len()].copy_from_slice(context);
        let dele_len = wire::write_message(
            &mut signed[context.len()..],
            &[
                (Tag::PUBK, online_public),
                (Tag::MINT, &mint.to_le_bytes()),
                (Tag::MAXT, &maxt.to_le_bytes()),
            ],
        )
        .unwrap_or(0);
        debug_assert_eq!(dele_len, scheme.dele_len());
        let signed = &signed[..context.len() + dele_len];
        let mut sig = [0u8; MAX_SIGNATURE];
        long_term.sign_into(signed, context.len(), &mut sig);
        let mut bytes = alloc::vec![0u8; scheme.cert_len()];
        let written = wire::write_message(
            &mut bytes,
            &[
                (Tag::SIG, &sig[..scheme.signature_len()]),
                (Tag::DELE, &signed[context.len()..]),
            ],
        );
        debug_assert_eq!(written, Ok(scheme.cert_len()));
        Certificate {
            bytes,
            mint_us: t.decode(mint).unwrap_or(u64::MAX),
            maxt_us: t.decode(maxt).unwrap_or(0),
            online_public: online_public.to_vec(),
            scheme,
        }
    }

    /// Load CERT bytes made elsewhere (an offline delegation) for `profile`.
    /// The signature is not checked here; a server checks it against its
    /// long-term public key with the verifier's `check_certificate` (which
    /// reads certificates; this module reads no verifier).
    pub fn from_bytes(bytes: &[u8], profile: &Profile) -> Result<Certificate, WireError> {
        let scheme = profile.scheme;
        if bytes.len() != scheme.cert_len() {
            return Err(WireError::ValueLength(Tag::CERT));
        }
        let cert = Message::parse(bytes)?;
        if cert.require(Tag::SIG)?.len() != scheme.signature_len() {
            return Err(WireError::ValueLength(Tag::SIG));
        }
        let dele = cert.nested(Tag::DELE)?;
        let online_public = dele.require(Tag::PUBK)?;
        if online_public.len() != scheme.public_len() {
            return Err(WireError::ValueLength(Tag::PUBK));
        }
        let t = profile.time;
        let bad = WireError::ValueLength(Tag::MINT);
        let mint_us = t.decode(dele.u64(Tag::MINT)?).ok_or(bad)?;
        let maxt_us = t.decode(dele.u64(Tag::MAXT)?).ok_or(bad)?;
        Ok(Certificate {
            bytes: bytes.to_vec(),
            mint_us,
            maxt_us,
            online_public: online_public.to_vec(),
            scheme,
        })
    }

    /// The CERT value.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Whether a response made at `now_us` would satisfy MINT ≤ MIDP ≤ MAXT.
    pub fn covers(&self, now_us: u64) -> bool {
        self.mint_us <= now_us && now_us <= self.maxt_us
    }
}

/// One delegation minted for every profile of the long-term key's scheme:
/// a multi-version Ed25519 server needs up to six different CERT encodings
/// of the same online key (variants A–E plus version 1's strings).
/// Profiles that share an encoding share the bytes; each is signed once.
/// Profiles of another scheme have no certificate here.
#[derive(Clone, Debug)]
pub struct CertificateSet {
    scheme: Scheme,
    certs: Vec<Certificate>,
    /// For each profile id, the index into `certs` ([`NO_CERT`] for none).
    index: [u8; crate::profile::PROFILES.len()],
}

const NO_CERT: u8 = u8::MAX;

impl CertificateSet {
    /// Delegate to `online_public` for [mint_us, maxt_us] in every profile
    /// of `long_term`'s scheme.
    pub fn mint_all(
        long_term: &dyn Sign,
        online_public: &[u8],
        mint_us: u64,
        maxt_us: u64,
    ) -> CertificateSet {
        use crate::profile::PROFILES;
        let mut certs = Vec::new();
        let mut reps: Vec<&Profile> = Vec::new();
        let mut index = [NO_CERT; PROFILES.len()];
        for p in PROFILES.iter().filter(|p| p.scheme == long_term.scheme()) {
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
        CertificateSet {
            scheme: long_term.scheme(),
            certs,
            index,
        }
    }

    /// A set from certificates made elsewhere (offline delegations read
    /// back from disk): `cert_for` is asked once per profile of `scheme`,
    /// in table order. Equal certificates share one slot, as in
    /// [`Self::mint_all`]. The caller checks the signatures (the
    /// verifier's `check_certificate`).
    pub fn from_fn(
        scheme: Scheme,
        mut cert_for: impl FnMut(&'static Profile) -> Certificate,
    ) -> CertificateSet {
        use crate::profile::PROFILES;
        let mut certs: Vec<Certificate> = Vec::new();
        let mut index = [NO_CERT; PROFILES.len()];
        for p in PROFILES.iter().filter(|p| p.scheme == scheme) {
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
        CertificateSet {
            scheme,
            certs,
            index,
        }
    }

    /// The scheme of the keys, and so of the profiles the set covers.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The certificate for `profile`; None for a profile of another scheme.
    pub fn for_profile(&self, profile: &Profile) -> Option<&Certificate> {
        self.certs
            .get(usize::from(*self.index.get(usize::from(profile.id.0))?))
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
