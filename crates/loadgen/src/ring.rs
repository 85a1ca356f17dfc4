//! The requests a socket has sent, kept in a fixed ring so each response can
//! be checked against the exact bytes it answers, without allocating per
//! request.
//!
//! Every nonce carries its request's sequence number, which is also its ring
//! index, and a per-run tag, so a response that copies the nonce back
//! (drafts and version 1) is matched in O(1). Google responses carry no
//! nonce; those are matched by finding the outstanding request whose Merkle
//! leaf climbs PATH to the response's ROOT, a few hashes per candidate.

use gnomon_protocol::merkle::{self, Orientation};
use gnomon_protocol::profile::{Framing, LeafInput};
use gnomon_protocol::wire::{self, Message};
use gnomon_protocol::{Offer, Profile, Tag};

/// Bytes of the nonce that identify a request: sequence number (8, LE) and
/// run tag (8). The rest of the nonce is filler derived from the tag.
pub(crate) const NONCE_TAG_LEN: usize = 16;
/// Most outstanding requests tried against a response without a nonce.
const MAX_PROOF_SCAN: u64 = 1024;

/// What happened to one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Never used.
    Free,
    /// Sent, no response yet.
    Outstanding,
    /// Answered in time.
    Answered,
    /// Given up on after the timeout (counted lost).
    Expired,
}

#[derive(Clone, Copy)]
struct Meta {
    seq: u64,
    sent_ns: u64,
    state: State,
}

/// Sent requests of one socket, indexed by sequence number modulo a power of
/// two.
pub(crate) struct Ring {
    mask: u64,
    size: usize,
    bytes: Vec<u8>,
    meta: Vec<Meta>,
    tag: [u8; 8],
    nonce: [u8; 64],
    nonce_len: usize,
    offer: Offer,
    srv: [u8; 32],
    profile: &'static Profile,
}

impl Ring {
    /// A ring of `len` (a power of two) requests of `size` bytes each.
    pub(crate) fn new(
        len: usize,
        size: usize,
        profile: &'static Profile,
        tag: u64,
        key: &[u8; 32],
    ) -> Ring {
        debug_assert!(len.is_power_of_two());
        let mut nonce = [0u8; 64];
        let mut x = tag;
        for chunk in nonce[NONCE_TAG_LEN..].chunks_mut(8) {
            x = splitmix(x);
            chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
        }
        nonce[8..16].copy_from_slice(&tag.to_le_bytes());
        Ring {
            mask: len as u64 - 1,
            size,
            bytes: vec![0; len * size],
            meta: vec![
                Meta {
                    seq: u64::MAX,
                    sent_ns: 0,
                    state: State::Free,
                };
                len
            ],
            tag: tag.to_le_bytes(),
            nonce,
            nonce_len: profile.nonce_len,
            offer: Offer::single(profile),
            srv: gnomon_protocol::request::srv_for(key),
            profile,
        }
    }

    pub(crate) fn len(&self) -> u64 {
        self.mask + 1
    }

    /// Write request `seq` into its slot; false if it cannot be built (the
    /// configuration check rules that out).
    pub(crate) fn build(&mut self, seq: u64) -> bool {
        let nonce = self.nonce_for(seq);
        let at = (seq & self.mask) as usize * self.size;
        let out = &mut self.bytes[at..at + self.size];
        self.offer
            .build(&nonce[..self.nonce_len], Some(&self.srv), self.size, out)
            .is_ok()
    }

    /// The bytes of the request in `seq`'s slot.
    pub(crate) fn request(&self, seq: u64) -> &[u8] {
        let at = (seq & self.mask) as usize * self.size;
        &self.bytes[at..at + self.size]
    }

    /// Mark `seq` sent at `now_ns`.
    pub(crate) fn sent(&mut self, seq: u64, now_ns: u64) {
        self.meta[(seq & self.mask) as usize] = Meta {
            seq,
            sent_ns: now_ns,
            state: State::Outstanding,
        };
    }

    /// State and send time of `seq`, if its slot still holds it.
    pub(crate) fn get(&self, seq: u64) -> Option<(State, u64)> {
        let m = self.meta[(seq & self.mask) as usize];
        (m.seq == seq).then_some((m.state, m.sent_ns))
    }

    pub(crate) fn set_state(&mut self, seq: u64, state: State) {
        let m = &mut self.meta[(seq & self.mask) as usize];
        if m.seq == seq {
            m.state = state;
        }
    }

    /// Which request in `oldest..next` `response` answers, if any.
    pub(crate) fn find(&self, response: &[u8], oldest: u64, next: u64) -> Option<u64> {
        match copied_nonce(self.profile, response) {
            Some(n) if n.len() == self.nonce_len && n[8..16] == self.tag => {
                let mut seq = [0u8; 8];
                seq.copy_from_slice(&n[..8]);
                Some(u64::from_le_bytes(seq))
            }
            // Someone else's nonce: not a response to us.
            Some(_) => None,
            None => self.find_by_proof(response, oldest, next),
        }
    }

    fn find_by_proof(&self, response: &[u8], oldest: u64, next: u64) -> Option<u64> {
        let p = self.profile;
        let body = match p.framing {
            Framing::Packet => wire::unframe(response).ok()?,
            Framing::Bare => response,
        };
        let msg = Message::parse(body).ok()?;
        let path = msg.get(Tag::PATH)?;
        let indx = msg.u32(Tag::INDX).ok()?;
        let root = msg.nested(Tag::SREP).ok()?.get(Tag::ROOT)?;
        let len = p.hash_len();
        if root.len() != len {
            return None;
        }
        let first = next.saturating_sub(MAX_PROOF_SCAN).max(oldest);
        (first..next).find(|&seq| {
            if !matches!(
                self.get(seq),
                Some((State::Outstanding | State::Expired, _))
            ) {
                return false;
            }
            let nonce = self.nonce_for(seq);
            let input = match p.leaf {
                LeafInput::Nonce => &nonce[..self.nonce_len],
                LeafInput::Packet => self.request(seq),
            };
            let mut leaf = [0u8; 64];
            p.hash.leaf(input, &mut leaf);
            [Orientation::HashFirst, Orientation::NodeFirst]
                .iter()
                .any(|&o| {
                    merkle::climb(p.hash, &leaf, path, indx, o).is_ok_and(|h| &h[..len] == root)
                })
        })
    }

    fn nonce_for(&self, seq: u64) -> [u8; 64] {
        let mut n = self.nonce;
        n[..8].copy_from_slice(&seq.to_le_bytes());
        n
    }
}

/// The response's copy of the nonce, wherever this version puts it.
fn copied_nonce<'a>(profile: &Profile, response: &'a [u8]) -> Option<&'a [u8]> {
    let body = match profile.framing {
        Framing::Packet => wire::unframe(response).ok()?,
        Framing::Bare => response,
    };
    let msg = Message::parse(body).ok()?;
    msg.get(Tag::NONC)
        .or_else(|| msg.nested(Tag::SREP).ok()?.get(Tag::NONC))
}

/// A well-mixed 64-bit step (SplitMix64), for nonce filler and sampling.
pub(crate) fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
