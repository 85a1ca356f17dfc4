//! The version table: one [`Profile`] row per distinguishable wire format.
//!
//! Every difference between versions lives in a field here (the drafts and RFC 10049, compared field by field,
//!). Code elsewhere reads fields; it never compares version numbers. Adding
//! a version is adding a row to [`PROFILES`].
//!
//! This file holds the row type, the table and the lookups into it; the
//! types of the fields are in `fields.rs`, sets of rows ([`ProfileSet`]) in
//! `set.rs`. The hash and the time encoding are fields too, defined with the
//! code that computes them ([`crate::hash`], [`crate::time`]), as the
//! signature scheme is ([`crate::scheme`]): the table reads them, they never
//! read the table.

mod drafts;
mod fields;
mod set;
#[cfg(test)]
mod tests;

pub use drafts::{wire_label, LAST_DRAFT};
pub use fields::{
    Batching, ChainRule, Contexts, Framing, Homonym, LeafInput, NoncePlace, VerList, VerPlace,
    DELE_DASHES, DELE_PLAIN, DELE_RFC, SREP_DRAFT, SREP_RFC,
};
pub use set::ProfileSet;

pub use crate::hash::HashAlg;
use crate::scheme::Scheme;
use crate::tag::Tag;
pub use crate::time::TimeEncoding;
use crate::version::Version;

const CTX_DASHES: Contexts = Contexts {
    dele: DELE_DASHES,
    srep: SREP_DRAFT,
};
const CTX_PLAIN: Contexts = Contexts {
    dele: DELE_PLAIN,
    srep: SREP_DRAFT,
};
const CTX_RFC: Contexts = Contexts {
    dele: DELE_RFC,
    srep: SREP_RFC,
};

/// One wire format.
#[derive(Debug, PartialEq, Eq)]
pub struct Profile {
    /// Index in [`PROFILES`].
    pub id: ProfileId,
    /// Short human name.
    pub name: &'static str,
    /// VER value on the wire ([`Version::GOOGLE`] for Google, which sends none).
    pub version: Version,
    /// Request and response framing.
    pub framing: Framing,
    /// Nonce length a client sends.
    pub nonce_len: usize,
    /// Nonce lengths a server accepts (deployments that deviated).
    pub accepted_nonce_lens: &'static [usize],
    /// Request padding tag.
    pub pad: Tag,
    /// Whether requests carry TYPE=0 and responses TYPE=1.
    pub type_tag: bool,
    /// Whether SRV is defined.
    pub srv: bool,
    /// VER list rules in requests.
    pub ver_list: VerList,
    /// Merkle hash.
    pub hash: HashAlg,
    /// Merkle leaf input.
    pub leaf: LeafInput,
    /// Time encoding.
    pub time: TimeEncoding,
    /// Smallest RADI a server sends, in the wire unit.
    pub min_radius: u32,
    /// Context strings a server signs with.
    pub contexts: Contexts,
    /// Further context strings a client accepts (deployed draft-19 servers
    /// sign version 1 with the capital-T strings).
    pub legacy_contexts: Option<Contexts>,
    /// Where the response carries NONC.
    pub nonce_place: NoncePlace,
    /// Whether a client insists on that NONC copy. Deployed servers left it out
    /// (Cloudflare's 0x80000003, roughenough's 08–11 before Nov 2024); the
    /// Merkle leaf binds the nonce anyway.
    pub nonce_copy_required: bool,
    /// Where the response carries its version.
    pub ver_place: VerPlace,
    /// Batching policy.
    pub batching: Batching,
    /// Nonce chaining.
    pub chain: ChainRule,
    /// Whether the version is served over TCP, where each request and each
    /// response is framed by its 12-byte ROUGHTIM header ([`Framing::Packet`];
    /// the ROUGHTIM packet framing of drafts 01 and later; each version's transports). Drafts 08 and later define this; drafts
    /// 01–07 define only UDP, but tannerryan/roughtime frames them the same
    /// way over TCP, and a stream cannot be spoofed, so they are served too.
    /// Google's bare message is not: its header gives the offsets of its
    /// values but not where the last one ends, so a stream has no boundary
    /// after it, and Google defined no TCP transport.
    pub tcp: bool,
    /// Whether the version is served over UDP. Not when every response is
    /// far larger than any request can be (ML-DSA-44's 6.4 KB): a UDP
    /// answer may never be larger than its request, and a datagram that
    /// size would be fragmented. A request offering such a version with
    /// others is answered in another one over UDP.
    pub udp: bool,
    /// How DELE and SREP are signed: the scheme of both keys, and how the
    /// context strings enter the signature.
    pub scheme: Scheme,
    /// A pre-standard format that used this version number with another
    /// layout (roughenough 1.x's "version 1"). A response in the
    /// wrong layout is then reported as that format, not as a misplaced VER.
    pub homonym: Option<Homonym>,
    /// A client also accepts a bare (unframed) response to a framed
    /// request. pyroughtime 1.0.1's draft-07 server answers that way; the
    /// 12-byte header is not signed, so nothing verified is given up.
    pub bare_response_ok: bool,
    /// The IETF drafts whose text describes this wire format, first and
    /// last (`Some((14, 19))`: drafts 14 to 19 all send 0x8000000c with
    /// TYPE); `None` for the formats no draft defines by its own number
    /// (Google, version 1, ML-DSA-44).
    pub drafts: Option<(u8, u8)>,
}

/// The pre-standard format a response is in, if its layout matches one
/// that reused `version`: VER found at top level and/or signed in
/// SREP, and whether TYPE is present.
pub fn homonym(
    version: Version,
    ver_top: bool,
    ver_signed: bool,
    has_type: bool,
) -> Option<Homonym> {
    PROFILES
        .iter()
        .filter(|p| p.version == version)
        .find_map(|p| {
            p.homonym.filter(|h| {
                let placed = match h.ver_place {
                    VerPlace::TopLevel => ver_top,
                    VerPlace::Srep => ver_signed,
                    VerPlace::Absent => false,
                };
                placed && h.type_tag == has_type
            })
        })
}

/// Index of a profile, usable in bit sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProfileId(pub u8);

const fn concat(hash: HashAlg) -> ChainRule {
    ChainRule::Concat {
        hash,
        framed: false,
    }
}

const MJD: TimeEncoding = TimeEncoding::MjdMicros;
const SECS: TimeEncoding = TimeEncoding::UnixSeconds;
const T32: HashAlg = HashAlg::Sha512Trunc32;

/// The row for an early draft (01–07): PAD\0, MJD-µs, top-level VER.
#[allow(clippy::too_many_arguments)]
const fn early(
    id: u8,
    name: &'static str,
    n: u32,
    nonce_len: usize,
    accepted: &'static [usize],
    hash: HashAlg,
    contexts: Contexts,
    nonce_place: NoncePlace,
    batching: Batching,
) -> Profile {
    Profile {
        id: ProfileId(id),
        name,
        version: Version::draft(n),
        framing: Framing::Packet,
        nonce_len,
        accepted_nonce_lens: accepted,
        pad: Tag::PAD_DRAFT,
        type_tag: false,
        srv: false,
        ver_list: VerList::Any,
        hash,
        leaf: LeafInput::Nonce,
        time: MJD,
        min_radius: 0,
        contexts,
        legacy_contexts: None,
        nonce_place,
        nonce_copy_required: true,
        ver_place: VerPlace::TopLevel,
        batching,
        chain: concat(hash),
        tcp: true,
        udp: true,
        scheme: Scheme::Ed25519,
        homonym: None,
        bare_response_ok: true,
        drafts: Some((n as u8, n as u8)),
    }
}

/// The row for drafts 08–11: ZZZZ, Unix seconds, `--` context.
const fn seconds_draft(id: u8, name: &'static str, n: u32, srv: bool) -> Profile {
    Profile {
        id: ProfileId(id),
        name,
        version: Version::draft(n),
        framing: Framing::Packet,
        nonce_len: 32,
        accepted_nonce_lens: &[32],
        pad: Tag::ZZZZ,
        type_tag: false,
        srv,
        ver_list: if srv { VerList::Unique } else { VerList::Any },
        hash: T32,
        leaf: LeafInput::Nonce,
        time: SECS,
        min_radius: if srv { 3 } else { 0 },
        contexts: CTX_DASHES,
        legacy_contexts: None,
        nonce_place: NoncePlace::TopLevel,
        nonce_copy_required: false,
        ver_place: VerPlace::TopLevel,
        batching: Batching::OrientationDisputed,
        chain: ChainRule::Concat {
            hash: T32,
            framed: false,
        },
        tcp: true,
        udp: true,
        scheme: Scheme::Ed25519,
        homonym: None,
        bare_response_ok: false,
        drafts: Some((n as u8, n as u8)),
    }
}

/// The row for the 0x8000000c family and version 1.
const fn modern(
    id: u8,
    name: &'static str,
    version: Version,
    type_tag: bool,
    contexts: Contexts,
    legacy_contexts: Option<Contexts>,
    batching: Batching,
) -> Profile {
    Profile {
        id: ProfileId(id),
        name,
        version,
        framing: Framing::Packet,
        nonce_len: 32,
        accepted_nonce_lens: &[32],
        pad: Tag::ZZZZ,
        type_tag,
        srv: true,
        ver_list: VerList::Sorted,
        hash: T32,
        leaf: LeafInput::Packet,
        time: SECS,
        min_radius: 1,
        contexts,
        legacy_contexts,
        nonce_place: NoncePlace::TopLevel,
        nonce_copy_required: true,
        ver_place: VerPlace::Srep,
        batching,
        chain: ChainRule::Concat {
            hash: T32,
            framed: true,
        },
        tcp: true,
        udp: true,
        scheme: Scheme::Ed25519,
        homonym: None,
        bare_response_ok: false,
        drafts: None,
    }
}

use Batching::{Free, Never, OrientationDisputed as Disputed};
use NoncePlace::{Srep as InSrep, TopLevel as Top};

/// Every profile, in preference order of their versions (lowest first).
pub static PROFILES: [Profile; 16] = [
    Profile {
        id: ProfileId(0),
        name: "google",
        version: Version::GOOGLE,
        framing: Framing::Bare,
        nonce_len: 64,
        accepted_nonce_lens: &[64],
        pad: Tag::PAD_GOOGLE,
        type_tag: false,
        srv: false,
        ver_list: VerList::Absent,
        hash: HashAlg::Sha512,
        leaf: LeafInput::Nonce,
        time: TimeEncoding::UnixMicros,
        min_radius: 0,
        contexts: CTX_DASHES,
        legacy_contexts: None,
        nonce_place: NoncePlace::Absent,
        nonce_copy_required: false,
        ver_place: VerPlace::Absent,
        batching: Free,
        chain: ChainRule::DoubleSha512,
        tcp: false,
        udp: true,
        scheme: Scheme::Ed25519,
        homonym: None,
        bare_response_ok: false,
        drafts: None,
    },
    early(1, "draft-01", 1, 64, &[64], T32, CTX_DASHES, InSrep, Never),
    early(
        2,
        "draft-02",
        2,
        64,
        &[64],
        HashAlg::Sha512_256,
        CTX_DASHES,
        InSrep,
        Never,
    ),
    // Deployed 0x80000003 used 32-byte nonces and left out NONC.
    relaxed_03(early(
        3,
        "draft-03",
        3,
        64,
        &[64, 32],
        T32,
        CTX_DASHES,
        Top,
        Free,
    )),
    early(4, "draft-04", 4, 64, &[64], T32, CTX_DASHES, Top, Free),
    early(5, "draft-05", 5, 32, &[32], T32, CTX_DASHES, Top, Disputed),
    early(6, "draft-06", 6, 32, &[32], T32, CTX_DASHES, Top, Disputed),
    early(
        7,
        "draft-07",
        7,
        32,
        &[32],
        HashAlg::Sha512_256,
        CTX_PLAIN,
        Top,
        Disputed,
    ),
    seconds_draft(8, "draft-08", 8, false),
    seconds_draft(9, "draft-09", 9, false),
    seconds_draft(10, "draft-10", 10, true),
    seconds_draft(11, "draft-11", 11, true),
    // Drafts 12 to 19 share one number; TYPE, added in draft 14, is the
    // only thing on the wire that tells 12–13 from 14–19.
    of_drafts(
        modern(
            12,
            "draft-12",
            Version::DRAFT_12_TO_19,
            false,
            CTX_PLAIN,
            None,
            Disputed,
        ),
        12,
        13,
    ),
    of_drafts(
        modern(
            13,
            "draft-14",
            Version::DRAFT_12_TO_19,
            true,
            CTX_PLAIN,
            None,
            Free,
        ),
        14,
        19,
    ),
    with_homonym(
        modern(
            14,
            "rfc-10049",
            Version::RFC,
            true,
            CTX_RFC,
            Some(CTX_PLAIN),
            Free,
        ),
        // roughenough 1.x put VER=1 at top level of a TYPE-less draft-5-era
        // layout.
        Homonym {
            name: "roughenough 1.x pre-standard version 1",
            ver_place: VerPlace::TopLevel,
            type_tag: false,
        },
    ),
    // tannerryan/roughtime's experimental post-quantum variant: version
    // 1's wire format and the draft-12 context strings (capital T), with
    // ML-DSA-44 keys and signatures, over TCP only. In no draft; pinned
    // by the exchange captured from its server (tests/data/tannerryan-ml-dsa-44).
    post_quantum(modern(
        15,
        "ml-dsa-44",
        Version::ML_DSA_44,
        true,
        CTX_PLAIN,
        None,
        Free,
    )),
];

const fn post_quantum(mut p: Profile) -> Profile {
    p.scheme = Scheme::MlDsa44;
    p.udp = false;
    p
}

const fn with_homonym(mut p: Profile, h: Homonym) -> Profile {
    p.homonym = Some(h);
    p
}

const fn of_drafts(mut p: Profile, first: u8, last: u8) -> Profile {
    p.drafts = Some((first, last));
    p
}

const fn relaxed_03(mut p: Profile) -> Profile {
    p.nonce_copy_required = false;
    p
}

/// Packet-framed version numbers: slot 0 is version 1, slot n is draft n
/// (0x80000000 + n; drafts 12–19 share draft 12's number).
/// Version 1 and drafts 01–12 take slots 0–12 (slot n for draft n).
const DRAFT_SLOTS: usize = 13;
/// The slot after the drafts' holds the post-quantum variant.
const ML_DSA_SLOT: usize = DRAFT_SLOTS;
const WIRE_SLOTS: usize = DRAFT_SLOTS + 1;
/// No row answers this (version, TYPE) pair.
const NO_ROW: u8 = u8::MAX;

const fn wire_slot(v: Version) -> Option<usize> {
    if v.0 == Version::RFC.0 {
        Some(0)
    } else if v.0 == Version::ML_DSA_44.0 {
        Some(ML_DSA_SLOT)
    } else if v.0 > Version::draft(0).0 && v.0 < Version::draft(DRAFT_SLOTS as u32).0 {
        Some((v.0 - Version::draft(0).0) as usize)
    } else {
        None
    }
}

/// [`Profile::for_wire`]'s answers: per slot, the row taking a request
/// without TYPE and the row taking one with it. A profile that requires
/// TYPE never takes a request without it; where two rows share a number,
/// TYPE presence picks the row.
static WIRE_ROWS: [[u8; 2]; WIRE_SLOTS] = wire_rows();

const fn wire_rows() -> [[u8; 2]; WIRE_SLOTS] {
    let mut rows = [[NO_ROW; 2]; WIRE_SLOTS];
    let mut i = 0;
    while i < PROFILES.len() {
        let p = &PROFILES[i];
        if matches!(p.framing, Framing::Packet) {
            let Some(slot) = wire_slot(p.version) else {
                panic!("a packet-framed profile's version has no slot in WIRE_ROWS");
            };
            let mut t = 0;
            while t < 2 {
                let has_type = t == 1;
                let takes = has_type || !p.type_tag;
                if takes && (rows[slot][t] == NO_ROW || p.type_tag == has_type) {
                    rows[slot][t] = i as u8;
                }
                t += 1;
            }
        }
        i += 1;
    }
    rows
}

impl Profile {
    /// Google's protocol.
    pub fn google() -> &'static Profile {
        &PROFILES[0]
    }

    /// RFC 10049 version 1.
    pub fn rfc() -> &'static Profile {
        &PROFILES[14]
    }

    /// The profile with this id.
    pub fn by_id(id: ProfileId) -> Option<&'static Profile> {
        PROFILES.get(usize::from(id.0))
    }

    /// The profile for a packet-framed request offering `version`, with or
    /// without a TYPE tag. TYPE is the only thing that tells drafts 12–13
    /// from 14+ apart.
    pub fn for_wire(version: Version, has_type: bool) -> Option<&'static Profile> {
        // A lookup in a table computed from PROFILES at compile time: a walk
        // of every row per offered version was a third of parsing a request.
        let row = WIRE_ROWS[wire_slot(version)?][usize::from(has_type)];
        PROFILES.get(usize::from(row))
    }

    /// Profile by human name (`google`, `draft-07`, `rfc-10049`, …), by
    /// any draft's number (`draft-17`: the row drafts 14–19 share; see
    /// [`Profile::of_draft`]) or by version number (`1`, `0x8000000b`).
    pub fn by_name(name: &str) -> Option<&'static Profile> {
        if let Some(p) = PROFILES.iter().find(|p| p.name.eq_ignore_ascii_case(name)) {
            return Some(p);
        }
        if let Some(n) = drafts::draft_number(name) {
            return Profile::of_draft(n);
        }
        let v = if let Some(hex) = name.strip_prefix("0x").or_else(|| name.strip_prefix("0X")) {
            u32::from_str_radix(hex, 16).ok()?
        } else {
            name.parse().ok()?
        };
        Profile::for_wire(Version(v), true)
            .or_else(|| (v == Version::GOOGLE.0).then(Profile::google))
    }

    /// Length of ROOT and of each PATH entry.
    pub fn hash_len(&self) -> usize {
        self.hash.len()
    }

    /// Whether this profile's CERT bytes are identical to `other`'s for the
    /// same delegation (CERT variants A–E).
    pub fn same_cert(&self, other: &Profile) -> bool {
        self.contexts.dele == other.contexts.dele
            && self.time == other.time
            && self.scheme == other.scheme
    }
}
