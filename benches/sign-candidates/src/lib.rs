//! Every candidate behind one shape: sign `msg` with the key made from `SEED`,
//! return the 64 signature bytes. Keys are built once by `Candidates::new`;
//! only `sign` is timed and counted.

/// The online key's seed (any fixed value; Ed25519 is deterministic).
pub const SEED: [u8; 32] = [0x5a; 32];

/// A version-1 SREP with its context prefix is 32 + ~68 bytes.
pub fn message() -> Vec<u8> {
    (0..100u32).map(|i| (i as u8).wrapping_mul(31).wrapping_add(17)).collect()
}

pub struct Candidates {
    dalek: ed25519_dalek::SigningKey,
    dalek_expanded: ed25519_dalek::hazmat::ExpandedSecretKey,
    dalek_public: ed25519_dalek::VerifyingKey,
    aws: aws_lc_rs::signature::Ed25519KeyPair,
    aws_sys_key: [u8; 64],
    ring: ring::signature::Ed25519KeyPair,
    graviola: graviola::signing::eddsa::Ed25519SigningKey,
    compact: ed25519_compact::SecretKey,
}

/// Names, in the order `sign` takes them.
pub const NAMES: [&str; 7] = [
    "dalek SigningKey::sign",
    "dalek hazmat raw_sign (expanded key kept)",
    "aws-lc-rs Ed25519KeyPair::sign",
    "aws-lc-sys ED25519_sign (FFI)",
    "ring 0.17 Ed25519KeyPair::sign",
    "graviola Ed25519SigningKey::sign",
    "ed25519-compact SecretKey::sign",
];

impl Candidates {
    pub fn new() -> Candidates {
        let dalek = ed25519_dalek::SigningKey::from_bytes(&SEED);
        let dalek_public = dalek.verifying_key();
        let mut aws_sys_key = [0u8; 64];
        aws_sys_key[..32].copy_from_slice(&SEED);
        aws_sys_key[32..].copy_from_slice(dalek_public.as_bytes());
        Candidates {
            dalek_expanded: ed25519_dalek::hazmat::ExpandedSecretKey::from(&SEED),
            dalek,
            dalek_public,
            aws: aws_lc_rs::signature::Ed25519KeyPair::from_seed_unchecked(&SEED).unwrap(),
            aws_sys_key,
            ring: ring::signature::Ed25519KeyPair::from_seed_unchecked(&SEED).unwrap(),
            graviola: graviola::signing::eddsa::Ed25519SigningKey::from_bytes(&SEED).unwrap(),
            compact: ed25519_compact::KeyPair::from_seed(ed25519_compact::Seed::new(SEED)).sk,
        }
    }

    #[inline(never)]
    pub fn sign(&self, which: usize, msg: &[u8]) -> [u8; 64] {
        use ed25519_dalek::Signer;
        match which {
            0 => self.dalek.sign(msg).to_bytes(),
            1 => ed25519_dalek::hazmat::raw_sign::<sha2::Sha512>(
                &self.dalek_expanded,
                msg,
                &self.dalek_public,
            )
            .to_bytes(),
            2 => self.aws.sign(msg).as_ref().try_into().unwrap(),
            3 => {
                let mut sig = [0u8; 64];
                // SAFETY: `sig` is 64 writable bytes, `msg` is readable for its
                // length, and the key is the 64-byte seed ‖ public key
                // ED25519_sign reads.
                let ok = unsafe {
                    aws_lc_sys::ED25519_sign(
                        sig.as_mut_ptr(),
                        msg.as_ptr(),
                        msg.len(),
                        self.aws_sys_key.as_ptr(),
                    )
                };
                assert_eq!(ok, 1);
                sig
            }
            4 => self.ring.sign(msg).as_ref().try_into().unwrap(),
            5 => self.graviola.sign(msg),
            6 => *self.compact.sign(msg, None),
            _ => unreachable!(),
        }
    }
}

impl Default for Candidates {
    fn default() -> Self {
        Self::new()
    }
}
