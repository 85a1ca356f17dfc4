//! The requests a socket has sent, kept in a fixed ring so each response can
//! be checked against the exact bytes it answers, without allocating per
//! request.
//!
//! Every nonce carries its request's sequence number, which is also its ring
//! index, and a per-run tag, so a response that copies the nonce back
//! (drafts and version 1) is matched in O(1). Google responses carry no
//! nonce; those are matched by finding the outstanding request whose Merkle
//! leaf climbs PATH to the response's ROOT. Responses of one batch share
//! ROOT and the upper PATH, so after the first the climb stops where it
//! meets the path of the one matched before it ([`LastProof`]): a leaf and
//! one or two node hashes per response instead of a climb to the root,
//! which at batch 64 had made the generator, not the server, the limit.

use gnomon_protocol::merkle::{self, Orientation, MAX_DEPTH};
use gnomon_protocol::profile::{Framing, LeafInput};
use gnomon_protocol::wire::{self, Message};
use gnomon_protocol::{LongTermKey, Offer, Profile, Tag};

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
    last: Option<Box<LastProof>>,
    /// Responses matched (or not) by climbing to the root.
    full_climbs: u64,
}

/// The last response matched by its Merkle proof.
struct LastProof {
    root: [u8; 64],
    indx: u32,
    path: [u8; 64 * MAX_DEPTH],
    path_len: usize,
    orientation: Orientation,
}

impl LastProof {
    /// Where a response of the same batch with `indx` and `path` meets
    /// this one's path: the level at which their subtrees are siblings,
    /// if both proofs agree above it.
    fn meeting(&self, root: &[u8], indx: u32, path: &[u8], len: usize) -> Option<usize> {
        if &self.root[..len] != root || self.path_len != path.len() || self.indx == indx {
            return None;
        }
        let level = (31 - (self.indx ^ indx).leading_zeros()) as usize;
        let above = (level + 1) * len;
        (above <= path.len() && path[above..] == self.path[above..self.path_len]).then_some(level)
    }
}

impl Ring {
    /// A ring of `len` (a power of two) requests of `size` bytes each.
    pub(crate) fn new(
        len: usize,
        size: usize,
        profile: &'static Profile,
        tag: u64,
        key: &LongTermKey,
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
            srv: key.srv(),
            profile,
            last: None,
            full_climbs: 0,
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
    pub(crate) fn find(&mut self, response: &[u8], oldest: u64, next: u64) -> Option<u64> {
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

    fn find_by_proof(&mut self, response: &[u8], oldest: u64, next: u64) -> Option<u64> {
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
        if root.len() != len || path.len() > 64 * MAX_DEPTH {
            return None;
        }
        let first = next.saturating_sub(MAX_PROOF_SCAN).max(oldest);
        // The same batch as the last match: climb only to where the two
        // proofs meet, and compare with the sibling the last one carried.
        let quick = self.last.as_ref().and_then(|last| {
            let level = last.meeting(root, indx, path, len)?;
            let mut want = [0u8; 64];
            want[..len].copy_from_slice(&last.path[level * len..(level + 1) * len]);
            Some((level, last.orientation, want))
        });
        if let Some((level, o, want)) = quick {
            let mask = (1u32 << level) - 1;
            let below = &path[..level * len];
            let found = (first..next).find(|&seq| {
                self.candidate(seq).is_some_and(|leaf| {
                    merkle::climb(p.hash, &leaf, below, indx & mask, o)
                        .is_ok_and(|h| h[..len] == want[..len])
                })
            });
            if let Some(seq) = found {
                self.remember(root, indx, path, o);
                return Some(seq);
            }
        }
        self.full_climbs += 1;
        let (seq, o) = (first..next).find_map(|seq| {
            let leaf = self.candidate(seq)?;
            [Orientation::HashFirst, Orientation::NodeFirst]
                .into_iter()
                .find(|&o| {
                    merkle::climb(p.hash, &leaf, path, indx, o).is_ok_and(|h| &h[..len] == root)
                })
                .map(|o| (seq, o))
        })?;
        self.remember(root, indx, path, o);
        Some(seq)
    }

    /// The leaf hash of `seq`, if it may still be answered.
    fn candidate(&self, seq: u64) -> Option<[u8; 64]> {
        if !matches!(
            self.get(seq),
            Some((State::Outstanding | State::Expired, _))
        ) {
            return None;
        }
        let nonce = self.nonce_for(seq);
        let input = match self.profile.leaf {
            LeafInput::Nonce => &nonce[..self.nonce_len],
            LeafInput::Packet => self.request(seq),
        };
        let mut leaf = [0u8; 64];
        self.profile.hash.leaf(input, &mut leaf);
        Some(leaf)
    }

    fn remember(&mut self, root: &[u8], indx: u32, path: &[u8], orientation: Orientation) {
        let last = self.last.get_or_insert_with(|| {
            Box::new(LastProof {
                root: [0; 64],
                indx: 0,
                path: [0; 64 * MAX_DEPTH],
                path_len: 0,
                orientation,
            })
        });
        last.root[..root.len()].copy_from_slice(root);
        last.indx = indx;
        last.path[..path.len()].copy_from_slice(path);
        last.path_len = path.len();
        last.orientation = orientation;
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

#[cfg(test)]
mod tests {
    use super::*;
    use gnomon_protocol::responder::RespondError;
    use gnomon_protocol::{
        Acceptor, BatchContext, Certificate, KeyPair, Responder, ResponderOptions, ResponseSink,
    };

    const NOW_US: u64 = 1_791_158_400_000_000;

    struct Replies(Vec<Vec<u8>>);

    impl ResponseSink for Replies {
        fn buffer(&mut self, i: usize) -> &mut [u8] {
            &mut self.0[i]
        }
        fn finish(&mut self, i: usize, result: Result<usize, RespondError>) {
            let len = result.expect("answered");
            self.0[i].truncate(len);
        }
    }

    /// The server's answers to `seqs` of `ring`, as one batch.
    fn answer(ring: &Ring, seqs: std::ops::Range<u64>) -> Vec<Vec<u8>> {
        let p = ring.profile;
        let long_term = KeyPair::from_seed(&[1; 32]);
        let online = KeyPair::from_seed(&[2; 32]);
        let cert = Certificate::mint(&long_term, &online.public(), NOW_US - 1, NOW_US + 1, p);
        let ctx = BatchContext {
            profile: p,
            now_us: NOW_US,
            radius_us: 1_000_000,
            online: &online,
            cert: &cert,
            vers: &[],
        };
        let acceptor = Acceptor::default();
        let requests: Vec<_> = seqs
            .clone()
            .map(|s| acceptor.parse(ring.request(s)).expect("request parses"))
            .collect();
        let mut replies = Replies(vec![vec![0; ring.size]; requests.len()]);
        let mut responder = Responder::new(requests.len(), ResponderOptions::default());
        let stats = responder.respond(&ctx, &requests, &mut replies);
        assert_eq!(stats.signatures, 1);
        replies.0
    }

    #[test]
    fn google_answers_are_found_by_proof_climbing_to_the_root_once_a_batch() {
        let p = Profile::google();
        let mut ring = Ring::new(256, 1024, p, 7, &[9; 32].into());
        for seq in 0..128 {
            assert!(ring.build(seq));
            ring.sent(seq, 0);
        }
        let (a, b) = (answer(&ring, 0..64), answer(&ring, 64..128));
        // The second batch first, its even indices then its odd ones; then
        // the first batch backwards.
        let mut order: Vec<u64> = (64..128).step_by(2).chain((65..128).step_by(2)).collect();
        order.extend((0..64).rev());
        for seq in order {
            let reply = if seq < 64 {
                &a[seq as usize]
            } else {
                &b[seq as usize - 64]
            };
            assert_eq!(ring.find(reply, 0, 128), Some(seq));
            ring.set_state(seq, State::Answered);
            // Answered: the same reply again is nobody's.
            assert_eq!(ring.find(reply, 0, 128), None);
        }
        // One climb to the root per batch, one per duplicate that fell back
        // to the full scan and found no one.
        assert_eq!(ring.full_climbs, 2 + 128);

        // Another generator's requests, and one of ours a batch did not hold.
        let mut other = Ring::new(256, 1024, p, 8, &[9; 32].into());
        for seq in 0..2 {
            assert!(other.build(seq));
        }
        ring.set_state(5, State::Outstanding);
        for reply in answer(&other, 0..2) {
            assert_eq!(ring.find(&reply, 0, 128), None);
        }
    }
}
