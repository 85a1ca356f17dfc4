//! Requests that parse, and the replies written over them: both versions,
//! every length up to the request's, the checksum's corner cases, and
//! what leaves a frame untouched.

use gnomon_server::xdp::frame::{parse, reply_in_place, Datagram};

use super::{check_reply, client4, client6, request_bytes, server4, server6, v4, v6, ETH};

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
