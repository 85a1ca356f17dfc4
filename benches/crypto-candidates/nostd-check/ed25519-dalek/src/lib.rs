#![no_std]
extern crate alloc;
use ed25519_dalek::{Signer, Verifier};
pub fn sign(seed: &[u8; 32], m: &[u8]) -> [u8; 64] { ed25519_dalek::SigningKey::from_bytes(seed).sign(m).to_bytes() }
pub fn verify(pk: &[u8; 32], m: &[u8], s: &[u8; 64]) -> bool { ed25519_dalek::VerifyingKey::from_bytes(pk).map(|k| k.verify(m, &ed25519_dalek::Signature::from_bytes(s)).is_ok()).unwrap_or(false) }
