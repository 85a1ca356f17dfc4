//! One connection's handler: read whatever the peer has sent, answer every
//! complete frame in it, write the responses back in one go, repeat.
//!
//! The requests that arrive in one read are answered together, so a client
//! that pipelines gets one signature for its burst, while a client that
//! sends one request and waits is answered at once; nothing waits for a
//! batch to fill. Runs of consecutive requests with the same (profile,
//! identity) share a tree, which keeps the responses in request order
//! (the drafts allow any order; in order is what a simple client expects).
//!
//! A response is not bounded by its request's length here (the peer's
//! address is proved), so the output buffer is not sized from the input:
//! runs are cut to what the buffer has room for, and it is written out
//! whenever it fills.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrayvec::ArrayVec;
use gnomon_protocol::responder::RespondError;
use gnomon_protocol::wire::PACKET_HEADER;
use gnomon_protocol::{
    Acceptor, Profile, ProfileSet, Request, RequestError, Responder, ResponseSink, Scheme,
};

use super::frame::{scan, Scan};
use super::{bump, tcp_acceptor, Close, ConnState, Counters, Place, Shared, TcpConfig};
use crate::grease::Greaser;
use crate::keys::{Choice, KeyEpoch};
use crate::limit::{SourceLimiter, Verdict};
use crate::settings::{udp_acceptor, WorkerConfig};
use crate::stats::Drop;

/// Requests answered per responder call at most.
const BURST: usize = 64;
/// Smallest read buffer: room for several 1024-byte requests, so that a
/// pipelining client's burst is read, and signed, together.
const MIN_BUFFER: usize = 8 * 1024;
/// `set_read_timeout` refuses zero; a deadline this close counts as passed.
const MIN_WAIT: Duration = Duration::from_millis(1);
/// Output room kept per Ed25519 response. The largest response of any
/// Ed25519 profile is about 1.2 KiB: header 64, SIG 64, VER 4, NONC ≤ 64,
/// TYPE 4, PATH ≤ 6 × 64 (runs of at most 64 requests), SREP ≤ 384,
/// CERT ≤ 200, INDX 4. A response that did not fit would be dropped as
/// `NoRoom` and counted.
const RESPONSE_ROOM: usize = 2048;
/// Output room kept per ML-DSA-44 response (version 0x90000001): SIG 2420
/// and CERT 3788 instead of 64 and 152, the rest as above: about 7.2 KiB.
const ML_DSA_RESPONSE_ROOM: usize = 8192;
/// Output buffer: several responses, so a pipelined burst is written in a
/// few syscalls.
const OUT_BUFFER: usize = 16 * RESPONSE_ROOM;

/// Room kept per response of `profile`.
fn response_room(profile: &Profile) -> usize {
    match profile.scheme {
        Scheme::Ed25519 => RESPONSE_ROOM,
        Scheme::MlDsa44 => ML_DSA_RESPONSE_ROOM,
    }
}

// Every room, with the largest header, SIG, CERT, SREP and PATH of its
// scheme, fits the output buffer, and the ML-DSA room its response.
const _: () = assert!(OUT_BUFFER >= ML_DSA_RESPONSE_ROOM);
const _: () = assert!(
    ML_DSA_RESPONSE_ROOM
        >= 64
            + Scheme::MlDsa44.signature_len()
            + Scheme::MlDsa44.cert_len()
            + 4
            + 64
            + 4
            + 6 * 64
            + 384
            + 4
);

/// Serve `stream` until it closes, then count why and shut it.
pub(super) fn serve(stream: Arc<TcpStream>, place: Place, state: Arc<ConnState>, shared: &Shared) {
    let why = Conn::new(&stream, shared, &state, place.source).run();
    // Counted before the peer can see the end of the stream.
    shared.finished(place, &state, why);
    let _ = stream.shutdown(Shutdown::Both);
}

struct Conn<'s> {
    stream: &'s TcpStream,
    shared: &'s Shared,
    /// Busy or idle, for the listener's choice of whom to evict.
    state: &'s ConnState,
    /// The settings at accept, kept for the connection's life.
    config: Arc<TcpConfig>,
    /// Received bytes; `inbuf[..filled]` is not yet answered.
    inbuf: Vec<u8>,
    filled: usize,
    /// Responses of the current read, in order, not yet written.
    out: Vec<u8>,
    out_len: usize,
    /// When the connection was accepted; it ends at `max_lifetime`.
    accepted: Instant,
    /// Frames taken so far; it ends at `max_requests`.
    frames: u32,
    responder: Responder,
    /// Grease choices.
    greaser: Greaser,
    /// The peer's address, judged by the allow and deny lists.
    peer: Option<IpAddr>,
    /// Its source prefix (`TcpConfig::source_prefix_v4`/`_v6`): whose
    /// share of the signature budget it spends.
    source: IpAddr,
    /// What the lists say of the peer, and the settings that said it.
    listed: (Arc<WorkerConfig>, Option<Verdict>),
}

/// What the allow and deny lists of `worker` say of `peer` (nothing for an
/// unknown peer: it is judged by the budget, as any untrusted one).
fn judge(worker: &WorkerConfig, peer: Option<IpAddr>) -> Option<Verdict> {
    SourceLimiter::lists_only(&worker.limit).listed(peer?)
}

/// A parsed request and the identity that answers it.
struct Slot<'a> {
    identity: usize,
    request: Request<'a>,
}

struct Sink<'a> {
    out: &'a mut [u8],
    len: &'a mut usize,
    counters: &'a Counters,
    profile: &'static Profile,
    greaser: &'a mut Greaser,
}

impl ResponseSink for Sink<'_> {
    fn buffer(&mut self, _i: usize) -> &mut [u8] {
        // Runs are cut so that `RESPONSE_ROOM` per response is left.
        &mut self.out[*self.len..]
    }

    fn finish(&mut self, _i: usize, result: Result<usize, RespondError>) {
        match result {
            Ok(n) => {
                let response = &mut self.out[*self.len..*self.len + n];
                if self.greaser.apply(self.profile, response) {
                    bump(&self.counters.greased);
                }
                *self.len += n;
            }
            Err(RespondError::OutsideDelegation) => {
                bump(&self.counters.drops[Drop::OutsideDelegation as usize])
            }
            Err(_) => bump(&self.counters.drops[Drop::TooSmall as usize]),
        }
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

impl<'s> Conn<'s> {
    fn new(
        stream: &'s TcpStream,
        shared: &'s Shared,
        state: &'s ConnState,
        source: IpAddr,
    ) -> Conn<'s> {
        let config = shared.config.load_full();
        let worker = shared.worker.load_full();
        let peer = stream.peer_addr().ok().map(|a| a.ip());
        let listed = judge(&worker, peer);
        // Any complete frame fits, so a partial frame never fills the buffer.
        let size = (PACKET_HEADER + config.max_frame).max(MIN_BUFFER);
        Conn {
            stream,
            shared,
            state,
            config,
            inbuf: vec![0; size],
            filled: 0,
            out: vec![0; OUT_BUFFER],
            out_len: 0,
            accepted: Instant::now(),
            frames: 0,
            responder: Responder::for_stream(worker.max_batch.clamp(1, BURST), worker.options),
            greaser: Greaser::new(worker.grease_per_million),
            peer,
            source,
            listed: (worker, listed),
        }
    }

    fn stopping(&self) -> bool {
        self.shared.stop.load(Ordering::Relaxed)
    }

    /// Read and answer until something ends the connection.
    fn run(&mut self) -> Close {
        let config = self.config.clone();
        let _ = self.stream.set_nodelay(true);
        let end_of_life = self.accepted + config.max_lifetime;
        // Restarted only by an answered request: empty or unanswerable
        // frames do not keep a connection alive.
        let mut last_answer = self.accepted;
        // When the first byte of the unfinished frame arrived.
        let mut frame_start: Option<Instant> = None;
        loop {
            if self.stopping() {
                return Close::Shutdown;
            }
            if self.state.was_evicted() {
                return Close::Evicted;
            }
            let (mut deadline, mut expired) = match frame_start {
                Some(t) => (t + config.read_timeout, Close::ReadTimeout),
                None => (last_answer + config.idle_timeout, Close::Idle),
            };
            if end_of_life < deadline {
                (deadline, expired) = (end_of_life, Close::Lifetime);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left < MIN_WAIT {
                return expired;
            }
            if self.stream.set_read_timeout(Some(left)).is_err() {
                return Close::Peer;
            }
            let n = match self.stream.read(&mut self.inbuf[self.filled..]) {
                Ok(0) => return self.ended(),
                Ok(n) => n,
                Err(e) => match e.kind() {
                    // The deadline is checked at the top of the loop.
                    io::ErrorKind::WouldBlock
                    | io::ErrorKind::TimedOut
                    | io::ErrorKind::Interrupted => continue,
                    _ => return self.ended(),
                },
            };
            let now = Instant::now();
            if self.filled == 0 {
                frame_start = Some(now);
            }
            self.state.busy();
            self.filled += n;
            let (frames, answered, closing) = self.answer(end_of_life);
            if self.filled == 0 {
                // Everything read is taken: idle until the next byte. Only
                // an answer makes it recent (empty frames do not).
                self.state.idle((answered > 0).then(|| self.shared.tick()));
            }
            if answered > 0 {
                last_answer = Instant::now();
            }
            if frames > 0 {
                frame_start = (self.filled > 0).then_some(now);
            }
            if let Some(why) = closing {
                return why;
            }
        }
    }

    /// The stream ended from the other side, or because we are stopping
    /// (shutdown wakes a blocked read with an end of stream).
    fn ended(&self) -> Close {
        if self.state.was_evicted() {
            Close::Evicted
        } else if self.stopping() {
            Close::Shutdown
        } else {
            Close::Peer
        }
    }

    /// Answer every complete frame in the buffer and write the responses.
    /// Returns the frames taken, the responses written and, when the
    /// connection must close, why.
    fn answer(&mut self, end_of_life: Instant) -> (usize, usize, Option<Close>) {
        let shared = self.shared;
        let counters = &shared.counters;
        let keys = shared.keys.load();
        // A reload reaches open connections at their next read.
        let worker = shared.worker.load();
        self.responder.set_options(worker.options);
        if !Arc::ptr_eq(&self.listed.0, &worker) {
            self.listed = (Arc::clone(&worker), judge(&worker, self.peer));
        }
        let (denied, trusted) = match self.listed.1 {
            Some(Verdict::Denied) => (true, false),
            Some(Verdict::Trusted) => (false, true),
            _ => (false, false),
        };
        self.greaser.set_per_million(worker.grease_per_million);
        // Narrowed to what some identity held now can sign, so a request
        // offering several versions is answered in one that can be.
        let signable = Acceptor {
            profiles: ProfileSet(worker.acceptor.profiles.0 & keys.profiles.0),
            ..worker.acceptor
        };
        let acceptors = (
            tcp_acceptor(&signable),
            udp_acceptor(&worker.acceptor, keys.profiles),
        );
        let answering = shared.clock.answering.load(Ordering::Relaxed);
        let now_us = now_us();
        let radius_us = shared
            .clock
            .radius_us
            .load(Ordering::Relaxed)
            .min(u64::from(u32::MAX)) as u32;
        let timeout = self.config.write_timeout;
        let (max_requests, max_frame) = (self.config.max_requests.max(1), self.config.max_frame);
        let mut pos = 0;
        let mut frames = 0;
        let mut answered = 0;
        let mut closing = None;
        loop {
            let mut slots: ArrayVec<Slot<'_>, BURST> = ArrayVec::new();
            while !slots.is_full() && closing.is_none() {
                if self.frames >= max_requests {
                    closing = Some(Close::RequestCap);
                    break;
                }
                let len = match scan(&self.inbuf[pos..self.filled], max_frame) {
                    Scan::Frame(len) => len,
                    Scan::Partial => break,
                    Scan::BadMagic => {
                        closing = Some(Close::Framing);
                        break;
                    }
                    Scan::TooLarge => {
                        closing = Some(Close::FrameTooLarge);
                        break;
                    }
                };
                let frame = &self.inbuf[pos..pos + len];
                pos += len;
                frames += 1;
                self.frames += 1;
                bump(&counters.requests);
                if denied {
                    bump(&counters.drops[Drop::Denied as usize]);
                    continue;
                }
                if let Some(slot) = accept(shared, &acceptors, &keys, answering, frame) {
                    slots.push(slot);
                }
            }
            let more = slots.is_full();
            let mut start = 0;
            while start < slots.len() {
                let (profile, who) = (slots[start].request.profile, slots[start].identity);
                let room = (self.out.len() - self.out_len) / response_room(profile);
                if room == 0 {
                    if let Err(why) = flush(
                        self.stream,
                        shared,
                        &self.out[..self.out_len],
                        timeout,
                        end_of_life,
                    ) {
                        return (frames, answered, Some(why));
                    }
                    self.out_len = 0;
                    continue;
                }
                let end = start
                    + slots[start..]
                        .iter()
                        .take(room)
                        .take_while(|s| s.request.profile.id == profile.id && s.identity == who)
                        .count();
                let identity = &keys.identities[who];
                let mut run: ArrayVec<Request<'_>, BURST> = ArrayVec::new();
                run.extend(slots[start..end].iter().map(|s| s.request));
                // `accept` chose an identity of the profile's scheme.
                let Some(ctx) = identity.batch(profile, now_us, radius_us, &worker.vers) else {
                    for _ in start..end {
                        bump(&counters.drops[Drop::UnknownVersion as usize]);
                    }
                    start = end;
                    continue;
                };
                // One signature for the run: the budget decides whether an
                // untrusted peer's prefix has that much of its share left.
                let budget = (!trusted).then(|| shared.budget.admit(&worker.limit, self.source));
                let charged = match budget {
                    Some(Some(None)) => {
                        for _ in start..end {
                            bump(&counters.drops[Drop::SignatureBudget as usize]);
                        }
                        start = end;
                        continue;
                    }
                    Some(Some(Some(ticket))) => Some((ticket, Instant::now())),
                    // Trusted, or no budget: nothing to settle, no lock.
                    _ => None,
                };
                let mut sink = Sink {
                    out: &mut self.out,
                    len: &mut self.out_len,
                    counters,
                    profile,
                    greaser: &mut self.greaser,
                };
                let done = self.responder.respond(&ctx, &run, &mut sink);
                if let Some((ticket, t)) = charged {
                    shared.budget.settle(ticket, t.elapsed().as_nanos() as u64);
                }
                counters
                    .signatures
                    .fetch_add(done.signatures as u64, Ordering::Relaxed);
                counters.responses[usize::from(profile.id.0)]
                    .fetch_add(done.responses as u64, Ordering::Relaxed);
                answered += done.responses;
                start = end;
            }
            if !more {
                break;
            }
        }
        // What was complete before a bad header or the cap is still answered.
        if self.out_len > 0 {
            let written = flush(
                self.stream,
                shared,
                &self.out[..self.out_len],
                timeout,
                end_of_life,
            );
            self.out_len = 0;
            if let Err(why) = written {
                closing = Some(why);
            }
        }
        self.inbuf.copy_within(pos..self.filled, 0);
        self.filled -= pos;
        (frames, answered, closing)
    }
}

/// Write `out` in full before `now + write_timeout` (or the
/// end of the connection's life): the deadline covers the whole write,
/// so a peer that takes a byte now and then cannot stretch it.
fn flush(
    stream: &TcpStream,
    shared: &Shared,
    out: &[u8],
    timeout: Duration,
    end_of_life: Instant,
) -> Result<(), Close> {
    let (deadline, expired) = if end_of_life < Instant::now() + timeout {
        (end_of_life, Close::Lifetime)
    } else {
        (Instant::now() + timeout, Close::WriteTimeout)
    };
    // `Write` is implemented for `&TcpStream`; a local makes it mutable.
    let mut writer = stream;
    let mut done = 0;
    while done < out.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left < MIN_WAIT {
            return Err(expired);
        }
        if stream.set_write_timeout(Some(left)).is_err() {
            return Err(Close::WriteFailed);
        }
        match writer.write(&out[done..]) {
            Ok(0) => return Err(Close::WriteFailed),
            Ok(n) => done += n,
            Err(e) => match e.kind() {
                io::ErrorKind::WouldBlock
                | io::ErrorKind::TimedOut
                | io::ErrorKind::Interrupted => {}
                _ if shared.stop.load(Ordering::Relaxed) => return Err(Close::Shutdown),
                _ => return Err(Close::WriteFailed),
            },
        }
    }
    Ok(())
}

/// Parse one frame and pick its identity; `None` when it is dropped
/// (counted here). The connection goes on either way: the frame was well
/// delimited, so the stream is still in step.
/// `acceptors`: this transport's, and the datagrams' (to tell a UDP-only
/// version from garbage).
fn accept<'a>(
    shared: &Shared,
    acceptors: &(Acceptor, Acceptor),
    keys: &KeyEpoch,
    answering: bool,
    frame: &'a [u8],
) -> Option<Slot<'a>> {
    let counters = &shared.counters;
    let request = match acceptors.0.parse(frame) {
        Ok(r) => r,
        Err(RequestError::Unsupported) if acceptors.1.parse(frame).is_ok() => {
            // Answerable over UDP, in a version that has no TCP framing.
            bump(&counters.udp_only);
            return None;
        }
        Err(e) => {
            bump(&counters.drops[Drop::from(e) as usize]);
            return None;
        }
    };
    if !answering {
        bump(&counters.drops[Drop::Unsynchronized as usize]);
        return None;
    }
    let identity = match keys.choose(request.profile, request.srv) {
        Choice::Identity(k) => k,
        Choice::UnknownSrv => {
            bump(&counters.drops[Drop::UnknownSrv as usize]);
            return None;
        }
        Choice::SrvRequired => {
            bump(&counters.drops[Drop::SrvRequired as usize]);
            return None;
        }
        // No key here signs that version: as if it were not served.
        Choice::NoKeyForScheme => {
            bump(&counters.drops[Drop::UnknownVersion as usize]);
            return None;
        }
    };
    Some(Slot { identity, request })
}
