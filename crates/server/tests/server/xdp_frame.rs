//! The AF_XDP frame parser and rewriter against an independent
//! implementation (etherparse): frames it builds parse to what it was told,
//! replies it parses carry the checksums it computes, every refusal has a
//! frame that earns it, and no input panics.
#![cfg(target_os = "linux")]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use etherparse::{
    IpDscp, IpEcn, IpHeaders, IpNumber, Ipv4Header, Ipv6FlowLabel, Ipv6Header, LinkHeader,
    NetHeaders, PacketBuilder, PacketHeaders, TransportHeader, UdpHeader, VlanId,
};
use gnomon_server::xdp::frame::{parse, reply_in_place, Datagram, Refused};
use proptest::prelude::*;
use proptest::sample::Index;

const CLIENT_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
const SERVER_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];
const ETH: usize = 14;

fn build(ip: IpHeaders, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(CLIENT_MAC, SERVER_MAC)
        .ip(ip)
        .udp(sport, dport);
    let mut v = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut v, payload).unwrap();
    v
}

fn v4(from: SocketAddr, to: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let (IpAddr::V4(s), IpAddr::V4(d)) = (from.ip(), to.ip()) else {
        panic!("not IPv4")
    };
    let mut h = Ipv4Header::new(0, 57, IpNumber::UDP, s.octets(), d.octets()).unwrap();
    // Everything the reply must reset, set to something else.
    h.dscp = IpDscp::try_new(46).unwrap();
    h.ecn = IpEcn::try_new(3).unwrap();
    h.identification = 0xbeef;
    h.dont_fragment = false;
    build(
        IpHeaders::Ipv4(h, Default::default()),
        from.port(),
        to.port(),
        payload,
    )
}

fn v6(from: SocketAddr, to: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let (IpAddr::V6(s), IpAddr::V6(d)) = (from.ip(), to.ip()) else {
        panic!("not IPv6")
    };
    let h = Ipv6Header {
        traffic_class: 0xb9,
        flow_label: Ipv6FlowLabel::try_new(0xabcde).unwrap(),
        payload_length: 0,
        next_header: IpNumber::UDP,
        hop_limit: 3,
        source: s.octets(),
        destination: d.octets(),
    };
    build(
        IpHeaders::Ipv6(h, Default::default()),
        from.port(),
        to.port(),
        payload,
    )
}

fn client4() -> SocketAddr {
    "192.0.2.1:40000".parse().unwrap()
}
fn server4() -> SocketAddr {
    "198.51.100.2:2002".parse().unwrap()
}
fn client6() -> SocketAddr {
    "[2001:db8::1]:40000".parse().unwrap()
}
fn server6() -> SocketAddr {
    "[2001:db8:ffff::2]:2002".parse().unwrap()
}

fn request_bytes(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + 3) as u8).collect()
}

/// RFC 1071 word by word, independent of the module's fast sum.
fn ones_sum(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for pair in data.chunks(2) {
        s += u32::from(pair[0]) << 8 | u32::from(*pair.get(1).unwrap_or(&0));
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Recomputes the IPv4 header checksum after a test edits the header, so
/// the edit is what gets refused.
fn fix_ipv4_header(frame: &mut [u8]) {
    frame[ETH + 10..ETH + 12].fill(0);
    let c = !ones_sum(&frame[ETH..ETH + 20]);
    frame[ETH + 10..ETH + 12].copy_from_slice(&c.to_be_bytes());
}

/// What etherparse finds in a reply, with the checksums it computes.
struct Seen {
    eth_src: [u8; 6],
    eth_dst: [u8; 6],
    net: NetHeaders,
    udp: UdpHeader,
    payload: Vec<u8>,
    expected_udp_checksum: u16,
}

fn see(frame: &[u8]) -> Seen {
    let p = PacketHeaders::from_ethernet_slice(frame).unwrap();
    let Some(LinkHeader::Ethernet2(eth)) = p.link else {
        panic!("no Ethernet")
    };
    let Some(TransportHeader::Udp(udp)) = p.transport else {
        panic!("no UDP")
    };
    let payload = p.payload.slice().to_vec();
    let net = p.net.unwrap();
    let expected_udp_checksum = match &net {
        NetHeaders::Ipv4(ip, _) => udp.calc_checksum_ipv4(ip, &payload).unwrap(),
        NetHeaders::Ipv6(ip, _) => udp.calc_checksum_ipv6(ip, &payload).unwrap(),
        NetHeaders::Arp(_) => panic!("ARP"),
    };
    Seen {
        eth_src: eth.source,
        eth_dst: eth.destination,
        net,
        udp,
        payload,
        expected_udp_checksum,
    }
}

/// The reply's invariants in both versions, by etherparse.
fn check_reply(frame: &[u8], req: &Datagram, reply: &[u8]) {
    let s = see(frame);
    assert_eq!((s.eth_src, s.eth_dst), (SERVER_MAC, CLIENT_MAC));
    assert_eq!(s.payload, reply);
    assert_eq!(s.udp.source_port, req.to.port());
    assert_eq!(s.udp.destination_port, req.from.port());
    assert_eq!(usize::from(s.udp.length), 8 + reply.len());
    assert_eq!(s.udp.checksum, s.expected_udp_checksum);
    match s.net {
        NetHeaders::Ipv4(ip, _) => {
            assert_eq!(IpAddr::from(ip.source), req.to.ip());
            assert_eq!(IpAddr::from(ip.destination), req.from.ip());
            assert_eq!(ip.time_to_live, 64);
            assert!(ip.dont_fragment && !ip.more_fragments);
            assert_eq!(ip.identification, 0);
            assert_eq!((ip.dscp.value(), ip.ecn.value()), (0, 0));
            assert_eq!(usize::from(ip.total_len), 28 + reply.len());
            assert_eq!(ip.header_checksum, ip.calc_header_checksum());
            assert_eq!(frame.len(), ETH + 28 + reply.len());
        }
        NetHeaders::Ipv6(ip, _) => {
            assert_eq!(IpAddr::from(ip.source), req.to.ip());
            assert_eq!(IpAddr::from(ip.destination), req.from.ip());
            assert_eq!(ip.hop_limit, 64);
            assert_eq!((ip.traffic_class, ip.flow_label.value()), (0, 0));
            assert_eq!(usize::from(ip.payload_length), 8 + reply.len());
            assert_eq!(frame.len(), ETH + 48 + reply.len());
        }
        NetHeaders::Arp(_) => panic!("ARP"),
    }
    assert_eq!(
        parse(frame),
        Ok(Datagram {
            from: req.to,
            to: req.from,
            payload: req.payload.start..req.payload.start + reply.len(),
        })
    );
}

#[test]
fn ipv4_request_parses() {
    let body = request_bytes(1024);
    let frame = v4(client4(), server4(), &body);
    let d = parse(&frame).unwrap();
    assert_eq!(
        d,
        Datagram {
            from: client4(),
            to: server4(),
            payload: 42..42 + 1024
        }
    );
    assert_eq!(&frame[d.payload], &body[..]);
}

#[test]
fn ipv6_request_parses() {
    let body = request_bytes(1024);
    let frame = v6(client6(), server6(), &body);
    let d = parse(&frame).unwrap();
    assert_eq!(
        d,
        Datagram {
            from: client6(),
            to: server6(),
            payload: 62..62 + 1024
        }
    );
    assert_eq!(&frame[d.payload], &body[..]);
}

#[test]
fn ipv4_reply_in_place() {
    let mut frame = v4(client4(), server4(), &request_bytes(1024));
    let d = parse(&frame).unwrap();
    let reply = request_bytes(1000).iter().map(|b| !b).collect::<Vec<_>>();
    let n = reply_in_place(&mut frame, &d, &reply).unwrap();
    check_reply(&frame[..n], &d, &reply);
}

#[test]
fn ipv6_reply_in_place() {
    let mut frame = v6(client6(), server6(), &request_bytes(1024));
    let d = parse(&frame).unwrap();
    let reply = request_bytes(1023).iter().map(|b| !b).collect::<Vec<_>>();
    let n = reply_in_place(&mut frame, &d, &reply).unwrap();
    check_reply(&frame[..n], &d, &reply);
}

#[test]
fn replies_of_every_length_up_to_the_request() {
    for frame in [
        v4(client4(), server4(), &request_bytes(33)),
        v6(client6(), server6(), &request_bytes(33)),
    ] {
        for len in 0..=33 {
            let mut f = frame.clone();
            let d = parse(&f).unwrap();
            let reply = vec![0x5a; len];
            let n = reply_in_place(&mut f, &d, &reply).unwrap();
            check_reply(&f[..n], &d, &reply);
        }
    }
}

/// A reply whose checksum computes to 0 goes out as 0xffff: over IPv6 a
/// 0 would be refused, over IPv4 it would mean "none".
#[test]
fn computed_zero_checksum_is_sent_as_ffff() {
    for frame in [
        v4(client4(), server4(), &request_bytes(64)),
        v6(client6(), server6(), &request_bytes(64)),
    ] {
        let d = parse(&frame).unwrap();
        let mut reply = request_bytes(32);
        reply[30..].fill(0);
        let mut f = frame.clone();
        let n = reply_in_place(&mut f, &d, &reply).unwrap();
        let udp = d.payload.start - 8;
        let c = u16::from_be_bytes([f[udp + 6], f[udp + 7]]);
        // The checksum as the last word makes the sum 0xffff: a computed 0.
        let c = if c == 0xffff { 0 } else { c };
        reply[30..].copy_from_slice(&c.to_be_bytes());
        let mut f = frame.clone();
        let n2 = reply_in_place(&mut f, &d, &reply).unwrap();
        assert_eq!(n, n2);
        assert_eq!(&f[udp + 6..udp + 8], &[0xff, 0xff]);
        check_reply(&f[..n], &d, &reply);
    }
}

#[test]
fn ipv4_without_udp_checksum_is_accepted_and_answered_with_one() {
    let mut frame = v4(client4(), server4(), &request_bytes(100));
    frame[ETH + 26..ETH + 28].fill(0);
    let d = parse(&frame).unwrap();
    let n = reply_in_place(&mut frame, &d, &[1, 2, 3]).unwrap();
    check_reply(&frame[..n], &d, &[1, 2, 3]);
    assert_ne!(&frame[ETH + 26..ETH + 28], &[0, 0]);
}

#[test]
fn ethernet_padding_is_ignored() {
    for mut frame in [
        v4(client4(), server4(), &[7; 4]),
        v6(client6(), server6(), &[]),
    ] {
        let d = parse(&frame).unwrap();
        let len = frame.len();
        frame.resize(len.max(60) + 4, 0xee);
        assert_eq!(parse(&frame), Ok(d.clone()));
        let n = reply_in_place(&mut frame, &d, &[9; 4][..d.payload.len()]).unwrap();
        assert_eq!(n, len);
    }
}

#[test]
fn reply_longer_than_request_leaves_frame_unchanged() {
    for frame in [
        v4(client4(), server4(), &request_bytes(64)),
        v6(client6(), server6(), &request_bytes(64)),
    ] {
        let d = parse(&frame).unwrap();
        let mut f = frame.clone();
        assert_eq!(reply_in_place(&mut f, &d, &[0; 65]), None);
        assert_eq!(f, frame);
    }
}

#[test]
fn datagram_not_of_this_frame_leaves_frame_unchanged() {
    let frame = v4(client4(), server4(), &request_bytes(64));
    let d = parse(&frame).unwrap();
    let other = parse(&v6(client6(), server6(), &request_bytes(64))).unwrap();
    let wrong = [
        other,
        Datagram {
            payload: d.payload.start + 1..d.payload.end,
            ..d.clone()
        },
        Datagram {
            payload: d.payload.start..frame.len() + 1,
            ..d.clone()
        },
        Datagram {
            from: client6(),
            ..d.clone()
        },
    ];
    for w in wrong {
        let mut f = frame.clone();
        assert_eq!(reply_in_place(&mut f, &w, &[1]), None, "{w:?}");
        assert_eq!(f, frame);
    }
    let mut short = frame[..40].to_vec();
    assert_eq!(reply_in_place(&mut short, &d, &[]), None);
    assert_eq!(short, frame[..40]);
}

#[test]
fn parse_and_reply_allocate_nothing() {
    let frame = v6(client6(), server6(), &request_bytes(1024));
    let reply = request_bytes(512);
    let mut f = frame.clone();
    let info = allocation_counter::measure(|| {
        let d = parse(&f).unwrap();
        reply_in_place(&mut f, &d, &reply).unwrap();
    });
    assert_eq!(info.count_total, 0);
}

fn refused(frame: &[u8]) -> Refused {
    parse(frame).unwrap_err()
}

#[test]
fn truncated() {
    let f4 = v4(client4(), server4(), &[]);
    let f6 = v6(client6(), server6(), &[]);
    assert_eq!(refused(&[]), Refused::Truncated);
    assert_eq!(refused(&f4[..13]), Refused::Truncated);
    assert_eq!(refused(&f4[..ETH + 19]), Refused::Truncated);
    assert_eq!(refused(&f4[..ETH + 27]), Refused::Truncated);
    assert_eq!(refused(&f6[..ETH + 39]), Refused::Truncated);
    assert_eq!(refused(&f6[..ETH + 47]), Refused::Truncated);
}

#[test]
fn not_ip() {
    let f4 = v4(client4(), server4(), &[1; 8]);
    let f6 = v6(client6(), server6(), &[1; 8]);
    let mut arp = f4.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(refused(&arp), Refused::NotIp);

    let b = PacketBuilder::ethernet2(CLIENT_MAC, SERVER_MAC)
        .single_vlan(VlanId::try_new(5).unwrap())
        .ipv4([192, 0, 2, 1], [198, 51, 100, 2], 64)
        .udp(1, 2);
    let mut vlan = Vec::new();
    b.write(&mut vlan, &[1; 8]).unwrap();
    assert_eq!(refused(&vlan), Refused::NotIp);

    let mut options = f4.clone();
    options[ETH] = 0x46;
    fix_ipv4_header(&mut options);
    assert_eq!(refused(&options), Refused::NotIp);

    let mut version = f4.clone();
    version[ETH] = 0x65;
    fix_ipv4_header(&mut version);
    assert_eq!(refused(&version), Refused::NotIp);

    let mut version = f6.clone();
    version[ETH] = 0x40;
    assert_eq!(refused(&version), Refused::NotIp);

    // Hop-by-hop, routing, fragment, destination options.
    for next in [0, 43, 44, 60] {
        let mut ext = f6.clone();
        ext[ETH + 6] = next;
        assert_eq!(refused(&ext), Refused::NotIp, "next header {next}");
    }
}

#[test]
fn not_udp() {
    let mut tcp = v4(client4(), server4(), &[1; 20]);
    tcp[ETH + 9] = 6;
    fix_ipv4_header(&mut tcp);
    assert_eq!(refused(&tcp), Refused::NotUdp);
    for next in [6, 58] {
        let mut f = v6(client6(), server6(), &[1; 20]);
        f[ETH + 6] = next;
        assert_eq!(refused(&f), Refused::NotUdp);
    }
}

#[test]
fn fragment() {
    for flags in [0x2000u16, 0x0001, 0x6000, 0x1fff] {
        let mut f = v4(client4(), server4(), &[1; 20]);
        f[ETH + 6..ETH + 8].copy_from_slice(&flags.to_be_bytes());
        fix_ipv4_header(&mut f);
        assert_eq!(refused(&f), Refused::Fragment, "{flags:#x}");
    }
    // DF alone is no fragment.
    let mut f = v4(client4(), server4(), &[1; 20]);
    f[ETH + 6..ETH + 8].copy_from_slice(&0x4000u16.to_be_bytes());
    fix_ipv4_header(&mut f);
    assert!(parse(&f).is_ok());
}

#[test]
fn bad_length() {
    let f4 = v4(client4(), server4(), &[1; 20]);
    let f6 = v6(client6(), server6(), &[1; 20]);
    let set = |f: &[u8], at: usize, v: u16| {
        let mut f = f.to_vec();
        f[at..at + 2].copy_from_slice(&v.to_be_bytes());
        f
    };
    // IPv4 total length: under 28, beyond the frame.
    for total in [0, 20, 27, 49] {
        let mut f = set(&f4, ETH + 2, total);
        fix_ipv4_header(&mut f);
        assert_eq!(refused(&f), Refused::BadLength, "total {total}");
    }
    // IPv6 payload length beyond the frame, or too short for UDP.
    for len in [0, 7, 29] {
        assert_eq!(refused(&set(&f6, ETH + 4, len)), Refused::BadLength);
    }
    // UDP length under 8, or beyond the IP payload.
    for (f, udp) in [(&f4, ETH + 20), (&f6, ETH + 40)] {
        for len in [0, 7, 29, 0xffff] {
            assert_eq!(refused(&set(f, udp + 4, len)), Refused::BadLength);
        }
    }
}

#[test]
fn bad_checksum() {
    let f4 = v4(client4(), server4(), &[1; 20]);
    let f6 = v6(client6(), server6(), &[1; 20]);
    let mut ip = f4.clone();
    ip[ETH + 8] ^= 1; // TTL, covered by the header checksum only
    assert_eq!(refused(&ip), Refused::BadChecksum);
    for (f, udp) in [(&f4, ETH + 20), (&f6, ETH + 40)] {
        let mut payload = f.clone();
        *payload.last_mut().unwrap() ^= 0x80;
        assert_eq!(refused(&payload), Refused::BadChecksum);
        let mut field = f.clone();
        field[udp + 7] ^= 1;
        assert_eq!(refused(&field), Refused::BadChecksum);
    }
    let mut zero = f6.clone();
    zero[ETH + 46..ETH + 48].fill(0);
    assert_eq!(refused(&zero), Refused::BadChecksum);
}

/// A valid request, with the datagram it must parse to.
fn valid_frame() -> impl Strategy<Value = (Vec<u8>, Datagram, Vec<u8>)> {
    let addrs4 = (any::<[u8; 4]>(), any::<[u8; 4]>()).prop_map(|(s, d)| {
        (
            IpAddr::from(Ipv4Addr::from(s)),
            IpAddr::from(Ipv4Addr::from(d)),
        )
    });
    let addrs6 = (any::<[u8; 16]>(), any::<[u8; 16]>()).prop_map(|(s, d)| {
        (
            IpAddr::from(Ipv6Addr::from(s)),
            IpAddr::from(Ipv6Addr::from(d)),
        )
    });
    (
        prop_oneof![addrs4, addrs6],
        any::<u16>(),
        any::<u16>(),
        proptest::collection::vec(any::<u8>(), 0..1500),
    )
        .prop_map(|((s, d), sport, dport, body)| {
            let (from, to) = (SocketAddr::new(s, sport), SocketAddr::new(d, dport));
            let (frame, start) = match s {
                IpAddr::V4(_) => (v4(from, to, &body), 42),
                IpAddr::V6(_) => (v6(from, to, &body), 62),
            };
            let d = Datagram {
                from,
                to,
                payload: start..start + body.len(),
            };
            (frame, d, body)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(
        mut bytes in proptest::collection::vec(any::<u8>(), 0..1600),
        shape in 0u8..3,
        start in any::<Index>(),
        end in any::<Index>(),
        reply in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        // Most random bytes stop at the ethertype; these get further.
        if bytes.len() > 15 {
            match shape {
                0 => { bytes[12..15].copy_from_slice(&[0x08, 0x00, 0x45]); }
                1 => {
                    bytes[12..15].copy_from_slice(&[0x86, 0xdd, 0x60]);
                    if let Some(next) = bytes.get_mut(ETH + 6) {
                        *next = 17;
                    }
                }
                _ => {}
            }
        }
        let _ = parse(&bytes);
        // reply_in_place on a frame and datagram that disagree.
        let frame = bytes.clone();
        let (a, b) = (start.index(bytes.len() + 100), end.index(bytes.len() + 100));
        for (from, to) in [(client4(), server4()), (client6(), server6()), (client4(), server6())] {
            let d = Datagram { from, to, payload: a..b };
            match reply_in_place(&mut bytes, &d, &reply) {
                None => prop_assert_eq!(&bytes, &frame),
                Some(n) => prop_assert!(n <= frame.len()),
            }
            bytes.copy_from_slice(&frame);
        }
    }

    #[test]
    fn valid_frames_parse_to_what_was_built(
        (mut frame, d, body) in valid_frame(),
        padding in 0usize..64,
    ) {
        prop_assert_eq!(parse(&frame), Ok(d.clone()));
        prop_assert_eq!(&frame[d.payload.clone()], &body[..]);
        frame.resize(frame.len() + padding, 0);
        prop_assert_eq!(parse(&frame), Ok(d));
    }

    #[test]
    fn reply_then_parse_swaps_endpoints(
        (mut frame, d, _) in valid_frame(),
        len in any::<Index>(),
        fill in any::<u8>(),
    ) {
        let len = len.index(d.payload.len() + 1);
        let reply: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
        let n = reply_in_place(&mut frame, &d, &reply).unwrap();
        check_reply(&frame[..n], &d, &reply);
        prop_assert_eq!(&frame[d.payload.start..n], &reply[..]);
    }

    #[test]
    fn one_flipped_bit_is_noticed(
        (frame, d, _) in valid_frame(),
        at in any::<Index>(),
        bit in 0u8..8,
    ) {
        let at = ETH + at.index(frame.len() - ETH);
        let mut f = frame.clone();
        f[at] ^= 1 << bit;
        let got = parse(&f);
        let v6 = matches!(d.from, SocketAddr::V6(_));
        // No checksum covers IPv6's traffic class, flow label or hop
        // limit, and the datagram doesn't carry them.
        let v6_unchecked = v6
            && ((at == ETH && bit < 4) || (ETH + 1..ETH + 4).contains(&at) || at == ETH + 7);
        // Over IPv4, a UDP checksum flipped to 0 reads as "no checksum".
        let v4_none = !v6 && (ETH + 26..ETH + 28).contains(&at) && f[ETH + 26..ETH + 28] == [0, 0];
        if v6_unchecked || v4_none {
            prop_assert_eq!(got, Ok(d));
        } else {
            prop_assert_ne!(got, Ok(d));
        }
    }
}
