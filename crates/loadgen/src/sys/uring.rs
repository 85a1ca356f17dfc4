//! The do-nothing responder over io_uring: one multishot `RecvMsg` that the
//! kernel feeds from a ring of provided buffers, and one `SendMsg` per
//! datagram back to its sender, all queued replies submitted by the same
//! `io_uring_enter` that waits for the next completions.
//!
//! ```text
//!  buffer ring (BUFFERS × BUF_SIZE) ─▶ multishot RecvMsg ─▶ CQE(bid)
//!        ▲                                                     │
//!        └──── buffer back to the ring ◀── CQE(send) ◀── SendMsg(reply → name in buffer bid)
//! ```
//!
//! A reply's destination address is read by the kernel straight from the
//! receive buffer it was delivered in, so a buffer goes back to the ring
//! only when its reply's completion arrives. Nothing is allocated after
//! [`Uring::new`].

use std::io;
use std::mem::{self, MaybeUninit};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::time::{Duration, Instant};

use io_uring::types::{BufRingEntry, Fd, RecvMsgOut, SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, squeue, IoUring};

/// Provided buffers; a power of two, as the buffer ring requires. It also
/// bounds the replies in flight.
const BUFFERS: u16 = 256;
/// One provided buffer: the kernel's 16-byte `io_uring_recvmsg_out`, the
/// sender's address (`NAME_LEN`), then the datagram (longer ones are cut,
/// and still answered).
const BUF_SIZE: usize = 2048;
/// The buffer group the multishot receive draws from.
const GROUP: u16 = 0;
const NAME_LEN: usize = size_of::<libc::sockaddr_storage>();
/// Where the sender's address starts in a buffer: after the kernel's
/// `io_uring_recvmsg_out` (four u32s).
const NAME_AT: usize = 16;
/// Submission queue: room for every reply plus the receive and a cancel.
const SQ_ENTRIES: u32 = 512;
/// Completion queue: a receive and a send completion per buffer, twice over.
const CQ_ENTRIES: u32 = 4 * BUFFERS as u32;
/// Completions taken off the queue at a time.
const REAP: usize = 128;
/// `user_data` of the multishot receive; a send carries its buffer id.
const RECV: u64 = u64::MAX;
const CANCEL: u64 = u64::MAX - 1;
/// How long a blocked worker waits before it looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);
/// How long a stopping worker waits for the kernel to finish with its
/// buffers before it gives up on a clean drain.
const DRAIN: Duration = Duration::from_secs(1);

const _: () = assert!(BUFFERS.is_power_of_two());
const _: () = assert!(BUF_SIZE > NAME_AT + NAME_LEN + 1024);
const _: () = assert!(SQ_ENTRIES as usize >= BUFFERS as usize + 2);

/// The buffer ring's entries: one page, as the kernel requires it aligned.
#[repr(C, align(4096))]
struct RingPage([u64; 2 * BUFFERS as usize]);

const _: () = assert!(size_of::<RingPage>() == BUFFERS as usize * 16);

/// One worker's ring, set up by the thread that binds and still disabled:
/// the worker thread enables it and so becomes its only submitter.
pub(crate) struct Uring {
    // Dropped first: closing the ring ends the kernel's use of the memory
    // below.
    ring: IoUring,
    entries: Box<RingPage>,
    bufs: Box<[u8]>,
}

impl Uring {
    /// Set up a ring with its provided buffers registered. io_uring being
    /// unavailable (no kernel support, `kernel.io_uring_disabled`, a seccomp
    /// filter) is an `Unsupported` error that says so.
    pub(crate) fn new() -> io::Result<Uring> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_r_disabled()
            .setup_cqsize(CQ_ENTRIES)
            .build(SQ_ENTRIES)
            .or_else(|e| match e.raw_os_error() {
                // Before Linux 6.1: no deferred task work; run it as usual.
                Some(libc::EINVAL) => IoUring::builder()
                    .setup_r_disabled()
                    .setup_cqsize(CQ_ENTRIES)
                    .build(SQ_ENTRIES),
                _ => Err(e),
            })
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ENOSYS | libc::EPERM | libc::EACCES) => unsupported("io_uring_setup", e),
                _ => e,
            })?;
        let mut uring = Uring {
            ring,
            entries: Box::new(RingPage([0; 2 * BUFFERS as usize])),
            bufs: vec![0; BUFFERS as usize * BUF_SIZE].into_boxed_slice(),
        };
        let mut tail = 0;
        for bid in 0..BUFFERS {
            uring.give_back(&mut tail, bid);
        }
        uring.publish(tail);
        let ring_addr = uring.entries.0.as_ptr() as u64;
        // SAFETY: `entries` is one page-aligned page of BUFFERS entries, and
        // every buffer it names lies in `bufs`; both are heap allocations
        // owned by this struct that do not move and are freed only after
        // `ring` (declared first) is closed, which unregisters the group.
        unsafe {
            uring
                .ring
                .submitter()
                .register_buf_ring_with_flags(ring_addr, BUFFERS, GROUP, 0)
        }
        .map_err(|e| match e.raw_os_error() {
            Some(libc::EINVAL) => unsupported("provided buffer rings (Linux 5.19+)", e),
            _ => e,
        })?;
        Ok(uring)
    }

    /// Append buffer `bid` to the buffer ring at `*tail` (not yet visible to
    /// the kernel: see `publish`).
    fn give_back(&mut self, tail: &mut u16, bid: u16) {
        let slot = (*tail & (BUFFERS - 1)) as usize;
        let base: *mut BufRingEntry = self.entries.0.as_mut_ptr().cast();
        let addr = self.bufs.as_ptr() as u64 + u64::from(bid) * BUF_SIZE as u64;
        // SAFETY: slot < BUFFERS, so the entry lies inside the page;
        // BufRingEntry is the kernel's 16-byte io_uring_buf, and the setters
        // do not touch the `resv` field that doubles as the tail in entry 0.
        // The kernel only reads entries between its head and the published
        // tail, which this slot is not.
        let e = unsafe { &mut *base.add(slot) };
        e.set_addr(addr);
        e.set_len(BUF_SIZE as u32);
        e.set_bid(bid);
        *tail = tail.wrapping_add(1);
    }

    /// Make every entry appended up to `tail` visible to the kernel.
    fn publish(&self, tail: u16) {
        let base: *const BufRingEntry = self.entries.0.as_ptr().cast();
        // SAFETY: `base` is the first entry of the registered ring, so
        // `tail` returns its tail field, a u16 aligned to 2 inside the page;
        // the kernel reads it concurrently, so it is written atomically, with
        // release ordering after the entries.
        let t = unsafe { &*(BufRingEntry::tail(base) as *const AtomicU16) };
        t.store(tail, Ordering::Release);
    }

    /// Answer every datagram on `fd` with `reply` until `stop` is set or
    /// `end` passes; returns (received, replied).
    pub(crate) fn serve(
        mut self,
        fd: RawFd,
        reply: &[u8],
        stop: &AtomicBool,
        end: Option<Instant>,
    ) -> (u64, u64) {
        // The worker thread becomes the ring's single issuer. This cannot
        // fail on a ring `new` set up; if it does, the run cannot go on.
        if let Err(e) = self.ring.submitter().register_enable_rings() {
            panic!("io_uring: cannot enable the ring in the worker: {e}");
        }
        // One iovec for every reply: the same bytes each time.
        let mut iov = libc::iovec {
            iov_base: reply.as_ptr() as *mut libc::c_void,
            iov_len: reply.len(),
        };
        let bufs = self.bufs.as_mut_ptr();
        // SAFETY: zeroed msghdrs are valid (null pointers, zero lengths).
        let mut sends: [libc::msghdr; BUFFERS as usize] = unsafe { mem::zeroed() };
        for (bid, m) in sends.iter_mut().enumerate() {
            m.msg_iov = &mut iov;
            m.msg_iovlen = 1;
            // SAFETY: bid * BUF_SIZE + NAME_AT + NAME_LEN < bufs.len().
            m.msg_name = unsafe { bufs.add(bid * BUF_SIZE + NAME_AT) }.cast();
        }
        // SAFETY: as above. Only the name and control lengths matter to a
        // multishot receive.
        let mut recv_hdr: libc::msghdr = unsafe { mem::zeroed() };
        recv_hdr.msg_namelen = NAME_LEN as libc::socklen_t;
        let mut st = State {
            fd,
            tail: BUFFERS,
            armed: false,
            pause: false,
            free: BUFFERS,
            sending: 0,
            received: 0,
            replied: 0,
        };
        let ts = Timespec::new().nsec(STOP_POLL.as_nanos() as u32);
        let args = SubmitArgs::new().timespec(&ts);
        let mut reaped = [const { MaybeUninit::<cqueue::Entry>::uninit() }; REAP];
        let running = || !stop.load(Ordering::Relaxed) && end.is_none_or(|e| Instant::now() < e);
        let mut drain_until = None;
        loop {
            if drain_until.is_none() && !running() {
                if st.armed {
                    let cancel = opcode::AsyncCancel::new(RECV).build().user_data(CANCEL);
                    self.push(&cancel);
                }
                drain_until = Some(Instant::now() + DRAIN);
            }
            if let Some(d) = drain_until {
                if (!st.armed && st.sending == 0) || Instant::now() >= d {
                    break;
                }
            } else if !st.armed && st.free > 0 {
                if st.pause {
                    // A receive error ended the last one: pause so a
                    // persistent error cannot spin a core.
                    std::thread::sleep(Duration::from_millis(1));
                    st.pause = false;
                }
                let recv = opcode::RecvMsgMulti::new(Fd(fd), &recv_hdr, GROUP)
                    .build()
                    .user_data(RECV);
                self.push(&recv);
                st.armed = true;
            }
            // One system call: submit every queued reply (and a receive, if
            // re-armed) and wait for at least one completion.
            match self.ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR)) => {}
                // EBUSY: completions must be reaped first, which is next.
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => panic!("io_uring_enter: {e}"),
            }
            let before = st.tail;
            loop {
                let cqes = self.ring.completion().fill(&mut reaped);
                if cqes.is_empty() {
                    break;
                }
                for cqe in cqes.iter() {
                    self.complete(cqe, &mut st, &mut sends, &recv_hdr);
                }
            }
            if st.tail != before {
                self.publish(st.tail);
            }
        }
        let Uring {
            ring,
            entries,
            bufs,
        } = self;
        drop(ring);
        if st.armed || st.sending > 0 {
            // The kernel did not finish with every buffer in time (a reply
            // stuck behind a full send buffer, say). Closing the ring
            // cancels what is left, but not necessarily before close
            // returns, so the memory it may still touch is leaked, not
            // freed: at most ≈ 0.5 MiB, once per stuck worker and run.
            Box::leak(entries);
            Box::leak(bufs);
        }
        (st.received, st.replied)
    }

    fn complete(
        &mut self,
        cqe: &cqueue::Entry,
        st: &mut State,
        sends: &mut [libc::msghdr; BUFFERS as usize],
        recv_hdr: &libc::msghdr,
    ) {
        let (res, flags) = (cqe.result(), cqe.flags());
        match cqe.user_data() {
            CANCEL => {}
            RECV => {
                if !cqueue::more(flags) {
                    st.armed = false;
                    // ENOBUFS: every buffer holds a reply in flight; the
                    // receive is re-armed once one comes back. ECANCELED:
                    // the stop. Anything else is an error to pause on.
                    st.pause = res < 0 && res != -libc::ENOBUFS && res != -libc::ECANCELED;
                }
                let Some(bid) = cqueue::buffer_select(flags) else {
                    return;
                };
                st.free -= 1;
                st.received += 1;
                let at = usize::from(bid) * BUF_SIZE;
                let used = usize::try_from(res).unwrap_or(0).min(BUF_SIZE);
                // SAFETY: the kernel handed buffer `bid` over with this
                // completion and writes no more into it until it is given
                // back; `used` bytes of it were written.
                let buf = unsafe { std::slice::from_raw_parts(self.bufs.as_ptr().add(at), used) };
                let name_len =
                    RecvMsgOut::parse(buf, recv_hdr).map_or(0, |out| out.name_data().len());
                if name_len == 0 {
                    // No sender to answer: the buffer goes straight back.
                    self.give_back(&mut st.tail, bid);
                    st.free += 1;
                    return;
                }
                let m = &mut sends[usize::from(bid)];
                m.msg_namelen = name_len as libc::socklen_t;
                let send = opcode::SendMsg::new(Fd(st.fd), m)
                    .build()
                    .user_data(u64::from(bid));
                self.push(&send);
                st.sending += 1;
            }
            bid => {
                st.sending -= 1;
                if res >= 0 {
                    st.replied += 1;
                }
                self.give_back(&mut st.tail, bid as u16);
                st.free += 1;
            }
        }
    }

    /// Queue `entry`, submitting what is queued first if the queue is full.
    fn push(&mut self, entry: &squeue::Entry) {
        loop {
            // SAFETY: every pointer in the entries queued here (msghdrs,
            // their iovec and names, the reply bytes) lives in `serve`'s
            // frame, in `self`, or in the caller's reply, all of which
            // outlive the operation: `serve` waits for every send and the
            // receive to complete before it returns.
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                return;
            }
            if let Err(e) = self.ring.submit() {
                if e.raw_os_error() != Some(libc::EBUSY) {
                    panic!("io_uring_enter: {e}");
                }
            }
        }
    }
}

/// What a worker's loop tracks.
struct State {
    fd: RawFd,
    /// The buffer ring's tail as this side has written it.
    tail: u16,
    /// A multishot receive is active.
    armed: bool,
    /// The last receive ended on an error.
    pause: bool,
    /// Buffers in the ring, available to the receive.
    free: u16,
    /// Replies submitted and not yet completed.
    sending: u16,
    received: u64,
    replied: u64,
}

fn unsupported(what: &str, e: io::Error) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("io_uring is unavailable here ({what}: {e}); use --backend recvmmsg"),
    )
}
