//! What the tests of crates/cli/tests/cli/xdp_netns.rs do inside the client
//! namespace: bursts, forged and broken frames, frames the XDP program
//! leaves to the kernel, an ICMP echo. Each prints what it saw for the
//! test outside to read.

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use gnomon_protocol::{verify_response, Profile};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::{server4, server6, CLIENT4, CLIENT6, PATIENCE};

/// A socket in the client namespace for talking to `to`.
pub fn client_socket(to: SocketAddr) -> UdpSocket {
    let bind: SocketAddr = match to {
        SocketAddr::V4(_) => (CLIENT4, 0).into(),
        SocketAddr::V6(_) => (CLIENT6.parse::<IpAddr>().unwrap(), 0).into(),
    };
    let sock = UdpSocket::bind(bind).unwrap();
    sock.connect(to).unwrap();
    sock
}

/// `n` requests sent back to back from each of `sockets` sockets (each its
/// own source port, so its own flow: on a link with several queues, the
/// flows spread over them), then every answer awaited (bounded): each
/// must verify against its own request.
pub fn burst(to: SocketAddr, sockets: u64, n: u64, public: &[u8; 32]) {
    let flows: Vec<(UdpSocket, Vec<Vec<u8>>)> = (0..sockets)
        .map(|s| {
            let requests = (0..n)
                .map(|i| gnomon_testkit::request(Profile::rfc(), 0xb0_0000 + s * n + i))
                .collect();
            (client_socket(to), requests)
        })
        .collect();
    for (sock, requests) in &flows {
        for r in requests {
            sock.send(r).unwrap();
        }
    }
    let deadline = Instant::now() + PATIENCE;
    let mut total = 0;
    let mut buf = [0u8; 2048];
    for (sock, requests) in &flows {
        let mut answered = BTreeSet::new();
        while (answered.len() as u64) < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            sock.set_read_timeout(Some(left)).unwrap();
            match sock.recv(&mut buf) {
                Ok(len) => {
                    let which = requests
                        .iter()
                        .position(|r| verify_response(r, &buf[..len], public).is_ok())
                        .unwrap_or_else(|| panic!("an answer ({len} bytes) to none of the burst"));
                    assert!(answered.insert(which), "request {which} answered twice");
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
                Err(e) => panic!("recv: {e}"),
            }
        }
        total += answered.len();
    }
    println!("BURST answered {total} of {}", sockets * n);
}

/// The UDP checksum (RFC 768) of the datagram in an IPv4 or IPv6 packet
/// built by `gnomon_testkit::raw::packet`, written into it.
pub fn fill_udp_checksum(packet: &mut [u8]) {
    let (pseudo_head, udp_at) = if packet[0] >> 4 == 4 {
        (packet[12..20].to_vec(), 20)
    } else {
        (packet[8..40].to_vec(), 40)
    };
    let len = packet.len() - udp_at;
    packet[udp_at + 6..udp_at + 8].copy_from_slice(&[0, 0]);
    let mut pseudo = pseudo_head;
    pseudo.extend_from_slice(&(len as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 17]);
    pseudo.extend_from_slice(&packet[udp_at..]);
    let mut sum: u32 = pseudo
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let c = match !(sum as u16) {
        0 => 0xffff,
        c => c,
    };
    packet[udp_at + 6..udp_at + 8].copy_from_slice(&c.to_be_bytes());
}

/// Send a whole IP packet (its own header) towards `to`.
pub fn send_raw(to: SocketAddr, packet: &[u8]) {
    let domain = if to.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    // IPPROTO_RAW: the packet carries its own IP header.
    let raw = Socket::new(domain, Type::RAW, Some(Protocol::from(255))).unwrap();
    raw.send_to(packet, &SockAddr::from(SocketAddr::new(to.ip(), 0)))
        .unwrap_or_else(|e| panic!("raw send to {to}: {e}"));
}

/// A valid request from a forged `from`, its checksums right. The answer
/// would go to `from`, not here: the metrics say whether there was one.
pub fn spoof(from: SocketAddr) {
    let to = if from.is_ipv4() { server4() } else { server6() };
    let mut packet =
        gnomon_testkit::raw::packet(from, to, &gnomon_testkit::request(Profile::rfc(), 7));
    fill_udp_checksum(&mut packet);
    send_raw(to, &packet);
    println!("HOSTILE sent");
}

/// After whatever `sock` caused, a valid request from it: the next
/// datagram must be its answer, and nothing else may follow.
pub fn probe(sock: &UdpSocket, public: &[u8; 32]) {
    let probe = gnomon_testkit::request(Profile::rfc(), 0x9e0be);
    sock.send(&probe).unwrap();
    sock.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = [0u8; 2048];
    let n = sock
        .recv(&mut buf)
        .unwrap_or_else(|e| panic!("no answer to the probe: {e}"));
    verify_response(&probe, &buf[..n], public).unwrap_or_else(|e| {
        panic!("the first datagram back ({n} bytes) is not the probe's answer: {e:?}")
    });
    sock.set_nonblocking(true).unwrap();
    if let Ok(n) = sock.recv(&mut buf) {
        panic!("a {n}-byte datagram after the probe's answer");
    }
    println!("PROBE answered");
}

/// Noise for a payload, from an ordinary socket, then a probe.
pub fn garbage(public: &[u8; 32]) {
    let sock = client_socket(server4());
    sock.send(&gnomon_testkit::noise(0x6a7b, 1024)).unwrap();
    println!("HOSTILE sent");
    probe(&sock, public);
}

/// A valid request from this namespace's own socket's address and port,
/// broken by `breaking` (given the packet and where UDP starts), then a
/// probe from that socket.
fn broken(to: SocketAddr, public: &[u8; 32], breaking: impl Fn(&mut [u8], usize)) {
    let sock = client_socket(to);
    let from = sock.local_addr().unwrap();
    let mut packet =
        gnomon_testkit::raw::packet(from, to, &gnomon_testkit::request(Profile::rfc(), 8));
    fill_udp_checksum(&mut packet);
    breaking(&mut packet, if to.is_ipv4() { 20 } else { 40 });
    send_raw(to, &packet);
    println!("HOSTILE sent");
    probe(&sock, public);
}

/// A request whose UDP checksum is wrong.
pub fn bad_checksum(to: SocketAddr, public: &[u8; 32]) {
    broken(to, public, |p, udp| p[udp + 6] ^= 0x5a);
}

/// A request whose UDP length runs past its IP packet (the kernel sets
/// the IPv4 total length of what a raw socket sends, not the UDP one).
pub fn bad_length(to: SocketAddr, public: &[u8; 32]) {
    broken(to, public, |p, udp| {
        p[udp + 4..udp + 6].copy_from_slice(&1500u16.to_be_bytes());
    });
}

/// A valid request from this namespace's own socket, sent raw as IPv4
/// with options (`ip-options`), in two IPv4 fragments (`fragments`) or as
/// IPv6 with a destination options header (`ipv6-extension`): the answer
/// must come back to the socket.
pub fn passed_to_kernel(kind: &str, public: &[u8; 32]) {
    let to = if kind == "ipv6-extension" {
        server6()
    } else {
        server4()
    };
    let sock = client_socket(to);
    let request = gnomon_testkit::request(Profile::rfc(), 0x0b7);
    let mut packet = gnomon_testkit::raw::packet(sock.local_addr().unwrap(), to, &request);
    fill_udp_checksum(&mut packet);
    let packets = match kind {
        "ip-options" => vec![with_options(&packet)],
        "fragments" => fragments(&packet),
        _ => vec![with_extension(&packet)],
    };
    for p in &packets {
        send_raw(to, p);
    }
    sock.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = [0u8; 2048];
    let n = sock
        .recv(&mut buf)
        .unwrap_or_else(|e| panic!("{kind}: no answer: {e}"));
    verify_response(&request, &buf[..n], public)
        .unwrap_or_else(|e| panic!("{kind}: the answer does not verify: {e:?}"));
    println!("ANSWERED {kind}");
}

/// The IPv4 header checksum of `packet`, written into it.
pub fn fill_ip_checksum(packet: &mut [u8]) {
    let ihl = usize::from(packet[0] & 0x0f) * 4;
    packet[10..12].copy_from_slice(&[0, 0]);
    let sum = gnomon_testkit::raw::checksum(&packet[..ihl]);
    packet[10..12].copy_from_slice(&sum.to_be_bytes());
}

/// `packet` (IPv4, no options) with four bytes of options: NOP, NOP, NOP,
/// end of list.
pub fn with_options(packet: &[u8]) -> Vec<u8> {
    let mut p = packet[..20].to_vec();
    p.extend_from_slice(&[1, 1, 1, 0]);
    p.extend_from_slice(&packet[20..]);
    p[0] = 0x46;
    let total = p.len() as u16;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    fill_ip_checksum(&mut p);
    p
}

/// `packet` (IPv6, UDP next) with an empty destination options header
/// (one PadN option) between the IPv6 header and UDP. The UDP checksum
/// stays right: its pseudo-header holds no extension header.
pub fn with_extension(packet: &[u8]) -> Vec<u8> {
    let mut p = packet[..40].to_vec();
    // Next header UDP, length 0 (8 bytes), PadN of 4 zero bytes.
    p.extend_from_slice(&[17, 0, 1, 4, 0, 0, 0, 0]);
    p.extend_from_slice(&packet[40..]);
    p[6] = 60;
    let payload = (p.len() - 40) as u16;
    p[4..6].copy_from_slice(&payload.to_be_bytes());
    p
}

/// `packet` (IPv4, no options) as two fragments, the first of 512 bytes.
pub fn fragments(packet: &[u8]) -> Vec<Vec<u8>> {
    let (head, body) = packet.split_at(20);
    let cut = 512;
    [(0, &body[..cut], true), (cut, &body[cut..], false)]
        .iter()
        .map(|(offset, part, more)| {
            let mut p = head.to_vec();
            p[4..6].copy_from_slice(&0x4a4bu16.to_be_bytes());
            let flags = (offset / 8) as u16 | if *more { 0x2000 } else { 0 };
            p[6..8].copy_from_slice(&flags.to_be_bytes());
            p[2..4].copy_from_slice(&((20 + part.len()) as u16).to_be_bytes());
            p.extend_from_slice(part);
            fill_ip_checksum(&mut p);
            p
        })
        .collect()
}

/// ICMP echo to `to` from a raw socket, until a matching reply (bounded).
pub fn ping(to: Ipv4Addr) {
    let raw = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4)).unwrap();
    // Any datagram socket's calls serve a raw one (recvfrom, sendto).
    let sock: UdpSocket = raw.into();
    let id = std::process::id() as u16;
    let deadline = Instant::now() + PATIENCE;
    let mut seq = 0u16;
    let mut buf = [0u8; 2048];
    while Instant::now() < deadline {
        seq += 1;
        let mut echo = vec![8, 0, 0, 0];
        echo.extend_from_slice(&id.to_be_bytes());
        echo.extend_from_slice(&seq.to_be_bytes());
        echo.extend_from_slice(b"gnomon xdp_netns");
        let sum = gnomon_testkit::raw::checksum(&echo);
        echo[2..4].copy_from_slice(&sum.to_be_bytes());
        sock.send_to(&echo, (to, 0)).unwrap();
        // Two seconds per try, as `ping -W 2`.
        let try_until = Instant::now() + Duration::from_secs(2);
        while let Some(left) = try_until
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
        {
            sock.set_read_timeout(Some(left)).unwrap();
            let Ok((n, _)) = sock.recv_from(&mut buf) else {
                break;
            };
            // A raw ICMP socket gets the IP header too.
            let got = &buf[..n];
            let ihl = usize::from(got[0] & 0x0f) * 4;
            let icmp = &got[ihl..];
            if got[12..16] == to.octets()
                && icmp.len() >= 8
                && icmp[0] == 0
                && icmp[4..6] == id.to_be_bytes()
                && icmp[6..8] == seq.to_be_bytes()
            {
                println!("PING reply from {to}, seq {seq}");
                return;
            }
        }
    }
    panic!("no echo reply from {to} in {PATIENCE:?}");
}
