//! Finding ROUGHTIM frames in a TCP byte stream (the ROUGHTIM packet framing of drafts 01 and later; each version's transports).
//!
//! Over TCP the 12-byte packet header is the only delimiter, so a header
//! that is wrong cannot be skipped: the rest of the stream has no known
//! boundary. Both a wrong magic and a length beyond the cap therefore end
//! the connection, and are detected from the header alone, before any of
//! the body is waited for or buffered.

use gnomon_protocol::wire::PACKET_HEADER;

/// The ROUGHTIM magic.
const MAGIC: &[u8; 8] = b"ROUGHTIM";

/// What the front of a buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scan {
    /// A complete frame of this many bytes (header included).
    Frame(usize),
    /// The start of a frame that may still become valid.
    Partial,
    /// The bytes cannot begin a ROUGHTIM header.
    BadMagic,
    /// The header announces a body longer than the cap.
    TooLarge,
}

/// Look at the frame starting at `buf[0]`; `max_body` caps the length field.
pub(crate) fn scan(buf: &[u8], max_body: usize) -> Scan {
    let seen = buf.len().min(MAGIC.len());
    // Checking the magic byte by byte rejects a bare (Google-style) message
    // or garbage as soon as it shows, not once 12 bytes have come in.
    if buf[..seen] != MAGIC[..seen] {
        return Scan::BadMagic;
    }
    if buf.len() < PACKET_HEADER {
        return Scan::Partial;
    }
    let len = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
    if len > max_body {
        return Scan::TooLarge;
    }
    if buf.len() < PACKET_HEADER + len {
        Scan::Partial
    } else {
        Scan::Frame(PACKET_HEADER + len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(len: u32) -> Vec<u8> {
        let mut h = MAGIC.to_vec();
        h.extend_from_slice(&len.to_le_bytes());
        h
    }

    #[test]
    fn frames_are_cut_at_the_declared_length() {
        let mut b = header(3);
        b.extend_from_slice(b"abcXYZ");
        assert_eq!(scan(&b, 100), Scan::Frame(15));
        assert_eq!(scan(&b[..14], 100), Scan::Partial);
        assert_eq!(scan(&header(0), 100), Scan::Frame(12));
    }

    #[test]
    fn partial_headers_wait_and_bad_ones_fail_early() {
        assert_eq!(scan(b"", 100), Scan::Partial);
        assert_eq!(scan(b"ROUG", 100), Scan::Partial);
        assert_eq!(scan(&header(5)[..11], 100), Scan::Partial);
        assert_eq!(scan(b"ROUX", 100), Scan::BadMagic);
        assert_eq!(scan(b"\x05\x00\x00\x00NONC", 100), Scan::BadMagic);
    }

    #[test]
    fn the_cap_applies_to_the_header_alone() {
        assert_eq!(scan(&header(101), 100), Scan::TooLarge);
        assert_eq!(scan(&header(100), 100), Scan::Partial);
        assert_eq!(scan(&header(u32::MAX), 100), Scan::TooLarge);
    }
}
