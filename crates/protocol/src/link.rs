//! One link of a chain and the order of the links: the rule that derives
//! a request's nonce from the response before it (RFC 10049's nonce
//! chaining), the exchange a link records, and the causal-order check
//! between exchanges.
//!
//! Malfeasance reports, relayed proofs and the measurement sequence all
//! read these plain data and rules, and this module reads none of them:
//! that keeps the three from importing each other to get at them. The
//! chain module re-exports everything public here.
//!
//! Nothing here draws random bytes: `rand` is always an argument.

use alloc::vec::Vec;

use crate::hash::{Hash, HashAlg};
use crate::profile::{ChainRule, Profile};
use crate::scheme::LongTermKey;
use crate::verify::Verified;
use crate::wire::{self, PACKET_HEADER};

/// Longest nonce any profile uses.
pub const MAX_NONCE_LEN: usize = 64;

/// Why a chained nonce could not be produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChainError {
    /// The output buffer is shorter than the profile's nonce.
    NoRoom {
        /// Bytes needed.
        need: usize,
    },
    /// A measurement sequence takes rand values exactly as long as the
    /// nonce.
    RandLength {
        /// Bytes expected.
        need: usize,
    },
}

/// Derive the nonce of a request built in `profile`'s format from the
/// previous response (bytes as received, framed or bare) and `rand`.
/// Writes `profile.nonce_len` bytes to `out` and returns that length.
///
/// `Concat` hashes `previous ‖ rand`, dropping a ROUGHTIM header first when
/// the rule is unframed (drafts up to 11). When the rule's hash is shorter
/// than the nonce (drafts 01–04 send 64-byte nonces) untruncated SHA-512 is
/// used instead, as Tanner Ryan's code, the only one chaining those drafts,
/// does (the chaining rule). `DoubleSha512` is SHA-512(SHA-512(previous) ‖ rand), hashing
/// the previous response as received.
pub fn chain_nonce(
    profile: &Profile,
    previous_response: &[u8],
    rand: &[u8],
    out: &mut [u8],
) -> Result<usize, ChainError> {
    let n = profile.nonce_len;
    let out = out.get_mut(..n).ok_or(ChainError::NoRoom { need: n })?;
    let mut h: Hash = [0; 64];
    match profile.chain {
        ChainRule::DoubleSha512 => {
            let mut inner: Hash = [0; 64];
            HashAlg::Sha512.digest(&[previous_response], &mut inner);
            HashAlg::Sha512.digest(&[&inner, rand], &mut h);
        }
        ChainRule::Concat { hash, framed } => {
            let prev = if !framed && wire::has_magic(previous_response) {
                previous_response.get(PACKET_HEADER..).unwrap_or_default()
            } else {
                previous_response
            };
            let alg = if hash.len() < n {
                HashAlg::Sha512
            } else {
                hash
            };
            alg.digest(&[prev, rand], &mut h);
        }
    }
    out.copy_from_slice(&h[..n]);
    Ok(n)
}

/// Every pair (i, j), i received before j, whose intervals cannot both hold:
/// MIDP_i − RADI_i > MIDP_j + RADI_j. `verified` is in the order the
/// responses were received.
pub fn causal_violations(verified: &[Verified]) -> Vec<(usize, usize)> {
    violations(
        &verified
            .iter()
            .map(|v| Some((v.earliest_us(), v.latest_us())))
            .collect::<Vec<_>>(),
    )
}

/// The causal check over (earliest, latest) intervals; `None` entries (a
/// response that did not verify) take part in no pair.
pub(crate) fn violations(intervals: &[Option<(i128, i128)>]) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    for (i, a) in intervals.iter().enumerate() {
        let Some((earliest_i, _)) = a else { continue };
        for (j, b) in intervals.iter().enumerate().skip(i + 1) {
            if let Some((_, latest_j)) = b {
                if earliest_i > latest_j {
                    pairs.push((i, j));
                }
            }
        }
    }
    pairs
}

/// One verified request/response pair of a chain.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// The request as sent.
    pub request: Vec<u8>,
    /// The response as received.
    pub response: Vec<u8>,
    /// The rand that chained this request to the previous response (or to
    /// the device value of a bound sequence); `None` for the first exchange
    /// of an unbound sequence, whose nonce was random on its own.
    pub rand: Option<Vec<u8>>,
    /// The long-term key the response was verified with.
    pub public_key: LongTermKey,
    /// The verification result.
    pub verified: Verified,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::PROFILES;

    #[test]
    fn framed_rule_keeps_the_header_unframed_rule_drops_it() {
        let rfc = Profile::rfc();
        let d08 = Profile::by_name("draft-08").unwrap();
        let mut packet = alloc::vec![0u8; 12 + 8];
        wire::write_frame_header(&mut packet, 8).unwrap();
        let body = packet[12..].to_vec();
        let rand = [7u8; 32];
        let (mut a, mut b, mut c) = ([0u8; 64], [0u8; 64], [0u8; 64]);
        chain_nonce(rfc, &packet, &rand, &mut a).unwrap();
        chain_nonce(d08, &packet, &rand, &mut b).unwrap();
        chain_nonce(d08, &body, &rand, &mut c).unwrap();
        assert_ne!(a[..32], b[..32]);
        assert_eq!(b[..32], c[..32]);
        let mut h = [0u8; 64];
        HashAlg::Sha512.digest(&[&packet, &rand], &mut h);
        assert_eq!(a[..32], h[..32]);
    }

    #[test]
    fn google_hashes_twice_and_fills_64_bytes() {
        let prev = [1u8; 100];
        let rand = [2u8; 64];
        let mut out = [0u8; 64];
        assert_eq!(
            chain_nonce(Profile::google(), &prev, &rand, &mut out),
            Ok(64)
        );
        let (mut inner, mut outer) = ([0u8; 64], [0u8; 64]);
        HashAlg::Sha512.digest(&[&prev], &mut inner);
        HashAlg::Sha512.digest(&[&inner, &rand], &mut outer);
        assert_eq!(out, outer);
    }

    #[test]
    fn every_profile_fills_its_nonce() {
        for p in PROFILES.iter() {
            let mut out = [0u8; 64];
            assert_eq!(chain_nonce(p, b"prev", &[9; 32], &mut out), Ok(p.nonce_len));
            // No zero tail: a 64-byte nonce is not a 32-byte hash padded out.
            assert!(out[p.nonce_len - 8..p.nonce_len].iter().any(|&b| b != 0));
            let mut short = [0u8; 16];
            assert_eq!(
                chain_nonce(p, b"prev", &[9; 32], &mut short),
                Err(ChainError::NoRoom { need: p.nonce_len })
            );
        }
    }

    #[test]
    fn violations_skip_missing_and_list_every_pair() {
        let iv = [
            Some((100, 110)),
            Some((0, 10)),
            None,
            Some((105, 120)),
            Some((0, 99)),
        ];
        assert_eq!(violations(&iv), [(0, 1), (0, 4), (3, 4)]);
        // Touching intervals are consistent: the check is strict.
        assert!(violations(&[Some((10, 20)), Some((0, 10))]).is_empty());
    }
}
