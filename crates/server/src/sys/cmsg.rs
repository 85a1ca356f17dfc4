//! Reading received control messages without trusting them: every header
//! and payload is bounds-checked against the bytes the kernel said it
//! wrote before it is read (issue 10, finding 10). The walk follows the
//! kernel's layout (`cmsghdr`, payloads and headers aligned to `size_t`)
//! but is plain slice arithmetic, so a length that lies ends the walk
//! instead of reading past the buffer.

use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What one datagram's control messages said.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Control {
    /// Kernel receive time, ns since the Unix epoch (`SCM_TIMESTAMPNS`).
    pub rx_ns: Option<u64>,
    /// Local address the datagram was sent to (`IP_PKTINFO`,
    /// `IPV6_PKTINFO`).
    pub to: Option<IpAddr>,
    /// The socket's cumulative overflow counter (`SO_RXQ_OVFL`).
    pub overflow: Option<u32>,
}

const ALIGN: usize = size_of::<usize>();

const fn align(n: usize) -> usize {
    (n + ALIGN - 1) & !(ALIGN - 1)
}

/// Header size with its padding: where the payload starts (`CMSG_LEN(0)`).
pub const HEADER: usize = align(size_of::<libc::cmsghdr>());

/// Types every bit pattern of which is a valid value, so they may be read
/// from bytes the kernel (or an attacker-shaped buffer) wrote.
trait Plain: Copy {}
impl Plain for libc::cmsghdr {}
impl Plain for libc::timespec {}
impl Plain for libc::in_pktinfo {}
impl Plain for libc::in6_pktinfo {}
impl Plain for u32 {}

fn read<T: Plain>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < size_of::<T>() {
        return None;
    }
    // SAFETY: the slice holds at least size_of::<T>() bytes (checked
    // above); T is plain data valid for any bit pattern (`Plain`), and the
    // read is unaligned.
    #[allow(unsafe_code)]
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

/// Walk the first `len` bytes of a control buffer (`msg_controllen` as the
/// kernel left it; clamped to the buffer).
pub fn parse(buf: &[u8], len: usize) -> Control {
    let buf = &buf[..len.min(buf.len())];
    let mut out = Control::default();
    let mut off = 0;
    while let Some(rest) = buf.get(off..) {
        let Some(h) = read::<libc::cmsghdr>(rest) else {
            break;
        };
        // size_t in glibc, socklen_t in musl.
        #[allow(clippy::unnecessary_cast)]
        let clen = h.cmsg_len as usize;
        // A length shorter than its own header, or past the bytes written,
        // is a lie: stop, keep what was read so far.
        if clen < HEADER || clen > rest.len() {
            break;
        }
        let data = &rest[HEADER..clen];
        match (h.cmsg_level, h.cmsg_type) {
            (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                if let Some(ts) = read::<libc::timespec>(data) {
                    out.rx_ns = timespec_ns(ts);
                }
            }
            (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) => {
                if let Some(n) = read::<u32>(data) {
                    out.overflow = Some(n);
                }
            }
            (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                if let Some(p) = read::<libc::in_pktinfo>(data) {
                    let a = Ipv4Addr::from(u32::from_be(p.ipi_addr.s_addr));
                    out.to = Some(IpAddr::V4(a));
                }
            }
            (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                if let Some(p) = read::<libc::in6_pktinfo>(data) {
                    out.to = Some(IpAddr::V6(Ipv6Addr::from(p.ipi6_addr.s6_addr)));
                }
            }
            _ => {}
        }
        off += align(clen);
    }
    out
}

fn timespec_ns(ts: libc::timespec) -> Option<u64> {
    let s = u64::try_from(ts.tv_sec).ok()?;
    let ns = u64::try_from(ts.tv_nsec)
        .ok()
        .filter(|&n| n < 1_000_000_000)?;
    s.checked_mul(1_000_000_000)?.checked_add(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One control message as the kernel lays it out.
    fn message(level: i32, kind: i32, payload: &[u8], claimed: Option<usize>) -> Vec<u8> {
        // SAFETY: cmsghdr is plain data; all-zero is valid.
        #[allow(unsafe_code)]
        let mut h: libc::cmsghdr = unsafe { std::mem::zeroed() };
        h.cmsg_len = claimed.unwrap_or(HEADER + payload.len()) as _;
        h.cmsg_level = level;
        h.cmsg_type = kind;
        let mut v = vec![0u8; HEADER];
        // SAFETY: v holds HEADER ≥ size_of::<cmsghdr>() bytes.
        #[allow(unsafe_code)]
        unsafe {
            std::ptr::write_unaligned(v.as_mut_ptr().cast(), h)
        };
        v.extend_from_slice(payload);
        v.resize(align(v.len()), 0);
        v
    }

    fn timestamp(sec: i64, nsec: i64) -> Vec<u8> {
        [sec.to_ne_bytes(), nsec.to_ne_bytes()].concat()
    }

    fn pktinfo4(addr: [u8; 4]) -> Vec<u8> {
        let mut p = vec![0u8; size_of::<libc::in_pktinfo>()];
        // ifindex, spec_dst, addr: addr is the last 4 bytes.
        let n = p.len();
        p[n - 4..].copy_from_slice(&addr);
        p
    }

    #[test]
    fn reads_what_the_kernel_writes() {
        let mut buf = message(
            libc::SOL_SOCKET,
            libc::SCM_TIMESTAMPNS,
            &timestamp(1_700_000_000, 5),
            None,
        );
        buf.extend(message(
            libc::IPPROTO_IP,
            libc::IP_PKTINFO,
            &pktinfo4([127, 0, 0, 2]),
            None,
        ));
        buf.extend(message(
            libc::SOL_SOCKET,
            libc::SO_RXQ_OVFL,
            &7u32.to_ne_bytes(),
            None,
        ));
        let c = parse(&buf, buf.len());
        assert_eq!(c.rx_ns, Some(1_700_000_000_000_000_005));
        assert_eq!(c.to, Some("127.0.0.2".parse().unwrap()));
        assert_eq!(c.overflow, Some(7));
        // msg_controllen bounds the walk, not the buffer's size.
        let c = parse(&buf, HEADER + align(size_of::<libc::timespec>()));
        assert_eq!((c.rx_ns, c.to), (Some(1_700_000_000_000_000_005), None));
        assert_eq!(parse(&buf, 0), Control::default());
    }

    #[test]
    fn a_lying_cmsg_len_is_never_followed() {
        let ts = timestamp(1_700_000_000, 0);
        // Longer than the buffer: the payload would be read past its end.
        let long = message(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &ts, Some(4096));
        assert_eq!(parse(&long, long.len()), Control::default());
        // Shorter than a header: the walk would never advance.
        for claimed in [0, 1, HEADER - 1] {
            let short = message(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &ts, Some(claimed));
            assert_eq!(parse(&short, short.len()), Control::default(), "{claimed}");
        }
        // Long enough for a header but not for the payload its type needs.
        let stub = message(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &ts[..4], None);
        assert_eq!(parse(&stub, stub.len()).rx_ns, None);
        let stub = message(libc::IPPROTO_IP, libc::IP_PKTINFO, &[1, 2, 3], None);
        assert_eq!(parse(&stub, stub.len()).to, None);
        // A good message before a lying one is kept; a buffer cut inside a
        // header is not read.
        let mut both = message(
            libc::SOL_SOCKET,
            libc::SO_RXQ_OVFL,
            &3u32.to_ne_bytes(),
            None,
        );
        both.extend(message(
            libc::IPPROTO_IP,
            libc::IP_PKTINFO,
            &pktinfo4([1; 4]),
            Some(999),
        ));
        let c = parse(&both, both.len());
        assert_eq!((c.overflow, c.to), (Some(3), None));
        assert_eq!(parse(&both, HEADER / 2), Control::default());
        // A timestamp no clock can have.
        for (s, ns) in [(-1, 0), (0, 1_000_000_000), (0, -1), (i64::MAX, 0)] {
            let bad = message(
                libc::SOL_SOCKET,
                libc::SCM_TIMESTAMPNS,
                &timestamp(s, ns),
                None,
            );
            assert_eq!(parse(&bad, bad.len()).rx_ns, None, "{s} {ns}");
        }
    }
}
