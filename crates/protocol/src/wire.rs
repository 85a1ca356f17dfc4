//! The message encoding shared by every version (the message format, the same in every version) and the
//! ROUGHTIM packet framing of the drafts.
//!
//! [`Message::parse`] validates the header, every offset and the tag order once.
//! After that every accessor is infallible: offsets are re-read from the
//! header, and validation proved that each resulting range lies inside the
//! message, so the slicing in the accessors cannot panic.

use crate::error::WireError;
use crate::tag::Tag;

/// "ROUGHTIM" as it appears on the wire.
pub const MAGIC: [u8; 8] = *b"ROUGHTIM";
/// Bytes of the packet header: magic and a `u32` length.
pub const PACKET_HEADER: usize = 12;

/// A validated, borrowed message.
#[derive(Clone, Copy, Debug)]
pub struct Message<'a> {
    bytes: &'a [u8],
    n: usize,
}

#[inline]
fn u32_at(b: &[u8], at: usize) -> u32 {
    // One bounds check for the four bytes, not one per byte.
    let mut word = [0u8; 4];
    word.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(word)
}

impl<'a> Message<'a> {
    /// Validate `bytes` as one whole message.
    pub fn parse(bytes: &'a [u8]) -> Result<Message<'a>, WireError> {
        if bytes.len() < 4 {
            return Err(WireError::Short("message header"));
        }
        if !bytes.len().is_multiple_of(4) {
            return Err(WireError::Unaligned);
        }
        let n = u32_at(bytes, 0) as usize;
        if n == 0 {
            // No offsets describe any value: trailing bytes would be a second
            // encoding of the same empty message.
            if bytes.len() != 4 {
                return Err(WireError::BadOffset);
            }
            return Ok(Message { bytes, n });
        }
        // 8N bytes of header; checked in u64 so a huge N cannot overflow.
        if (n as u64) * 8 > bytes.len() as u64 {
            return Err(WireError::TooManyTags);
        }
        let header = 8 * n;
        let values = bytes.len() - header;
        let mut prev_off = 0usize;
        for i in 1..n {
            let off = u32_at(bytes, 4 * i) as usize;
            if !off.is_multiple_of(4) || off < prev_off || off > values {
                return Err(WireError::BadOffset);
            }
            prev_off = off;
        }
        let tags = 4 * n;
        let mut prev_tag = u32_at(bytes, tags);
        for i in 1..n {
            let t = u32_at(bytes, tags + 4 * i);
            if t <= prev_tag {
                return Err(WireError::TagOrder);
            }
            prev_tag = t;
        }
        Ok(Message { bytes, n })
    }

    /// The whole message.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Number of tags.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True when the message has no tags.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Tag number `i` (< `len()`).
    pub fn tag(&self, i: usize) -> Tag {
        Tag(u32_at(self.bytes, 4 * self.n + 4 * i))
    }

    fn offset(&self, i: usize) -> usize {
        if i == 0 {
            0
        } else if i == self.n {
            self.bytes.len() - 8 * self.n
        } else {
            u32_at(self.bytes, 4 * i) as usize
        }
    }

    /// Value number `i` (< `len()`).
    pub fn value(&self, i: usize) -> &'a [u8] {
        let base = 8 * self.n;
        &self.bytes[base + self.offset(i)..base + self.offset(i + 1)]
    }

    /// Every (tag, value) pair in wire order, offsets read once each: for a
    /// reader that wants several tags, one pass instead of a search per tag.
    pub fn entries(&self) -> Entries<'a> {
        Entries {
            bytes: self.bytes,
            n: self.n,
            i: 0,
            start: 0,
        }
    }

    /// The value of `tag`, if present. Binary search: tags are sorted.
    pub fn get(&self, tag: Tag) -> Option<&'a [u8]> {
        let (mut lo, mut hi) = (0, self.n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let t = self.tag(mid);
            if t == tag {
                return Some(self.value(mid));
            }
            if t < tag {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        None
    }

    /// The value of `tag`, or [`WireError::Missing`].
    pub fn require(&self, tag: Tag) -> Result<&'a [u8], WireError> {
        self.get(tag).ok_or(WireError::Missing(tag))
    }

    /// The value of `tag`, which must be exactly `N` bytes.
    pub fn fixed<const N: usize>(&self, tag: Tag) -> Result<&'a [u8; N], WireError> {
        self.require(tag)?
            .try_into()
            .map_err(|_| WireError::ValueLength(tag))
    }

    /// A `u32` value.
    pub fn u32(&self, tag: Tag) -> Result<u32, WireError> {
        self.fixed::<4>(tag).map(|b| u32::from_le_bytes(*b))
    }

    /// A `u64` value.
    pub fn u64(&self, tag: Tag) -> Result<u64, WireError> {
        self.fixed::<8>(tag).map(|b| u64::from_le_bytes(*b))
    }

    /// A nested message (SREP, CERT, DELE): a bounded sub-view that must use
    /// its whole value.
    pub fn nested(&self, tag: Tag) -> Result<Message<'a>, WireError> {
        Message::parse(self.require(tag)?)
    }

    /// All (tag, value) pairs in wire order.
    pub fn iter(&self) -> impl Iterator<Item = (Tag, &'a [u8])> + '_ {
        (0..self.n).map(|i| (self.tag(i), self.value(i)))
    }
}

/// Split a ROUGHTIM packet into its message bytes. The length field must
/// account for every byte of the packet: trailing bytes are rejected,
/// because drafts 12 and later hash the whole packet into the leaf.
pub fn unframe(packet: &[u8]) -> Result<&[u8], WireError> {
    if packet.len() < PACKET_HEADER {
        return Err(WireError::Short("packet header"));
    }
    if packet[..8] != MAGIC {
        return Err(WireError::NoMagic);
    }
    let len = u32_at(packet, 8) as usize;
    if len != packet.len() - PACKET_HEADER {
        return Err(WireError::FrameLength);
    }
    Ok(&packet[PACKET_HEADER..])
}

/// True when `datagram` starts with the ROUGHTIM magic.
pub fn has_magic(datagram: &[u8]) -> bool {
    datagram.len() >= 8 && datagram[..8] == MAGIC
}

/// Write a packet header for a message of `len` bytes.
pub fn write_frame_header(out: &mut [u8], len: usize) -> Result<(), WireError> {
    let hdr = out.get_mut(..PACKET_HEADER).ok_or(WireError::NoRoom)?;
    hdr[..8].copy_from_slice(&MAGIC);
    hdr[8..].copy_from_slice(&(len as u32).to_le_bytes());
    Ok(())
}

/// Size of a message with these value lengths.
pub fn message_len(value_lens: impl IntoIterator<Item = usize>) -> usize {
    let (n, total) = value_lens
        .into_iter()
        .fold((0, 0), |(n, t), l| (n + 1, t + l));
    if n == 0 {
        4
    } else {
        8 * n + total
    }
}

/// Write the header of a message whose tags and value lengths are `layout`,
/// returning the header length. Values follow it in the same order.
pub fn write_header(out: &mut [u8], layout: &[(Tag, usize)]) -> Result<usize, WireError> {
    let n = layout.len();
    let hlen = if n == 0 { 4 } else { 8 * n };
    let out = out.get_mut(..hlen).ok_or(WireError::NoRoom)?;
    out[..4].copy_from_slice(&(n as u32).to_le_bytes());
    let mut off = 0usize;
    let mut prev: Option<Tag> = None;
    for (i, &(tag, len)) in layout.iter().enumerate() {
        if prev.is_some_and(|p| p >= tag) {
            return Err(WireError::TagOrder);
        }
        if len % 4 != 0 {
            return Err(WireError::ValueLength(tag));
        }
        prev = Some(tag);
        if i > 0 {
            out[4 * i..4 * i + 4].copy_from_slice(&(off as u32).to_le_bytes());
        }
        out[4 * n + 4 * i..4 * n + 4 * i + 4].copy_from_slice(&tag.to_bytes());
        off += len;
    }
    Ok(hlen)
}

/// Write a whole message from (tag, value) pairs in increasing tag order.
pub fn write_message(out: &mut [u8], entries: &[(Tag, &[u8])]) -> Result<usize, WireError> {
    const MAX: usize = 16;
    if entries.len() > MAX {
        return Err(WireError::TooManyTags);
    }
    let mut layout = [(Tag(0), 0usize); MAX];
    for (slot, (t, v)) in layout.iter_mut().zip(entries) {
        *slot = (*t, v.len());
    }
    let total = message_len(entries.iter().map(|e| e.1.len()));
    if out.len() < total {
        return Err(WireError::NoRoom);
    }
    let mut pos = write_header(out, &layout[..entries.len()])?;
    for (_, v) in entries {
        out[pos..pos + v.len()].copy_from_slice(v);
        pos += v.len();
    }
    Ok(pos)
}

/// The pairs of a [`Message`] in wire order ([`Message::entries`]).
#[derive(Clone, Debug)]
pub struct Entries<'a> {
    bytes: &'a [u8],
    n: usize,
    i: usize,
    start: usize,
}

impl<'a> Iterator for Entries<'a> {
    type Item = (Tag, &'a [u8]);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.i >= self.n {
            return None;
        }
        let (n, i) = (self.n, self.i);
        let tag = Tag(u32_at(self.bytes, 4 * n + 4 * i));
        let base = 8 * n;
        let end = if i + 1 == n {
            self.bytes.len() - base
        } else {
            u32_at(self.bytes, 4 * (i + 1)) as usize
        };
        // `parse` proved start <= end <= the values' length.
        let value = &self.bytes[base + self.start..base + end];
        self.start = end;
        self.i += 1;
        Some((tag, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.n - self.i;
        (left, Some(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_walk_every_pair_in_order() {
        let mut buf = [0u8; 96];
        let pairs: [(Tag, &[u8]); 4] = [
            (Tag::SIG, &[1; 8]),
            (Tag::NONC, &[2; 4]),
            (Tag::PATH, &[]),
            (Tag::ZZZZ, &[0; 12]),
        ];
        let n = write_message(&mut buf, &pairs).unwrap();
        let msg = Message::parse(&buf[..n]).unwrap();
        assert_eq!(msg.entries().count(), pairs.len());
        for (i, ((tag, value), want)) in msg.entries().zip(pairs).enumerate() {
            assert_eq!((tag, value), want, "pair {i}");
            assert_eq!((tag, value), (msg.tag(i), msg.value(i)), "pair {i}");
        }
        assert_eq!(msg.entries().size_hint(), (4, Some(4)));
        let empty = Message::parse(&[0, 0, 0, 0]).unwrap();
        assert_eq!(empty.entries().count(), 0);
    }

    #[test]
    fn round_trip_and_lookup() {
        let mut buf = [0u8; 64];
        let n = write_message(
            &mut buf,
            &[(Tag::SIG, &[1; 8]), (Tag::NONC, &[2; 4]), (Tag::PATH, &[])],
        )
        .unwrap();
        assert_eq!(n, 24 + 12);
        let m = Message::parse(&buf[..n]).unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m.get(Tag::SIG), Some(&[1u8; 8][..]));
        assert_eq!(m.get(Tag::NONC), Some(&[2u8; 4][..]));
        assert_eq!(m.get(Tag::PATH), Some(&[][..]));
        assert_eq!(m.get(Tag::INDX), None);
    }

    #[test]
    fn empty_message_is_four_bytes() {
        let m = Message::parse(&[0, 0, 0, 0]).unwrap();
        assert!(m.is_empty());
        assert_eq!(m.get(Tag::SIG), None);
        assert_eq!(
            Message::parse(&[0, 0, 0, 0, 1, 2, 3, 4]).unwrap_err(),
            WireError::BadOffset
        );
    }

    #[test]
    fn rejects_bad_headers() {
        assert_eq!(
            Message::parse(&[1, 0, 0]).unwrap_err(),
            WireError::Short("message header")
        );
        // N = 2 but only 12 bytes.
        assert_eq!(
            Message::parse(&[2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]).unwrap_err(),
            WireError::TooManyTags
        );
        // Tags out of order.
        let mut buf = [0u8; 16];
        buf[0] = 2;
        buf[8..12].copy_from_slice(&Tag::NONC.to_bytes());
        buf[12..16].copy_from_slice(&Tag::SIG.to_bytes());
        assert_eq!(Message::parse(&buf).unwrap_err(), WireError::TagOrder);
        // Offset past the end.
        buf[8..12].copy_from_slice(&Tag::SIG.to_bytes());
        buf[12..16].copy_from_slice(&Tag::NONC.to_bytes());
        buf[4] = 8;
        assert_eq!(Message::parse(&buf).unwrap_err(), WireError::BadOffset);
        // A tag count near u32::MAX cannot overflow.
        assert_eq!(
            Message::parse(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]).unwrap_err(),
            WireError::TooManyTags
        );
    }

    #[test]
    fn frames() {
        let mut p = [0u8; 16];
        write_frame_header(&mut p, 4).unwrap();
        assert_eq!(unframe(&p).unwrap(), &[0, 0, 0, 0]);
        assert_eq!(unframe(&p[..15]).unwrap_err(), WireError::FrameLength);
        p[0] = b'X';
        assert_eq!(unframe(&p).unwrap_err(), WireError::NoMagic);
    }
}
