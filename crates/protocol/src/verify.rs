//! The client side: full verification of a response against the request
//! that was sent (the CERT and DELE layout; the Merkle tree of each version; each version's response layout; the tree orientation the drafts and deployments disagree on; deployed servers that differ from their drafts).
//!
//! The result is the midpoint and radius in Unix µs whatever the version's
//! encoding. Every failure is its own [`VerifyError`] variant.

use crate::error::WireError;
use crate::hash::Hash;
use crate::merkle::{self, Orientation, PathError};
use crate::profile::{homonym, Contexts, LeafInput, NoncePlace, Profile, VerPlace};
pub use crate::scheme::ed25519_ok;
use crate::scheme::{srv_for, PublicKey, Scheme};
use crate::tag::Tag;
use crate::time::FOREVER;
use crate::version::Version;
use crate::wire::{self, Message};

/// Why a response was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerifyError {
    /// The request we are checking against does not parse.
    Request(WireError),
    /// The response's framing does not match the request's.
    Framing(WireError),
    /// The response (or a nested message) is malformed or lacks a tag.
    Message(WireError),
    /// The response names no version, or one we cannot map to a profile.
    UnknownVersion(u32),
    /// The response's version was not offered.
    NotOffered(Version),
    /// VER=1 at top level without TYPE: roughenough 1.x's pre-standard
    /// format, not RFC 10049.
    LegacyVersionOne,
    /// The version is not where this version puts it.
    VersionPlacement,
    /// TYPE is missing or not 1.
    Type,
    /// VERS is unsorted, too long, or lacks VER.
    Vers,
    /// VERS shows a better version we both speak: a downgrade.
    Downgrade {
        /// Version answered.
        answered: Version,
        /// Better version both sides support.
        better: Version,
    },
    /// DELE is not signed by the long-term key.
    DelegationSignature,
    /// SREP is not signed by the delegated online key.
    ResponseSignature,
    /// The NONC copy differs from the nonce sent.
    NonceMismatch,
    /// The NONC copy is required and missing.
    NonceMissing,
    /// PATH is malformed or INDX has bits past its depth.
    Path(PathError),
    /// The Merkle path does not lead to ROOT in either orientation.
    Root,
    /// A time value cannot be decoded.
    Time,
    /// MIDP is outside [MINT, MAXT].
    OutsideDelegation,
    /// RADI is 0 where the version forbids it.
    ZeroRadius,
    /// The answer is signed in another scheme than the pinned key's (an
    /// ML-DSA-44 key pinned, an Ed25519 version answered, or the reverse).
    KeyScheme {
        /// The pinned key's scheme.
        key: Scheme,
        /// The scheme of the version answered.
        answered: Scheme,
    },
}

impl From<WireError> for VerifyError {
    fn from(e: WireError) -> Self {
        VerifyError::Message(e)
    }
}

/// A verified response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The profile the server answered with.
    pub profile: &'static Profile,
    /// Midpoint, Unix µs.
    pub midpoint_us: u64,
    /// Radius, µs.
    pub radius_us: u64,
    /// The delegated online key, or for a scheme whose keys are longer
    /// than 32 bytes (ML-DSA-44) the first 32 bytes of SHA-512(0xff ‖ key),
    /// as SRV names a key: enough to tell keys apart and to show.
    pub online_key: [u8; 32],
    /// Delegation window, Unix µs (`u64::MAX` for "no limit").
    pub mint_us: u64,
    /// End of the delegation window.
    pub maxt_us: u64,
    /// Orientation the Merkle proof verified in.
    pub orientation: Orientation,
    /// True when the signatures verified only with the version's legacy
    /// context strings (a draft-19 server answering version 1).
    pub legacy_context: bool,
    /// Batch size lower bound: 2^PATH depth.
    pub path_depth: u8,
}

impl Verified {
    /// Earliest time the server vouches for (MIDP − RADI), Unix µs.
    pub fn earliest_us(&self) -> i128 {
        i128::from(self.midpoint_us) - i128::from(self.radius_us)
    }

    /// Latest time the server vouches for (MIDP + RADI), Unix µs.
    pub fn latest_us(&self) -> i128 {
        i128::from(self.midpoint_us) + i128::from(self.radius_us)
    }
}

/// What a request we sent says: its nonce, offer and format.
#[derive(Clone, Copy, Debug)]
pub struct SentRequest<'a> {
    /// The bytes as sent.
    pub packet: &'a [u8],
    /// The nonce.
    pub nonce: &'a [u8],
    /// Offered versions as raw VER bytes (empty for Google).
    pub ver: &'a [u8],
    /// TYPE present.
    pub has_type: bool,
    /// Packet framing.
    pub framed: bool,
}

impl<'a> SentRequest<'a> {
    /// Read a request back (ours, or one in a report).
    pub fn parse(packet: &'a [u8]) -> Result<SentRequest<'a>, WireError> {
        let framed = wire::has_magic(packet);
        let body = if framed {
            wire::unframe(packet)?
        } else {
            packet
        };
        let msg = Message::parse(body)?;
        let nonce = msg.require(Tag::NONC)?;
        let ver = if framed { msg.require(Tag::VER)? } else { &[] };
        Ok(SentRequest {
            packet,
            nonce,
            ver,
            has_type: msg.get(Tag::TYPE).is_some(),
            framed,
        })
    }

    /// Offered versions.
    pub fn offered(&self) -> impl Iterator<Item = Version> + Clone + 'a {
        self.ver
            .chunks_exact(4)
            .map(|c| Version(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
    }

    /// The profile whose format this request was built in: the preferred
    /// one among those offered (Google for a bare request).
    pub fn primary(&self) -> Option<&'static Profile> {
        if !self.framed {
            return Some(Profile::google());
        }
        self.offered()
            .filter_map(|v| Profile::for_wire(v, self.has_type))
            .max_by_key(|p| p.version.preference())
    }
}

/// Verify `response` to the request `request` (bytes as sent) against the
/// server's long-term public key (an Ed25519 key as `&[u8; 32]`, or any
/// [`PublicKey`]).
pub fn verify_response<'k>(
    request: &[u8],
    response: &[u8],
    long_term_public: impl Into<PublicKey<'k>>,
) -> Result<Verified, VerifyError> {
    verify_with(request, response, long_term_public.into())
}

fn verify_with(
    request: &[u8],
    response: &[u8],
    long_term_public: PublicKey<'_>,
) -> Result<Verified, VerifyError> {
    let sent = SentRequest::parse(request).map_err(VerifyError::Request)?;
    // A framed request's answer without the header may still be a bare
    // message from a version that allows it (`Profile::bare_response_ok`);
    // otherwise the framing error stands.
    let (body, bare) = match sent.framed.then(|| wire::unframe(response)) {
        None => (response, None),
        Some(Ok(body)) => (body, None),
        Some(Err(e)) if !wire::has_magic(response) => (response, Some(e)),
        Some(Err(e)) => return Err(VerifyError::Framing(e)),
    };
    let parsed = Message::parse(body)
        .map_err(VerifyError::from)
        .and_then(|msg| {
            let srep = msg.nested(Tag::SREP)?;
            let profile = identify(&sent, &msg, &srep)?;
            Ok((msg, srep, profile))
        });
    let (msg, srep, profile) = match (parsed, bare) {
        (Ok(p), None) => p,
        (Ok(p), Some(_)) if p.2.bare_response_ok => p,
        (Err(e), None) => return Err(e),
        (_, Some(e)) => return Err(VerifyError::Framing(e)),
    };

    if profile.scheme != long_term_public.scheme() {
        return Err(VerifyError::KeyScheme {
            key: long_term_public.scheme(),
            answered: profile.scheme,
        });
    }
    if profile.type_tag && msg.get(Tag::TYPE) != Some(&1u32.to_le_bytes()[..]) {
        return Err(VerifyError::Type);
    }
    let cert = msg.nested(Tag::CERT)?;
    let dele_bytes = cert.require(Tag::DELE)?;
    let dele = Message::parse(dele_bytes)?;
    let online = dele.require(Tag::PUBK)?;
    if online.len() != profile.scheme.public_len() {
        return Err(VerifyError::Message(WireError::ValueLength(Tag::PUBK)));
    }
    let legacy_context = check_signatures(
        profile,
        &msg,
        &cert,
        dele_bytes,
        online,
        long_term_public.bytes(),
    )?;
    let online_key = match <[u8; 32]>::try_from(online) {
        Ok(key) => key,
        Err(_) => srv_for(online),
    };

    if profile.ver_place == VerPlace::Srep {
        check_vers(profile, &sent, &srep)?;
    }
    check_nonce(profile, &sent, &msg, &srep)?;

    let root = srep.require(Tag::ROOT)?;
    if root.len() != profile.hash_len() {
        return Err(VerifyError::Message(WireError::ValueLength(Tag::ROOT)));
    }
    let path = msg.require(Tag::PATH)?;
    let indx = msg.u32(Tag::INDX)?;
    let mut leaf: Hash = [0; 64];
    let input = match profile.leaf {
        LeafInput::Nonce => sent.nonce,
        LeafInput::Packet => sent.packet,
    };
    profile.hash.leaf(input, &mut leaf);
    let orientation = prove(profile, &leaf, path, indx, root)?;

    let t = profile.time;
    let midp_raw = srep.u64(Tag::MIDP)?;
    let radi_raw = srep.u32(Tag::RADI)?;
    let (mint_raw, maxt_raw) = (dele.u64(Tag::MINT)?, dele.u64(Tag::MAXT)?);
    // Compared as decoded times, both ends inclusive: raw MJD words
    // order by day first, so a µs-of-day past midnight would slip a later
    // time under a MAXT on the same day. The all-ones "no limit" decodes
    // to itself and keeps its meaning.
    let decoded = (t.decode(mint_raw), t.decode(midp_raw), t.decode(maxt_raw));
    let (Some(mint_us), Some(midpoint_us), Some(maxt_us)) = decoded else {
        return Err(VerifyError::Time);
    };
    if midpoint_us == FOREVER {
        return Err(VerifyError::Time);
    }
    if !(mint_us <= midpoint_us && midpoint_us <= maxt_us) {
        return Err(VerifyError::OutsideDelegation);
    }
    if radi_raw == 0 && profile.min_radius > 0 {
        return Err(VerifyError::ZeroRadius);
    }
    Ok(Verified {
        profile,
        midpoint_us,
        radius_us: t.decode_radius(radi_raw),
        online_key,
        mint_us,
        maxt_us,
        orientation,
        legacy_context,
        path_depth: (path.len() / profile.hash_len()) as u8,
    })
}

/// Which profile answered, and is that consistent with what we sent?
fn identify(
    sent: &SentRequest<'_>,
    msg: &Message<'_>,
    srep: &Message<'_>,
) -> Result<&'static Profile, VerifyError> {
    if !sent.framed {
        return Ok(Profile::google());
    }
    let top = msg.get(Tag::VER);
    let signed = srep.get(Tag::VER);
    let raw = signed
        .or(top)
        .ok_or(VerifyError::Message(WireError::Missing(Tag::VER)))?;
    let v =
        Version(u32::from_le_bytes(raw.try_into().map_err(|_| {
            VerifyError::Message(WireError::ValueLength(Tag::VER))
        })?));
    let legacy = homonym(
        v,
        top == Some(raw),
        signed == Some(raw),
        msg.get(Tag::TYPE).is_some(),
    );
    let Some(profile) = Profile::for_wire(v, sent.has_type) else {
        return Err(if legacy.is_some() {
            VerifyError::LegacyVersionOne
        } else {
            VerifyError::UnknownVersion(v.0)
        });
    };
    if !sent.offered().any(|o| o == v) {
        return Err(VerifyError::NotOffered(v));
    }
    // The version must sit where this version puts it; a copy elsewhere is
    // an unknown extra and is ignored (roughly's mixed draft-11 layout).
    let placed = match profile.ver_place {
        VerPlace::Srep => signed,
        VerPlace::TopLevel => top,
        VerPlace::Absent => None,
    };
    if placed != Some(raw) {
        return Err(if legacy.is_some() {
            VerifyError::LegacyVersionOne
        } else {
            VerifyError::VersionPlacement
        });
    }
    Ok(profile)
}

fn check_signatures(
    profile: &Profile,
    msg: &Message<'_>,
    cert: &Message<'_>,
    dele: &[u8],
    online: &[u8],
    long_term: &[u8],
) -> Result<bool, VerifyError> {
    let scheme = profile.scheme;
    let cert_sig = signature_of(cert, scheme)?;
    let srep_sig = signature_of(msg, scheme)?;
    let srep = msg.require(Tag::SREP)?;
    let try_set = |c: &Contexts| -> Result<(), VerifyError> {
        if !scheme.verify(long_term, c.dele, dele, cert_sig) {
            return Err(VerifyError::DelegationSignature);
        }
        if !scheme.verify(online, c.srep, srep, srep_sig) {
            return Err(VerifyError::ResponseSignature);
        }
        Ok(())
    };
    match try_set(&profile.contexts) {
        Ok(()) => Ok(false),
        Err(first) => match &profile.legacy_contexts {
            Some(legacy) if try_set(legacy).is_ok() => Ok(true),
            _ => Err(first),
        },
    }
}

/// The SIG of `m`, if it is as long as `scheme`'s signatures.
fn signature_of<'a>(m: &Message<'a>, scheme: Scheme) -> Result<&'a [u8], VerifyError> {
    let sig = m.require(Tag::SIG)?;
    if sig.len() == scheme.signature_len() {
        Ok(sig)
    } else {
        Err(VerifyError::Message(WireError::ValueLength(Tag::SIG)))
    }
}

fn check_vers(
    profile: &Profile,
    sent: &SentRequest<'_>,
    srep: &Message<'_>,
) -> Result<(), VerifyError> {
    let vers = srep.require(Tag::VERS)?;
    if vers.len() > 4 * 32 {
        return Err(VerifyError::Vers);
    }
    let list = vers
        .chunks_exact(4)
        .map(|c| Version(u32::from_le_bytes([c[0], c[1], c[2], c[3]])));
    let mut prev = None;
    for v in list.clone() {
        if prev.is_some_and(|p| p >= v) {
            return Err(VerifyError::Vers);
        }
        prev = Some(v);
    }
    if !list.clone().any(|v| v == profile.version) {
        return Err(VerifyError::Vers);
    }
    // Signed VERS shows what else the server speaks; if we offered something
    // better that it also lists, it should have picked that.
    let better = sent
        .offered()
        .filter(|o| list.clone().any(|v| v == *o))
        .filter(|o| Profile::for_wire(*o, sent.has_type).is_some())
        .max_by_key(|o| o.preference());
    match better {
        Some(b) if b.preference() > profile.version.preference() => Err(VerifyError::Downgrade {
            answered: profile.version,
            better: b,
        }),
        _ => Ok(()),
    }
}

fn check_nonce(
    profile: &Profile,
    sent: &SentRequest<'_>,
    msg: &Message<'_>,
    srep: &Message<'_>,
) -> Result<(), VerifyError> {
    let (copy, required) = match profile.nonce_place {
        NoncePlace::Srep => (srep.get(Tag::NONC), true),
        NoncePlace::TopLevel => (msg.get(Tag::NONC), profile.nonce_copy_required),
        // Google: any NONC is an unknown extra (Cloudflare adds one).
        NoncePlace::Absent => (None, false),
    };
    match copy {
        Some(n) if n != sent.nonce => Err(VerifyError::NonceMismatch),
        None if required => Err(VerifyError::NonceMissing),
        _ => Ok(()),
    }
}

/// Hash-first, then node-first once if PATH is not empty (implementations disagree on it).
fn prove(
    profile: &Profile,
    leaf: &Hash,
    path: &[u8],
    indx: u32,
    root: &[u8],
) -> Result<Orientation, VerifyError> {
    let len = profile.hash_len();
    let first = merkle::climb(profile.hash, leaf, path, indx, Orientation::HashFirst)
        .map_err(VerifyError::Path)?;
    if &first[..len] == root {
        return Ok(Orientation::HashFirst);
    }
    if !path.is_empty() {
        let second = merkle::climb(profile.hash, leaf, path, indx, Orientation::NodeFirst)
            .map_err(VerifyError::Path)?;
        if &second[..len] == root {
            return Ok(Orientation::NodeFirst);
        }
    }
    Err(VerifyError::Root)
}

/// Check a CERT value against a long-term key under `profile`'s context
/// and scheme (for servers loading offline delegations: the check that
/// [`Certificate::from_bytes`] and [`CertificateSet::from_fn`] leave to
/// their caller).
///
/// [`Certificate::from_bytes`]: crate::cert::Certificate::from_bytes
/// [`CertificateSet::from_fn`]: crate::cert::CertificateSet::from_fn
pub fn check_certificate<'k>(
    cert: &[u8],
    profile: &Profile,
    long_term_public: impl Into<PublicKey<'k>>,
) -> Result<(), VerifyError> {
    let key = long_term_public.into();
    if key.scheme() != profile.scheme {
        return Err(VerifyError::KeyScheme {
            key: key.scheme(),
            answered: profile.scheme,
        });
    }
    let cert = Message::parse(cert)?;
    let sig = cert.require(Tag::SIG)?;
    let dele = cert.require(Tag::DELE)?;
    if profile
        .scheme
        .verify(key.bytes(), profile.contexts.dele, dele, sig)
    {
        Ok(())
    } else {
        Err(VerifyError::DelegationSignature)
    }
}
