//! Requests: built by clients for any version, parsed and validated by
//! servers, with the server's version choice: the newest version both
//! sides speak.

use crate::error::WireError;
use crate::profile::{Framing, Profile, ProfileSet, VerList};
pub use crate::scheme::srv_for;
use crate::tag::Tag;
use crate::version::Version;
use crate::wire::{self, Message, PACKET_HEADER};

/// Default request size: a 1024-byte packet (or bare message for Google),
/// which every known server accepts (the amplification rule).
pub const DEFAULT_REQUEST_SIZE: usize = 1024;
/// Most VER entries a request may carry (draft 13).
pub const MAX_VERSIONS: usize = 32;
/// Most VER entries accepted in any version. Drafts before 13 set no limit;
/// real clients offer about ten, and a bound keeps the repeat check cheap.
pub const MAX_VER_ENTRIES: usize = 128;

/// Why a request could not be built or an offer formed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// No profile offered.
    Empty,
    /// More than 32 versions.
    TooMany,
    /// Offered profiles disagree on framing, nonce length or TYPE.
    Incompatible(&'static str, &'static str),
    /// Nonce length does not fit the offer.
    NonceLength,
    /// The size cannot hold the tags, or is not a multiple of 4.
    Size,
    /// Output buffer too small.
    NoRoom,
}

/// The versions a client offers, all sharing one request format.
#[derive(Clone, Copy, Debug)]
pub struct Offer {
    versions: [Version; MAX_VERSIONS],
    len: usize,
    primary: &'static Profile,
    has_type: bool,
}

impl Offer {
    /// Offer these profiles in one request. The most preferred one decides
    /// the format (nonce length, padding tag); the rest must accept it.
    pub fn new(profiles: &[&'static Profile]) -> Result<Offer, BuildError> {
        let primary = *profiles
            .iter()
            .max_by_key(|p| p.version.preference())
            .ok_or(BuildError::Empty)?;
        if profiles.len() > MAX_VERSIONS {
            return Err(BuildError::TooMany);
        }
        let has_type = profiles.iter().any(|p| p.type_tag);
        let mut versions = [Version(0); MAX_VERSIONS];
        let mut len = 0;
        for p in profiles {
            let compatible = p.framing == primary.framing
                && p.accepted_nonce_lens.contains(&primary.nonce_len)
                && (p.framing == Framing::Bare
                    || Profile::for_wire(p.version, has_type).is_some_and(|q| q.id == p.id));
            if !compatible {
                return Err(BuildError::Incompatible(primary.name, p.name));
            }
            if !versions[..len].contains(&p.version) {
                versions[len] = p.version;
                len += 1;
            }
        }
        // Ascending satisfies every version's list rule at once.
        versions[..len].sort_unstable();
        Ok(Offer {
            versions,
            len,
            primary,
            has_type,
        })
    }

    /// Offer a single profile.
    pub fn single(profile: &'static Profile) -> Offer {
        // One profile is always compatible with itself.
        Offer::new(&[profile]).unwrap_or(Offer {
            versions: [profile.version; MAX_VERSIONS],
            len: 1,
            primary: profile,
            has_type: profile.type_tag,
        })
    }

    /// The profile whose format the request uses.
    pub fn primary(&self) -> &'static Profile {
        self.primary
    }

    /// Offered version numbers, ascending (empty for Google).
    pub fn versions(&self) -> &[Version] {
        if self.primary.framing == Framing::Bare {
            &[]
        } else {
            &self.versions[..self.len]
        }
    }

    /// Whether the request carries TYPE.
    pub fn has_type(&self) -> bool {
        self.has_type
    }

    /// Build a request of `size` bytes (whole packet, or bare message for
    /// Google) into `out`; returns its length.
    pub fn build(
        &self,
        nonce: &[u8],
        srv: Option<&[u8; 32]>,
        size: usize,
        out: &mut [u8],
    ) -> Result<usize, BuildError> {
        let p = self.primary;
        if nonce.len() != p.nonce_len {
            return Err(BuildError::NonceLength);
        }
        let out = out.get_mut(..size).ok_or(BuildError::NoRoom)?;
        let srv = srv.filter(|_| {
            self.versions()
                .iter()
                .any(|v| Profile::for_wire(*v, self.has_type).is_some_and(|q| q.srv))
        });
        let mut ver = [0u8; 4 * MAX_VERSIONS];
        for (chunk, v) in ver.chunks_exact_mut(4).zip(self.versions()) {
            chunk.copy_from_slice(&v.0.to_le_bytes());
        }
        let ver = &ver[..4 * self.versions().len()];
        let type_zero = [0u8; 4];
        let mut fields: [(Tag, &[u8]); 5] = [(Tag(0), &[]); 5];
        let mut n = 0;
        if !ver.is_empty() {
            fields[n] = (Tag::VER, ver);
            n += 1;
        }
        if let Some(s) = srv {
            fields[n] = (Tag::SRV, s);
            n += 1;
        }
        fields[n] = (Tag::NONC, nonce);
        n += 1;
        if self.has_type {
            fields[n] = (Tag::TYPE, &type_zero);
            n += 1;
        }
        let framed = p.framing == Framing::Packet;
        let overhead = if framed { PACKET_HEADER } else { 0 };
        let used = wire::message_len(fields[..n].iter().map(|f| f.1.len()).chain([0]));
        if !size.is_multiple_of(4) || size < overhead + used {
            return Err(BuildError::Size);
        }
        let pad_len = size - overhead - used;
        // Padding sorts first (PAD\0) or last (ZZZZ, PAD\xff); it is zeros.
        let mut layout = [(Tag(0), 0usize); 6];
        let mut k = 0;
        if p.pad < Tag::VER {
            layout[k] = (p.pad, pad_len);
            k += 1;
        }
        for f in &fields[..n] {
            layout[k] = (f.0, f.1.len());
            k += 1;
        }
        if p.pad > Tag::VER {
            layout[k] = (p.pad, pad_len);
            k += 1;
        }
        let msg = &mut out[overhead..];
        let mut pos = wire::write_header(msg, &layout[..k]).map_err(|_| BuildError::NoRoom)?;
        for &(tag, len) in &layout[..k] {
            let dst = &mut msg[pos..pos + len];
            match fields[..n].iter().find(|f| f.0 == tag) {
                Some(f) => dst.copy_from_slice(f.1),
                None => dst.fill(0),
            }
            pos += len;
        }
        if framed {
            wire::write_frame_header(out, size - PACKET_HEADER).map_err(|_| BuildError::NoRoom)?;
        }
        Ok(size)
    }
}

/// Why a server drops a request. Each maps to a drop counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestError {
    /// Smaller than the minimum request size.
    TooShort,
    /// Bad ROUGHTIM framing.
    Framing(WireError),
    /// Malformed message.
    Message(WireError),
    /// A packet without VER, or a VER value of bad length.
    NoVersion,
    /// VER list breaks the chosen version's rules (order, repeats, length).
    VerList,
    /// Nothing offered is supported with this request's format.
    Unsupported,
    /// NONC missing.
    NoNonce,
    /// TYPE present but not 4 bytes, or not 0.
    Type,
    /// SRV present but not 32 bytes.
    Srv,
}

/// A validated request, borrowed from the datagram.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The datagram as received: what 12+ hashes as the leaf.
    pub packet: &'a [u8],
    /// The nonce.
    pub nonce: &'a [u8],
    /// The SRV value, if present.
    pub srv: Option<&'a [u8; 32]>,
    /// The version chosen to answer with.
    pub profile: &'static Profile,
}

/// What a server accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Acceptor {
    /// Profiles the server answers.
    pub profiles: ProfileSet,
    /// Smallest datagram answered (the amplification rule: 1024 by default).
    pub min_size: usize,
}

impl Default for Acceptor {
    fn default() -> Self {
        Acceptor {
            profiles: ProfileSet::ALL,
            min_size: DEFAULT_REQUEST_SIZE,
        }
    }
}

impl Acceptor {
    /// Parse and validate one datagram.
    pub fn parse<'a>(&self, datagram: &'a [u8]) -> Result<Request<'a>, RequestError> {
        if datagram.len() < self.min_size {
            return Err(RequestError::TooShort);
        }
        if !wire::has_magic(datagram) {
            return self.parse_google(datagram);
        }
        let body = wire::unframe(datagram).map_err(RequestError::Framing)?;
        let msg = Message::parse(body).map_err(RequestError::Message)?;
        let fields = Fields::of(&msg);
        let nonce = fields.nonce.ok_or(RequestError::NoNonce)?;
        let has_type = match fields.typ {
            None => false,
            Some([0, 0, 0, 0]) => true,
            Some(_) => return Err(RequestError::Type),
        };
        let srv = match fields.srv {
            None => None,
            Some(s) => Some(<&[u8; 32]>::try_from(s).map_err(|_| RequestError::Srv)?),
        };
        let ver = fields.ver.ok_or(RequestError::NoVersion)?;
        if ver.is_empty() {
            return Err(RequestError::NoVersion);
        }
        if ver.len() > 4 * MAX_VER_ENTRIES {
            return Err(RequestError::VerList);
        }
        let offered = ver
            .chunks_exact(4)
            .map(|c| Version(u32::from_le_bytes([c[0], c[1], c[2], c[3]])));
        let mut best: Option<&'static Profile> = None;
        for v in offered.clone() {
            if v.is_private_use() {
                continue;
            }
            let Some(p) = Profile::for_wire(v, has_type) else {
                continue;
            };
            if self.profiles.contains(p.id)
                && p.accepted_nonce_lens.contains(&nonce.len())
                && best.is_none_or(|b| p.version.preference() >= b.version.preference())
            {
                best = Some(p);
            }
        }
        let profile = best.ok_or(RequestError::Unsupported)?;
        check_ver_list(profile.ver_list, offered)?;
        Ok(Request {
            packet: datagram,
            nonce,
            srv,
            profile,
        })
    }

    fn parse_google<'a>(&self, datagram: &'a [u8]) -> Result<Request<'a>, RequestError> {
        let profile = Profile::google();
        if !self.profiles.contains(profile.id) {
            return Err(RequestError::Unsupported);
        }
        let msg = Message::parse(datagram).map_err(RequestError::Message)?;
        let nonce = msg.get(Tag::NONC).ok_or(RequestError::NoNonce)?;
        if nonce.len() != profile.nonce_len {
            return Err(RequestError::Unsupported);
        }
        Ok(Request {
            packet: datagram,
            nonce,
            srv: None,
            profile,
        })
    }
}

/// The four tags a request is read by, found in one walk of the tag table
/// (a binary search per tag cost twice as much: docs/COST.md, the ledger).
#[derive(Default)]
struct Fields<'a> {
    nonce: Option<&'a [u8]>,
    typ: Option<&'a [u8]>,
    srv: Option<&'a [u8]>,
    ver: Option<&'a [u8]>,
}

impl<'a> Fields<'a> {
    /// The highest of the four tags: tags are sorted, so the walk stops
    /// there and never reads the padding's or any later tag.
    const LAST: Tag = max_tag(max_tag(Tag::NONC, Tag::TYPE), max_tag(Tag::SRV, Tag::VER));

    fn of(msg: &Message<'a>) -> Fields<'a> {
        let mut f = Fields::default();
        for (tag, value) in msg.entries() {
            match tag {
                Tag::NONC => f.nonce = Some(value),
                Tag::TYPE => f.typ = Some(value),
                Tag::SRV => f.srv = Some(value),
                Tag::VER => f.ver = Some(value),
                _ => {}
            }
            if tag >= Self::LAST {
                break;
            }
        }
        f
    }
}

const fn max_tag(a: Tag, b: Tag) -> Tag {
    if a.0 > b.0 {
        a
    } else {
        b
    }
}

/// Enforce the chosen version's VER list rule: the rule of the version
/// answered, so a list that is fine for draft 08 is not held to 12+'s rules.
fn check_ver_list(
    rule: VerList,
    offered: impl Iterator<Item = Version> + Clone,
) -> Result<(), RequestError> {
    match rule {
        VerList::Absent | VerList::Any => Ok(()),
        VerList::Sorted => {
            let mut count = 0;
            let mut prev: Option<Version> = None;
            for v in offered {
                count += 1;
                if prev.is_some_and(|p| p >= v) || count > MAX_VERSIONS {
                    return Err(RequestError::VerList);
                }
                prev = Some(v);
            }
            Ok(())
        }
        VerList::Unique => {
            // Sorting a stack copy finds repeats in O(n log n); comparing
            // every pair would let one packet cost ~30 000 comparisons.
            let mut seen = [0u32; MAX_VER_ENTRIES];
            let mut n = 0;
            for v in offered {
                *seen.get_mut(n).ok_or(RequestError::VerList)? = v.0;
                n += 1;
            }
            let seen = &mut seen[..n];
            seen.sort_unstable();
            if seen.windows(2).any(|w| w[0] == w[1]) {
                return Err(RequestError::VerList);
            }
            Ok(())
        }
    }
}
