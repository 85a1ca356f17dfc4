//! Errors. Each layer owns a small `Copy` enum; none carries I/O or heap data,
//! so the server can turn any of them into a drop counter for free.

use core::fmt;

use crate::tag::Tag;

/// A message or packet that is not well formed (the message format, the same in every version; the ROUGHTIM packet framing of drafts 01 and later).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// Fewer bytes than the structure needs.
    Short(&'static str),
    /// Length not a multiple of four.
    Unaligned,
    /// An offset is unaligned, decreasing, or points past the end.
    BadOffset,
    /// Tags are not strictly increasing.
    TagOrder,
    /// The tag count cannot fit in the message.
    TooManyTags,
    /// ROUGHTIM header length field disagrees with the datagram.
    FrameLength,
    /// No ROUGHTIM magic where a packet was required.
    NoMagic,
    /// A required tag is absent.
    Missing(Tag),
    /// A value has the wrong length.
    ValueLength(Tag),
    /// Output buffer too small.
    NoRoom,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Short(what) => write!(f, "too short for {what}"),
            WireError::Unaligned => f.write_str("length is not a multiple of 4"),
            WireError::BadOffset => f.write_str("offset unaligned, decreasing or out of range"),
            WireError::TagOrder => f.write_str("tags not strictly increasing"),
            WireError::TooManyTags => f.write_str("tag count exceeds the message"),
            WireError::FrameLength => f.write_str("ROUGHTIM length does not match the packet"),
            WireError::NoMagic => f.write_str("missing ROUGHTIM header"),
            WireError::Missing(t) => write!(f, "required tag {t} missing"),
            WireError::ValueLength(t) => write!(f, "tag {t} has the wrong length"),
            WireError::NoRoom => f.write_str("output buffer too small"),
        }
    }
}
