//! Hostile TCP peers against a real `gnomon serve`: one host holding every
//! connection, one network's many addresses, many networks filling the
//! total (the connection idle the longest makes room), empty frames as keep-alives, a peer that never reads, a
//! connection that never stops asking; and the requests TCP can answer
//! that UDP must not (drafts 01–07, unpadded requests).

use crate::serve_support;

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

use gnomon_protocol::tag::Tag;
use gnomon_protocol::wire;
use gnomon_protocol::{verify_response, Offer, Profile, Version, PROFILES};
use serve_support::peer::{connect_from, read_frame, PATIENCE};
use serve_support::{start_serve, Started};

const HOG: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
const OTHER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

fn request(profile: &'static Profile, i: u8, size: usize) -> Vec<u8> {
    let mut out = vec![0u8; size];
    let n = Offer::single(profile)
        .build(&vec![i; profile.nonce_len], None, size, &mut out)
        .unwrap();
    out.truncate(n);
    out
}

/// A 0x8000000c request as pyroughtime's client sends it over TCP: VER,
/// NONC and TYPE, no ZZZZ padding.
fn unpadded_request() -> Vec<u8> {
    let ver = Version::DRAFT_12_TO_19.0.to_le_bytes();
    let nonce = [9u8; 32];
    let mut msg = [0u8; 128];
    let n = wire::write_message(
        &mut msg,
        &[(Tag::VER, &ver), (Tag::NONC, &nonce), (Tag::TYPE, &[0; 4])],
    )
    .unwrap();
    let mut out = vec![0u8; 12 + n];
    wire::write_frame_header(&mut out, n).unwrap();
    out[12..].copy_from_slice(&msg[..n]);
    out
}

/// `gnomon serve` with `extra` flags, and its TCP address.
fn start(extra: &[&str]) -> (Started, std::net::SocketAddr) {
    let mut s = start_serve(extra, |_| {});
    let tcp = s.tcp_addr();
    (s, tcp)
}

fn empty_frame() -> Vec<u8> {
    let mut f = b"ROUGHTIM".to_vec();
    f.extend_from_slice(&0u32.to_le_bytes());
    f
}

#[test]
fn one_source_cannot_hold_every_connection() {
    let _heavy = crate::heavy();
    let (s, tcp) = start(&[
        "--metrics",
        "127.0.0.1:0",
        "--tcp-max-connections",
        "8",
        "--tcp-max-per-source",
        "3",
    ]);
    let r = request(Profile::rfc(), 1, 1024);
    // The hog opens past both caps; each connection asks once, so the ones
    // admitted are known to be held when the other client comes.
    let mut held = Vec::new();
    let mut refused = 0;
    for _ in 0..12 {
        let mut c = connect_from(HOG, tcp);
        c.write_all(&r).unwrap();
        match read_frame(&mut c) {
            Some(answer) => {
                verify_response(&r, &answer, &s.public).unwrap();
                held.push(c);
            }
            None => refused += 1,
        }
    }
    assert_eq!((held.len(), refused), (3, 9), "per-source cap of 3");
    // Another source is still answered while the hog holds its share.
    let mut other = connect_from(OTHER, tcp);
    other.write_all(&r).unwrap();
    let answer = read_frame(&mut other).expect("a client from another source is answered");
    verify_response(&r, &answer, &s.public).unwrap();
    assert_eq!(
        s.metric("gnomon_tcp_connections_total{event=\"refused_per_source\"}"),
        9
    );
    assert_eq!(
        s.metric("gnomon_tcp_connections_total{event=\"refused\"}"),
        0
    );
    assert_eq!(s.metric("gnomon_tcp_open_connections"), 4);
    // Once the hog lets one go, its slot is free for it again.
    drop(held.pop());
    s.wait_metric("gnomon_tcp_open_connections", |v| v < 4);
    let mut again = connect_from(HOG, tcp);
    again.write_all(&r).unwrap();
    assert!(read_frame(&mut again).is_some());
    let (status, _, _) = s.terminate_bounded();
    assert!(status.success());
}

#[test]
fn empty_frames_do_not_keep_a_connection_alive() {
    let (s, tcp) = start(&["--metrics", "127.0.0.1:0", "--tcp-idle-timeout", "1s"]);
    let mut c = connect_from(HOG, tcp);
    // An empty frame every 100 ms, ten times the idle timeout's rate: only
    // an answered request restarts the idle timer.
    c.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let ended = loop {
        if started.elapsed() > PATIENCE {
            break false;
        }
        if c.write_all(&empty_frame()).is_err() {
            break true;
        }
        match c.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => panic!("an empty frame got an answer"),
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break true,
            Err(_) => {} // nothing yet: the read timeout paces the loop
        }
    };
    assert!(
        ended,
        "empty frames kept the connection open for {PATIENCE:?}"
    );
    assert_eq!(
        s.wait_metric("gnomon_tcp_closed_total{reason=\"idle_timeout\"}", |v| v
            >= 1),
        1
    );
    assert!(s.metric("gnomon_tcp_dropped_total{reason=\"malformed\"}") >= 5);
    let (status, _, _) = s.terminate_bounded();
    assert!(status.success());
}

#[test]
fn a_peer_that_never_reads_is_closed_by_the_write_deadline() {
    // The read timeout is long: the write deadline alone must end it.
    let (s, tcp) = start(&[
        "--metrics",
        "127.0.0.1:0",
        "--tcp-write-timeout",
        "500ms",
        "--tcp-read-timeout",
        "1m",
        "--tcp-idle-timeout",
        "1h",
        "--tcp-max-requests",
        "1000000",
    ]);
    let mut c = connect_from(HOG, tcp);
    c.set_write_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let r = request(Profile::rfc(), 3, 1024);
    let started = Instant::now();
    let mut off = 0;
    // Pipeline requests and never read: both socket buffers fill, the
    // server's write stalls, and the deadline ends the connection.
    let ended = loop {
        if started.elapsed() > 2 * PATIENCE {
            break false;
        }
        match c.write(&r[off..]) {
            // Whole frames only, so the stream stays well formed.
            Ok(n) => off = (off + n) % r.len(),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if s.metric("gnomon_tcp_closed_total{reason=\"write_timeout\"}") == 1 {
                    break true;
                }
            }
            Err(_) => break true,
        }
    };
    assert!(ended, "the server kept the unread connection");
    assert_eq!(
        s.wait_metric("gnomon_tcp_closed_total{reason=\"write_timeout\"}", |v| v
            >= 1),
        1
    );
    assert_eq!(s.metric("gnomon_tcp_open_connections"), 0);
    let (status, _, _) = s.terminate_bounded();
    assert!(status.success());
}

#[test]
fn a_busy_connection_ends_at_its_lifetime() {
    let (s, tcp) = start(&[
        "--metrics",
        "127.0.0.1:0",
        "--tcp-max-lifetime",
        "1s",
        "--tcp-max-requests",
        "1000000",
    ]);
    let mut c = connect_from(HOG, tcp);
    // Answered requests keep the idle timer fresh; only the lifetime ends it.
    let started = Instant::now();
    let mut answered = 0u64;
    let ended = loop {
        if started.elapsed() > PATIENCE {
            break false;
        }
        let r = request(Profile::rfc(), answered as u8, 1024);
        if c.write_all(&r).is_err() {
            break true;
        }
        match read_frame(&mut c) {
            Some(answer) => {
                verify_response(&r, &answer, &s.public).unwrap();
                answered += 1;
            }
            None => break true,
        }
    };
    assert!(ended, "the connection outlived its lifetime");
    assert!(answered > 0);
    assert_eq!(
        s.wait_metric("gnomon_tcp_closed_total{reason=\"max_lifetime\"}", |v| v
            >= 1),
        1
    );
    let (status, _, _) = s.terminate_bounded();
    assert!(status.success());
}

#[test]
fn the_request_cap_closes_the_connection() {
    let (s, tcp) = start(&["--metrics", "127.0.0.1:0", "--tcp-max-requests", "3"]);
    let mut c = connect_from(HOG, tcp);
    let reqs: Vec<Vec<u8>> = (0..5).map(|i| request(Profile::rfc(), i, 1024)).collect();
    c.write_all(&reqs.concat()).unwrap();
    for r in &reqs[..3] {
        let answer = read_frame(&mut c).expect("an answer within the cap");
        verify_response(r, &answer, &s.public).unwrap();
    }
    assert!(read_frame(&mut c).is_none(), "answered past the cap");
    assert_eq!(
        s.wait_metric("gnomon_tcp_closed_total{reason=\"max_requests\"}", |v| v
            >= 1),
        1
    );
    assert_eq!(s.metric("gnomon_tcp_requests_total"), 3);
    let (status, _, _) = s.terminate_bounded();
    assert!(status.success());
}

#[test]
fn drafts_01_to_07_are_answered_over_tcp() {
    let (s, tcp) = start(&[]);
    let early: Vec<&'static Profile> = PROFILES
        .iter()
        .filter(|p| (1..=7).any(|n| p.version == Version::draft(n)))
        .collect();
    assert_eq!(early.len(), 7);
    // One connection for all of them, as tannerryan/roughtime's client may.
    let mut c = connect_from(HOG, tcp);
    for (i, p) in early.iter().enumerate() {
        let r = request(p, i as u8, 1024);
        c.write_all(&r).unwrap();
        let answer = read_frame(&mut c).unwrap_or_else(|| panic!("{}: no answer", p.name));
        let v =
            verify_response(&r, &answer, &s.public).unwrap_or_else(|e| panic!("{}: {e:?}", p.name));
        assert_eq!(v.profile.id, p.id);
    }
    let (status, _, _) = s.terminate_bounded();
    assert!(status.success());
}

#[test]
fn unpadded_requests_are_answered_over_tcp_only() {
    let (s, tcp) = start(&["--metrics", "127.0.0.1:0", "--min-request-size", "256"]);
    let short = unpadded_request();
    assert!(short.len() < 100);
    let mut c = connect_from(HOG, tcp);
    c.write_all(&short).unwrap();
    let answer = read_frame(&mut c).expect("an unpadded request is answered over TCP");
    let v = verify_response(&short, &answer, &s.public).unwrap();
    assert_eq!(v.profile.name, "draft-14");
    // Not cut to the request's length: TCP cannot be spoofed.
    assert!(answer.len() > short.len());
    // A padded 256-byte request is long enough for UDP's size floor here,
    // but its response is not: over TCP it is answered in full.
    let padded = request(Profile::rfc(), 4, 256);
    c.write_all(&padded).unwrap();
    let answer = read_frame(&mut c).unwrap();
    verify_response(&padded, &answer, &s.public).unwrap();
    assert!(answer.len() > padded.len());

    // Over UDP both rules hold: the short request is too short, and the
    // 256-byte one cannot carry its response.
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    u.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 2048];
    for r in [&short, &padded] {
        u.send_to(r, s.addr).unwrap();
        assert!(
            u.recv_from(&mut buf).is_err(),
            "a UDP answer to {} bytes",
            r.len()
        );
    }
    // A full-size request over UDP still is answered, within its length.
    let full = request(Profile::rfc(), 5, 1024);
    u.set_read_timeout(Some(PATIENCE)).unwrap();
    u.send_to(&full, s.addr).unwrap();
    let (n, _) = u.recv_from(&mut buf).unwrap();
    verify_response(&full, &buf[..n], &s.public).unwrap();
    assert!(n <= full.len());
    // Both UDP refusals are counted, each under its own reason.
    assert_eq!(
        s.wait_metric("gnomon_dropped_total{reason=\"too_short\"}", |v| v >= 1),
        1
    );
    assert_eq!(
        s.wait_metric("gnomon_dropped_total{reason=\"too_small\"}", |v| v >= 1),
        1
    );
    let (status, _, _) = s.terminate_bounded();
    assert!(status.success());
}

/// A connection from `from` that asked once and was answered (held, idle
/// from then on, as a holder that asks now and then keeps it), or `None`
/// if the server closed it at once.
fn held_from(from: IpAddr, tcp: std::net::SocketAddr, r: &[u8]) -> Option<std::net::TcpStream> {
    let mut c = connect_from(from, tcp);
    c.write_all(r).ok()?;
    read_frame(&mut c).map(|_| c)
}

#[test]
fn one_network_of_many_addresses_holds_only_its_share() {
    let _heavy = crate::heavy();
    let (s, tcp) = start(&[
        "--metrics",
        "127.0.0.1:0",
        "--tcp-max-connections",
        "16",
        "--tcp-max-per-source",
        "4",
        "--tcp-max-per-network",
        "8",
    ]);
    let r = request(Profile::rfc(), 4, 1024);
    // Six addresses of one /24, four connections each: the /24 gets 8.
    let held: Vec<_> = (1..=6)
        .flat_map(|host| (0..4).map(move |_| IpAddr::from([127, 3, 0, host])))
        .filter_map(|from| held_from(from, tcp, &r))
        .collect();
    assert_eq!(held.len(), 8, "per-network cap of 8");
    assert_eq!(
        s.metric("gnomon_tcp_connections_total{event=\"refused_per_network\"}"),
        16
    );
    // Another /24 is served beside it.
    assert!(held_from(IpAddr::from([127, 4, 0, 1]), tcp, &r).is_some());
    let (status, _, _) = s.terminate_bounded();
    assert!(status.success());
}

#[test]
fn many_networks_filling_the_total_do_not_lock_out_an_honest_client() {
    let _heavy = crate::heavy();
    const CAP: usize = 16;
    let (s, tcp) = start(&[
        "--metrics",
        "127.0.0.1:0",
        "--tcp-max-connections",
        "16",
        "--tcp-max-per-source",
        "4",
    ]);
    let r = request(Profile::rfc(), 5, 1024);
    // Eight /24s, one address each at its share of 4: twice the total.
    let holders: Vec<IpAddr> = (0..8).map(|n| IpAddr::from([127, 1, n, 1])).collect();
    let mut held: Vec<_> = holders
        .iter()
        .flat_map(|&from| std::iter::repeat_n(from, 4))
        .filter_map(|from| held_from(from, tcp, &r))
        .collect();
    assert_eq!(
        s.wait_metric("gnomon_tcp_open_connections", |v| v == CAP as u64),
        CAP as u64
    );
    // Ten times: the holders top the table up to the cap, then an honest
    // client from another /24 asks once.
    let honest = IpAddr::from([127, 2, 0, 1]);
    let mut answered = 0;
    for i in 0..10 {
        for &from in holders.iter().cycle().skip(i).take(2) {
            held.extend(held_from(from, tcp, &r));
        }
        let ask = request(Profile::rfc(), 100 + i as u8, 1024);
        let mut c = connect_from(honest, tcp);
        if c.write_all(&ask).is_ok() {
            if let Some(answer) = read_frame(&mut c) {
                verify_response(&ask, &answer, &s.public).unwrap();
                answered += 1;
            }
        }
    }
    let evicted = s.metric("gnomon_tcp_connections_total{event=\"evicted\"}");
    let refused = s.metric("gnomon_tcp_connections_total{event=\"refused\"}");
    eprintln!("honest TCP client answered {answered} of 10; evicted {evicted}, refused {refused}");
    assert!(answered >= 9, "honest client answered {answered} of 10");
    assert!(evicted >= 10, "evicted {evicted}");
    assert_eq!(refused, 0);
    assert_eq!(
        s.wait_metric("gnomon_tcp_closed_total{reason=\"evicted\"}", |v| v
            >= evicted),
        evicted
    );
    drop(held);
    let (status, _, _) = s.terminate_bounded();
    assert!(status.success());
}
