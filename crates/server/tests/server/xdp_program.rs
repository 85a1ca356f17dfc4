//! The XDP program, checked two ways: run by hand over frames an
//! adversary chooses (`program::interpret`, which fails on any read the
//! program did not bound first), against a statement of what it must
//! steer; and loaded into this kernel, whose verifier must accept it for
//! every shape of served-address list.
//!
//! What it must do: send a frame to the AF_XDP socket exactly when the
//! kernel would deliver it to a served UDP socket: Ethernet carrying IPv4
//! without options and not a fragment, or IPv6 with UDP as the next
//! header, whose UDP destination is a served address and port (an
//! unspecified served address matches every address of the host's in its
//! family), sent to the interface's own MAC from a unicast one, with
//! neither address a loopback one and the source not the host's own.
//! Everything else passes to the kernel, so no traffic but the served UDP
//! is ever taken from it; a frame for a served port passed for one of the
//! last reasons is counted under it (the first that applies, in the
//! program's order). And the kernel, running the program, counts the same.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use gnomon_server::xdp::frame;
use gnomon_server::xdp::interpret::{interpret, Host};
use gnomon_server::xdp::program::{assemble, Passed};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

/// The interface's own MAC address, and another host's.
const OURS: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
const OTHER: [u8; 6] = [0x02, 0, 0, 0, 0, 9];
const CLIENT: [u8; 6] = [0x02, 0, 0, 0, 0, 2];

/// The host's own addresses.
fn local() -> BTreeSet<IpAddr> {
    ["10.77.0.1", "10.77.0.5", "fd77::1", "fd77::5"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect()
}

fn host() -> Host {
    Host::new(OURS, local())
}

/// A frame's headers, as generated.
#[derive(Clone, Debug)]
struct Shape {
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
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
    let mut f = [s.dst_mac, s.src_mac].concat();
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

/// Whether `s` is UDP of a shape the program reads, to a served address
/// and port (a wildcard matching any of the host's addresses).
fn for_a_served_port(s: &Shape, served: &[SocketAddr]) -> bool {
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

/// Why the program must leave `s`, a frame for a served port, to the
/// kernel: the first reason that applies, in the program's order; `None`:
/// it must take it.
fn passed_because(s: &Shape, served: &[SocketAddr]) -> Option<Passed> {
    let wildcard_only = !served
        .iter()
        .any(|a| a.port() == s.dport && a.is_ipv4() == s.dst.is_ipv4() && a.ip() == s.dst);
    let local = local();
    if s.dst.is_loopback() || s.src.is_loopback() {
        Some(Passed::Loopback)
    } else if s.src_mac[0] & 1 == 1 {
        Some(Passed::GroupSource)
    } else if s.dst_mac[0] & 1 == 1 {
        Some(Passed::GroupDestination)
    } else if s.dst_mac != OURS {
        Some(Passed::OtherHost)
    } else if wildcard_only && !local.contains(&s.dst) {
        Some(Passed::NotLocal)
    } else if local.contains(&s.src) {
        Some(Passed::LocalSource)
    } else {
        None
    }
}

/// What the program must do with `s`: redirect (true) or pass.
fn steered(s: &Shape, served: &[SocketAddr]) -> bool {
    for_a_served_port(s, served) && passed_because(s, served).is_none()
}

fn mac() -> impl Strategy<Value = [u8; 6]> {
    prop_oneof![
        6 => Just(OURS),
        1 => Just(OTHER),
        1 => Just([0xff; 6]),
        // IPv4 all-hosts and IPv6 all-nodes multicast.
        1 => Just([0x01, 0x00, 0x5e, 0, 0, 1]),
        1 => Just([0x33, 0x33, 0, 0, 0, 1]),
        1 => any::<[u8; 6]>(),
    ]
}

fn src_mac() -> impl Strategy<Value = [u8; 6]> {
    prop_oneof![
        6 => Just(CLIENT),
        1 => Just([0xff; 6]),
        1 => Just([0x01, 0x00, 0x5e, 0, 0, 1]),
        1 => any::<[u8; 6]>(),
    ]
}

fn v4() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        Just(IpAddr::V4(Ipv4Addr::new(10, 77, 0, 1))),
        Just(IpAddr::V4(Ipv4Addr::new(10, 77, 0, 3))),
        Just(IpAddr::V4(Ipv4Addr::new(10, 77, 0, 5))),
        Just(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        Just(IpAddr::V4(Ipv4Addr::new(127, 9, 9, 9))),
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
        Just(IpAddr::V6("fd77::5".parse().unwrap())),
        Just(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        // Differs from ::1 in the first word only.
        Just(IpAddr::V6("1::1".parse().unwrap())),
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
        (mac(), src_mac()),
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
            |(
                (dst_mac, src_mac),
                (dst, src, ethertype),
                other_type,
                dport,
                sport,
                proto,
                ihl,
                frag,
                payload,
                cut,
            )| {
                Shape {
                    dst_mac,
                    src_mac,
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

    /// The program steers exactly what the kernel would deliver to a
    /// served socket, counts why it passed each other frame for a served
    /// port, and reads nothing it did not bound or write first (the
    /// interpreter would panic).
    #[test]
    fn steers_exactly_what_the_kernel_would_deliver(s in shape(), served in served(), queue in 0u32..8) {
        let mut h = host();
        let prog = assemble(&served, &h.maps);
        let f = build(&s);
        let got = interpret(&prog, &f, queue, &mut h);
        prop_assert_eq!(got.is_some(), steered(&s, &served), "{:?}", s);
        if let Some(q) = got {
            // To the socket of the queue the frame came in on.
            prop_assert_eq!(q, queue);
        }
        let mut counted = [0u64; Passed::ALL.len()];
        if for_a_served_port(&s, &served) {
            if let Some(p) = passed_because(&s, &served) {
                counted[p as usize] = 1;
            }
        }
        prop_assert_eq!(h.passed, counted, "{:?}", s);
    }

    /// Whatever the worker would answer, the program steers to it: a frame
    /// the worker's parser accepts, for a served address and passing the
    /// host's checks, is never left to the kernel; and the parser refuses
    /// what no reply may answer (a group source MAC).
    #[test]
    fn what_the_worker_answers_is_steered_to_it(s in shape(), served in served()) {
        let mut h = host();
        let prog = assemble(&served, &h.maps);
        let f = build(&s);
        match frame::parse(&f) {
            Ok(d) => {
                let for_us = for_a_served_port(&s, &served) && passed_because(&s, &served).is_none();
                prop_assert_eq!(d.to.ip(), s.dst);
                prop_assert_eq!(interpret(&prog, &f, 0, &mut h).is_some(), for_us);
            }
            Err(frame::Refused::GroupSource) => prop_assert_eq!(s.src_mac[0] & 1, 1),
            Err(_) => {}
        }
    }

    /// Arbitrary bytes: never a read out of bounds.
    #[test]
    fn arbitrary_bytes_are_read_within_bounds(f in proptest::collection::vec(any::<u8>(), 0..128), served in served()) {
        let mut h = host();
        let prog = assemble(&served, &h.maps);
        let _ = interpret(&prog, &f, 0, &mut h);
    }
}

/// The maps a kernel test loads the program with, filled as [`host`].
struct KernelMaps {
    xsks: gnomon_server::xdp::sys::SocketMap,
    settings: gnomon_server::xdp::sys::Array,
    local: gnomon_server::xdp::sys::AddressSet,
    passed: gnomon_server::xdp::sys::Array,
}

impl KernelMaps {
    /// The maps, or why this kernel or process cannot make them.
    fn make() -> Result<KernelMaps, String> {
        use gnomon_server::xdp::sys::{AddressSet, Array, SocketMap};
        if let Some(e) = gnomon_server::xdp::unavailable() {
            return Err(format!("no AF_XDP socket can be made here: {e}"));
        }
        let e = |e: std::io::Error| format!("no BPF map can be made here: {e}");
        let maps = KernelMaps {
            xsks: SocketMap::new(4).map_err(e)?,
            settings: Array::new(1, b"t_settings").map_err(e)?,
            local: AddressSet::new(16).map_err(e)?,
            passed: Array::new(Passed::ALL.len() as u32, b"t_passed").map_err(e)?,
        };
        let mut mac = [0u8; 8];
        mac[..6].copy_from_slice(&OURS);
        maps.settings.set(0, mac).unwrap();
        for ip in local() {
            maps.local
                .insert(&gnomon_server::xdp::gate::key(ip))
                .unwrap();
        }
        Ok(maps)
    }

    fn fds(&self) -> gnomon_server::xdp::program::Maps {
        gnomon_server::xdp::program::Maps {
            xsks: self.xsks.raw(),
            settings: self.settings.raw(),
            local: self.local.raw(),
            passed: self.passed.raw(),
        }
    }

    fn passed(&self) -> [u64; Passed::ALL.len()] {
        Passed::ALL.map(|p| u64::from_ne_bytes(self.passed.get(p as u32).unwrap()))
    }
}

/// The kernel runs the loaded program over generated frames
/// (`BPF_PROG_TEST_RUN`) and counts each passed frame under the reason the
/// interpreter gives: what the tests above prove of the interpreter holds
/// of the program the kernel runs.
#[test]
fn the_kernel_counts_what_the_interpreter_counts() {
    let test = "the_kernel_counts_what_the_interpreter_counts";
    let maps = match KernelMaps::make() {
        Ok(m) => m,
        Err(why) => return gnomon_testkit::skip(test, &why),
    };
    let served: Vec<SocketAddr> = ["0.0.0.0:2002", "[::]:2002", "10.77.0.1:2003"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    let prog = gnomon_server::xdp::sys::Program::load(&assemble(&served, &maps.fds()))
        .unwrap_or_else(|e| panic!("the verifier refused the program: {e}"));
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut h = host();
    let mine = assemble(&served, &h.maps);
    let mut frames = 0;
    let strategy = shape();
    for _ in 0..512 {
        let s = strategy.new_tree(&mut runner).unwrap().current();
        let f = build(&s);
        // The kernel runs XDP only over a whole Ethernet header.
        if f.len() < 14 {
            continue;
        }
        let before = maps.passed();
        let interpreted_before = h.passed;
        match prog.test_run(&f) {
            Ok(_) => {}
            Err(e) if frames == 0 => {
                return gnomon_testkit::skip(test, &format!("BPF_PROG_TEST_RUN refused: {e}"))
            }
            Err(e) => panic!("BPF_PROG_TEST_RUN: {e}"),
        }
        interpret(&mine, &f, 0, &mut h);
        let kernel: Vec<u64> = maps
            .passed()
            .iter()
            .zip(before)
            .map(|(a, b)| a - b)
            .collect();
        let interpreted: Vec<u64> = h
            .passed
            .iter()
            .zip(interpreted_before)
            .map(|(a, b)| a - b)
            .collect();
        assert_eq!(kernel, interpreted, "{s:?}");
        frames += 1;
    }
    assert!(frames > 400, "{frames} frames run");
    let counted: u64 = maps.passed().iter().sum();
    assert!(
        counted > 50,
        "only {counted} frames passed for a reason: the shapes miss the checks"
    );
    eprintln!(
        "{frames} frames run in the kernel, {counted} passed for a reason: {:?}",
        maps.passed()
    );
}

#[test]
fn every_shape_of_served_list_loads_into_this_kernel() {
    let test = "every_shape_of_served_list_loads_into_this_kernel";
    let maps = match KernelMaps::make() {
        Ok(m) => m,
        Err(why) => return gnomon_testkit::skip(test, &why),
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
        let prog = assemble(&served, &maps.fds());
        if let Err(e) = gnomon_server::xdp::sys::Program::load(&prog) {
            panic!("the verifier refused the program for {list:?}: {e}");
        }
    }
}

/// The size DESIGN.md quotes: one IPv4 and one IPv6 address served.
#[test]
fn the_usual_program_is_under_three_hundred_instructions() {
    let served = [
        "10.77.0.1:2002".parse().unwrap(),
        "[fd77::1]:2002".parse().unwrap(),
    ];
    let n = assemble(&served, &host().maps).len();
    assert!((150..=300).contains(&n), "{n} instructions");
    eprintln!("{n} instructions");
}
