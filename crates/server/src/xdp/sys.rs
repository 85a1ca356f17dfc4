//! Every system call and shared-memory access of the AF_XDP datapath, and
//! the only `unsafe` in it: the bpf(2) calls that load the program, make
//! the socket map and attach the program to an interface, and the AF_XDP
//! socket with its frame area (UMEM) and four rings shared with the
//! kernel. Everything above this module is safe code over [`Xsk`] and
//! [`Attachment`].
//!
//! The attachment is a BPF link (`BPF_LINK_CREATE`), owned by one file
//! descriptor: when the process exits for any reason, SIGKILL and a crash
//! included, the kernel closes the descriptor and detaches the program. No
//! pinned object is left behind for an operator to clean up, and a link
//! never replaces a program someone else attached (the call fails with
//! EBUSY instead).
#![allow(unsafe_code)]

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use super::program::Insn;

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// The attribute block of one bpf(2) command: the kernel reads the
/// fields it knows and wants the rest zero.
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }

    fn u32(&mut self, at: usize, v: u32) -> &mut Attr {
        self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }

    fn u64(&mut self, at: usize, v: u64) -> &mut Attr {
        self.0[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }

    fn bytes(&mut self, at: usize, v: &[u8]) -> &mut Attr {
        self.0[at..at + v.len()].copy_from_slice(v);
        self
    }
}

/// bpf(2); a descriptor for the commands that make an object.
fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<i64> {
    // SAFETY: `attr` is a live, writable, zero-padded block of the size
    // passed; the kernel reads (and for some commands writes) only within
    // it, and every pointer stored in it by the callers outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.0.as_mut_ptr(),
            size_of::<Attr>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn fd_of(r: i64) -> OwnedFd {
    // SAFETY: the commands that call this return a new descriptor that
    // nothing else owns.
    unsafe { OwnedFd::from_raw_fd(r as RawFd) }
}

/// How the program runs on the interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// In the driver, before any socket buffer is made.
    Native,
    /// After the kernel made a socket buffer: works on every interface,
    /// saves less.
    Generic,
}

impl Mode {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::Generic => "generic",
        }
    }
}

/// The socket map: queue index to AF_XDP socket.
pub struct SocketMap(OwnedFd);

impl SocketMap {
    /// A map for queues `0..queues`.
    pub fn new(queues: u32) -> io::Result<SocketMap> {
        let mut a = Attr::new();
        a.u32(0, BPF_MAP_TYPE_XSKMAP)
            .u32(4, 4)
            .u32(8, 4)
            .u32(12, queues.max(1))
            .bytes(28, b"gnomon_xsks");
        Ok(SocketMap(fd_of(bpf(BPF_MAP_CREATE, &mut a)?)))
    }

    /// The descriptor the program's map load names.
    pub fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Send queue `queue`'s frames to `xsk`.
    pub fn insert(&self, queue: u32, xsk: &Xsk) -> io::Result<()> {
        let key = queue;
        let value = xsk.fd.as_raw_fd() as u32;
        let mut a = Attr::new();
        a.u32(0, self.0.as_raw_fd() as u32)
            .u64(8, &key as *const u32 as u64)
            .u64(16, &value as *const u32 as u64)
            .u64(24, 0);
        bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
    }
}

/// A loaded program.
pub struct Program(OwnedFd);

impl Program {
    /// Load `insns` as an XDP program. On refusal the error carries the
    /// verifier's log, which says which instruction it objected to.
    pub fn load(insns: &[Insn]) -> io::Result<Program> {
        let license = b"Apache-2.0 OR MIT\0";
        let mut log = vec![0u8; 64 * 1024];
        let mut a = Attr::new();
        a.u32(0, BPF_PROG_TYPE_XDP)
            .u32(4, insns.len() as u32)
            .u64(8, insns.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .u32(24, 1)
            .u32(28, log.len() as u32)
            .u64(32, log.as_mut_ptr() as u64)
            .bytes(48, b"gnomon_udp")
            .u32(68, BPF_XDP);
        match bpf(BPF_PROG_LOAD, &mut a) {
            Ok(fd) => Ok(Program(fd_of(fd))),
            Err(e) => {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let said = String::from_utf8_lossy(&log[..end]);
                let tail: String = said.lines().rev().take(6).collect::<Vec<_>>().join(" / ");
                Err(io::Error::new(
                    e.kind(),
                    format!("the kernel refused the XDP program: {e}; verifier: {tail}"),
                ))
            }
        }
    }
}

/// The program attached to an interface; dropping it (or the process
/// ending) detaches it.
pub struct Attachment {
    _link: OwnedFd,
    /// Where it runs.
    pub mode: Mode,
}

impl Attachment {
    /// Attach `prog` to interface `ifindex`, in the driver when it can
    /// run there, else generic, or only in `mode` when one is given.
    pub fn attach(prog: &Program, ifindex: u32, mode: Option<Mode>) -> io::Result<Attachment> {
        let try_mode = |m: Mode| {
            let flags = match m {
                Mode::Native => XDP_FLAGS_DRV_MODE,
                Mode::Generic => XDP_FLAGS_SKB_MODE,
            };
            let mut a = Attr::new();
            a.u32(0, prog.0.as_raw_fd() as u32)
                .u32(4, ifindex)
                .u32(8, BPF_XDP)
                .u32(12, flags);
            bpf(BPF_LINK_CREATE, &mut a).map(|fd| Attachment {
                _link: fd_of(fd),
                mode: m,
            })
        };
        match mode {
            Some(m) => try_mode(m),
            None => try_mode(Mode::Native).or_else(|native| {
                // EBUSY: another program is there; generic would not help.
                if native.raw_os_error() == Some(libc::EBUSY) {
                    Err(native)
                } else {
                    try_mode(Mode::Generic)
                }
            }),
        }
    }
}

/// Frame size in the UMEM: the kernel's smallest chunk, room for a full
/// 1500-byte frame after its headroom.
pub const FRAME_SIZE: u32 = 2048;

/// One ring shared with the kernel: a producer and a consumer index, a
/// flags word, and `size` entries of `T`.
struct Ring<T> {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    entries: NonNull<T>,
    mask: u32,
    map: NonNull<libc::c_void>,
    map_len: usize,
}

impl<T: Copy> Ring<T> {
    /// Map the ring at page offset `pgoff` of `fd`, laid out as `off` says.
    fn map(fd: RawFd, pgoff: u64, off: &libc::xdp_ring_offset, size: u32) -> io::Result<Ring<T>> {
        let map_len = off.desc as usize + size as usize * size_of::<T>();
        // SAFETY: a fresh shared mapping of the socket's ring, of the length
        // the kernel's offsets give for `size` entries; checked for failure.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = p.cast::<u8>();
        // SAFETY: the kernel's offsets lie inside the mapping, and its
        // index words are 4-byte aligned u32s that it updates atomically.
        unsafe {
            Ok(Ring {
                producer: NonNull::new_unchecked(base.add(off.producer as usize).cast()),
                consumer: NonNull::new_unchecked(base.add(off.consumer as usize).cast()),
                flags: NonNull::new_unchecked(base.add(off.flags as usize).cast()),
                entries: NonNull::new_unchecked(base.add(off.desc as usize).cast()),
                mask: size - 1,
                map: NonNull::new_unchecked(p),
                map_len,
            })
        }
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the mapping, which lives as long as self.
        unsafe { self.producer.as_ref() }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.consumer.as_ref() }
    }

    fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `producer`.
        unsafe { self.flags.as_ref() }.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    fn read(&self, index: u32) -> T {
        // SAFETY: `index & mask` < size, and the entry is one the kernel
        // produced and has not been given back (the callers' index rules).
        unsafe {
            self.entries
                .as_ptr()
                .add((index & self.mask) as usize)
                .read()
        }
    }

    fn write(&self, index: u32, v: T) {
        // SAFETY: `index & mask` < size, and the entry is one the kernel
        // consumed (the callers' index rules).
        unsafe {
            self.entries
                .as_ptr()
                .add((index & self.mask) as usize)
                .write(v)
        }
    }

    /// Entries the kernel produced that we have not consumed, from `at`.
    fn ready(&self) -> (u32, u32) {
        let at = self.consumer().load(Ordering::Relaxed);
        let n = self.producer().load(Ordering::Acquire).wrapping_sub(at);
        (at, n)
    }

    fn release(&self, at: u32, n: u32) {
        self.consumer().store(at.wrapping_add(n), Ordering::Release);
    }

    /// Room to produce into, and where.
    fn room(&self) -> (u32, u32) {
        let at = self.producer().load(Ordering::Relaxed);
        let used = at.wrapping_sub(self.consumer().load(Ordering::Acquire));
        (at, self.mask + 1 - used)
    }

    fn submit(&self, at: u32, n: u32) {
        self.producer().store(at.wrapping_add(n), Ordering::Release);
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.map.as_ptr(), self.map_len) };
    }
}

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

    /// Room in the chunk from `f.addr` on: how long a frame written there
    /// may be.
    pub fn room(f: Frame) -> u32 {
        FRAME_SIZE - (f.addr % u64::from(FRAME_SIZE)) as u32
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

    /// Whether the fill ring wants a wake-up (the caller then waits).
    pub fn fill_needs_wakeup(&self) -> bool {
        self.fill.needs_wakeup()
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

/// Whether this kernel and process can make an AF_XDP socket at all: the
/// reason when not (no AF_XDP in the kernel, or not allowed).
pub fn unavailable() -> Option<io::Error> {
    // SAFETY: socket(2) with constant arguments; closed at once.
    let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Some(io::Error::last_os_error());
    }
    // SAFETY: the descriptor just made.
    drop(unsafe { OwnedFd::from_raw_fd(raw) });
    None
}

/// The interface's index, by name.
pub fn ifindex(name: &str) -> io::Result<u32> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the interface name"))?;
    // SAFETY: a NUL-terminated name that lives through the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(i)
    }
}
