//! One message at a time with sha2: the fallback for every CPU, and the
//! path for messages the AVX2 groups leave over.

use sha2::{Digest as _, Sha512, Sha512_256};

use crate::{Digest, Message, Variant};

pub(crate) fn digest_many(variant: Variant, msgs: &[Message<'_>], out: &mut [Digest]) {
    for (m, o) in msgs.iter().zip(out) {
        digest_one(variant, m, o);
    }
}

/// The concatenation of `parts`, hashed; any number of parts.
pub(crate) fn digest_one(variant: Variant, parts: &[&[u8]], out: &mut Digest) {
    match variant {
        Variant::Sha512 => {
            let mut h = Sha512::new();
            for p in parts {
                h.update(p);
            }
            out.copy_from_slice(&h.finalize());
        }
        Variant::Sha512_256 => {
            let mut h = Sha512_256::new();
            for p in parts {
                h.update(p);
            }
            out[..32].copy_from_slice(&h.finalize());
            out[32..].fill(0);
        }
    }
}
