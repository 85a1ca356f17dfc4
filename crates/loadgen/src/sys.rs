//! Every system call std does not offer: batched UDP send and receive
//! (`sendmmsg`/`recvmmsg`), busy-polling socket options, a wait with
//! microsecond resolution (`ppoll`), process CPU time (`getrusage`), a stop
//! flag set by SIGINT/SIGTERM, and (in `uring`) the do-nothing responder's
//! io_uring backend. This module and its child are the only ones of the
//! crate with `unsafe`.
#![allow(unsafe_code)]

pub(crate) mod uring;

use std::io;
use std::mem;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Most datagrams moved by one `recvmmsg` or `sendmmsg`.
pub(crate) const BATCH: usize = 64;

/// Receive buffers for one `recvmmsg`, with the sender of each datagram so a
/// reply can go back to it. Allocated once; reused for every call.
pub(crate) struct RecvBatch {
    data: Vec<u8>,
    slot: usize,
    lens: [usize; BATCH],
    truncated: [bool; BATCH],
    peers: Box<[libc::sockaddr_storage; BATCH]>,
    peer_lens: [libc::socklen_t; BATCH],
}

impl RecvBatch {
    /// Room for `BATCH` datagrams of up to `slot` bytes each.
    pub(crate) fn new(slot: usize) -> RecvBatch {
        RecvBatch {
            data: vec![0; slot * BATCH],
            slot,
            lens: [0; BATCH],
            truncated: [false; BATCH],
            // SAFETY: sockaddr_storage is plain old data; all zeros is a valid
            // (unspecified-family) value.
            peers: Box::new([unsafe { mem::zeroed() }; BATCH]),
            peer_lens: [0; BATCH],
        }
    }

    /// Datagram `i` of the last receive; `None` if it did not fit the slot.
    pub(crate) fn datagram(&self, i: usize) -> Option<&[u8]> {
        if self.truncated[i] {
            return None;
        }
        let at = i * self.slot;
        Some(&self.data[at..at + self.lens[i]])
    }
}

/// Receive up to `BATCH` datagrams. With `wait_for_one`, block (up to the
/// socket's receive timeout) until the first arrives; otherwise never block.
/// `Ok(0)` means nothing was waiting (or the timeout passed).
pub(crate) fn recv_batch(
    sock: &impl AsRawFd,
    batch: &mut RecvBatch,
    wait_for_one: bool,
) -> io::Result<usize> {
    // SAFETY: both arrays are zeroed plain old data, filled in below.
    let mut iovs: [libc::iovec; BATCH] = unsafe { mem::zeroed() };
    // SAFETY: as above.
    let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { mem::zeroed() };
    let base = batch.data.as_mut_ptr();
    for i in 0..BATCH {
        // SAFETY: i * slot + slot <= data.len(), so the pointer stays inside
        // the allocation.
        iovs[i].iov_base = unsafe { base.add(i * batch.slot) }.cast();
        iovs[i].iov_len = batch.slot;
        hdrs[i].msg_hdr.msg_iov = &mut iovs[i];
        hdrs[i].msg_hdr.msg_iovlen = 1;
        hdrs[i].msg_hdr.msg_name = (&mut batch.peers[i] as *mut libc::sockaddr_storage).cast();
        hdrs[i].msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    }
    let flags = if wait_for_one {
        libc::MSG_WAITFORONE
    } else {
        libc::MSG_DONTWAIT
    };
    // SAFETY: every header points at a live iovec, buffer and address slot
    // owned by `iovs` or `batch`, all of which outlive the call; the kernel
    // writes at most iov_len / msg_namelen bytes into each.
    let n = unsafe {
        libc::recvmmsg(
            sock.as_raw_fd(),
            hdrs.as_mut_ptr(),
            BATCH as libc::c_uint,
            // c_int in glibc, c_uint in musl.
            flags as _,
            std::ptr::null_mut(),
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted => {
                Ok(0)
            }
            _ => Err(e),
        };
    }
    let n = n as usize;
    for (i, h) in hdrs.iter().enumerate().take(n) {
        batch.lens[i] = h.msg_len as usize;
        batch.truncated[i] = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        batch.peer_lens[i] = h.msg_hdr.msg_namelen;
    }
    Ok(n)
}

/// Send `datagrams` (at most `BATCH`) on a connected socket without
/// blocking; returns how many the kernel took.
pub(crate) fn send_connected(sock: &impl AsRawFd, datagrams: &[&[u8]]) -> io::Result<usize> {
    let n = datagrams.len().min(BATCH);
    // SAFETY: zeroed plain old data, filled in below.
    let mut iovs: [libc::iovec; BATCH] = unsafe { mem::zeroed() };
    // SAFETY: as above.
    let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { mem::zeroed() };
    for i in 0..n {
        // The kernel only reads through iov_base for a send.
        iovs[i].iov_base = datagrams[i].as_ptr() as *mut libc::c_void;
        iovs[i].iov_len = datagrams[i].len();
        hdrs[i].msg_hdr.msg_iov = &mut iovs[i];
        hdrs[i].msg_hdr.msg_iovlen = 1;
    }
    send_mmsg(sock.as_raw_fd(), &mut hdrs[..n])
}

/// Send `reply` to the sender of each of the first `n` datagrams of `batch`.
/// Returns how many replies the kernel took; refused ones are skipped.
pub(crate) fn send_replies(
    sock: &impl AsRawFd,
    reply: &[u8],
    batch: &mut RecvBatch,
    n: usize,
) -> usize {
    let n = n.min(BATCH);
    // One iovec serves every reply: they are the same bytes.
    let mut iov = libc::iovec {
        iov_base: reply.as_ptr() as *mut libc::c_void,
        iov_len: reply.len(),
    };
    // SAFETY: zeroed plain old data, filled in below.
    let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { mem::zeroed() };
    for (i, h) in hdrs.iter_mut().enumerate().take(n) {
        h.msg_hdr.msg_iov = &mut iov;
        h.msg_hdr.msg_iovlen = 1;
        h.msg_hdr.msg_name = (&mut batch.peers[i] as *mut libc::sockaddr_storage).cast();
        h.msg_hdr.msg_namelen = batch.peer_lens[i];
    }
    let (mut pos, mut sent) = (0, 0);
    while pos < n {
        match send_mmsg(sock.as_raw_fd(), &mut hdrs[pos..n]) {
            Ok(0) => break,
            Ok(k) => {
                pos += k;
                sent += k;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // The kernel refused the reply at `pos` (an address it cannot
            // route, say): skip that one rather than retry it forever.
            Err(_) => pos += 1,
        }
    }
    sent
}

fn send_mmsg(fd: RawFd, hdrs: &mut [libc::mmsghdr]) -> io::Result<usize> {
    if hdrs.is_empty() {
        return Ok(0);
    }
    // SAFETY: each header points at an iovec and (optionally) an address
    // that the caller keeps alive for the duration of the call; the kernel
    // only reads them and writes msg_len.
    let n = unsafe {
        libc::sendmmsg(
            fd,
            hdrs.as_mut_ptr(),
            hdrs.len() as libc::c_uint,
            libc::MSG_DONTWAIT as _,
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(n as usize)
}

/// Ask the kernel to busy-poll the device queue for up to `us` µs before a
/// receive on `sock` sleeps (`SO_BUSY_POLL`), and to prefer that polling
/// over interrupts (`SO_PREFER_BUSY_POLL`). Only sockets whose packets come
/// through a NAPI device queue are affected; loopback has none.
pub(crate) fn set_busy_poll(sock: &impl AsRawFd, us: u32) -> io::Result<()> {
    let us = libc::c_int::try_from(us)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad --busy-poll: too large"))?;
    for (opt, val) in [(libc::SO_BUSY_POLL, us), (libc::SO_PREFER_BUSY_POLL, 1)] {
        // SAFETY: a valid socket, and a pointer to a c_int with its size.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&val as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Block until the socket is readable, a signal arrives, or `timeout`
/// passes. Sub-millisecond timeouts are kept, unlike `poll`.
pub(crate) fn wait(sock: &impl AsRawFd, timeout: Duration) -> io::Result<()> {
    let mut fds = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        // Not `libc::time_t`, which libc deprecates on musl (it will
        // become 64-bit there); the field's own type is what counts.
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as _,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, and no signal mask change.
    let r = unsafe { libc::ppoll(&mut fds, 1, &ts, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

/// CPU time (user + system) the calling thread has used so far. Per thread,
/// so a responder and a generator in one process are measured apart.
pub(crate) fn thread_cpu_time() -> Duration {
    // SAFETY: rusage is plain old data and getrusage fills it.
    let mut ru: libc::rusage = unsafe { mem::zeroed() };
    // SAFETY: a valid pointer to a rusage owned by this frame.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::Relaxed);
}

/// A flag that SIGINT and SIGTERM set, so a run can end early and still
/// report. Installed without SA_RESTART so blocked calls return at once.
pub fn stop_on_signals() -> &'static AtomicBool {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction is plain old data; the handler only performs an
        // atomic store, which is async-signal-safe.
        unsafe {
            let mut sa: libc::sigaction = mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = 0;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    &STOP
}
