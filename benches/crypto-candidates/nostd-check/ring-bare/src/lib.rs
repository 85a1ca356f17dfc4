#![no_std]
extern crate alloc;
pub fn leaf(d: &[u8]) -> ring::digest::Digest { let mut h = ring::digest::Context::new(&ring::digest::SHA512); h.update(&[0]); h.update(d); h.finish() }
pub fn sign(seed: &[u8], m: &[u8]) -> ring::signature::Signature { ring::signature::Ed25519KeyPair::from_seed_unchecked(seed).unwrap().sign(m) }
pub fn verify(pk: &[u8], m: &[u8], s: &[u8]) -> bool { ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, pk).verify(m, s).is_ok() }
