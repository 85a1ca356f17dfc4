//! The TCP transport on loopback: several requests per connection for every
//! version with a packet header, bad frames dropped, the frame cap, the
//! read (slowloris) and idle timeouts, the connection cap, and shutdown.
//!
//! Nothing here sleeps to wait for the server: each test waits on a socket
//! (a response, or the end of the stream) under a read timeout that only
//! bounds a failure.

use crate::common;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use gnomon_protocol::{verify_response, KeyPair, Offer, Profile, PROFILES};
use gnomon_server::stats::Drop;
use gnomon_server::tcp::{Close, TcpConfig, TcpStats};
use gnomon_server::worker::WorkerConfig;
use gnomon_server::{Engine, EngineConfig};

use common::{config, worker_config};

/// Bounds a wait that should end far sooner.
const PATIENCE: Duration = Duration::from_secs(5);

fn tcp_config() -> TcpConfig {
    TcpConfig {
        enabled: true,
        max_connections: 16,
        // Long enough that none of these tests meets them by accident.
        idle_timeout: Duration::from_secs(60),
        read_timeout: Duration::from_secs(60),
        write_timeout: Duration::from_secs(60),
        max_frame: 2048,
        max_lifetime: Duration::from_secs(600),
        max_requests: 1_000_000,
        ..TcpConfig::default()
    }
}

fn engine_with(tcp: TcpConfig) -> (Engine, KeyPair) {
    engine_on(&["127.0.0.1:0"], tcp)
}

fn engine_on(listen: &[&str], tcp: TcpConfig) -> (Engine, KeyPair) {
    engine_full(listen, tcp, 0)
}

fn engine_full(listen: &[&str], tcp: TcpConfig, grease_per_million: u32) -> (Engine, KeyPair) {
    let lt = KeyPair::from_seed(&[41; 32]);
    let worker = WorkerConfig {
        grease_per_million,
        ..worker_config(64)
    };
    let config = EngineConfig {
        listen: listen.iter().map(|a| a.parse().unwrap()).collect(),
        recv_buffer: None,
        xdp: None,
        tcp: Some(tcp),
        ..config(listen[0], worker)
    };
    (Engine::start(config, vec![lt.clone()]).unwrap(), lt)
}

fn request_of_size(profile: &'static Profile, i: u64, size: usize) -> Vec<u8> {
    let mut nonce = vec![0u8; profile.nonce_len];
    nonce[..8].copy_from_slice(&i.to_le_bytes());
    let mut out = vec![0u8; size];
    let n = Offer::single(profile)
        .build(&nonce, None, size, &mut out)
        .unwrap();
    out.truncate(n);
    out
}

fn request(profile: &'static Profile, i: u64) -> Vec<u8> {
    request_of_size(profile, i, 1024)
}

fn connect(engine: &Engine) -> TcpStream {
    connect_to(engine.tcp_local()[0])
}

fn connect_to(to: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(to).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s
}

/// A ROUGHTIM header announcing a body of `len` bytes.
fn header(len: u32) -> Vec<u8> {
    let mut h = b"ROUGHTIM".to_vec();
    h.extend_from_slice(&len.to_le_bytes());
    h
}

/// Read one framed response.
fn read_frame(s: &mut TcpStream) -> Vec<u8> {
    let mut head = [0u8; 12];
    s.read_exact(&mut head).expect("a response header");
    assert_eq!(&head[..8], b"ROUGHTIM");
    let len = u32::from_le_bytes(head[8..].try_into().unwrap()) as usize;
    let mut frame = head.to_vec();
    frame.resize(12 + len, 0);
    s.read_exact(&mut frame[12..]).expect("a response body");
    frame
}

/// True once the server has ended the stream (a clean end or a reset);
/// false if `s`'s read timeout passed with the connection still open.
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(n) => panic!("{n} unexpected bytes"),
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => true,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            false
        }
        Err(e) => panic!("read: {e}"),
    }
}

/// Wait (bounded by `PATIENCE`) for the server to close `s`.
fn expect_closed(s: &mut TcpStream) {
    assert!(closed(s), "the server kept the connection open");
}

fn stats(engine: &Engine) -> TcpStats {
    engine.tcp_stats().expect("TCP is on")
}

#[test]
fn every_tcp_version_answers_several_requests_on_one_connection() {
    let (engine, lt) = engine_with(tcp_config());
    // The Ed25519 ones: ML-DSA-44's, answered by an identity of its own
    // scheme, are in tests/pq.rs.
    let tcp: Vec<&'static Profile> = PROFILES
        .iter()
        .filter(|p| p.tcp && p.scheme == gnomon_protocol::Scheme::Ed25519)
        .collect();
    assert_eq!(tcp.len(), 14, "drafts 01–11, 0x8000000c twice, and 1");
    for (k, profile) in tcp.iter().enumerate() {
        let mut s = connect(&engine);
        let reqs: Vec<Vec<u8>> = (0..5).map(|i| request(profile, i)).collect();
        // Two written at once (pipelined), then three one by one.
        s.write_all(&[reqs[0].clone(), reqs[1].clone()].concat())
            .unwrap();
        for r in &reqs[2..] {
            s.write_all(r).unwrap();
        }
        for (i, r) in reqs.iter().enumerate() {
            let answer = read_frame(&mut s);
            assert!(answer.len() <= r.len(), "{}: amplification", profile.name);
            // In request order; for 12+ this also checks that the leaf is
            // exactly the frame's bytes.
            verify_response(r, &answer, &lt.public())
                .unwrap_or_else(|e| panic!("{} response {i}: {e:?}", profile.name));
        }
        let st = stats(&engine);
        assert_eq!(
            st.responses[usize::from(profile.id.0)],
            5,
            "{}",
            profile.name
        );
        assert_eq!(st.accepted, k as u64 + 1);
    }
    let st = stats(&engine);
    assert_eq!(st.requests, 5 * tcp.len() as u64);
    assert_eq!(st.total_responses(), 5 * tcp.len() as u64);
    assert_eq!(st.total_drops(), 0);
    // Nothing came over UDP.
    let udp = engine.shutdown().unwrap();
    assert_eq!(udp.total_responses(), 0);
}

#[test]
fn mixed_versions_on_one_connection_are_answered_in_order() {
    let (engine, lt) = engine_with(tcp_config());
    let order = [
        Profile::rfc(),
        Profile::rfc(),
        Profile::by_name("draft-08").unwrap(),
        Profile::rfc(),
        Profile::by_name("draft-11").unwrap(),
        Profile::by_name("draft-11").unwrap(),
    ];
    let reqs: Vec<Vec<u8>> = order
        .iter()
        .enumerate()
        .map(|(i, p)| request(p, i as u64))
        .collect();
    let mut s = connect(&engine);
    s.write_all(&reqs.concat()).unwrap();
    for (r, p) in reqs.iter().zip(order) {
        let answer = read_frame(&mut s);
        verify_response(r, &answer, &lt.public()).unwrap_or_else(|e| panic!("{}: {e:?}", p.name));
    }
    assert_eq!(stats(&engine).total_responses(), 6);
    engine.shutdown().unwrap();
}

#[test]
fn bad_requests_are_dropped_and_the_connection_survives() {
    let (engine, lt) = engine_with(tcp_config());
    let mut s = connect(&engine);
    let mut garbage = header(1012);
    garbage.resize(1024, 0xff);
    s.write_all(&garbage).unwrap();
    // An empty frame is well delimited but carries no message.
    s.write_all(&header(0)).unwrap();
    // The next response on the stream answers this request, so none of the
    // frames before it got one.
    let good = request(Profile::rfc(), 100);
    s.write_all(&good).unwrap();
    verify_response(&good, &read_frame(&mut s), &lt.public()).unwrap();
    let st = stats(&engine);
    assert_eq!(st.drops[Drop::Message as usize], 2);
    assert_eq!(st.udp_only, 0);
    assert_eq!(st.requests, 3);
    assert_eq!(st.total_responses(), 1);
    assert_eq!(st.closed, [0; Close::COUNT]);

    // Google has no framing at all: its bare message cannot be delimited in
    // a stream, so it ends the connection.
    let mut g = connect(&engine);
    g.write_all(&request(Profile::google(), 1)).unwrap();
    expect_closed(&mut g);
    let st = stats(&engine);
    assert_eq!(st.closed[Close::Framing as usize], 1);
    assert_eq!(st.total_responses(), 1);
    // The first connection is still served.
    let again = request(Profile::rfc(), 101);
    s.write_all(&again).unwrap();
    verify_response(&again, &read_frame(&mut s), &lt.public()).unwrap();
    engine.shutdown().unwrap();
}

#[test]
fn a_frame_longer_than_the_cap_closes_the_connection() {
    let config = tcp_config();
    let cap = config.max_frame;
    let (engine, lt) = engine_with(config);
    let mut s = connect(&engine);
    // A request exactly at the cap is answered.
    let biggest = request_of_size(Profile::rfc(), 1, 12 + cap);
    assert_eq!(biggest.len(), 12 + cap);
    s.write_all(&biggest).unwrap();
    verify_response(&biggest, &read_frame(&mut s), &lt.public()).unwrap();
    // One byte more: closed on the header alone, long before the 60 s read
    // timeout would end a wait for the body.
    s.write_all(&header(cap as u32 + 1)).unwrap();
    expect_closed(&mut s);
    let st = stats(&engine);
    assert_eq!(st.closed[Close::FrameTooLarge as usize], 1);
    assert_eq!(st.total_responses(), 1);
    // A bad header after a good request: the request is still answered.
    let mut t = connect(&engine);
    let good = request(Profile::rfc(), 2);
    t.write_all(&[good.clone(), b"GNOMONxx\x00\x04\x00\x00".to_vec()].concat())
        .unwrap();
    verify_response(&good, &read_frame(&mut t), &lt.public()).unwrap();
    expect_closed(&mut t);
    assert_eq!(stats(&engine).closed[Close::Framing as usize], 1);
    engine.shutdown().unwrap();
}

#[test]
fn a_stalled_connection_does_not_hurt_udp_and_is_closed_after_the_read_timeout() {
    let read_timeout = Duration::from_millis(300);
    let (engine, lt) = engine_with(TcpConfig {
        read_timeout,
        ..tcp_config()
    });
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut stalled = connect(&engine);
    // Half a header, then nothing.
    let started = Instant::now();
    stalled.write_all(b"ROUGHT").unwrap();
    stalled
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let mut other = connect(&engine);
    let mut rounds = 0u64;
    let mut buf = [0u8; 2048];
    loop {
        // While it stalls, UDP and other TCP clients are answered.
        let r = request(Profile::rfc(), rounds);
        udp.send_to(&r, engine.local[0]).unwrap();
        let (n, _) = udp.recv_from(&mut buf).expect("a UDP answer");
        verify_response(&r, &buf[..n], &lt.public()).unwrap();
        let t = request(Profile::rfc(), 1_000 + rounds);
        other.write_all(&t).unwrap();
        verify_response(&t, &read_frame(&mut other), &lt.public()).unwrap();
        rounds += 1;
        if closed(&mut stalled) {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the stalled connection stayed open"
        );
    }
    assert!(
        started.elapsed() >= read_timeout,
        "closed before the read timeout"
    );
    assert!(rounds >= 1);
    let st = stats(&engine);
    assert_eq!(st.closed[Close::ReadTimeout as usize], 1);
    assert_eq!(st.total_responses(), rounds);
    let udp_stats = engine.shutdown().unwrap();
    assert_eq!(udp_stats.total_responses(), rounds);
}

#[test]
fn a_trickled_frame_is_closed_at_the_read_timeout() {
    // Bytes keep coming, but the frame's deadline runs from its first byte.
    let read_timeout = Duration::from_millis(300);
    let (engine, _) = engine_with(TcpConfig {
        read_timeout,
        ..tcp_config()
    });
    let mut s = connect(&engine);
    s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let r = request(Profile::rfc(), 1);
    let started = Instant::now();
    let mut sent = 0;
    loop {
        // A failed write also means the server has closed.
        if s.write_all(&r[sent..sent + 1]).is_err() || closed(&mut s) {
            break;
        }
        sent += 1;
        assert!(sent < r.len(), "the whole frame went through");
        assert!(started.elapsed() < PATIENCE, "the trickle was never cut");
    }
    // The server counts a deadline less than 1 ms away as passed
    // (`MIN_WAIT` in src/tcp/conn.rs): it may close up to 1 ms early.
    let early = Duration::from_millis(1);
    assert!(
        started.elapsed() + early >= read_timeout,
        "cut after {:?}",
        started.elapsed()
    );
    assert_eq!(stats(&engine).closed[Close::ReadTimeout as usize], 1);
    engine.shutdown().unwrap();
}

#[test]
fn the_connection_cap_is_enforced() {
    let (engine, lt) = engine_with(TcpConfig {
        max_connections: 2,
        ..tcp_config()
    });
    // A round trip on each proves both are admitted.
    let mut a = connect(&engine);
    let mut b = connect(&engine);
    for (i, s) in [&mut a, &mut b].into_iter().enumerate() {
        let r = request(Profile::rfc(), i as u64);
        s.write_all(&r).unwrap();
        verify_response(&r, &read_frame(s), &lt.public()).unwrap();
    }
    // At the cap, a newcomer takes the slot of the connection idle the
    // longest: `a`, answered first.
    let mut c = connect(&engine);
    expect_closed(&mut a);
    let r = request(Profile::rfc(), 2);
    c.write_all(&r).unwrap();
    verify_response(&r, &read_frame(&mut c), &lt.public()).unwrap();
    let st = stats(&engine);
    assert_eq!((st.accepted, st.evicted, st.refused), (3, 1, 0));
    // With both holders mid-request, nothing is idle: a newcomer is refused.
    b.write_all(b"ROUGHT").unwrap();
    c.write_all(b"ROUGHT").unwrap();
    let until = Instant::now() + PATIENCE;
    while stats(&engine).busy < 2 {
        assert!(Instant::now() < until, "the half frames were not read");
        std::thread::yield_now();
    }
    let mut d = connect(&engine);
    expect_closed(&mut d);
    let st = stats(&engine);
    assert_eq!((st.accepted, st.evicted, st.refused), (3, 1, 1));
    // Counted by `a`'s handler as it ends, which may be after its peer
    // saw the close.
    while stats(&engine).closed[Close::Evicted as usize] < 1 {
        assert!(Instant::now() < until, "the eviction was not counted");
        std::thread::yield_now();
    }
    engine.shutdown().unwrap();
}

#[test]
fn an_idle_connection_is_closed_after_the_idle_timeout() {
    let idle_timeout = Duration::from_millis(200);
    let (engine, lt) = engine_with(TcpConfig {
        idle_timeout,
        ..tcp_config()
    });
    let mut s = connect(&engine);
    let started = Instant::now();
    let r = request(Profile::rfc(), 1);
    s.write_all(&r).unwrap();
    verify_response(&r, &read_frame(&mut s), &lt.public()).unwrap();
    expect_closed(&mut s);
    // Counted from the last request, which was sent after `started`.
    assert!(started.elapsed() >= idle_timeout);
    // A connection that never sends anything is closed the same way.
    let mut silent = connect(&engine);
    expect_closed(&mut silent);
    let st = stats(&engine);
    assert_eq!(st.closed[Close::Idle as usize], 2);
    assert_eq!(st.open, 0);
    engine.shutdown().unwrap();
}

#[test]
fn shutdown_closes_open_connections_promptly() {
    // Two addresses, so two listeners share the set of connections.
    let (engine, lt) = engine_on(&["127.0.0.1:0", "127.0.0.2:0"], tcp_config());
    assert_eq!(engine.tcp_local().len(), 2);
    let mut open = Vec::new();
    let first = engine.tcp_local()[0];
    for (i, to) in engine.tcp_local().iter().chain([&first]).enumerate() {
        let mut s = connect_to(*to);
        let r = request(Profile::rfc(), i as u64);
        s.write_all(&r).unwrap();
        verify_response(&r, &read_frame(&mut s), &lt.public()).unwrap();
        open.push(s);
    }
    // The last one waits in the middle of a frame.
    open[2].write_all(&header(1012)).unwrap();
    assert_eq!(stats(&engine).open, 3);
    let started = Instant::now();
    engine.shutdown().unwrap();
    // Each would otherwise wait out a 60 s timeout.
    assert!(started.elapsed() < Duration::from_secs(2));
    for s in &mut open {
        expect_closed(s);
    }
}

#[test]
fn tcp_is_off_unless_enabled() {
    let (engine, _) = engine_with(TcpConfig {
        enabled: false,
        ..tcp_config()
    });
    assert!(engine.tcp_local().is_empty());
    assert!(engine.tcp_stats().is_none());
    // Nothing listens over TCP on the UDP port.
    let to: SocketAddr = engine.local[0];
    assert_eq!(
        TcpStream::connect(to).unwrap_err().kind(),
        io::ErrorKind::ConnectionRefused
    );
    engine.shutdown().unwrap();
}

#[test]
fn a_peer_that_does_not_read_its_responses_is_closed() {
    let (engine, _) = engine_with(TcpConfig {
        write_timeout: Duration::from_millis(300),
        ..tcp_config()
    });
    let mut s = connect(&engine);
    s.set_write_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let r = request(Profile::rfc(), 1);
    let started = Instant::now();
    let mut off = 0;
    // Pipeline requests and never read: the responses fill both socket
    // buffers, the server's write stalls, and it gives up on the peer.
    loop {
        match s.write(&r[off..]) {
            // Whole frames only, so the server never sees a broken stream.
            Ok(n) => off = (off + n) % r.len(),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
        assert!(started.elapsed() < 4 * PATIENCE, "the server kept writing");
    }
    let st = stats(&engine);
    assert_eq!(
        st.closed[Close::WriteTimeout as usize],
        1,
        "{:?}",
        st.closed
    );
    assert!(st.total_responses() > 0);
    engine.shutdown().unwrap();
}

#[test]
fn grease_over_tcp_breaks_only_signatures() {
    let (engine, lt) = engine_full(&["127.0.0.1:0"], tcp_config(), 500_000);
    let mut s = connect(&engine);
    let reqs: Vec<Vec<u8>> = (0..40).map(|i| request(Profile::rfc(), i)).collect();
    s.write_all(&reqs.concat()).unwrap();
    let (mut valid, mut greased) = (0, 0);
    for r in &reqs {
        match verify_response(r, &read_frame(&mut s), &lt.public()) {
            Ok(_) => valid += 1,
            Err(gnomon_protocol::VerifyError::ResponseSignature) => greased += 1,
            Err(e) => panic!("grease produced {e:?}"),
        }
    }
    // Half of 40 each way; all on one side has odds of 2^-39.
    assert!(valid > 0 && greased > 0, "{valid} valid, {greased} greased");
    assert_eq!(stats(&engine).greased, greased);
    engine.shutdown().unwrap();
}

#[test]
fn a_reload_reaches_udp_workers_and_open_tcp_connections() {
    use gnomon_protocol::{Acceptor, ProfileSet};
    use gnomon_server::keys::KeySource;
    use gnomon_server::offline::{Delegation, OfflineStore};
    let lt = KeyPair::from_seed(&[41; 32]);
    let base = EngineConfig {
        xdp: None,
        tcp: Some(tcp_config()),
        ..config("127.0.0.1:0", worker_config(64))
    };
    let engine = Engine::start(base.clone(), vec![lt.clone()]).unwrap();
    let (rfc, draft) = (Profile::rfc(), Profile::by_name("draft-12").unwrap());
    let mut open = connect(&engine);
    let r = request(rfc, 0);
    open.write_all(&r).unwrap();
    verify_response(&r, &read_frame(&mut open), &lt.public()).unwrap();
    // Another key, and version 1 no longer answered.
    let next = KeyPair::from_seed(&[42; 32]);
    let mut reloaded = base.clone();
    reloaded.worker.acceptor = Acceptor {
        profiles: ProfileSet(ProfileSet::ALL.0 & !(1 << rfc.id.0)),
        ..reloaded.worker.acceptor
    };
    let publics = engine
        .reload(reloaded.clone(), Some(vec![KeySource::from(next.clone())]))
        .unwrap();
    assert_eq!(publics, [gnomon_protocol::LongTermKey::from(next.public())]);
    // On the connection opened before: version 1 is dropped (responses
    // come in request order, so the first back is the draft's), the rest
    // is signed by the new key.
    let (r1, r12) = (request(rfc, 1), request(draft, 2));
    open.write_all(&[r1, r12.clone()].concat()).unwrap();
    verify_response(&r12, &read_frame(&mut open), &next.public()).unwrap();
    assert_eq!(stats(&engine).drops[Drop::UnknownVersion as usize], 1);
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(PATIENCE)).unwrap();
    udp.send_to(&r12, engine.local[0]).unwrap();
    let mut buf = [0u8; 2048];
    let (n, _) = udp.recv_from(&mut buf).unwrap();
    verify_response(&r12, &buf[..n], &next.public()).unwrap();
    // Delegations none of which covers now: refused, nothing changes.
    let dir = tempfile::tempdir().unwrap();
    let year_2100 = 4_102_444_800_000_000;
    Delegation::mint(&lt, &[7; 32], year_2100, year_2100 + 3_600_000_000)
        .write_into(dir.path())
        .unwrap();
    let store = OfflineStore::load(dir.path(), None).unwrap();
    let refused = engine.reload(base, Some(vec![KeySource::Offline(store)]));
    assert!(refused.is_err());
    open.write_all(&request(rfc, 3)).unwrap();
    let r = request(draft, 4);
    open.write_all(&r).unwrap();
    verify_response(&r, &read_frame(&mut open), &next.public()).unwrap();
    let counts = engine.snapshot().reloads;
    assert_eq!(
        (counts.succeeded, counts.failed, counts.last_ok),
        (1, 1, false)
    );
    engine.shutdown().unwrap();
}
