//! The AF_XDP frame parser and rewriter against an independent
//! implementation (etherparse): frames it builds parse to what it was told,
//! replies it parses carry the checksums it computes, every refusal has a
//! frame that earns it, and no input panics.
//!
//! Here the frames and the reply's check, shared; the tests by what they
//! try: `answered` (requests that parse, and their replies), `refusals`
//! (a frame for every refusal) and `props` (generated frames and bytes).
#![cfg(target_os = "linux")]

use std::net::{IpAddr, SocketAddr};

use etherparse::{
    IpDscp, IpEcn, IpHeaders, IpNumber, Ipv4Header, Ipv6FlowLabel, Ipv6Header, LinkHeader,
    NetHeaders, PacketBuilder, PacketHeaders, TransportHeader, UdpHeader,
};
use gnomon_server::xdp::frame::{parse, Datagram};

mod answered;
mod props;
mod refusals;

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
