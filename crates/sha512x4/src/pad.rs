//! FIPS 180-4 §5.1.2 padding, one 128-byte block at a time, read straight
//! from the message's slices: a block that lies inside one slice is read in
//! place; only the blocks that straddle slices or hold the padding are
//! assembled on the stack.

use crate::Message;

/// A message seen as its padded blocks.
#[derive(Clone, Copy)]
pub(crate) struct Padded<'a> {
    parts: Message<'a>,
    len: usize,
    blocks: usize,
}

impl<'a> Padded<'a> {
    pub(crate) fn new(parts: &Message<'a>) -> Padded<'a> {
        let len = parts.iter().map(|p| p.len()).sum();
        Padded {
            parts: *parts,
            len,
            blocks: blocks(len),
        }
    }

    /// Number of 128-byte blocks after padding.
    pub(crate) fn blocks(&self) -> usize {
        self.blocks
    }

    /// Block `b`'s bytes where it lies inside one slice (no padding), read
    /// in place.
    pub(crate) fn in_place(&self, b: usize) -> Option<&'a [u8]> {
        let start = 128 * b;
        let mut off = 0;
        for p in self.parts {
            if start >= off && start + 128 <= off + p.len() {
                return Some(&p[start - off..start - off + 128]);
            }
            off += p.len();
        }
        None
    }

    /// Block `b` as sixteen big-endian words.
    pub(crate) fn block(&self, b: usize) -> [u64; 16] {
        if let Some(bytes) = self.in_place(b) {
            return words(bytes);
        }
        let start = 128 * b;
        let mut buf = [0u8; 128];
        let mut off = 0;
        for p in self.parts {
            // The overlap of [off, off + len) with [start, start + 128).
            let lo = off.max(start);
            let hi = (off + p.len()).min(start + 128);
            if lo < hi {
                buf[lo - start..hi - start].copy_from_slice(&p[lo - off..hi - off]);
            }
            off += p.len();
        }
        if (start..start + 128).contains(&self.len) {
            buf[self.len - start] = 0x80;
        }
        if b + 1 == self.blocks {
            let bits = (self.len as u128) << 3;
            buf[112..].copy_from_slice(&bits.to_be_bytes());
        }
        words(&buf)
    }
}

/// Padded block count of a message of `len` bytes: one 0x80 byte and a
/// 16-byte length follow the data.
pub(crate) fn blocks(len: usize) -> usize {
    (len + 1 + 16).div_ceil(128)
}

fn words(block: &[u8]) -> [u64; 16] {
    core::array::from_fn(|i| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&block[8 * i..8 * i + 8]);
        u64::from_be_bytes(w)
    })
}

/// Block `b`'s words where it lies in place in every lane with the same
/// bytes: one comparison of 128 bytes per lane, most often stopped at the
/// first lane by a difference in its first bytes. The vector paths use it
/// to skip building vectors for a block every lane shares.
#[inline]
pub(crate) fn same_in_place(lanes: &[Padded<'_>], b: usize) -> Option<[u64; 16]> {
    let (first, rest) = lanes.split_first()?;
    let first = first.in_place(b)?;
    rest.iter()
        .all(|p| p.in_place(b) == Some(first))
        .then(|| words(first))
}
