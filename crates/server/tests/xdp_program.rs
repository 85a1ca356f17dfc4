//! The XDP program, checked two ways: run by hand over frames an
//! adversary chooses (`program::interpret`, which fails on any read the
//! program did not bound first), against a statement of what it must
//! steer; and loaded into this kernel, whose verifier must accept it for
//! every shape of served-address list.
//!
//! What it must do: send a frame to the AF_XDP socket exactly when it is
//! Ethernet carrying IPv4 without options and not a fragment, or IPv6 with
//! UDP as the next header, whose UDP destination is a served address and
//! port (an unspecified served address matches every address of its
//! family). Everything else passes to the kernel, so no traffic but the
//! served UDP is ever taken from it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use gnomon_server::xdp::frame;
use gnomon_server::xdp::program::{assemble, interpret};
use proptest::prelude::*;

/// A frame's headers, as generated.
#[derive(Clone, Debug)]
struct Shape {
    ethertype: u16,
    dst: IpAddr,
    src: IpAddr,
    dport: u16,
    sport: u16,
    proto: u8,
    /// IPv4 header length in words (5: no options).
    ihl: u8,
    /// IPv4 flags and fragment offset.
    frag: u16,
    payload: Vec<u8>,
    /// Cut the frame to this many bytes, if shorter.
    cut: usize,
}

fn sum(data: &[u8]) -> u32 {
    data.chunks(2)
        .map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0)))
        .sum()
}

fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// The frame `s` describes, checksums right.
fn build(s: &Shape) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    f.extend_from_slice(&s.ethertype.to_be_bytes());
    let udp_len = 8 + s.payload.len() as u16;
    let mut udp = Vec::new();
    udp.extend_from_slice(&s.sport.to_be_bytes());
    udp.extend_from_slice(&s.dport.to_be_bytes());
    udp.extend_from_slice(&udp_len.to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(&s.payload);
    match (s.src, s.dst) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let opts = usize::from(s.ihl.saturating_sub(5)) * 4;
            let total = (20 + opts) as u16 + udp_len;
            let mut ip = vec![0x40 | s.ihl, 0];
            ip.extend_from_slice(&total.to_be_bytes());
            ip.extend_from_slice(&[0, 0]);
            ip.extend_from_slice(&s.frag.to_be_bytes());
            ip.extend_from_slice(&[64, s.proto, 0, 0]);
            ip.extend_from_slice(&a.octets());
            ip.extend_from_slice(&b.octets());
            ip.resize(20 + opts, 1);
            let c = fold(sum(&ip));
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&a.octets());
            pseudo.extend_from_slice(&b.octets());
            pseudo.extend_from_slice(&[0, 17]);
            pseudo.extend_from_slice(&udp_len.to_be_bytes());
            let c = fold(sum(&pseudo) + sum(&udp));
            let c = if c == 0 { 0xffff } else { c };
            udp[6..8].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&ip);
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let mut ip = vec![0x60, 0, 0, 0];
            ip.extend_from_slice(&udp_len.to_be_bytes());
            ip.extend_from_slice(&[s.proto, 64]);
            ip.extend_from_slice(&a.octets());
            ip.extend_from_slice(&b.octets());
            let mut pseudo = Vec::new();
            pseudo.extend_from_slice(&a.octets());
            pseudo.extend_from_slice(&b.octets());
            pseudo.extend_from_slice(&u32::from(udp_len).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, 17]);
            let c = fold(sum(&pseudo) + sum(&udp));
            let c = if c == 0 { 0xffff } else { c };
            udp[6..8].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&ip);
        }
        _ => unreachable!("one family per frame"),
    }
    f.extend_from_slice(&udp);
    f.truncate(s.cut);
    f
}

/// What the program must do with `s`: redirect (true) or pass.
fn steered(s: &Shape, served: &[SocketAddr]) -> bool {
    let len = build(s).len();
    let headers_ok = match s.dst {
        IpAddr::V4(_) => {
            s.ethertype == 0x0800
                && len >= 14 + 20 + 8
                && s.ihl == 5
                && s.proto == 17
                && s.frag & 0x3fff == 0
        }
        IpAddr::V6(_) => s.ethertype == 0x86dd && len >= 14 + 40 + 8 && s.proto == 17,
    };
    headers_ok
        && served.iter().any(|a| {
            a.port() == s.dport
                && a.is_ipv4() == s.dst.is_ipv4()
                && (a.ip().is_unspecified() || a.ip() == s.dst)
        })
}

fn v4() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        Just(IpAddr::V4(Ipv4Addr::new(10, 77, 0, 1))),
        Just(IpAddr::V4(Ipv4Addr::new(10, 77, 0, 3))),
        any::<[u8; 4]>().prop_map(|b| IpAddr::V4(b.into())),
    ]
}

fn v6() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        Just(IpAddr::V6("fd77::1".parse().unwrap())),
        // Differs from the served one in the last word only.
        Just(IpAddr::V6("fd77::2".parse().unwrap())),
        // And in the first word only.
        Just(IpAddr::V6("fd78::1".parse().unwrap())),
        any::<[u8; 16]>().prop_map(|b| IpAddr::V6(b.into())),
    ]
}

fn port() -> impl Strategy<Value = u16> {
    prop_oneof![Just(2002u16), Just(2003), Just(0x0207), any::<u16>()]
}

fn served() -> impl Strategy<Value = Vec<SocketAddr>> {
    let one = (
        prop_oneof![
            Just(IpAddr::V4(Ipv4Addr::new(10, 77, 0, 1))),
            Just(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            Just(IpAddr::V6("fd77::1".parse().unwrap())),
            Just(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
        ],
        prop_oneof![Just(2002u16), Just(2003)],
    )
        .prop_map(|(ip, port)| SocketAddr::new(ip, port));
    proptest::collection::vec(one, 1..4)
}

fn shape() -> impl Strategy<Value = Shape> {
    let family = prop_oneof![
        (v4(), v4()).prop_map(|(d, s)| (d, s, 0x0800u16)),
        (v6(), v6()).prop_map(|(d, s)| (d, s, 0x86ddu16)),
    ];
    (
        family,
        prop_oneof![
            8 => Just(None),
            1 => Just(Some(0x8100u16)),
            1 => any::<u16>()
                .prop_filter("another type", |t| *t != 0x0800 && *t != 0x86dd)
                .prop_map(Some),
        ],
        port(),
        any::<u16>(),
        prop_oneof![8 => Just(17u8), 1 => Just(6), 1 => any::<u8>()],
        prop_oneof![8 => Just(5u8), 1 => 6u8..=15],
        prop_oneof![6 => Just(0u16), 2 => Just(0x4000), 1 => Just(0x2000), 1 => any::<u16>()],
        proptest::collection::vec(any::<u8>(), 0..64),
        prop_oneof![6 => Just(usize::MAX), 4 => 0usize..80],
    )
        .prop_map(
            |((dst, src, ethertype), other_type, dport, sport, proto, ihl, frag, payload, cut)| {
                Shape {
                    ethertype: other_type.unwrap_or(ethertype),
                    dst,
                    src,
                    dport,
                    sport,
                    proto,
                    ihl,
                    frag,
                    payload,
                    cut,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// The program steers exactly the served UDP, and reads nothing it
    /// did not bound first (the interpreter would panic).
    #[test]
    fn steers_exactly_the_served_udp(s in shape(), served in served(), queue in 0u32..8) {
        let prog = assemble(&served, 7);
        let f = build(&s);
        let got = interpret(&prog, &f, queue);
        prop_assert_eq!(got.is_some(), steered(&s, &served), "{:?}", s);
        if let Some(q) = got {
            // To the socket of the queue the frame came in on.
            prop_assert_eq!(q, queue);
        }
    }

    /// Whatever the worker would answer, the program steers to it: a frame
    /// the worker's parser accepts, for a served address, is never left to
    /// the kernel.
    #[test]
    fn what_the_worker_answers_is_steered_to_it(s in shape(), served in served()) {
        let prog = assemble(&served, 7);
        let f = build(&s);
        if let Ok(d) = frame::parse(&f) {
            let for_us = served.iter().any(|a| {
                a.port() == d.to.port()
                    && a.is_ipv4() == d.to.is_ipv4()
                    && (a.ip().is_unspecified() || a.ip() == d.to.ip())
            });
            prop_assert_eq!(interpret(&prog, &f, 0).is_some(), for_us);
        }
    }

    /// Arbitrary bytes: never a read out of bounds.
    #[test]
    fn arbitrary_bytes_are_read_within_bounds(f in proptest::collection::vec(any::<u8>(), 0..128), served in served()) {
        let prog = assemble(&served, 7);
        let _ = interpret(&prog, &f, 0);
    }
}

#[test]
fn every_shape_of_served_list_loads_into_this_kernel() {
    let test = "every_shape_of_served_list_loads_into_this_kernel";
    if let Some(e) = gnomon_server::xdp::unavailable() {
        gnomon_testkit::skip(test, &format!("no AF_XDP socket can be made here: {e}"));
        return;
    }
    let map = match gnomon_server::xdp::sys::SocketMap::new(4) {
        Ok(m) => m,
        Err(e) => {
            gnomon_testkit::skip(test, &format!("no BPF map can be made here: {e}"));
            return;
        }
    };
    let lists: [&[&str]; 5] = [
        &["10.77.0.1:2002"],
        &["[fd77::1]:2002"],
        &["0.0.0.0:2002", "[::]:2002"],
        &[
            "10.77.0.1:2002",
            "10.77.0.3:2003",
            "[fd77::1]:2002",
            "[fd77::9]:4000",
        ],
        &[
            "10.0.0.1:1",
            "10.0.0.2:2",
            "10.0.0.3:3",
            "10.0.0.4:4",
            "10.0.0.5:5",
            "10.0.0.6:6",
            "10.0.0.7:7",
            "10.0.0.8:8",
            "[fd00::1]:1",
            "[fd00::2]:2",
            "[fd00::3]:3",
            "[fd00::4]:4",
            "[fd00::5]:5",
            "[fd00::6]:6",
            "[fd00::7]:7",
            "[fd00::8]:8",
        ],
    ];
    for list in lists {
        let served: Vec<SocketAddr> = list.iter().map(|a| a.parse().unwrap()).collect();
        let prog = assemble(&served, map.raw());
        if let Err(e) = gnomon_server::xdp::sys::Program::load(&prog) {
            panic!("the verifier refused the program for {list:?}: {e}");
        }
    }
}

/// The size DESIGN.md quotes: one IPv4 and one IPv6 address served.
#[test]
fn the_usual_program_is_a_few_dozen_instructions() {
    let served = [
        "10.77.0.1:2002".parse().unwrap(),
        "[fd77::1]:2002".parse().unwrap(),
    ];
    let n = assemble(&served, 7).len();
    assert!((40..=60).contains(&n), "{n} instructions");
    eprintln!("{n} instructions");
}
