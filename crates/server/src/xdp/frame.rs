//! Ethernet frames carrying UDP over IPv4 or IPv6: parsed where they lie
//! and rewritten in place into their replies.
//!
//! ```text
//!  ┌ Ethernet 14 ┬ IPv4 20 (no options)       ┬ UDP 8 ┬ payload ┬ padding ┐
//!  │             └ IPv6 40 (next header: UDP) ┘       │         │ ignored │
//! ```
//!
//! Only that shape is answered here; anything else is refused with a
//! reason ([`Refused`]) the caller counts. VLAN tags, IPv4 options, IPv6
//! extension headers and fragments are not what a Roughtime client sends.
//!
//! Nothing here allocates, and every access is bounds-checked: a frame is
//! whatever the wire delivered. Checksums are verified on receipt because a
//! NIC's checksum offload result does not reach an AF_XDP socket.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::Range;

/// What a received frame holds, when it is a UDP datagram this path may answer.
///
/// Not `Copy`: `Range` isn't (it is an iterator).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// Source IP and port.
    pub from: SocketAddr,
    /// Destination IP and port.
    pub to: SocketAddr,
    /// Where the UDP payload lies in the frame.
    pub payload: Range<usize>,
}

/// Why a frame is not answered on this path. Each becomes a drop counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Shorter than its fixed headers (Ethernet, IP, UDP) themselves.
    Truncated,
    /// Neither IPv4 nor IPv6 (a VLAN tag counts as neither), IPv4 with
    /// options (IHL not 5), or an IPv6 extension header before UDP.
    NotIp,
    /// IP but not UDP.
    NotUdp,
    /// An IPv4 fragment (more-fragments set or a nonzero offset).
    Fragment,
    /// A length field inconsistent with the frame: IPv4 total length under
    /// 28 or beyond the frame, IPv6 payload length beyond the frame, UDP
    /// length under 8 or beyond the IP payload. Bytes after the IP packet
    /// (Ethernet padding) are allowed and ignored.
    BadLength,
    /// IPv4 header checksum wrong, or UDP checksum wrong. Over IPv4 a zero
    /// UDP checksum means "none" and is accepted; over IPv6 it is refused
    /// (RFC 8200, section 8.1).
    BadChecksum,
    /// From a broadcast or multicast MAC address: the reply would go to
    /// every host on the link.
    GroupSource,
}

const ETH_LEN: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const UDP_LEN: usize = 8;
const PROTO_UDP: u8 = 17;
/// Linux's default TTL and hop limit, so replies look like the kernel
/// path's.
const REPLY_TTL: u8 = 64;
/// IANA's "IPv6 Extension Header Types": these are refused as `NotIp`
/// rather than `NotUdp`, since walking the chain might find UDP behind them.
const IPV6_EXTENSIONS: [u8; 11] = [0, 43, 44, 50, 51, 60, 135, 139, 140, 253, 254];

#[derive(Clone, Copy)]
enum Ip {
    V4,
    V6,
}

impl Ip {
    fn header_len(self) -> usize {
        match self {
            Ip::V4 => 20,
            Ip::V6 => 40,
        }
    }

    fn ethertype(self) -> u16 {
        match self {
            Ip::V4 => ETHERTYPE_IPV4,
            Ip::V6 => ETHERTYPE_IPV6,
        }
    }

    /// Source then destination address, adjacent in both versions: one
    /// slice is the pseudo-header's address part, and one swap the reply's.
    fn addrs(self) -> Range<usize> {
        match self {
            Ip::V4 => ETH_LEN + 12..ETH_LEN + 20,
            Ip::V6 => ETH_LEN + 8..ETH_LEN + 40,
        }
    }
}

/// Parses `frame` as Ethernet + IPv4/IPv6 + UDP, verifying lengths and
/// checksums.
pub fn parse(frame: &[u8]) -> Result<Datagram, Refused> {
    let ip = match be16(frame, 12).ok_or(Refused::Truncated)? {
        ETHERTYPE_IPV4 => Ip::V4,
        ETHERTYPE_IPV6 => Ip::V6,
        _ => return Err(Refused::NotIp),
    };
    // The group bit: the low bit of the address's first byte.
    if frame.get(6).is_some_and(|b| b & 1 != 0) {
        return Err(Refused::GroupSource);
    }
    let udp = ETH_LEN + ip.header_len();
    let header = frame.get(ETH_LEN..udp).ok_or(Refused::Truncated)?;
    let ip_len = match ip {
        Ip::V4 => check_ipv4(header)?,
        Ip::V6 => check_ipv6(header)?,
    };
    if frame.len() < udp + UDP_LEN {
        return Err(Refused::Truncated);
    }
    let ip_end = ETH_LEN + ip_len;
    if ip_end > frame.len() || ip_end < udp + UDP_LEN {
        return Err(Refused::BadLength);
    }
    let udp_len = usize::from(be16(frame, udp + 4).ok_or(Refused::Truncated)?);
    if udp_len < UDP_LEN || udp + udp_len > ip_end {
        return Err(Refused::BadLength);
    }
    let segment = frame.get(udp..udp + udp_len).ok_or(Refused::Truncated)?;
    let checksum = be16(frame, udp + 6).ok_or(Refused::Truncated)?;
    let unchecked = checksum == 0 && matches!(ip, Ip::V4);
    if !unchecked && fold(add(pseudo_header(frame, ip, udp_len), sum(segment))) != 0xffff {
        return Err(Refused::BadChecksum);
    }
    let addrs = frame.get(ip.addrs()).ok_or(Refused::Truncated)?;
    let (src, dst) = match ip {
        Ip::V4 => (
            IpAddr::V4(Ipv4Addr::from(
                array::<4>(addrs, 0).ok_or(Refused::Truncated)?,
            )),
            IpAddr::V4(Ipv4Addr::from(
                array::<4>(addrs, 4).ok_or(Refused::Truncated)?,
            )),
        ),
        Ip::V6 => (
            IpAddr::V6(Ipv6Addr::from(
                array::<16>(addrs, 0).ok_or(Refused::Truncated)?,
            )),
            IpAddr::V6(Ipv6Addr::from(
                array::<16>(addrs, 16).ok_or(Refused::Truncated)?,
            )),
        ),
    };
    let sport = be16(frame, udp).ok_or(Refused::Truncated)?;
    let dport = be16(frame, udp + 2).ok_or(Refused::Truncated)?;
    Ok(Datagram {
        from: SocketAddr::new(src, sport),
        to: SocketAddr::new(dst, dport),
        payload: udp + UDP_LEN..udp + udp_len,
    })
}

/// Checks an IPv4 header without options; returns the packet's total length.
fn check_ipv4(h: &[u8]) -> Result<usize, Refused> {
    let h: &[u8; 20] = h.try_into().map_err(|_| Refused::Truncated)?;
    if h[0] != 0x45 {
        return Err(Refused::NotIp);
    }
    // Checked before the fields it covers are trusted.
    if fold(sum(h)) != 0xffff {
        return Err(Refused::BadChecksum);
    }
    if h[9] != PROTO_UDP {
        return Err(Refused::NotUdp);
    }
    // More-fragments and the 13-bit offset; DF and the reserved bit don't
    // matter to a datagram that arrived whole.
    if u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0 {
        return Err(Refused::Fragment);
    }
    Ok(usize::from(u16::from_be_bytes([h[2], h[3]])))
}

/// Checks a fixed IPv6 header; returns the packet's total length.
fn check_ipv6(h: &[u8]) -> Result<usize, Refused> {
    let h: &[u8; 40] = h.try_into().map_err(|_| Refused::Truncated)?;
    if h[0] >> 4 != 6 {
        return Err(Refused::NotIp);
    }
    match h[6] {
        PROTO_UDP => {}
        next if IPV6_EXTENSIONS.contains(&next) => return Err(Refused::NotIp),
        _ => return Err(Refused::NotUdp),
    }
    Ok(40 + usize::from(u16::from_be_bytes([h[4], h[5]])))
}

/// Rewrites the request `frame`, as parsed into `d`, into the reply
/// carrying `reply` as its UDP payload, and returns the reply's length.
///
/// Ethernet addresses, IP addresses and UDP ports are swapped. IPv4: TOS 0,
/// identification 0, DF set, TTL 64, total length and header checksum
/// recomputed. IPv6: traffic class and flow label 0, hop limit 64, payload
/// length recomputed. UDP: length and checksum recomputed (a computed 0 is
/// sent as 0xffff). No Ethernet padding is added: the NIC pads short frames.
///
/// The reply is written over the request's payload, so it must be no
/// longer than that payload (the server never answers with more than it
/// received). Returns `None`, with `frame` unchanged, if it is longer or if
/// `d` does not describe `frame`.
pub fn reply_in_place(frame: &mut [u8], d: &Datagram, reply: &[u8]) -> Option<usize> {
    let ip = match (d.from, d.to) {
        (SocketAddr::V4(_), SocketAddr::V4(_)) => Ip::V4,
        (SocketAddr::V6(_), SocketAddr::V6(_)) => Ip::V6,
        _ => return None,
    };
    let udp = ETH_LEN + ip.header_len();
    let payload = udp + UDP_LEN;
    if be16(frame, 12)? != ip.ethertype()
        || d.payload.start != payload
        || d.payload.end > frame.len()
        || reply.len() > d.payload.end.checked_sub(payload)?
    {
        return None;
    }
    let end = payload + reply.len();
    let udp_len = u16::try_from(UDP_LEN + reply.len()).ok()?;
    let ip_len = u16::try_from(match ip {
        Ip::V4 => end - ETH_LEN, // total length: header included
        Ip::V6 => end - udp,     // payload length: header excluded
    })
    .ok()?;
    // Nothing below can fail: every offset lies below `end`, which lies
    // within the frame. So a `None` above leaves the frame as it was.
    let frame = frame.get_mut(..end)?;
    frame.get_mut(payload..)?.copy_from_slice(reply);
    swap_adjacent(frame, 0, 6)?;
    swap_adjacent(frame, ip.addrs().start, ip.addrs().len() / 2)?;
    swap_adjacent(frame, udp, 2)?;
    match ip {
        Ip::V4 => {
            let h: &mut [u8; 20] = frame.get_mut(ETH_LEN..udp)?.try_into().ok()?;
            // TOS 0, as the socket path sends: echoing the request's ECN
            // bits (CE above all) would report congestion the reply never
            // met, and IPv6's traffic class is cleared alike.
            h[1] = 0;
            [h[2], h[3]] = ip_len.to_be_bytes();
            [h[4], h[5]] = [0, 0];
            // DF: the reply is never longer than the request, which came
            // through whole.
            [h[6], h[7]] = 0x4000u16.to_be_bytes();
            h[8] = REPLY_TTL;
            [h[10], h[11]] = [0, 0];
            [h[10], h[11]] = (!fold(sum(h))).to_be_bytes();
        }
        Ip::V6 => {
            let h: &mut [u8; 40] = frame.get_mut(ETH_LEN..udp)?.try_into().ok()?;
            [h[0], h[1], h[2], h[3]] = [0x60, 0, 0, 0];
            [h[4], h[5]] = ip_len.to_be_bytes();
            h[7] = REPLY_TTL;
        }
    }
    put16(frame, udp + 4, udp_len)?;
    put16(frame, udp + 6, 0)?;
    let total = add(
        pseudo_header(frame, ip, usize::from(udp_len)),
        sum(frame.get(udp..)?),
    );
    // 0 means "no checksum" over IPv4 and is refused over IPv6; 0xffff is
    // the same value in one's complement.
    let checksum = match !fold(total) {
        0 => 0xffff,
        c => c,
    };
    put16(frame, udp + 6, checksum)?;
    Some(end)
}

/// The unfolded sum of the UDP pseudo-header: both addresses, protocol
/// 17 and the UDP length. IPv6's 32-bit length and 24 zero bits sum the
/// same as IPv4's 16-bit length and 8 zero bits.
fn pseudo_header(frame: &[u8], ip: Ip, udp_len: usize) -> u64 {
    let addrs = frame.get(ip.addrs()).map_or(0, sum);
    add(addrs, u64::from(PROTO_UDP) + udp_len as u64)
}

/// The Internet checksum's running sum (RFC 1071) of `data`, taken to
/// start at an even offset of the checksummed whole, an odd last byte
/// padded with zero. Unfolded: [`fold`] makes it 16 bits.
///
/// Big-endian 64-bit words added with end-around carry: 2^64 - 1 is a
/// multiple of 2^16 - 1, so the result is congruent to the sum of 16-bit
/// words. Two accumulators let the carry chains run side by side.
fn sum(data: &[u8]) -> u64 {
    let (words, tail) = data.as_chunks::<8>();
    let (pairs, odd) = words.as_chunks::<2>();
    let (mut a, mut b) = (0u64, 0u64);
    for [x, y] in pairs {
        a = add(a, u64::from_be_bytes(*x));
        b = add(b, u64::from_be_bytes(*y));
    }
    for x in odd {
        a = add(a, u64::from_be_bytes(*x));
    }
    let mut last = [0u8; 8];
    if let Some(dst) = last.get_mut(..tail.len()) {
        dst.copy_from_slice(tail);
    }
    add(add(a, b), u64::from_be_bytes(last))
}

/// One's-complement addition of two running sums.
fn add(a: u64, b: u64) -> u64 {
    let (s, carry) = a.overflowing_add(b);
    // Cannot overflow: with a carry out, `s` is at most 2^64 - 2.
    s + u64::from(carry)
}

/// Folds a running sum into 16 bits. A nonzero sum never folds to 0, so
/// a sum with its checksum folds to 0xffff exactly when the checksum holds.
fn fold(mut s: u64) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    array::<2>(b, at).map(u16::from_be_bytes)
}

fn put16(b: &mut [u8], at: usize, v: u16) -> Option<()> {
    b.get_mut(at..at.checked_add(2)?)?
        .copy_from_slice(&v.to_be_bytes());
    Some(())
}

fn array<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// Swaps the `n` bytes at `at` with the `n` bytes right after them.
fn swap_adjacent(b: &mut [u8], at: usize, n: usize) -> Option<()> {
    let region = b.get_mut(at..at.checked_add(n.checked_mul(2)?)?)?;
    let (x, y) = region.split_at_mut_checked(n)?;
    x.swap_with_slice(y);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// RFC 1071 word by word, to check the fast sum against.
    fn reference(data: &[u8]) -> u16 {
        let mut s: u32 = 0;
        for pair in data.chunks(2) {
            let hi = u32::from(pair[0]) << 8;
            let lo = pair.get(1).map_or(0, |&b| u32::from(b));
            s += hi | lo;
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    #[test]
    fn checksum_known_answers() {
        // RFC 1071, section 3: the example's sum is ddf2.
        assert_eq!(
            fold(sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7])),
            0xddf2
        );
        assert_eq!(fold(sum(&[])), 0);
        assert_eq!(fold(sum(&[0xab])), 0xab00);
        assert_eq!(fold(sum(&[0xff; 64])), 0xffff);
        // A carry out of every 64-bit add.
        assert_eq!(fold(sum(&[0xff; 4096])), reference(&[0xff; 4096]));
    }

    #[test]
    fn add_wraps_around() {
        assert_eq!(add(u64::MAX, 1), 1);
        assert_eq!(add(u64::MAX, u64::MAX), u64::MAX);
        assert_eq!(fold(u64::MAX), 0xffff);
    }

    proptest! {
        #[test]
        fn fast_sum_is_reference(data in proptest::collection::vec(any::<u8>(), 0..2100)) {
            prop_assert_eq!(fold(sum(&data)), reference(&data));
        }

        #[test]
        fn sums_of_even_splits_add(
            data in proptest::collection::vec(any::<u8>(), 0..600),
            at in 0usize..300,
        ) {
            let at = (at * 2).min(data.len() & !1);
            let (x, y) = data.split_at(at);
            prop_assert_eq!(fold(add(sum(x), sum(y))), reference(&data));
        }

        #[test]
        fn fast_sum_at_extremes(len in 0usize..1600, fill in prop_oneof![Just(0u8), Just(0xff), any::<u8>()]) {
            let data = vec![fill; len];
            prop_assert_eq!(fold(sum(&data)), reference(&data));
        }
    }
}
