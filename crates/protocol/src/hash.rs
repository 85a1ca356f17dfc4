//! The Merkle hash primitives (VERSIONS.md §2.5) behind one small interface, so
//! the SHA-512 crate is a choice made in one place (docs/COST.md).

use sha2::{Digest, Sha512, Sha512_256};

use crate::profile::HashAlg;

/// A hash output; only the first `HashAlg::len()` bytes are meaningful.
pub type Hash = [u8; 64];

const LEAF: u8 = 0x00;
const NODE: u8 = 0x01;

impl HashAlg {
    /// Hash the concatenation of `parts` into `out`.
    pub fn digest(self, parts: &[&[u8]], out: &mut Hash) {
        match self {
            HashAlg::Sha512 | HashAlg::Sha512Trunc32 => {
                let mut h = Sha512::new();
                for p in parts {
                    h.update(p);
                }
                out.copy_from_slice(&h.finalize());
            }
            HashAlg::Sha512_256 => {
                let mut h = Sha512_256::new();
                for p in parts {
                    h.update(p);
                }
                out[..32].copy_from_slice(&h.finalize());
                out[32..].fill(0);
            }
        }
        if self == HashAlg::Sha512Trunc32 {
            // Truncated at every node, not only at the root (§2.5): clearing the
            // tail keeps comparisons of whole arrays honest.
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
}

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
}
