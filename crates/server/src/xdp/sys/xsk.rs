//! The AF_XDP socket: its frame area (UMEM), its four rings, and what the
//! worker does with them.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use super::ring::Ring;

/// Frame size in the UMEM: the kernel's smallest chunk, room for a full
/// 1500-byte frame after its headroom.
pub const FRAME_SIZE: u32 = 2048;

/// A received frame or one to send: its place in the UMEM and length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Frame {
    /// Offset in the UMEM.
    pub addr: u64,
    /// Bytes.
    pub len: u32,
}

/// Counters the kernel keeps for one socket (`XDP_STATISTICS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCounters {
    /// Frames dropped for a reason other than a full ring.
    pub rx_dropped: u64,
    /// Frames dropped because the receive ring was full.
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty.
    pub fill_empty: u64,
    /// Invalid descriptors we gave it (never, unless a bug).
    pub invalid: u64,
}

/// One AF_XDP socket on one queue, with its own frame area.
pub struct Xsk {
    fd: OwnedFd,
    umem: NonNull<u8>,
    umem_len: usize,
    rx: Ring<libc::xdp_desc>,
    tx: Ring<libc::xdp_desc>,
    fill: Ring<u64>,
    done: Ring<u64>,
    /// Bound in copy mode (the only one veth offers) or zero-copy.
    pub zero_copy: bool,
}

// SAFETY: the mappings belong to this socket alone and are used by the one
// thread that owns it; moving it to that thread is fine.
unsafe impl Send for Xsk {}

/// Ring sizes, in entries (a power of two). The frame area holds twice
/// as many frames, so a full fill ring and a full send ring never starve
/// each other.
pub const RING: u32 = 2048;

fn setsockopt<T>(fd: RawFd, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` is a live value of the option's type and size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            opt,
            (v as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn getsockopt<T: Default>(fd: RawFd, opt: libc::c_int) -> io::Result<T> {
    let mut v = T::default();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` is a writable value of the option's size.
    let r =
        unsafe { libc::getsockopt(fd, libc::SOL_XDP, opt, (&mut v as *mut T).cast(), &mut len) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(v)
    }
}

impl Xsk {
    /// A socket bound to queue `queue` of `ifindex`, its fill ring full.
    /// Zero-copy when the driver offers it, else copy mode.
    pub fn new(ifindex: u32, queue: u32) -> io::Result<Xsk> {
        // SAFETY: socket(2) with constant arguments; the result is checked
        // and owned at once.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new descriptor owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let frames = 2 * RING;
        let umem_len = (frames * FRAME_SIZE) as usize;
        // SAFETY: a private anonymous mapping, checked for failure.
        let area = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                umem_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if area == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: mmap succeeded: not null.
        let umem = unsafe { NonNull::new_unchecked(area.cast::<u8>()) };
        let built = Xsk::build(fd, umem, umem_len, ifindex, queue);
        if built.is_err() {
            // SAFETY: the mapping above, not referenced by anything else
            // now that building failed.
            unsafe { libc::munmap(area, umem_len) };
        }
        built
    }

    fn build(
        fd: OwnedFd,
        umem: NonNull<u8>,
        umem_len: usize,
        ifindex: u32,
        queue: u32,
    ) -> io::Result<Xsk> {
        let raw = fd.as_raw_fd();
        let reg = libc::xdp_umem_reg {
            addr: umem.as_ptr() as u64,
            len: umem_len as u64,
            chunk_size: FRAME_SIZE,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(raw, libc::XDP_UMEM_REG, &reg)?;
        setsockopt(raw, libc::XDP_UMEM_FILL_RING, &RING)?;
        setsockopt(raw, libc::XDP_UMEM_COMPLETION_RING, &RING)?;
        setsockopt(raw, libc::XDP_RX_RING, &RING)?;
        setsockopt(raw, libc::XDP_TX_RING, &RING)?;
        let off = offsets(raw)?;
        let rx = Ring::map(raw, libc::XDP_PGOFF_RX_RING as u64, &off.rx, RING)?;
        let tx = Ring::map(raw, libc::XDP_PGOFF_TX_RING as u64, &off.tx, RING)?;
        let fill = Ring::map(raw, libc::XDP_UMEM_PGOFF_FILL_RING, &off.fr, RING)?;
        let done = Ring::map(raw, libc::XDP_UMEM_PGOFF_COMPLETION_RING, &off.cr, RING)?;
        let bind = |flags: u16| {
            let sa = libc::sockaddr_xdp {
                sxdp_family: libc::AF_XDP as u16,
                sxdp_flags: flags | libc::XDP_USE_NEED_WAKEUP,
                sxdp_ifindex: ifindex,
                sxdp_queue_id: queue,
                sxdp_shared_umem_fd: 0,
            };
            // SAFETY: `sa` is a live sockaddr_xdp of the size passed.
            let r = unsafe {
                libc::bind(
                    raw,
                    (&sa as *const libc::sockaddr_xdp).cast(),
                    size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            };
            if r < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        let zero_copy = match bind(libc::XDP_ZEROCOPY) {
            Ok(()) => true,
            Err(_) => {
                bind(libc::XDP_COPY)?;
                false
            }
        };
        let xsk = Xsk {
            fd,
            umem,
            umem_len,
            rx,
            tx,
            fill,
            done,
            zero_copy,
        };
        Ok(xsk)
    }

    /// How many frames the area holds.
    pub fn frames(&self) -> u32 {
        (self.umem_len / FRAME_SIZE as usize) as u32
    }

    /// The socket, for poll(2).
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Frames the kernel received, up to `out.len()`, into `out`; they
    /// are ours until given back through [`Xsk::fill_from`] or [`Xsk::send`].
    pub fn receive(&mut self, out: &mut [Frame]) -> usize {
        let (at, ready) = self.rx.ready();
        let n = (ready as usize).min(out.len());
        for (k, slot) in out[..n].iter_mut().enumerate() {
            let d = self.rx.read(at.wrapping_add(k as u32));
            *slot = Frame {
                addr: d.addr,
                len: d.len,
            };
        }
        self.rx.release(at, n as u32);
        n
    }

    /// The bytes of `f` (its whole length), checked against the area.
    pub fn bytes(&mut self, f: Frame) -> Option<&mut [u8]> {
        let start = usize::try_from(f.addr).ok()?;
        let end = start.checked_add(f.len as usize)?;
        // A frame never crosses its chunk.
        if end > self.umem_len
            || start / FRAME_SIZE as usize != (end.max(1) - 1) / FRAME_SIZE as usize
        {
            return None;
        }
        // SAFETY: [start, end) lies inside the area, which lives as long
        // as self; the kernel does not write a frame while we hold it (it
        // is on none of the rings), and the borrow of self keeps a second
        // slice from being made meanwhile.
        Some(unsafe { std::slice::from_raw_parts_mut(self.umem.as_ptr().add(start), end - start) })
    }

    /// Give idle frames to the kernel to receive into, from the end of
    /// `free`, as many as the fill ring has room for.
    pub fn fill_from(&mut self, free: &mut Vec<u64>) {
        let (at, room) = self.fill.room();
        let n = (room as usize).min(free.len());
        let from = free.len() - n;
        for (k, a) in free[from..].iter().enumerate() {
            // The chunk's start: the kernel adds its own headroom.
            self.fill
                .write(at.wrapping_add(k as u32), a - a % u64::from(FRAME_SIZE));
        }
        self.fill.submit(at, n as u32);
        free.truncate(from);
    }

    /// Queue frames to send; returns how many fit. They come back through
    /// [`Xsk::completed`] once sent.
    pub fn send(&mut self, frames: &[Frame]) -> usize {
        let (at, room) = self.tx.room();
        let n = (room as usize).min(frames.len());
        for (k, f) in frames[..n].iter().enumerate() {
            self.tx.write(
                at.wrapping_add(k as u32),
                libc::xdp_desc {
                    addr: f.addr,
                    len: f.len,
                    options: 0,
                },
            );
        }
        self.tx.submit(at, n as u32);
        n
    }

    /// Tell the kernel to send what is queued, when it asks to be told
    /// (copy mode always does). In copy mode one call sends at most 32
    /// frames and says EAGAIN while more wait, so this calls again until
    /// the ring is empty or the device pushes back (a full device queue:
    /// the frames stay queued and the next call sends them). Returns
    /// whether frames are still waiting.
    pub fn kick(&self) -> io::Result<bool> {
        if !self.tx.needs_wakeup() {
            return Ok(self.tx_waiting());
        }
        // A bound: the ring's size in calls of 32, and some.
        for _ in 0..RING / 16 {
            // SAFETY: a zero-length send with no buffer and no address,
            // which AF_XDP reads as "process the send ring".
            let r = unsafe {
                libc::sendto(
                    self.raw(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r >= 0 {
                return Ok(self.tx_waiting());
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // More to send: again.
                Some(libc::EAGAIN) if self.tx_waiting() => continue,
                Some(libc::EAGAIN) => return Ok(false),
                // The device is busy or down: later.
                Some(libc::EBUSY | libc::ENOBUFS | libc::ENETDOWN) => return Ok(true),
                _ => return Err(e),
            }
        }
        Ok(self.tx_waiting())
    }

    /// Whether frames on the send ring wait for the kernel.
    fn tx_waiting(&self) -> bool {
        self.tx.room().1 < RING
    }

    /// Frames the kernel has sent, given back into `out`.
    pub fn completed(&mut self, out: &mut [u64]) -> usize {
        let (at, ready) = self.done.ready();
        let n = (ready as usize).min(out.len());
        for (k, slot) in out[..n].iter_mut().enumerate() {
            *slot = self.done.read(at.wrapping_add(k as u32));
        }
        self.done.release(at, n as u32);
        n
    }

    /// Wait up to `timeout_ms` for frames; also wakes the driver when the
    /// fill ring asks for it.
    pub fn wait(&self, timeout_ms: i32) -> io::Result<()> {
        let mut p = libc::pollfd {
            fd: self.raw(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd.
        let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        }
        Ok(())
    }

    /// The kernel's counters for this socket.
    pub fn counters(&self) -> io::Result<KernelCounters> {
        let s: Stats = getsockopt(self.raw(), libc::XDP_STATISTICS)?;
        Ok(KernelCounters {
            rx_dropped: s.0.rx_dropped,
            rx_ring_full: s.0.rx_ring_full,
            fill_empty: s.0.rx_fill_ring_empty_descs,
            invalid: s.0.rx_invalid_descs + s.0.tx_invalid_descs,
        })
    }
}

struct Stats(libc::xdp_statistics);

impl Default for Stats {
    fn default() -> Stats {
        Stats(libc::xdp_statistics {
            rx_dropped: 0,
            rx_invalid_descs: 0,
            tx_invalid_descs: 0,
            rx_ring_full: 0,
            rx_fill_ring_empty_descs: 0,
            tx_ring_empty_descs: 0,
        })
    }
}

fn offsets(fd: RawFd) -> io::Result<libc::xdp_mmap_offsets> {
    let zero = libc::xdp_ring_offset {
        producer: 0,
        consumer: 0,
        desc: 0,
        flags: 0,
    };
    let mut v = libc::xdp_mmap_offsets {
        rx: zero,
        tx: zero,
        fr: zero,
        cr: zero,
    };
    let mut len = size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
    // SAFETY: `v` is a writable xdp_mmap_offsets of the size passed.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            (&mut v as *mut libc::xdp_mmap_offsets).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if (len as usize) < size_of::<libc::xdp_mmap_offsets>() {
        // A kernel before 5.4 has no flags word, so no need-wakeup.
        return Err(io::Error::other(
            "this kernel's AF_XDP is older than 5.4 (no ring flags)",
        ));
    }
    Ok(v)
}

impl Drop for Xsk {
    fn drop(&mut self) {
        // The rings unmap themselves; the area is ours. The socket closes
        // after this (field order), which the kernel needs before it lets
        // go of the area's pages anyway.
        // SAFETY: the area mapped in `new`, unmapped once.
        unsafe { libc::munmap(self.umem.as_ptr().cast(), self.umem_len) };
    }
}
