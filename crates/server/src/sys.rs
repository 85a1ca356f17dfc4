//! Batched UDP syscalls: `recvmmsg`/`sendmmsg` with the ancillary data the
//! worker needs. This is the crate's only `unsafe` code.
//!
//! * `SO_TIMESTAMPNS`: the kernel's receive time of each datagram, for the
//!   stale-request drop.
//! * `IP_PKTINFO` / `IPV6_RECVPKTINFO`: the local address a request arrived
//!   on, so the reply leaves from that address on multi-homed hosts.
//! * `SO_RXQ_OVFL`: the kernel's count of datagrams dropped because the
//!   socket buffer was full.
//!
//! All buffers are allocated once in [`Batch::new`]; the `mmsghdr` arrays
//! point into them and are rebuilt in place before each call.
#![allow(unsafe_code)]

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::failure::Failure;
use crate::stats::{Drop, WorkerStats};

pub mod cmsg;
pub mod passed;

/// Largest datagram handled; longer ones arrive truncated and are dropped.
pub const MAX_DATAGRAM: usize = 1536;
/// Room for the timestamp, pktinfo and overflow-counter messages.
const CMSG_LEN: usize = 128;

/// Aligned storage for control messages.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Cmsg([u8; CMSG_LEN]);

/// What the kernel told us about one received datagram.
#[derive(Clone, Copy, Debug)]
pub struct RecvMeta {
    /// Bytes received.
    pub len: usize,
    /// The datagram was longer than [`MAX_DATAGRAM`].
    pub truncated: bool,
    /// Sender.
    pub from: SocketAddr,
    /// Local address the datagram was sent to, when the kernel said.
    pub to: Option<IpAddr>,
    /// Kernel receive time, ns since the Unix epoch.
    pub rx_ns: Option<u64>,
}

/// Preallocated buffers and headers for one `recvmmsg` and one `sendmmsg`.
pub struct Batch {
    bufs: Vec<[u8; MAX_DATAGRAM]>,
    names: Vec<libc::sockaddr_storage>,
    iovs: Vec<libc::iovec>,
    cmsgs: Vec<Cmsg>,
    hdrs: Vec<libc::mmsghdr>,
    meta: Vec<RecvMeta>,
    /// Kernel overflow counter as last reported (cumulative per socket).
    pub overflow: u32,
    out: Vec<[u8; MAX_DATAGRAM]>,
    out_len: Vec<usize>,
    out_to: Vec<usize>,
}

impl Batch {
    /// Buffers for batches of `n` datagrams.
    pub fn new(n: usize) -> Batch {
        let n = n.max(1);
        let unspecified = SocketAddr::from(([0, 0, 0, 0], 0));
        Batch {
            bufs: vec![[0; MAX_DATAGRAM]; n],
            // SAFETY: sockaddr_storage is plain data; all-zero is a valid value.
            names: vec![unsafe { zeroed() }; n],
            iovs: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                };
                n
            ],
            cmsgs: vec![Cmsg([0; CMSG_LEN]); n],
            // SAFETY: mmsghdr is plain data; all-zero is a valid value.
            hdrs: vec![unsafe { zeroed() }; n],
            meta: vec![
                RecvMeta {
                    len: 0,
                    truncated: false,
                    from: unspecified,
                    to: None,
                    rx_ns: None
                };
                n
            ],
            overflow: 0,
            out: vec![[0; MAX_DATAGRAM]; n],
            out_len: vec![0; n],
            out_to: vec![0; n],
        }
    }

    /// Most datagrams one receive takes.
    pub fn capacity(&self) -> usize {
        self.bufs.len()
    }

    /// Metadata of received datagram `i`.
    pub fn meta(&self, i: usize) -> &RecvMeta {
        &self.meta[i]
    }

    /// Received datagrams and the reply buffers, borrowed together.
    pub fn split(&mut self) -> (Received<'_>, Replies<'_>) {
        (
            Received {
                bufs: &self.bufs,
                meta: &self.meta,
            },
            Replies {
                out: &mut self.out,
                len: &mut self.out_len,
                to: &mut self.out_to,
                n: 0,
            },
        )
    }

    /// Receive up to `capacity()` datagrams; blocks until at least one
    /// arrives or the socket's read timeout passes (then returns 0).
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        self.recv_from_slot(fd, 0, libc::MSG_WAITFORONE)
    }

    /// Receive, without waiting, into the slots after the first `start`
    /// (which keep what they hold); returns how many more arrived.
    pub fn recv_more(&mut self, fd: RawFd, start: usize) -> io::Result<usize> {
        if start >= self.bufs.len() {
            return Ok(0);
        }
        self.recv_from_slot(fd, start, libc::MSG_DONTWAIT)
    }

    fn recv_from_slot(&mut self, fd: RawFd, start: usize, flags: libc::c_int) -> io::Result<usize> {
        let n = self.bufs.len();
        // Base pointers taken once, without a reference to any element in
        // between: a `&mut self.iovs[i]` per header would reborrow the whole
        // vector and invalidate the pointers already stored in earlier
        // headers (finding 10).
        let bufs = self.bufs.as_mut_ptr();
        let names = self.names.as_mut_ptr();
        let iovs = self.iovs.as_mut_ptr();
        let cmsgs = self.cmsgs.as_mut_ptr();
        let hdrs = self.hdrs.as_mut_ptr();
        for i in start..n {
            // SAFETY: every vector holds `n` entries (`new`), so `i < n` is
            // in bounds for each; the pointers stay valid because no vector
            // is touched until the call below has returned.
            unsafe {
                iovs.add(i).write(libc::iovec {
                    iov_base: bufs.add(i).cast(),
                    iov_len: MAX_DATAGRAM,
                });
                let mut h: libc::msghdr = zeroed();
                h.msg_name = names.add(i).cast();
                h.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
                h.msg_iov = iovs.add(i);
                h.msg_iovlen = 1;
                h.msg_control = cmsgs.add(i).cast();
                h.msg_controllen = CMSG_LEN as _;
                hdrs.add(i).write(libc::mmsghdr {
                    msg_hdr: h,
                    msg_len: 0,
                });
            }
        }
        // SAFETY: headers [start, n) point at buffers owned by `self` that
        // live and stay in place for the call; lengths match the buffers.
        let got = unsafe {
            libc::recvmmsg(
                fd,
                hdrs.add(start),
                (n - start) as libc::c_uint,
                // c_int in glibc, c_uint in musl.
                flags as _,
                std::ptr::null_mut(),
            )
        };
        if got < 0 {
            let e = io::Error::last_os_error();
            return match crate::failure::on_receive(e.raw_os_error()) {
                Failure::Retry => Ok(0),
                _ => Err(e),
            };
        }
        let got = (got as usize).min(n - start);
        for i in start..start + got {
            let h = &self.hdrs[i];
            // size_t in glibc, socklen_t in musl.
            #[allow(clippy::unnecessary_cast)]
            let control = cmsg::parse(&self.cmsgs[i].0, h.msg_hdr.msg_controllen as usize);
            if let Some(o) = control.overflow {
                self.overflow = o;
            }
            self.meta[i] = RecvMeta {
                len: (h.msg_len as usize).min(MAX_DATAGRAM),
                truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
                // An unknown family reads as 0.0.0.0:0, which the source
                // filter drops.
                from: to_socket_addr(&self.names[i]).unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0))),
                to: control.to,
                rx_ns: control.rx_ns,
            };
        }
        Ok(got)
    }

    /// Send the replies queued through [`Replies`]; returns how many the
    /// kernel took. A reply the kernel refuses is counted in `stats` under
    /// its reason and the rest are still sent; a full socket buffer drops
    /// replies, never blocks the worker. Only an error meaning the socket
    /// is gone is returned (`failure::on_send`).
    pub fn send(&mut self, fd: RawFd, count: usize, stats: &mut WorkerStats) -> io::Result<usize> {
        let count = count.min(self.out.len());
        // Base pointers taken once (see `recv_from_slot`).
        let out = self.out.as_mut_ptr();
        let names = self.names.as_mut_ptr();
        let iovs = self.iovs.as_mut_ptr();
        let cmsgs = self.cmsgs.as_mut_ptr();
        let hdrs = self.hdrs.as_mut_ptr();
        let mut built = 0;
        for k in 0..count {
            let from = self.meta[self.out_to[k]];
            // The worker drops these sources before parsing; this is the
            // last line: the kernel sends a reply to `::` or 0.0.0.0 to
            // this host, and port 0 to nobody.
            if from.from.ip().is_unspecified() {
                stats.drop(Drop::SourceUnspecified);
                continue;
            }
            if from.from.port() == 0 {
                stats.drop(Drop::SourcePortZero);
                continue;
            }
            let name = SockAddr::from(from.from);
            let len = self.out_len[k].min(MAX_DATAGRAM);
            let b = built;
            // SAFETY: b ≤ k < count ≤ the length of every vector (`new`);
            // `name` is a valid sockaddr of `name.len()` ≤
            // size_of::<sockaddr_storage>() bytes, copied into storage owned
            // by self; no vector is touched through a reference until the
            // call below returns.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    name.as_ptr().cast::<u8>(),
                    names.add(b).cast::<u8>(),
                    name.len() as usize,
                );
                iovs.add(b).write(libc::iovec {
                    iov_base: out.add(k).cast(),
                    iov_len: len,
                });
                let clen = write_pktinfo(&mut *cmsgs.add(b), from.to);
                let mut h: libc::msghdr = zeroed();
                h.msg_name = names.add(b).cast();
                h.msg_namelen = name.len();
                h.msg_iov = iovs.add(b);
                h.msg_iovlen = 1;
                if clen != 0 {
                    h.msg_control = cmsgs.add(b).cast();
                    h.msg_controllen = clen as _;
                }
                hdrs.add(b).write(libc::mmsghdr {
                    msg_hdr: h,
                    msg_len: 0,
                });
            }
            built += 1;
        }
        let (mut done, mut sent) = (0, 0);
        while done < built {
            // SAFETY: headers [done, built) point at buffers owned by self.
            let r = unsafe {
                libc::sendmmsg(
                    fd,
                    hdrs.add(done),
                    (built - done) as libc::c_uint,
                    libc::MSG_DONTWAIT as _,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                match crate::failure::on_send(e.raw_os_error()) {
                    Failure::Retry => continue,
                    Failure::Fatal => return Err(e),
                    // The error belongs to the first datagram of the call:
                    // skip it, keep serving the rest.
                    Failure::Drop(why) => {
                        stats.drop(why);
                        done += 1;
                        continue;
                    }
                }
            }
            if r == 0 {
                break;
            }
            done += r as usize;
            sent += r as usize;
        }
        for _ in done..built {
            stats.drop(Drop::SendFailed);
        }
        Ok(sent)
    }
}

/// Received datagrams.
pub struct Received<'a> {
    bufs: &'a [[u8; MAX_DATAGRAM]],
    meta: &'a [RecvMeta],
}

impl<'a> Received<'a> {
    /// Datagram `i`.
    pub fn datagram(&self, i: usize) -> &'a [u8] {
        &self.bufs[i][..self.meta[i].len]
    }
    /// Metadata of datagram `i`.
    pub fn meta(&self, i: usize) -> &'a RecvMeta {
        &self.meta[i]
    }
}

/// Reply slots: reply `k` answers received datagram `to[k]`.
pub struct Replies<'a> {
    out: &'a mut [[u8; MAX_DATAGRAM]],
    len: &'a mut [usize],
    to: &'a mut [usize],
    n: usize,
}

impl Replies<'_> {
    /// The buffer of reply slot `k`.
    pub fn slot(&mut self, k: usize) -> &mut [u8] {
        &mut self.out[k]
    }
    /// Record that slot `k` holds `len` bytes answering datagram `src`.
    pub fn commit(&mut self, k: usize, src: usize, len: usize) {
        self.len[k] = len;
        self.to[k] = src;
        self.n = self.n.max(k + 1);
    }
    /// Number of slots (all slots below it must have been committed).
    pub fn count(&self) -> usize {
        self.n
    }
    /// Reset for the next batch.
    pub fn clear(&mut self) {
        self.n = 0;
    }
}

fn write_pktinfo(c: &mut Cmsg, to: Option<IpAddr>) -> usize {
    let Some(ip) = to else { return 0 };
    // SAFETY: the buffer is 8-aligned and CMSG_LEN bytes, larger than
    // CMSG_SPACE of either pktinfo; the header is written in place.
    unsafe {
        let mut msg: libc::msghdr = zeroed();
        msg.msg_control = c.0.as_mut_ptr().cast();
        msg.msg_controllen = CMSG_LEN as _;
        let cm = libc::CMSG_FIRSTHDR(&msg);
        match ip {
            IpAddr::V4(a) => {
                let mut p: libc::in_pktinfo = zeroed();
                p.ipi_spec_dst.s_addr = u32::from(a).to_be();
                (*cm).cmsg_level = libc::IPPROTO_IP;
                (*cm).cmsg_type = libc::IP_PKTINFO;
                (*cm).cmsg_len = libc::CMSG_LEN(size_of::<libc::in_pktinfo>() as u32) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(cm).cast(), p);
                libc::CMSG_SPACE(size_of::<libc::in_pktinfo>() as u32) as usize
            }
            IpAddr::V6(a) => {
                let mut p: libc::in6_pktinfo = zeroed();
                p.ipi6_addr.s6_addr = a.octets();
                (*cm).cmsg_level = libc::IPPROTO_IPV6;
                (*cm).cmsg_type = libc::IPV6_PKTINFO;
                (*cm).cmsg_len = libc::CMSG_LEN(size_of::<libc::in6_pktinfo>() as u32) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(cm).cast(), p);
                libc::CMSG_SPACE(size_of::<libc::in6_pktinfo>() as u32) as usize
            }
        }
    }
}

fn to_socket_addr(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match s.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in.
            let a: libc::sockaddr_in =
                unsafe { std::ptr::read((s as *const libc::sockaddr_storage).cast()) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this storage holds a sockaddr_in6.
            let a: libc::sockaddr_in6 =
                unsafe { std::ptr::read((s as *const libc::sockaddr_storage).cast()) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

fn set_int(fd: RawFd, level: libc::c_int, opt: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int and its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A worker's UDP socket: `SO_REUSEPORT` so every worker binds the same
/// address and the kernel spreads flows; ancillary data switched on; a read
/// timeout so the worker notices shutdown.
pub fn udp_socket(
    addr: SocketAddr,
    recv_buffer: Option<usize>,
    read_timeout: Duration,
) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_port(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    prepare_udp(&s, addr, recv_buffer, read_timeout)?;
    s.bind(&addr.into())?;
    Ok(s)
}

/// What a worker needs of a UDP socket bound (or to be bound) to `addr`,
/// whether gnomon made it or the service manager passed it: blocking
/// receives with a timeout (a passed socket may come non-blocking, which
/// would make the worker spin), the buffer size, and the ancillary data.
pub fn prepare_udp(
    s: &Socket,
    addr: SocketAddr,
    recv_buffer: Option<usize>,
    read_timeout: Duration,
) -> io::Result<()> {
    s.set_nonblocking(false)?;
    if let Some(b) = recv_buffer {
        s.set_recv_buffer_size(b)?;
    }
    s.set_read_timeout(Some(read_timeout))?;
    let fd = s.as_raw_fd();
    set_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
    set_int(fd, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)?;
    // Only a wildcard bind needs the arrival address to answer from it; a
    // socket bound to one address answers from that address anyway, and
    // skipping the control message saves work per datagram both ways
    // (docs/COST.md, the kernel side).
    if addr.ip().is_unspecified() {
        if addr.is_ipv6() {
            set_int(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO, 1)?;
        } else {
            set_int(fd, libc::IPPROTO_IP, libc::IP_PKTINFO, 1)?;
        }
    }
    Ok(())
}

/// The kernel's view of the system clock (`adjtimex`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelClock {
    /// Maximum error estimate, µs.
    pub max_error_us: u64,
    /// False when the kernel says the clock is not synchronized.
    pub synchronized: bool,
}

/// Read the kernel clock state without changing it.
pub fn kernel_clock() -> io::Result<KernelClock> {
    // SAFETY: timex is plain data; modes = 0 makes adjtimex read-only.
    let mut tx: libc::timex = unsafe { zeroed() };
    // SAFETY: passes a valid pointer to a timex the call may write.
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(KernelClock {
        max_error_us: tx.maxerror.max(0) as u64,
        synchronized: state != libc::TIME_ERROR && tx.status & libc::STA_UNSYNC == 0,
    })
}

/// The kernel's `CLOCK_REALTIME`, ns, read by a direct system call rather
/// than through the C library (and its vDSO shortcut).
///
/// This is the clock `SO_TIMESTAMPNS` stamps datagrams with, so the gap
/// between the two is how long a request really waited. The process's own
/// view of the time can disagree with the kernel's: a preloaded clock shim
/// such as libfaketime moves `clock_gettime` and not the receive
/// timestamps, and then every request would look as old as the shift.
/// A system call costs about 1 µs, so workers read it now and then and
/// keep the offset (`kernel_time`).
pub fn kernel_realtime_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer to
    // a local that lives for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_clock_gettime,
            libc::CLOCK_REALTIME,
            &mut ts as *mut libc::timespec,
        )
    };
    if r != 0 || ts.tv_sec < 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// For the datagram-path fuzzer (fuzz/fuzz_targets/server_batch.rs): fill
/// receive slots without a socket and read the replies back.
impl Batch {
    /// Put `datagram` in receive slot `i` as if the kernel had delivered
    /// it with `meta` (whose `len` is replaced; longer than
    /// [`MAX_DATAGRAM`] arrives cut short and marked truncated).
    #[doc(hidden)]
    pub fn load(&mut self, i: usize, datagram: &[u8], meta: RecvMeta) {
        let len = datagram.len().min(MAX_DATAGRAM);
        self.bufs[i][..len].copy_from_slice(&datagram[..len]);
        self.meta[i] = RecvMeta {
            len,
            truncated: meta.truncated || datagram.len() > MAX_DATAGRAM,
            ..meta
        };
    }

    /// Reply slot `k`: its bytes and the receive slot it answers.
    #[doc(hidden)]
    pub fn reply(&self, k: usize) -> (&[u8], usize) {
        (&self.out[k][..self.out_len[k]], self.out_to[k])
    }
}

/// Make this process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`): no core
/// file is written if it crashes, and other processes of the same user can
/// neither ptrace it nor read its memory through /proc. Its memory holds
/// the long-term or online seeds.
pub fn set_non_dumpable() -> io::Result<()> {
    // SAFETY: PR_SET_DUMPABLE takes one integer argument and touches no
    // memory of ours; the unused arguments are zero as prctl(2) asks.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Let this thread's timed sleeps end when they are due
/// (`prctl(PR_SET_TIMERSLACK)`, which applies to the calling thread only).
/// The kernel lets an ordinary thread's sleep run up to 50 µs late by
/// default, to group wake-ups; every `batch-wait` would be that much
/// longer than configured, half again at 100 µs (docs/COST.md, "Latency
/// and batch-wait").
pub fn set_timer_slack(ns: u64) -> io::Result<()> {
    let ns =
        libc::c_ulong::try_from(ns).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches no
    // memory of ours; the unused arguments are zero as prctl(2) asks.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns, 0, 0, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
