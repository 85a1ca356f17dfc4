//! Tags: an open set of 32-bit values (the message format, the same in every version).
//!
//! Unknown tags are legal on the wire and must be kept and ignored, so a tag is
//! a newtype over `u32`, never a closed enum.

use core::fmt;

/// A message tag, as the little-endian `u32` of its four wire bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tag(pub u32);

impl Tag {
    /// Request padding, drafts 01–07 (sorts first).
    pub const PAD_DRAFT: Tag = Tag::from_bytes(*b"PAD\0");
    /// Signature.
    pub const SIG: Tag = Tag::from_bytes(*b"SIG\0");
    /// Version (list in requests, one value in responses).
    pub const VER: Tag = Tag::from_bytes(*b"VER\0");
    /// Server key selector, drafts 10 and later.
    pub const SRV: Tag = Tag::from_bytes(*b"SRV\0");
    /// UT1−UTC, optional in SREP of some early drafts.
    pub const DUT1: Tag = Tag::from_bytes(*b"DUT1");
    /// Nonce.
    pub const NONC: Tag = Tag::from_bytes(*b"NONC");
    /// Delegation.
    pub const DELE: Tag = Tag::from_bytes(*b"DELE");
    /// Message type, drafts 14 and later (0 request, 1 response).
    pub const TYPE: Tag = Tag::from_bytes(*b"TYPE");
    /// Merkle path.
    pub const PATH: Tag = Tag::from_bytes(*b"PATH");
    /// TAI−UTC, optional in SREP of some early drafts.
    pub const DTAI: Tag = Tag::from_bytes(*b"DTAI");
    /// Radius.
    pub const RADI: Tag = Tag::from_bytes(*b"RADI");
    /// Online public key.
    pub const PUBK: Tag = Tag::from_bytes(*b"PUBK");
    /// Leap second list, optional in SREP of some early drafts.
    pub const LEAP: Tag = Tag::from_bytes(*b"LEAP");
    /// Midpoint.
    pub const MIDP: Tag = Tag::from_bytes(*b"MIDP");
    /// Signed response.
    pub const SREP: Tag = Tag::from_bytes(*b"SREP");
    /// Versions the server supports, drafts 12 and later.
    pub const VERS: Tag = Tag::from_bytes(*b"VERS");
    /// Delegation start.
    pub const MINT: Tag = Tag::from_bytes(*b"MINT");
    /// Merkle root.
    pub const ROOT: Tag = Tag::from_bytes(*b"ROOT");
    /// Certificate.
    pub const CERT: Tag = Tag::from_bytes(*b"CERT");
    /// Delegation end.
    pub const MAXT: Tag = Tag::from_bytes(*b"MAXT");
    /// Merkle leaf index.
    pub const INDX: Tag = Tag::from_bytes(*b"INDX");
    /// Request padding, drafts 08 and later.
    pub const ZZZZ: Tag = Tag::from_bytes(*b"ZZZZ");
    /// Request padding, Google (sorts last).
    pub const PAD_GOOGLE: Tag = Tag::from_bytes(*b"PAD\xff");

    /// The tag whose wire bytes are `b`.
    pub const fn from_bytes(b: [u8; 4]) -> Tag {
        Tag(u32::from_le_bytes(b))
    }

    /// The four wire bytes.
    pub const fn to_bytes(self) -> [u8; 4] {
        self.0.to_le_bytes()
    }
}

impl fmt::Debug for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Printable tags show as text with NUL as nothing and other bytes as `\xNN`.
impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.to_bytes() {
            match b {
                0 => {}
                0x20..=0x7e => write!(f, "{}", b as char)?,
                _ => write!(f, "\\x{b:02x}")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_values_match_the_registry() {
        // The tag table of the message format, the same in every version.
        assert_eq!(Tag::PAD_DRAFT.0, 0x0044_4150);
        assert_eq!(Tag::SIG.0, 0x0047_4953);
        assert_eq!(Tag::VER.0, 0x0052_4556);
        assert_eq!(Tag::SRV.0, 0x0056_5253);
        assert_eq!(Tag::NONC.0, 0x434e_4f4e);
        assert_eq!(Tag::TYPE.0, 0x4550_5954);
        assert_eq!(Tag::VERS.0, 0x5352_4556);
        assert_eq!(Tag::ZZZZ.0, 0x5a5a_5a5a);
        assert_eq!(Tag::PAD_GOOGLE.0, 0xff44_4150);
        assert_eq!(alloc::format!("{}", Tag::PAD_GOOGLE), "PAD\\xff");
        assert_eq!(alloc::format!("{}", Tag::SIG), "SIG");
    }
}
