//! What a row of the version table may differ in: the type of each
//! [`Profile`](super::Profile) field that is not a plain number or flag,
//! and the context strings the rows sign with.

use crate::hash::HashAlg;

/// How a request or response is carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// One bare message per datagram (Google).
    Bare,
    /// "ROUGHTIM" + length + message (drafts and version 1).
    Packet,
}

/// What a Merkle leaf hashes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeafInput {
    /// The request's NONC value (Google to draft 11).
    Nonce,
    /// The whole request packet as sent, header and padding included (12+).
    Packet,
}

/// Where a response carries a copy of the request's nonce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoncePlace {
    /// Nowhere; the Merkle leaf binds it (Google).
    Absent,
    /// Inside the signed SREP (drafts 01–02): one nonce per signature.
    Srep,
    /// A top-level, unsigned copy (drafts 03 and later).
    TopLevel,
}

/// Where a response says its version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerPlace {
    /// No version at all (Google).
    Absent,
    /// One top-level, unsigned VER (drafts 01–11).
    TopLevel,
    /// VER and VERS inside SREP, signed (drafts 12 and later).
    Srep,
}

/// Rules for the VER list of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerList {
    /// No VER (Google).
    Absent,
    /// At least one value, any order, repeats tolerated (01–09).
    Any,
    /// No repeats (10–11).
    Unique,
    /// Ascending, no repeats, at most 32 (12+).
    Sorted,
}

/// How a server may batch this format (where NONC goes; the disputed tree orientation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Batching {
    /// Any batch size.
    Free,
    /// Implementations disagree on the tree orientation: batches of one unless
    /// the operator opts in to hash-first batches (gnomon policy: implementations disagree on the orientation).
    OrientationDisputed,
    /// Never: SREP carries the nonce (drafts 01–02).
    Never,
}

/// How a client derives a chained nonce from the previous response (the chaining rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChainRule {
    /// H(previous response as received ‖ rand), cut to the nonce length.
    /// `framed` keeps the ROUGHTIM header in the hashed response (12+).
    Concat {
        /// The hash.
        hash: HashAlg,
        /// Whether the ROUGHTIM header is part of the hashed response.
        framed: bool,
    },
    /// SHA-512(SHA-512(previous response) ‖ rand), as Google-era clients do.
    DoubleSha512,
}

/// The two context strings of a version (a prefix of the signed bytes
/// for Ed25519, FIPS 204's context parameter for ML-DSA).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Contexts {
    /// Prefix of DELE signed by the long-term key.
    pub dele: &'static [u8],
    /// Prefix of SREP signed by the online key.
    pub srep: &'static [u8],
}

/// Delegation context with dashes (Google, drafts 01–06, 08–11).
pub const DELE_DASHES: &[u8] = b"RoughTime v1 delegation signature--\0";
/// Delegation context without dashes (draft 07, drafts 12–19).
pub const DELE_PLAIN: &[u8] = b"RoughTime v1 delegation signature\0";
/// RFC 10049 delegation context (lower-case t).
pub const DELE_RFC: &[u8] = b"Roughtime v1 delegation signature\0";
/// Response context of every version before 1.
pub const SREP_DRAFT: &[u8] = b"RoughTime v1 response signature\0";
/// RFC 10049 response context (lower-case t).
pub const SREP_RFC: &[u8] = b"Roughtime v1 response signature\0";

/// A different, older format that reused a profile's version number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Homonym {
    /// What it was.
    pub name: &'static str,
    /// Where its responses carry VER.
    pub ver_place: VerPlace,
    /// Whether its responses carry TYPE.
    pub type_tag: bool,
}
