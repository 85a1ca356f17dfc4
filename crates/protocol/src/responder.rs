//! The server side: one Merkle tree and one SREP signature per batch, each
//! response written straight into the caller's buffer.
//!
//! ```text
//!  requests (one profile) ─▶ leaves ─▶ tree ─▶ SREP ─▶ one signature
//!                                                 │
//!        per request: header │ SIG │ VER │ NONC │ TYPE │ PATH │ SREP │ CERT │ INDX
//! ```
//!
//! Anti-amplification is enforced by the API: the buffer a response is
//! written to is cut to its request's length before any byte is written, so
//! a larger response cannot be produced; it fails as `NoRoom` instead. The
//! batch is split up front so that this never happens for a valid request.
//! Only a responder made for a stream ([`Responder::for_stream`]) drops that
//! bound: over TCP the handshake proves the source, so there is nothing to
//! amplify, and clients that send unpadded requests there are answered.

use crate::cert::{Certificate, Sign, MAX_CONTEXT};
use crate::error::WireError;
use crate::merkle::Tree;
use crate::profile::{Batching, LeafInput, NoncePlace, Profile, VerPlace};
use crate::request::Request;
use crate::scheme::MAX_SIGNATURE;
use crate::tag::Tag;
use crate::version::Version;
use crate::wire::{self, PACKET_HEADER};

/// Largest SREP any profile produces (VER, RADI, MIDP, 32 VERS, 64-byte
/// ROOT and a 64-byte NONC, with headers), rounded up.
const SREP_MAX: usize = 8 * 6 + 4 + 4 + 8 + 4 * 32 + 64 + 64;
/// Longest top-level message header: 8 tags, 7 offsets and the count.
const HEADER_MAX: usize = 8 * 8;
const _: () = assert!(SREP_MAX <= 384);

/// Where responses go: one buffer per request index.
pub trait ResponseSink {
    /// The buffer for response `i`. Only its first `request.len()` bytes
    /// will be used.
    fn buffer(&mut self, i: usize) -> &mut [u8];
    /// Response `i` is complete: `Ok(len)` bytes of its buffer, or dropped.
    fn finish(&mut self, i: usize, result: Result<usize, RespondError>);
}

/// Why a request in a batch got no response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RespondError {
    /// The request is too small to carry even a single-leaf response.
    TooSmall,
    /// The batch mixes profiles (a caller bug, reported not panicked).
    MixedProfiles,
    /// The certificate does not cover `now` (MINT ≤ MIDP ≤ MAXT would fail).
    OutsideDelegation,
    /// A VERS list that does not hold the version, is unsorted or too long.
    BadVers,
    /// Writing failed (buffer smaller than the request).
    NoRoom,
}

impl From<WireError> for RespondError {
    fn from(_: WireError) -> Self {
        RespondError::NoRoom
    }
}

/// What one batch needs besides the requests.
#[derive(Clone, Copy, Debug)]
pub struct BatchContext<'a> {
    /// The profile every request in the batch was parsed as.
    pub profile: &'static Profile,
    /// Now, in Unix µs, read once per batch.
    pub now_us: u64,
    /// Honest radius in µs.
    pub radius_us: u32,
    /// The online key's signer: a [`crate::KeyPair`], or a faster signer
    /// of the same key that the server injects.
    pub online: &'a dyn Sign,
    /// The delegation of `online`, minted for this profile.
    pub cert: &'a Certificate,
    /// Versions the server supports, ascending (VERS, 12+ only).
    pub vers: &'a [Version],
}

/// Options for the responder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponderOptions {
    /// Batch versions whose tree orientation is disputed (implementations disagree on it), hash-first.
    /// Off by default: they are answered in batches of one.
    pub batch_disputed: bool,
    /// Add a top-level NONC to Google responses, as Cloudflare does.
    pub google_nonce: bool,
}

/// Counts for one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Responses written.
    pub responses: usize,
    /// Signatures made (trees built).
    pub signatures: usize,
    /// Requests dropped.
    pub dropped: usize,
}

/// A reusable responder; allocates only in [`Responder::new`].
#[derive(Debug)]
pub struct Responder {
    tree: Tree,
    /// Context string followed by the SREP bytes: the signed message.
    signed: [u8; MAX_CONTEXT + SREP_MAX],
    /// The chunk's message header followed by its signature: what every
    /// response of the chunk starts with, copied in one piece. Kept here
    /// rather than in each chunk's layout, so ML-DSA-44's 2420 bytes are
    /// not cleared per batch.
    head: [u8; HEADER_MAX + MAX_SIGNATURE],
    options: ResponderOptions,
    /// Whether each response is bounded by its request's length (datagrams).
    bounded: bool,
}

/// Per-chunk layout of a response.
struct Layout {
    /// Bytes of `Responder::head` that hold the header and the signature.
    head_len: usize,
    srep_at: usize,
    srep_len: usize,
}

impl Responder {
    /// A responder for batches of up to `max_batch` requests.
    pub fn new(max_batch: usize, options: ResponderOptions) -> Responder {
        Responder {
            tree: Tree::with_capacity(max_batch),
            signed: [0; MAX_CONTEXT + SREP_MAX],
            head: [0; HEADER_MAX + MAX_SIGNATURE],
            options,
            bounded: true,
        }
    }

    /// A responder for a stream transport (TCP), whose source address
    /// cannot be spoofed: a response is bounded by the sink's buffer only,
    /// not by its request's length, so short (unpadded) requests are
    /// answered in full.
    pub fn for_stream(max_batch: usize, options: ResponderOptions) -> Responder {
        Responder {
            bounded: false,
            ..Responder::new(max_batch, options)
        }
    }

    /// Room for `r`'s response: its request's length for a datagram.
    fn room(&self, r: &Request<'_>) -> usize {
        if self.bounded {
            r.packet.len()
        } else {
            usize::MAX
        }
    }

    /// Change the options for the batches that follow (a configuration
    /// reload); allocates nothing.
    pub fn set_options(&mut self, options: ResponderOptions) {
        self.options = options;
    }

    /// Largest batch one tree takes.
    pub fn max_batch(&self) -> usize {
        self.tree.capacity()
    }

    /// Most requests of profile `p` one signature covers: 1 for the
    /// versions answered singly (the server budgets those), else the
    /// tree's capacity.
    pub fn leaves_per_signature(&self, p: &Profile) -> usize {
        match p.batching {
            Batching::Never => 1,
            Batching::OrientationDisputed if !self.options.batch_disputed => 1,
            _ => self.tree.capacity(),
        }
    }

    /// Answer `requests`, all of `ctx.profile`. Response `i` goes to
    /// `sink.buffer(i)`. Requests are split into as few trees as the
    /// capacity, the profile's batching rule and every request's size allow.
    pub fn respond(
        &mut self,
        ctx: &BatchContext<'_>,
        requests: &[Request<'_>],
        sink: &mut impl ResponseSink,
    ) -> BatchStats {
        let mut stats = BatchStats::default();
        let p = ctx.profile;
        let fail = |sink: &mut dyn ResponseSink, i, e, stats: &mut BatchStats| {
            sink.finish(i, Err(e));
            stats.dropped += 1;
        };
        let whole_batch_error = if !ctx.cert.covers(ctx.now_us) {
            Some(RespondError::OutsideDelegation)
        } else if p.ver_place == VerPlace::Srep && !vers_ok(ctx.vers, p.version) {
            Some(RespondError::BadVers)
        } else {
            None
        };
        let max_leaves = self.leaves_per_signature(p);
        let mut i = 0;
        while i < requests.len() {
            let r = &requests[i];
            if let Some(e) = whole_batch_error {
                fail(sink, i, e, &mut stats);
                i += 1;
                continue;
            }
            if r.profile.id != p.id {
                fail(sink, i, RespondError::MixedProfiles, &mut stats);
                i += 1;
                continue;
            }
            // Exact for this request's nonce: draft 03 accepts two lengths.
            let base = base_len(p, r.nonce.len(), ctx.vers.len(), self.options.google_nonce);
            if self.room(r) < base {
                fail(sink, i, RespondError::TooSmall, &mut stats);
                i += 1;
                continue;
            }
            // Grow the chunk while every member still fits its response.
            let mut end = i + 1;
            let mut min_len = self.room(r);
            while end < requests.len() && end - i < max_leaves {
                let q = &requests[end];
                // The chunk shares one header, laid out for the first nonce's
                // length; draft 03 accepts two lengths.
                if q.profile.id != p.id || self.room(q) < base || q.nonce.len() != r.nonce.len() {
                    break;
                }
                let m = min_len.min(self.room(q));
                if depth_for(end + 1 - i) > (m - base) / p.hash_len() {
                    break;
                }
                min_len = m;
                end += 1;
            }
            self.respond_chunk(ctx, &requests[i..end], i, base, sink, &mut stats);
            i = end;
        }
        stats
    }

    fn respond_chunk(
        &mut self,
        ctx: &BatchContext<'_>,
        chunk: &[Request<'_>],
        first: usize,
        base: usize,
        sink: &mut impl ResponseSink,
        stats: &mut BatchStats,
    ) {
        let p = ctx.profile;
        self.tree.reset(p.hash);
        // Leaves go to the tree a few at a time so that equal-length
        // requests are hashed together (multi-buffer SHA-512); the inputs
        // are gathered on the stack.
        let mut inputs: [&[u8]; 16] = [&[]; 16];
        for part in chunk.chunks(inputs.len()) {
            for (slot, r) in inputs.iter_mut().zip(part) {
                *slot = match p.leaf {
                    LeafInput::Nonce => r.nonce,
                    LeafInput::Packet => r.packet,
                };
            }
            // Capacity was respected when the chunk was cut.
            let _ = self.tree.push_leaves(&inputs[..part.len()]);
        }
        self.tree.finish();
        let layout = match self.layout(ctx, chunk[0].nonce, base) {
            Ok(l) => l,
            Err(e) => {
                for k in 0..chunk.len() {
                    sink.finish(first + k, Err(e));
                }
                stats.dropped += chunk.len();
                return;
            }
        };
        stats.signatures += 1;
        for (k, r) in chunk.iter().enumerate() {
            let buf = sink.buffer(first + k);
            // The anti-amplification bound: nothing past the request length.
            let cap = self.room(r).min(buf.len());
            let result = self.write_one(ctx, &layout, r, k, &mut buf[..cap]);
            if result.is_ok() {
                stats.responses += 1;
            } else {
                stats.dropped += 1;
            }
            sink.finish(first + k, result);
        }
    }

    /// Build and sign SREP, and the top-level header shared by the chunk.
    fn layout(
        &mut self,
        ctx: &BatchContext<'_>,
        nonce: &[u8],
        base: usize,
    ) -> Result<Layout, RespondError> {
        let p = ctx.profile;
        let ctx_len = p.contexts.srep.len();
        self.signed[..ctx_len].copy_from_slice(p.contexts.srep);
        let radi = p
            .time
            .encode_radius(ctx.now_us, ctx.radius_us, p.min_radius)
            .to_le_bytes();
        let midp = p.time.encode(ctx.now_us).to_le_bytes();
        let ver = p.version.0.to_le_bytes();
        let mut vers = [0u8; 4 * 32];
        for (c, v) in vers.chunks_exact_mut(4).zip(ctx.vers) {
            c.copy_from_slice(&v.0.to_le_bytes());
        }
        let vers = &vers[..4 * ctx.vers.len().min(32)];
        let root = self.tree.root();
        let srep_buf = &mut self.signed[ctx_len..];
        let srep_len = match (p.ver_place, p.nonce_place) {
            (VerPlace::Srep, _) => wire::write_message(
                srep_buf,
                &[
                    (Tag::VER, &ver),
                    (Tag::RADI, &radi),
                    (Tag::MIDP, &midp),
                    (Tag::VERS, vers),
                    (Tag::ROOT, root),
                ],
            )?,
            (_, NoncePlace::Srep) => wire::write_message(
                srep_buf,
                &[
                    (Tag::NONC, nonce),
                    (Tag::RADI, &radi),
                    (Tag::MIDP, &midp),
                    (Tag::ROOT, root),
                ],
            )?,
            _ => wire::write_message(
                srep_buf,
                &[(Tag::RADI, &radi), (Tag::MIDP, &midp), (Tag::ROOT, root)],
            )?,
        };
        let path_len = self.tree.depth() * p.hash_len();
        let mut tags = [(Tag(0), 0usize); 8];
        let mut n = 0;
        for (tag, len) in [
            (Tag::SIG, p.scheme.signature_len()),
            (
                Tag::VER,
                if p.ver_place == VerPlace::TopLevel {
                    4
                } else {
                    usize::MAX
                },
            ),
            (
                Tag::NONC,
                if self.nonce_top_level(p) {
                    nonce.len()
                } else {
                    usize::MAX
                },
            ),
            (Tag::TYPE, if p.type_tag { 4 } else { usize::MAX }),
            (Tag::PATH, path_len),
            (Tag::SREP, srep_len),
            (Tag::CERT, ctx.cert.bytes().len()),
            (Tag::INDX, 4),
        ] {
            if len != usize::MAX {
                tags[n] = (tag, len);
                n += 1;
            }
        }
        let header_len = wire::write_header(&mut self.head[..HEADER_MAX], &tags[..n])?;
        // One signature for the whole chunk, over SREP under the context,
        // right after the header it is the first value of.
        let sig_len = p.scheme.signature_len();
        ctx.online.sign_into(
            &self.signed[..ctx_len + srep_len],
            ctx_len,
            &mut self.head[header_len..header_len + sig_len],
        );
        let layout = Layout {
            head_len: header_len + sig_len,
            srep_at: ctx_len,
            srep_len,
        };
        // `base` assumed the profile's nonce length; draft 03 accepts another.
        debug_assert_eq!(
            base + path_len,
            framing(p) + wire::message_len(tags[..n].iter().map(|t| t.1))
        );
        Ok(layout)
    }

    fn nonce_top_level(&self, p: &Profile) -> bool {
        p.nonce_place == NoncePlace::TopLevel
            || (p.nonce_place == NoncePlace::Absent && self.options.google_nonce)
    }

    fn write_one(
        &self,
        ctx: &BatchContext<'_>,
        layout: &Layout,
        r: &Request<'_>,
        index: usize,
        out: &mut [u8],
    ) -> Result<usize, RespondError> {
        let p = ctx.profile;
        let path_len = self.tree.depth() * p.hash_len();
        let body_len = layout.head_len
            + if p.ver_place == VerPlace::TopLevel {
                4
            } else {
                0
            }
            + if self.nonce_top_level(p) {
                r.nonce.len()
            } else {
                0
            }
            + if p.type_tag { 4 } else { 0 }
            + path_len
            + layout.srep_len
            + ctx.cert.bytes().len()
            + 4;
        let start = framing(p);
        let out = out
            .get_mut(..start + body_len)
            .ok_or(RespondError::NoRoom)?;
        if start > 0 {
            wire::write_frame_header(out, body_len)?;
        }
        let mut w = Writer { out, pos: start };
        w.put(&self.head[..layout.head_len]);
        if p.ver_place == VerPlace::TopLevel {
            w.put(&p.version.0.to_le_bytes());
        }
        if self.nonce_top_level(p) {
            w.put(r.nonce);
        }
        if p.type_tag {
            w.put(&1u32.to_le_bytes());
        }
        self.tree.write_path(index, w.take(path_len));
        w.put(&self.signed[layout.srep_at..layout.srep_at + layout.srep_len]);
        w.put(ctx.cert.bytes());
        w.put(&(index as u32).to_le_bytes());
        Ok(w.pos)
    }
}

/// Bytes before the message: the ROUGHTIM header for packet profiles.
fn framing(p: &Profile) -> usize {
    match p.framing {
        crate::profile::Framing::Packet => PACKET_HEADER,
        crate::profile::Framing::Bare => 0,
    }
}

/// Response length with an empty PATH, for a request with a nonce of
/// `nonce_len` bytes and `n_vers` VERS entries.
fn base_len(p: &Profile, nonce_len: usize, n_vers: usize, google_nonce: bool) -> usize {
    let ver_top = p.ver_place == VerPlace::TopLevel;
    let nonce_top = p.nonce_place == NoncePlace::TopLevel
        || (p.nonce_place == NoncePlace::Absent && google_nonce);
    let srep = match (p.ver_place, p.nonce_place) {
        (VerPlace::Srep, _) => wire::message_len([4, 4, 8, 4 * n_vers, p.hash_len()]),
        (_, NoncePlace::Srep) => wire::message_len([nonce_len, 4, 8, p.hash_len()]),
        _ => wire::message_len([4, 8, p.hash_len()]),
    };
    let lens = [
        Some(p.scheme.signature_len()),
        ver_top.then_some(4),
        nonce_top.then_some(nonce_len),
        p.type_tag.then_some(4),
        Some(0),
        Some(srep),
        Some(p.scheme.cert_len()),
        Some(4),
    ];
    framing(p) + wire::message_len(lens.into_iter().flatten())
}

/// PATH entries for a tree of `n` leaves (the padded tree's height).
fn depth_for(n: usize) -> usize {
    if n <= 1 {
        0
    } else {
        (usize::BITS - (n - 1).leading_zeros()) as usize
    }
}

fn vers_ok(vers: &[Version], v: Version) -> bool {
    vers.len() <= 32 && vers.windows(2).all(|w| w[0] < w[1]) && vers.contains(&v)
}

struct Writer<'a> {
    out: &'a mut [u8],
    pos: usize,
}

impl Writer<'_> {
    fn put(&mut self, b: &[u8]) {
        self.out[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }

    fn take(&mut self, n: usize) -> &mut [u8] {
        let s = &mut self.out[self.pos..self.pos + n];
        self.pos += n;
        s
    }
}

/// Grease (RFC 10049 §7): make a written response deliberately invalid by
/// flipping a bit of its SREP signature, so clients that skip verification
/// are caught. Only the signature is touched: a greased response never
/// carries a wrong time under a valid signature. `bit` picks which of the
/// signature's bits. Returns false if `response` is not a response of `profile`.
pub fn grease_signature(profile: &Profile, response: &mut [u8], bit: u16) -> bool {
    let start = framing(profile);
    let Some(msg) = response.get(start..) else {
        return false;
    };
    let Ok(m) = wire::Message::parse(msg) else {
        return false;
    };
    let len = profile.scheme.signature_len();
    let Some(sig) = m.get(Tag::SIG).filter(|s| s.len() == len) else {
        return false;
    };
    let at = start + (sig.as_ptr() as usize - msg.as_ptr() as usize) + usize::from(bit / 8) % len;
    response[at] ^= 1 << (bit % 8);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_matches_the_padded_tree() {
        assert_eq!(depth_for(1), 0);
        assert_eq!(depth_for(2), 1);
        assert_eq!(depth_for(3), 2);
        assert_eq!(depth_for(4), 2);
        assert_eq!(depth_for(5), 3);
        assert_eq!(depth_for(1024), 10);
        assert_eq!(depth_for(1025), 11);
    }

    #[test]
    fn base_lengths_match_the_spec_sizes() {
        // Google 360 without NONC, 432 with; 08–11: 392; 14+/v1 with one
        // VERS entry: 416, two: 420; 12–13 with one: 404.
        let p = |name| Profile::by_name(name).unwrap();
        assert_eq!(base_len(Profile::google(), 64, 0, false), 360);
        assert_eq!(base_len(Profile::google(), 64, 0, true), 360 + 72);
        assert_eq!(base_len(p("draft-11"), 32, 0, false), 392);
        assert_eq!(base_len(Profile::rfc(), 32, 1, false), 416);
        assert_eq!(base_len(Profile::rfc(), 32, 2, false), 420);
        assert_eq!(base_len(p("draft-12"), 32, 1, false), 404);
        // Deployed 0x80000003 with a 32-byte nonce needs 32 bytes less.
        assert_eq!(
            base_len(p("draft-03"), 64, 0, false) - base_len(p("draft-03"), 32, 0, false),
            32
        );
    }
}
