//! Datagrams with forged sources, for tests of what a server does with
//! them: whole IPv4/IPv6 + UDP packets written to a raw socket that takes
//! its own IP header (`IPPROTO_RAW`). Root only; Linux fills in a zero IPv4
//! source itself and drops some sources on receipt (an IPv6 multicast
//! source), so not every forgery reaches the server.

use std::io;
use std::net::{IpAddr, SocketAddr};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// The Internet checksum (RFC 1071).
pub fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An IPv4 or IPv6 packet carrying one UDP datagram from `from` to `to`,
/// for a raw socket that writes its own IP header.
pub fn packet(from: SocketAddr, to: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let ulen = 8 + payload.len();
    let mut udp = Vec::with_capacity(ulen);
    udp.extend_from_slice(&from.port().to_be_bytes());
    udp.extend_from_slice(&to.port().to_be_bytes());
    udp.extend_from_slice(&(ulen as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    match (from.ip(), to.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            // UDP checksum 0: none, allowed over IPv4.
            let mut ip = vec![0x45, 0];
            ip.extend_from_slice(&((20 + ulen) as u16).to_be_bytes());
            ip.extend_from_slice(&[0, 1, 0, 0, 64, 17, 0, 0]);
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            let c = checksum(&ip);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            ip.extend(udp);
            ip
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&s.octets());
            pseudo.extend_from_slice(&d.octets());
            pseudo.extend_from_slice(&(ulen as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, 17]);
            pseudo.extend_from_slice(&udp);
            let c = match checksum(&pseudo) {
                0 => 0xffff,
                c => c,
            };
            udp[6..8].copy_from_slice(&c.to_be_bytes());
            let mut ip = vec![0x60, 0, 0, 0];
            ip.extend_from_slice(&(ulen as u16).to_be_bytes());
            ip.extend_from_slice(&[17, 64]);
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            ip.extend(udp);
            ip
        }
        // Tests pass both ends; mixing families is a bug in the test.
        _ => panic!("mixed families: {from} → {to}"),
    }
}

/// Send one datagram with a forged source (needs root: a raw socket).
pub fn spoof(from: SocketAddr, to: SocketAddr, payload: &[u8]) -> io::Result<()> {
    let domain = if to.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    // IPPROTO_RAW: the packet carries its own IP header.
    let raw = Socket::new(domain, Type::RAW, Some(Protocol::from(255)))?;
    let dst = SockAddr::from(SocketAddr::new(to.ip(), 0));
    raw.send_to(&packet(from, to, payload), &dst)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_carry_valid_checksums() {
        let v4 = packet(
            "127.255.255.255:9".parse().unwrap(),
            "127.0.0.1:2002".parse().unwrap(),
            b"abc",
        );
        assert_eq!(v4.len(), 20 + 8 + 3);
        assert_eq!(checksum(&v4[..20]), 0, "IPv4 header checksum");
        let v6 = packet(
            "[::]:9".parse().unwrap(),
            "[::1]:2002".parse().unwrap(),
            b"abc",
        );
        assert_eq!(v6.len(), 40 + 8 + 3);
        // The UDP checksum over the pseudo-header and datagram sums to 0.
        let mut pseudo = v6[8..40].to_vec();
        pseudo.extend_from_slice(&11u32.to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 17]);
        pseudo.extend_from_slice(&v6[40..]);
        assert_eq!(checksum(&pseudo), 0, "UDP checksum");
    }
}
