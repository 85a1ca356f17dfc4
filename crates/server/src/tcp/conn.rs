//! One connection's handler: read whatever the peer has sent, answer every
//! complete frame in it, write the responses back in one go, repeat.
//!
//! The requests that arrive in one read are answered together, so a client
//! that pipelines gets one signature for its burst, while a client that
//! sends one request and waits is answered at once; nothing waits for a
//! batch to fill. Runs of consecutive requests with the same (profile,
//! identity) share a tree, which keeps the responses in request order
//! (§6.7 allows any order; in order is what a simple client expects).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrayvec::ArrayVec;
use gnomon_protocol::responder::RespondError;
use gnomon_protocol::wire::PACKET_HEADER;
use gnomon_protocol::{Profile, Request, RequestError, Responder, ResponseSink};

use super::frame::{scan, Scan};
use super::{bump, Close, Counters, Shared};
use crate::grease::Greaser;
use crate::keys::{Choice, KeyEpoch};
use crate::stats::Drop;

/// Requests answered per responder call at most.
const BURST: usize = 64;
/// Smallest read buffer: room for several 1024-byte requests, so that a
/// pipelining client's burst is read, and signed, together.
const MIN_BUFFER: usize = 8 * 1024;
/// `set_read_timeout` refuses zero; a deadline this close counts as passed.
const MIN_WAIT: Duration = Duration::from_millis(1);

/// Serve `stream` until it closes, then count why and shut it.
pub(super) fn serve(stream: Arc<TcpStream>, id: u64, shared: &Shared) {
    let why = Conn::new(&stream, shared).run();
    // Counted before the peer can see the end of the stream.
    shared.finished(id, why);
    let _ = stream.shutdown(Shutdown::Both);
}

struct Conn<'s> {
    stream: &'s TcpStream,
    shared: &'s Shared,
    /// Received bytes; `inbuf[..filled]` is not yet answered.
    inbuf: Vec<u8>,
    filled: usize,
    /// Responses of the current read, in order.
    out: Vec<u8>,
    responder: Responder,
    /// Grease choices.
    greaser: Greaser,
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
        // The responder cuts this to the request's length; the buffer holds
        // at least every request of the read, so it never runs short.
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
    fn new(stream: &'s TcpStream, shared: &'s Shared) -> Conn<'s> {
        // Any complete frame fits, so a partial frame never fills the buffer.
        let size = (PACKET_HEADER + shared.config.max_frame).max(MIN_BUFFER);
        Conn {
            stream,
            shared,
            inbuf: vec![0; size],
            filled: 0,
            // Responses are never longer than their requests.
            out: vec![0; size],
            responder: Responder::new(
                shared.worker.max_batch.clamp(1, BURST),
                shared.worker.options,
            ),
            greaser: Greaser::new(shared.worker.grease_per_million),
        }
    }

    fn stopping(&self) -> bool {
        self.shared.stop.load(Ordering::Relaxed)
    }

    /// Read and answer until something ends the connection.
    fn run(&mut self) -> Close {
        let config = &self.shared.config;
        let _ = self.stream.set_nodelay(true);
        if self
            .stream
            .set_write_timeout(Some(config.read_timeout.max(MIN_WAIT)))
            .is_err()
        {
            return Close::Peer;
        }
        let mut last_request = Instant::now();
        // When the first byte of the unfinished frame arrived.
        let mut frame_start: Option<Instant> = None;
        loop {
            if self.stopping() {
                return Close::Shutdown;
            }
            let (deadline, expired) = match frame_start {
                Some(t) => (t + config.read_timeout, Close::ReadTimeout),
                None => (last_request + config.idle_timeout, Close::Idle),
            };
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
            self.filled += n;
            let (frames, closing) = self.answer();
            if frames > 0 {
                last_request = now;
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
        if self.stopping() {
            Close::Shutdown
        } else {
            Close::Peer
        }
    }

    /// Answer every complete frame in the buffer and write the responses.
    /// Returns the frames taken and, when the connection must close, why.
    fn answer(&mut self) -> (usize, Option<Close>) {
        let shared = self.shared;
        let counters = &shared.counters;
        let keys = shared.keys.load();
        let answering = shared.clock.answering.load(Ordering::Relaxed);
        let now_us = now_us();
        let radius_us = shared
            .clock
            .radius_us
            .load(Ordering::Relaxed)
            .min(u64::from(u32::MAX)) as u32;
        let mut out_len = 0;
        let mut pos = 0;
        let mut frames = 0;
        let mut closing = None;
        loop {
            let mut slots: ArrayVec<Slot<'_>, BURST> = ArrayVec::new();
            while !slots.is_full() && closing.is_none() {
                let len = match scan(&self.inbuf[pos..self.filled], shared.config.max_frame) {
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
                bump(&counters.requests);
                if let Some(slot) = accept(shared, &keys, answering, frame) {
                    slots.push(slot);
                }
            }
            let more = slots.is_full();
            let mut start = 0;
            while start < slots.len() {
                let (profile, who) = (slots[start].request.profile, slots[start].identity);
                let end = start
                    + slots[start..]
                        .iter()
                        .take_while(|s| s.request.profile.id == profile.id && s.identity == who)
                        .count();
                let identity = &keys.identities[who];
                let mut run: ArrayVec<Request<'_>, BURST> = ArrayVec::new();
                run.extend(slots[start..end].iter().map(|s| s.request));
                let ctx = identity.batch(profile, now_us, radius_us, &shared.worker.vers);
                let mut sink = Sink {
                    out: &mut self.out,
                    len: &mut out_len,
                    counters,
                    profile,
                    greaser: &mut self.greaser,
                };
                let done = self.responder.respond(&ctx, &run, &mut sink);
                counters
                    .signatures
                    .fetch_add(done.signatures as u64, Ordering::Relaxed);
                counters.responses[usize::from(profile.id.0)]
                    .fetch_add(done.responses as u64, Ordering::Relaxed);
                start = end;
            }
            if !more {
                break;
            }
        }
        // What was complete before a bad header is still answered.
        if out_len > 0 && self.stream.write_all(&self.out[..out_len]).is_err() {
            closing = Some(if self.stopping() {
                Close::Shutdown
            } else {
                Close::WriteFailed
            });
        }
        self.inbuf.copy_within(pos..self.filled, 0);
        self.filled -= pos;
        (frames, closing)
    }
}

/// Parse one frame and pick its identity; `None` when it is dropped
/// (counted here). The connection goes on either way: the frame was well
/// delimited, so the stream is still in step.
fn accept<'a>(
    shared: &Shared,
    keys: &KeyEpoch,
    answering: bool,
    frame: &'a [u8],
) -> Option<Slot<'a>> {
    let counters = &shared.counters;
    let request = match shared.acceptor.parse(frame) {
        Ok(r) => r,
        Err(RequestError::Unsupported) if shared.worker.acceptor.parse(frame).is_ok() => {
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
    };
    Some(Slot { identity, request })
}
