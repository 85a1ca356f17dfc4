//! Merkle trees over a batch (the Merkle tree of each version; batches of any size; the tree orientation the drafts and deployments disagree on).
//!
//! Trees are built hash-first in every version: that is what every batching
//! implementation except one does, whatever the draft text says (implementations disagree on it).
//! An odd level is padded with a copy of its first node, which reproduces
//! Cloudflare's batch vectors byte for byte (non-power-of-two batches); verification never depends
//! on the padding rule because PATH carries whatever the server used.

use alloc::vec;
use alloc::vec::Vec;

use crate::hash::{Hash, HashAlg};

/// Deepest tree any version allows (12+: at most 32 PATH entries).
pub const MAX_DEPTH: usize = 32;

/// Which side the running hash takes when an INDX bit is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Orientation {
    /// bit 0 → H(0x01 ‖ h ‖ sibling). Google, CF, the RFC, and gnomon.
    HashFirst,
    /// bit 0 → H(0x01 ‖ sibling ‖ h). The text of drafts 05–15.
    NodeFirst,
}

/// A reusable tree: storage is allocated once for `capacity` leaves, so
/// building a batch allocates nothing.
#[derive(Debug)]
pub struct Tree {
    nodes: Vec<Hash>,
    /// (start, len) of each level, leaves first; the last level is the root.
    levels: [(usize, usize); MAX_DEPTH + 1],
    depth: usize,
    leaves: usize,
    capacity: usize,
    hash: HashAlg,
}

impl Tree {
    /// A tree for batches of up to `capacity` leaves.
    pub fn with_capacity(capacity: usize) -> Tree {
        let capacity = capacity.max(1);
        // Each level holds at most ceil(len/2)+1 nodes of the one below.
        Tree {
            nodes: vec![[0u8; 64]; 2 * capacity + 2 * (MAX_DEPTH + 1)],
            levels: [(0, 0); MAX_DEPTH + 1],
            depth: 0,
            leaves: 0,
            capacity,
            hash: HashAlg::Sha512,
        }
    }

    /// Most leaves one build can take.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Start a new tree; returns false (and does nothing) past capacity.
    pub fn reset(&mut self, hash: HashAlg) {
        self.hash = hash;
        self.leaves = 0;
        self.depth = 0;
    }

    /// Add the leaf H(0x00 ‖ input). Returns its index, or `None` when full.
    pub fn push_leaf(&mut self, input: &[u8]) -> Option<usize> {
        if self.leaves == self.capacity {
            return None;
        }
        let i = self.leaves;
        self.hash.leaf(input, &mut self.nodes[i]);
        self.leaves += 1;
        Some(i)
    }

    /// Add the leaves H(0x00 ‖ input) for every input, hashed several at a
    /// time (multi-buffer SHA-512). Returns the index of the first, or `None`
    /// (adding nothing) when they do not all fit.
    pub fn push_leaves(&mut self, inputs: &[&[u8]]) -> Option<usize> {
        let i = self.leaves;
        if inputs.len() > self.capacity - i {
            return None;
        }
        self.hash
            .leaves(inputs, &mut self.nodes[i..i + inputs.len()]);
        self.leaves += inputs.len();
        Some(i)
    }

    /// Hash the levels above the leaves; returns the root.
    pub fn finish(&mut self) -> &[u8] {
        let len = self.hash.len();
        let mut start = 0;
        let mut count = self.leaves.max(1);
        if self.leaves == 0 {
            self.nodes[0] = [0u8; 64];
        }
        let mut depth = 0;
        while count > 1 {
            if count % 2 == 1 {
                self.nodes[start + count] = self.nodes[start];
                count += 1;
            }
            self.levels[depth] = (start, count);
            let next = start + count;
            let (below, above) = self.nodes.split_at_mut(next);
            let pairs = below[start..next]
                .chunks_exact(2)
                .map(|p| (&p[0][..len], &p[1][..len]));
            self.hash.nodes(pairs, &mut above[..count / 2]);
            start = next;
            count /= 2;
            depth += 1;
        }
        self.levels[depth] = (start, 1);
        self.depth = depth;
        &self.nodes[start][..len]
    }

    /// Number of PATH entries each leaf gets.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The root of the last `finish`.
    pub fn root(&self) -> &[u8] {
        &self.nodes[self.levels[self.depth].0][..self.hash.len()]
    }

    /// Write leaf `i`'s PATH into `out` (exactly `depth × hash length` bytes).
    /// INDX is `i` itself.
    pub fn write_path(&self, i: usize, out: &mut [u8]) {
        let len = self.hash.len();
        let mut j = i;
        for (level, chunk) in out.chunks_exact_mut(len).take(self.depth).enumerate() {
            let (start, _) = self.levels[level];
            chunk.copy_from_slice(&self.nodes[start + (j ^ 1)][..len]);
            j >>= 1;
        }
    }
}

/// Why a Merkle proof failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathError {
    /// PATH is not a whole number of hashes, or deeper than 32.
    Length,
    /// INDX has bits set beyond the PATH depth.
    IndexBits,
}

/// Walk `path` up from `leaf` under `indx`; returns the computed root.
pub fn climb(
    hash: HashAlg,
    leaf: &Hash,
    path: &[u8],
    indx: u32,
    orientation: Orientation,
) -> Result<Hash, PathError> {
    let len = hash.len();
    if !path.len().is_multiple_of(len) || path.len() / len > MAX_DEPTH {
        return Err(PathError::Length);
    }
    let depth = path.len() / len;
    if indx.checked_shr(depth as u32).unwrap_or(0) != 0 {
        return Err(PathError::IndexBits);
    }
    let mut h = *leaf;
    let mut next = [0u8; 64];
    for (k, sibling) in path.chunks_exact(len).enumerate() {
        let bit = (indx >> k) & 1;
        let hash_first = (bit == 0) == (orientation == Orientation::HashFirst);
        if hash_first {
            hash.node(&h[..len], sibling, &mut next);
        } else {
            hash.node(sibling, &h[..len], &mut next);
        }
        h = next;
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_all(n: usize, alg: HashAlg) {
        let mut t = Tree::with_capacity(n);
        t.reset(alg);
        for i in 0..n {
            t.push_leaf(&(i as u64).to_le_bytes()).unwrap();
        }
        let root: Vec<u8> = t.finish().to_vec();
        let mut path = vec![0u8; t.depth() * alg.len()];
        for i in 0..n {
            t.write_path(i, &mut path);
            let mut leaf = [0u8; 64];
            alg.leaf(&(i as u64).to_le_bytes(), &mut leaf);
            let got = climb(alg, &leaf, &path, i as u32, Orientation::HashFirst).unwrap();
            assert_eq!(&got[..alg.len()], &root[..], "n={n} i={i}");
            if n > 1 {
                let other = climb(alg, &leaf, &path, i as u32, Orientation::NodeFirst).unwrap();
                // Node-first differs for any leaf with a 0 bit in range… and
                // for leaves whose bits are all 1 too, since sides swap.
                assert_ne!(&other[..alg.len()], &root[..], "n={n} i={i}");
            }
        }
    }

    #[test]
    fn every_leaf_proves_its_root() {
        for n in [1, 2, 3, 5, 8, 10, 64, 100] {
            check_all(n, HashAlg::Sha512Trunc32);
        }
        check_all(7, HashAlg::Sha512);
        check_all(9, HashAlg::Sha512_256);
    }

    #[test]
    fn single_leaf_root_is_the_leaf() {
        let mut t = Tree::with_capacity(4);
        t.reset(HashAlg::Sha512Trunc32);
        t.push_leaf(b"abcd").unwrap();
        let root = t.finish().to_vec();
        let mut leaf = [0u8; 64];
        HashAlg::Sha512Trunc32.leaf(b"abcd", &mut leaf);
        assert_eq!(root, leaf[..32]);
        assert_eq!(t.depth(), 0);
    }

    #[test]
    fn leftover_index_bits_fail() {
        let leaf = [0u8; 64];
        assert_eq!(
            climb(
                HashAlg::Sha512Trunc32,
                &leaf,
                &[0; 32],
                2,
                Orientation::HashFirst
            ),
            Err(PathError::IndexBits)
        );
        assert_eq!(
            climb(
                HashAlg::Sha512Trunc32,
                &leaf,
                &[0; 31],
                0,
                Orientation::HashFirst
            ),
            Err(PathError::Length)
        );
    }

    #[test]
    fn leaves_together_or_one_by_one_give_one_root() {
        let data: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 1024]).collect();
        let inputs: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
        for alg in [HashAlg::Sha512, HashAlg::Sha512Trunc32, HashAlg::Sha512_256] {
            for n in 1..=inputs.len() {
                let mut one = Tree::with_capacity(n);
                one.reset(alg);
                for input in &inputs[..n] {
                    one.push_leaf(input).unwrap();
                }
                let mut many = Tree::with_capacity(n);
                many.reset(alg);
                // In two calls, as the responder does past 16 leaves.
                let k = n / 3;
                assert_eq!(many.push_leaves(&inputs[..k]), Some(0));
                assert_eq!(many.push_leaves(&inputs[k..n]), Some(k));
                assert_eq!(one.finish(), many.finish(), "{alg:?} n={n}");
                assert_eq!(many.push_leaves(&inputs[..1]), None);
            }
        }
    }

    #[test]
    fn full_tree_refuses_more_leaves() {
        let mut t = Tree::with_capacity(2);
        t.reset(HashAlg::Sha512);
        assert!(t.push_leaf(b"a").is_some());
        assert!(t.push_leaf(b"b").is_some());
        assert!(t.push_leaf(b"c").is_none());
    }
}
