//! The Merkle hash primitives (the Merkle tree of each version) behind one small interface, so
//! the SHA-512 crate is a choice made in one place (docs/COST.md).
//!
//! Every hash goes through [`gnomon_sha512x4`]: single ones through its sha2
//! path, a tree's leaves and each level of its nodes through its multi-buffer
//! path, which hashes up to eight equal-length messages at once with AVX2 and
//! falls back to sha2 elsewhere (docs/COST.md, "Multi-buffer leaf hashing").

use gnomon_sha512x4::{Message, Variant};

/// The Merkle hash (the Merkle tree of each version).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashAlg {
    /// SHA-512, all 64 bytes (Google).
    Sha512,
    /// The first 32 bytes of SHA-512, at every node.
    Sha512Trunc32,
    /// FIPS 180-4 SHA-512/256 (drafts 02 and 07).
    Sha512_256,
}

/// A hash output; only the first `HashAlg::len()` bytes are meaningful.
pub type Hash = [u8; 64];

const LEAF: u8 = 0x00;
const NODE: u8 = 0x01;

impl HashAlg {
    /// Output length in bytes.
    #[allow(clippy::len_without_is_empty)] // a digest is never empty
    pub const fn len(self) -> usize {
        match self {
            HashAlg::Sha512 => 64,
            HashAlg::Sha512Trunc32 | HashAlg::Sha512_256 => 32,
        }
    }

    /// Hash the concatenation of `parts` into `out`.
    pub fn digest(self, parts: &[&[u8]], out: &mut Hash) {
        gnomon_sha512x4::digest_one(self.variant(), parts, out);
        self.truncate(out);
    }

    /// The SHA-512 family member behind this hash.
    fn variant(self) -> Variant {
        match self {
            HashAlg::Sha512 | HashAlg::Sha512Trunc32 => Variant::Sha512,
            HashAlg::Sha512_256 => Variant::Sha512_256,
        }
    }

    /// Truncated at every node, not only at the root: clearing the
    /// tail keeps comparisons of whole arrays honest.
    fn truncate(self, out: &mut Hash) {
        if self == HashAlg::Sha512Trunc32 {
            out[32..].fill(0);
        }
    }

    /// H(0x00 ‖ input).
    pub fn leaf(self, input: &[u8], out: &mut Hash) {
        self.digest(&[&[LEAF], input], out);
    }

    /// H(0x01 ‖ left ‖ right).
    pub fn node(self, left: &[u8], right: &[u8], out: &mut Hash) {
        self.digest(&[&[NODE], left, right], out);
    }

    /// `out[i]` = H(0x00 ‖ `inputs[i]`), several at once; the shorter of the
    /// two slices decides how many. Same digests as [`HashAlg::leaf`].
    pub fn leaves(self, inputs: &[&[u8]], out: &mut [Hash]) {
        self.many(&LEAF, inputs.iter().map(|i| (*i, &[][..])), out);
    }

    /// `out[i]` = H(0x01 ‖ `pairs[i].0` ‖ `pairs[i].1`), several at once.
    /// Same digests as [`HashAlg::node`].
    pub fn nodes<'a>(self, pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>, out: &mut [Hash]) {
        self.many(&NODE, pairs, out);
    }

    /// Up to [`BATCH`] messages per call of the multi-buffer hash, gathered
    /// on the stack: nothing is allocated or copied.
    fn many<'a>(
        self,
        prefix: &'a u8,
        pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>,
        out: &mut [Hash],
    ) {
        let mut pairs = pairs.take(out.len());
        if out.len() == 1 {
            // Batch 1 (a quiet server): nothing to group, skip the dispatch.
            if let Some((a, b)) = pairs.next() {
                self.digest(&[core::slice::from_ref(prefix), a, b], &mut out[0]);
            }
            return;
        }
        let variant = self.variant();
        let prefix = core::slice::from_ref(prefix);
        let mut msgs: [Message<'a>; BATCH] = [[&[]; 3]; BATCH];
        for slots in out.chunks_mut(BATCH) {
            let mut n = 0;
            for (m, (a, b)) in msgs.iter_mut().zip(pairs.by_ref().take(slots.len())) {
                *m = [prefix, a, b];
                n += 1;
            }
            gnomon_sha512x4::digest_many(variant, &msgs[..n], &mut slots[..n]);
            for o in &mut slots[..n] {
                self.truncate(o);
            }
            if n < slots.len() {
                break;
            }
        }
    }
}

/// Messages per multi-buffer call: two groups of eight lanes.
const BATCH: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha512_256_is_not_truncated_sha512() {
        let (mut a, mut b) = ([0u8; 64], [0u8; 64]);
        HashAlg::Sha512Trunc32.leaf(b"x", &mut a);
        HashAlg::Sha512_256.leaf(b"x", &mut b);
        assert_ne!(a[..32], b[..32]);
        assert_eq!(a[32..], [0u8; 32]);
        let mut full = [0u8; 64];
        HashAlg::Sha512.leaf(b"x", &mut full);
        assert_eq!(full[..32], a[..32]);
    }

    #[test]
    fn many_at_once_match_one_at_a_time() {
        let data: alloc::vec::Vec<alloc::vec::Vec<u8>> = (0..40u8)
            .map(|i| alloc::vec![i; 1024 - (i as usize % 3) * 500])
            .collect();
        let inputs: alloc::vec::Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
        for alg in [HashAlg::Sha512, HashAlg::Sha512Trunc32, HashAlg::Sha512_256] {
            for n in [0, 1, 3, 4, 8, 9, 16, 17, 40] {
                let mut many = alloc::vec![[0xffu8; 64]; n];
                alg.leaves(&inputs[..n], &mut many);
                let mut nodes = alloc::vec![[0xffu8; 64]; n / 2];
                alg.nodes(
                    inputs[..n]
                        .chunks_exact(2)
                        .map(|p| (&p[0][..20], &p[1][..20])),
                    &mut nodes,
                );
                for i in 0..n {
                    let mut one = [0u8; 64];
                    alg.leaf(inputs[i], &mut one);
                    assert_eq!(many[i], one, "{alg:?} n={n} leaf {i}");
                    if i < n / 2 {
                        alg.node(&inputs[2 * i][..20], &inputs[2 * i + 1][..20], &mut one);
                        assert_eq!(nodes[i], one, "{alg:?} n={n} node {i}");
                    }
                }
            }
        }
    }
}
