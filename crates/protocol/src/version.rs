//! Version numbers: an open set of `u32` values (the version numbers and their IANA registry).

use core::fmt;

/// A Roughtime version number as carried in VER/VERS, or in a server list.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version(pub u32);

impl Version {
    /// Google's protocol has no number on the wire; server lists call it
    /// 3000600613 (0xb2d98825) (the version numbers and their IANA registry).
    pub const GOOGLE: Version = Version(0xb2d9_8825);
    /// RFC 10049, Roughtime version 1.
    pub const RFC: Version = Version(1);
    /// tannerryan/roughtime's experimental ML-DSA-44 variant
    /// (`roughtime-ml-dsa-44`), in the IANA registry's experimental range.
    pub const ML_DSA_44: Version = Version(0x9000_0001);
    /// The value drafts 12 to 19 all use.
    pub const DRAFT_12_TO_19: Version = Version(0x8000_000c);

    /// IETF draft `n` (1 ≤ n ≤ 12) as 0x80000000 + n.
    pub const fn draft(n: u32) -> Version {
        Version(0x8000_0000 + n)
    }

    /// Values in the private-use range are never chosen (how servers choose a version).
    pub const fn is_private_use(self) -> bool {
        self.0 >= 0xc000_0000 && self.0 != Version::GOOGLE.0
    }

    /// Rank for choosing among offered versions: version 1 first, then the
    /// highest draft, Google last (how servers choose a version). Larger is preferred.
    pub const fn preference(self) -> u64 {
        match self.0 {
            1 => u64::MAX,
            v if v == Version::GOOGLE.0 => 0,
            v => v as u64,
        }
    }
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 => f.write_str("1"),
            v if v == Version::GOOGLE.0 => f.write_str("google"),
            v => write!(f, "{v:#010x}"),
        }
    }
}
