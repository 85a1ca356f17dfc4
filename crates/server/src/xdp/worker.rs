//! One AF_XDP worker: the socket worker's run-to-completion loop with the
//! kernel's socket path replaced by one queue's rings. Frames are read
//! from the receive ring, their UDP payloads loaded into the same batch
//! the socket worker fills, answered by the same [`Worker::respond`], and
//! each reply written over its request's frame (a reply is never longer
//! than its request) and put on the send ring. Nothing is allocated after
//! [`XdpWorker::run`] starts.

use std::io;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::sources::SourceFilter;
use crate::stats::Drop;
use crate::sys::{RecvMeta, MAX_DATAGRAM};
use crate::worker::{Worker, WorkerState};

use super::frame::{self, Datagram, Refused};
use super::sys::{Frame, Xsk, RING};

/// How long a worker waits for frames before it looks at the stop flag
/// and ticks its heartbeat again, ms.
const IDLE_WAIT_MS: i32 = 100;

/// One queue's worker.
pub struct XdpWorker {
    /// The settings, keys, clock and counters every worker shares; its
    /// socket is never read here.
    pub worker: Worker,
    /// The queue's socket.
    pub xsk: Xsk,
}

impl From<Refused> for Drop {
    fn from(r: Refused) -> Drop {
        match r {
            Refused::Truncated => Drop::FrameTruncated,
            Refused::NotIp => Drop::FrameNotIp,
            Refused::NotUdp => Drop::FrameNotUdp,
            Refused::Fragment => Drop::FrameFragment,
            Refused::BadLength => Drop::FrameBadLength,
            Refused::BadChecksum => Drop::FrameBadChecksum,
            Refused::GroupSource => Drop::FrameGroupSource,
        }
    }
}

/// The loop's buffers, made once by [`XdpWorker::prepare`].
pub struct Rings {
    /// Frames read this round.
    rx: Vec<Frame>,
    /// For each batch slot, its frame and what it holds.
    slots: Vec<(Frame, Datagram)>,
    /// Which slots got a reply.
    answered: Vec<bool>,
    /// Replies to send.
    tx: Vec<Frame>,
    /// Frames that are ours and idle: given to the fill ring as it has room.
    free: Vec<u64>,
    /// Sent frames the completion ring gave back.
    done: Vec<u64>,
    /// When the receive ring was last seen empty: no frame read since
    /// arrived earlier.
    empty_at: Option<Instant>,
}

impl XdpWorker {
    /// Allocate everything the loop will use and give the kernel its
    /// frames to receive into.
    pub fn prepare(&mut self) -> (WorkerState, Rings) {
        // The frame's own destination decides, as on a wildcard socket.
        let state = self
            .worker
            .prepare_with(SourceFilter::for_socket(None, false));
        let cap = state.batch_capacity();
        let frames = self.xsk.frames();
        let mut rings = Rings {
            rx: vec![Frame::default(); cap],
            slots: Vec::with_capacity(cap),
            answered: vec![false; cap],
            tx: Vec::with_capacity(cap),
            free: (0..u64::from(frames))
                .map(|i| i * u64::from(super::sys::FRAME_SIZE))
                .collect(),
            done: vec![0; RING as usize],
            empty_at: None,
        };
        self.xsk.fill_from(&mut rings.free);
        (state, rings)
    }

    /// Run until the stop flag is set. An error only for a socket failure
    /// that will not go away.
    pub fn run(mut self) -> io::Result<()> {
        let (mut state, mut rings) = self.prepare();
        let mut last_publish = Instant::now();
        while !self.worker.stop.load(Ordering::Relaxed) {
            self.worker.heartbeat.tick();
            self.serve_once(&mut state, &mut rings)?;
            if let Some(n) = state
                .config()
                .fail_after
                .filter(|&n| state.stats.received >= n)
            {
                return Err(io::Error::other(format!(
                    "injected fault after {n} datagrams"
                )));
            }
            if last_publish.elapsed().as_millis() >= 200 {
                self.counters(&mut state);
                if let Ok(mut p) = self.worker.published.try_lock() {
                    *p = state.stats;
                    last_publish = Instant::now();
                }
            }
        }
        self.counters(&mut state);
        if let Ok(mut p) = self.worker.published.lock() {
            *p = state.stats;
        }
        Ok(())
    }

    fn counters(&self, state: &mut WorkerState) {
        if let Ok(k) = self.xsk.counters() {
            state.stats.xdp_ring_full = k.rx_ring_full;
            state.stats.xdp_kernel_dropped = k.rx_dropped + k.invalid;
            state.stats.xdp_fill_empty = k.fill_empty;
        }
    }

    /// `batch-wait`, as the socket worker does it: when a read found
    /// fewer frames than a batch holds, wait until the first of them has
    /// waited the configured time and read again, so one signature covers
    /// more requests at moderate load. A frame carries no receive time, so
    /// its arrival is taken as no earlier than when the ring was last seen
    /// empty (a read that came back short, or the wake-up from poll that
    /// the arrival caused): the wait never exceeds the configured one.
    /// Returns the frames now read.
    fn gather(
        &mut self,
        state: &mut WorkerState,
        r: &mut Rings,
        got: usize,
        read_at: Instant,
    ) -> usize {
        let cap = r.rx.len();
        let wait_ns = state.config().batch_wait_us.saturating_mul(1_000);
        let since = r.empty_at;
        if got < cap {
            r.empty_at = Some(read_at);
        }
        let (Some(since), true) = (since, got < cap && wait_ns > 0) else {
            return got;
        };
        let waited = read_at.saturating_duration_since(since).as_nanos() as u64;
        if waited >= wait_ns {
            return got;
        }
        let slept = Instant::now();
        std::thread::sleep(std::time::Duration::from_nanos(wait_ns - waited));
        state.stats.ns_batch_wait += slept.elapsed().as_nanos() as u64;
        let again = Instant::now();
        let more = self.xsk.receive(&mut r.rx[got..]);
        if got + more < cap {
            r.empty_at = Some(again);
        }
        got + more
    }

    /// Take back sent frames, read one batch of frames (waiting a while
    /// when there is none) and answer it. Allocates nothing.
    pub fn serve_once(&mut self, state: &mut WorkerState, r: &mut Rings) -> io::Result<()> {
        let t0 = Instant::now();
        let n = self.xsk.completed(&mut r.done);
        r.free.extend_from_slice(&r.done[..n]);
        self.xsk.fill_from(&mut r.free);
        let got = self.xsk.receive(&mut r.rx);
        if got == 0 {
            // Sends still queued in copy mode need the kick; then sleep in
            // poll, which also wakes the driver for the fill ring.
            let waiting = self.xsk.kick()?;
            // Replies still queued: come back soon rather than sleep.
            self.xsk.wait(if waiting { 1 } else { IDLE_WAIT_MS })?;
            // Woken by an arrival (or the timeout): what is read next came
            // no earlier than about now.
            r.empty_at = Some(Instant::now());
            state.stats.ns_syscalls += t0.elapsed().as_nanos() as u64;
            return Ok(());
        }
        let got = self.gather(state, r, got, t0);
        state.stats.xdp_received += got as u64;
        r.slots.clear();
        for &f in &r.rx[..got] {
            // A refused frame is a datagram received and dropped, as on
            // the socket path: received = answered + dropped holds.
            let Some(bytes) = self.xsk.bytes(f) else {
                state.stats.received += 1;
                state.stats.drop(Drop::FrameTruncated);
                r.free.push(f.addr);
                continue;
            };
            match frame::parse(bytes) {
                Ok(d) => {
                    let payload = &bytes[d.payload.clone()];
                    state.batch().load(
                        r.slots.len(),
                        payload,
                        RecvMeta {
                            len: payload.len(),
                            truncated: payload.len() > MAX_DATAGRAM,
                            from: d.from,
                            to: Some(d.to.ip()),
                            // No kernel receive stamp on this path: the
                            // ring's size bounds how long a frame waits.
                            rx_ns: None,
                        },
                    );
                    r.slots.push((f, d));
                }
                Err(why) => {
                    state.stats.received += 1;
                    state.stats.drop(why.into());
                    r.free.push(f.addr);
                }
            }
        }
        let loaded = r.slots.len();
        if loaded == 0 {
            return Ok(());
        }
        let count = self.worker.respond(state, loaded);
        r.answered[..loaded].fill(false);
        r.tx.clear();
        for k in 0..count {
            let (reply, src) = state.batch().reply(k);
            let (f, d) = &r.slots[src];
            let f = *f;
            let written = self
                .xsk
                .bytes(f)
                .and_then(|b| frame::reply_in_place(b, d, reply));
            match written {
                Some(len) => {
                    r.answered[src] = true;
                    r.tx.push(Frame {
                        addr: f.addr,
                        len: len as u32,
                    });
                }
                // Longer than the request: the responder never does this.
                None => state.stats.drop(Drop::TooSmall),
            }
        }
        for (k, (f, _)) in r.slots.iter().enumerate() {
            if !r.answered[k] {
                r.free.push(f.addr);
            }
        }
        let t_send = Instant::now();
        let mut sent = self.xsk.send(&r.tx);
        if sent < r.tx.len() {
            // The ring is full of earlier replies: push them out, take
            // back what went, and try once more before dropping.
            self.xsk.kick()?;
            let n = self.xsk.completed(&mut r.done);
            r.free.extend_from_slice(&r.done[..n]);
            sent += self.xsk.send(&r.tx[sent..]);
        }
        for f in &r.tx[sent..] {
            state.stats.drop(Drop::XdpSendFull);
            r.free.push(f.addr);
        }
        state.stats.xdp_sent += sent as u64;
        self.xsk.kick()?;
        state.stats.ns_syscalls += t_send.elapsed().as_nanos() as u64;
        Ok(())
    }
}
