//! Properties over generated frames and bytes: no input panics, valid
//! frames parse to what was built, replies turn the endpoints around, and
//! a flipped bit is noticed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use gnomon_server::xdp::frame::{parse, reply_in_place, Datagram};
use proptest::prelude::*;
use proptest::sample::Index;

use super::{check_reply, client4, client6, server4, server6, v4, v6, ETH};

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
