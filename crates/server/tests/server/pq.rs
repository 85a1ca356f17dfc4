//! The experimental post-quantum version 0x90000001 (ML-DSA-44, docs/PQ.md)
//! served on loopback: over TCP by an ML-DSA-44 identity, whose answers
//! verify and list only 0x90000001 in VERS; never over UDP, where a request
//! offering only it is dropped and counted, and one offering version 1
//! too is answered in version 1 by the Ed25519 identity beside it; from
//! offline delegations of an ML-DSA-44 root; and, to a peer off the allow
//! list, within the TCP signature budget.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gnomon_protocol::tag::Tag;
use gnomon_protocol::wire::{unframe, Message};
use gnomon_protocol::{
    verify_response, KeyPair, MlDsa44KeyPair, Offer, Profile, ProfileSet, Version,
};
use gnomon_server::keys::KeySource;
use gnomon_server::limit::LimitConfig;
use gnomon_server::offline::{Delegation, OfflineStore};
use gnomon_server::stats::Drop;
use gnomon_server::tcp::{Close, TcpConfig};
use gnomon_server::worker::{VersLists, WorkerConfig};
use gnomon_server::{Engine, EngineConfig};

use common::{config, worker_config};

/// Bounds a wait that should end far sooner.
const PATIENCE: Duration = Duration::from_secs(10);

/// The version number of the ML-DSA-44 variant.
const PQ: Version = Version(0x9000_0001);

fn ml_dsa() -> &'static Profile {
    Profile::by_name("ml-dsa-44").unwrap()
}

/// Every version configured (as `serve` does with `versions = ["all"]`),
/// TCP on.
fn engine(sources: Vec<KeySource>) -> Engine {
    engine_limited(sources, LimitConfig::default())
}

/// As [`engine`], with `limit` for the allow and deny lists and the budget.
fn engine_limited(sources: Vec<KeySource>, limit: LimitConfig) -> Engine {
    engine_tcp(sources, limit, TcpConfig::default())
}

/// As [`engine_limited`], with `tcp` for the transport's caps and deadlines.
fn engine_tcp(sources: Vec<KeySource>, limit: LimitConfig, tcp: TcpConfig) -> Engine {
    let worker = WorkerConfig {
        vers: VersLists::new(&ProfileSet::ALL.versions()),
        limit,
        ..worker_config(64)
    };
    let config = EngineConfig {
        xdp: None,
        tcp: Some(tcp),
        ..config("127.0.0.1:0", worker)
    };
    Engine::start_with(config, sources).unwrap()
}

fn request(offer: Offer, i: u8) -> Vec<u8> {
    let nonce = vec![i; offer.primary().nonce_len];
    let mut out = vec![0u8; 1024];
    let n = offer.build(&nonce, None, 1024, &mut out).unwrap();
    out.truncate(n);
    out
}

fn tcp_exchange(engine: &Engine, req: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(engine.tcp_local()[0]).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s.write_all(req).unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).expect("a response header");
    assert_eq!(&head[..8], b"ROUGHTIM");
    let len = u32::from_le_bytes(head[8..].try_into().unwrap()) as usize;
    let mut frame = head.to_vec();
    frame.resize(12 + len, 0);
    s.read_exact(&mut frame[12..]).expect("a response body");
    frame
}

/// The versions the response's signed SREP lists.
fn vers(response: &[u8]) -> Vec<u32> {
    let reply = Message::parse(unframe(response).unwrap()).unwrap();
    let srep = reply.nested(Tag::SREP).unwrap();
    srep.get(Tag::VERS)
        .unwrap()
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn ml_dsa_is_served_over_tcp_and_never_over_udp() {
    let ed = KeyPair::from_seed(&[51; 32]);
    let pq = MlDsa44KeyPair::from_seed(&[52; 32]);
    let engine = engine(vec![
        KeySource::from(ed.clone()),
        KeySource::from(pq.clone()),
    ]);

    // TCP, 0x90000001: answered by the ML-DSA-44 identity.
    let r = request(Offer::single(ml_dsa()), 1);
    let answer = tcp_exchange(&engine, &r);
    let v = verify_response(&r, &answer, pq.public()).unwrap();
    assert_eq!(v.profile.version, PQ);
    assert!(answer.len() > 6000, "{} bytes", answer.len());
    assert_eq!(vers(&answer), [PQ.0]);
    // Not under the Ed25519 key, nor by any other ML-DSA key.
    assert!(verify_response(&r, &answer, &ed.public()).is_err());
    let stranger = MlDsa44KeyPair::from_seed(&[53; 32]);
    assert!(verify_response(&r, &answer, stranger.public()).is_err());

    // TCP, version 1: the Ed25519 identity, whose VERS never names 0x90000001.
    let r1 = request(Offer::single(Profile::rfc()), 2);
    let answer = tcp_exchange(&engine, &r1);
    verify_response(&r1, &answer, &ed.public()).unwrap();
    let listed = vers(&answer);
    assert!(listed.contains(&Version::RFC.0), "{listed:x?}");
    assert!(!listed.contains(&PQ.0), "{listed:x?}");

    // UDP: 0x90000001 alone is dropped; [1, 0x90000001] is answered in 1.
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(PATIENCE)).unwrap();
    let to = engine.local[0];
    let pq_only = request(Offer::single(ml_dsa()), 3);
    let both = request(Offer::new(&[Profile::rfc(), ml_dsa()]).unwrap(), 4);
    udp.send_to(&pq_only, to).unwrap();
    udp.send_to(&both, to).unwrap();
    // One worker, one socket, in order: the first datagram back answers
    // `both`, so `pq_only` was read and not answered.
    let mut buf = [0u8; 2048];
    let (n, _) = udp.recv_from(&mut buf).unwrap();
    let v = verify_response(&both, &buf[..n], &ed.public()).unwrap();
    assert_eq!(v.profile.version, Version::RFC);
    assert!(!vers(&buf[..n]).contains(&PQ.0));
    udp.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    assert!(udp.recv_from(&mut buf).is_err(), "a second UDP answer");
    let stats = engine.shutdown().unwrap();
    assert_eq!(stats.drops[Drop::UnknownVersion as usize], 1);
}

/// Pipelined ML-DSA-44 requests on one connection, more than the output
/// buffer holds answers of (each about 6.4 KB): all answered, in order,
/// each verifying; none dropped for want of room.
#[test]
fn pipelined_ml_dsa_requests_are_all_answered_in_order() {
    let pq = MlDsa44KeyPair::from_seed(&[57; 32]);
    let engine = engine(vec![KeySource::from(pq.clone())]);
    let reqs: Vec<Vec<u8>> = (0..10)
        .map(|i| request(Offer::single(ml_dsa()), i))
        .collect();
    let mut s = TcpStream::connect(engine.tcp_local()[0]).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s.write_all(&reqs.concat()).unwrap();
    for (i, r) in reqs.iter().enumerate() {
        let mut head = [0u8; 12];
        s.read_exact(&mut head).expect("a response header");
        let len = u32::from_le_bytes(head[8..].try_into().unwrap()) as usize;
        let mut frame = head.to_vec();
        frame.resize(12 + len, 0);
        s.read_exact(&mut frame[12..]).expect("a response body");
        verify_response(r, &frame, pq.public()).unwrap_or_else(|e| panic!("{i}: {e:?}"));
    }
    let st = engine.tcp_stats().unwrap();
    assert_eq!(st.responses[usize::from(ml_dsa().id.0)], 10);
    assert_eq!(st.total_drops(), 0);
    engine.shutdown().unwrap();
}

/// With only an ML-DSA-44 identity, a UDP request offering version 1 and
/// 0x90000001 has no version this server may answer over UDP: dropped.
#[test]
fn an_ml_dsa_only_server_answers_nothing_over_udp() {
    let pq = MlDsa44KeyPair::from_seed(&[54; 32]);
    let engine = engine(vec![KeySource::from(pq.clone())]);
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let both = request(Offer::new(&[Profile::rfc(), ml_dsa()]).unwrap(), 5);
    udp.send_to(&both, engine.local[0]).unwrap();
    let mut buf = [0u8; 2048];
    assert!(udp.recv_from(&mut buf).is_err(), "a UDP answer");
    // Over TCP the same request is answered in 0x90000001.
    let answer = tcp_exchange(&engine, &both);
    let v = verify_response(&both, &answer, pq.public()).unwrap();
    assert_eq!(v.profile.version, PQ);
    let stats = engine.shutdown().unwrap();
    assert_eq!(stats.drops[Drop::UnknownVersion as usize], 1);
}

/// Offline delegations of an ML-DSA-44 root: the server holds only the
/// delegation files, and its answers verify under the root.
#[test]
fn offline_delegations_of_an_ml_dsa_root_are_served() {
    let root = MlDsa44KeyPair::from_seed(&[55; 32]);
    let now_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let hour = 3_600_000_000;
    let dir = tempfile::tempdir().unwrap();
    Delegation::mint(&root, &[56; 32], now_us - hour, now_us + hour)
        .write_into(dir.path())
        .unwrap();
    let store = OfflineStore::load(dir.path(), Some(&root.public()[..])).unwrap();
    let engine = engine(vec![KeySource::Offline(store)]);
    let r = request(Offer::single(ml_dsa()), 6);
    let answer = tcp_exchange(&engine, &r);
    verify_response(&r, &answer, root.public()).unwrap();
    assert_eq!(vers(&answer), [PQ.0]);
    let online = MlDsa44KeyPair::from_seed(&[56; 32]);
    let snapshot = engine.snapshot();
    assert_eq!(snapshot.keys[0].online.bytes(), online.public());
    let metrics = gnomon_server::metrics::render(&snapshot);
    let line = metrics
        .lines()
        .find(|l| l.starts_with("gnomon_online_key_info{"))
        .unwrap();
    assert!(line.contains("long_term_key=\"ml-dsa-44:"), "{line}");
    assert!(line.len() < 200, "{line}");
    engine.shutdown().unwrap();
}

/// Ask `reqs` one at a time on one connection, each only once the server
/// has answered or dropped the one before (its counters say which), as a
/// client in lock-step does; every answer must verify. Returns how many
/// were answered, and the connection, still open.
fn lockstep(engine: &Engine, reqs: &[Vec<u8>], key: &MlDsa44KeyPair) -> (u64, TcpStream) {
    let mut s = TcpStream::connect(engine.tcp_local()[0]).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let handled = |st: &gnomon_server::tcp::TcpStats| {
        st.responses[usize::from(ml_dsa().id.0)] + st.total_drops()
    };
    let mut answered = 0;
    for (i, r) in reqs.iter().enumerate() {
        let before = engine.tcp_stats().unwrap();
        s.write_all(r).unwrap();
        let started = std::time::Instant::now();
        let after = loop {
            let st = engine.tcp_stats().unwrap();
            if handled(&st) > handled(&before) {
                break st;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "request {i} neither answered nor dropped"
            );
            std::thread::park_timeout(Duration::from_millis(1));
        };
        if after.responses != before.responses {
            let mut head = [0u8; 12];
            s.read_exact(&mut head).expect("a response header");
            let len = u32::from_le_bytes(head[8..].try_into().unwrap()) as usize;
            let mut frame = head.to_vec();
            frame.resize(12 + len, 0);
            s.read_exact(&mut frame[12..]).expect("a response body");
            verify_response(r, &frame, key.public()).unwrap_or_else(|e| panic!("{i}: {e:?}"));
            answered += 1;
        }
    }
    (answered, s)
}

/// Signing over TCP for a peer off the allow list takes at most
/// `signature-share` of one core: with a share of one millionth (the first
/// signature fills the bucket's debt, and each next one needs two seconds
/// of wall time), a lock-step client gets its first answer and then
/// counted drops, on a connection that stays open. The same client on the
/// allow list (loopback, the default) gets every answer.
#[test]
fn a_tcp_peer_off_the_allow_list_gets_only_its_share_of_ml_dsa_signatures() {
    let pq = MlDsa44KeyPair::from_seed(&[58; 32]);
    let reqs: Vec<Vec<u8>> = (0..8)
        .map(|i| request(Offer::single(ml_dsa()), i))
        .collect();
    let tight = LimitConfig {
        allow: Vec::new(),
        signature_share_ppm: 1,
        signature_burst_us: 1_000_000,
        ..LimitConfig::default()
    };
    let engine = engine_limited(vec![KeySource::from(pq.clone())], tight.clone());
    let (answered, _held) = lockstep(&engine, &reqs, &pq);
    let st = engine.tcp_stats().unwrap();
    let refused = st.drops[Drop::SignatureBudget as usize];
    assert!(answered >= 1, "a full bucket admits the first");
    assert!(refused >= 1, "{answered} answered, none refused");
    assert_eq!(answered + refused, reqs.len() as u64);
    assert_eq!(st.signatures, answered);
    assert_eq!(
        st.open, 1,
        "a refused request does not close the connection"
    );
    engine.shutdown().unwrap();

    // Allow-listed, the same peer is never refused.
    let trusted = LimitConfig {
        allow: LimitConfig::loopback(),
        ..tight
    };
    let engine = engine_limited(vec![KeySource::from(pq.clone())], trusted);
    assert_eq!(lockstep(&engine, &reqs, &pq).0, reqs.len() as u64);
    assert_eq!(engine.tcp_stats().unwrap().total_drops(), 0);
    engine.shutdown().unwrap();
}

/// The deny list holds over TCP as over UDP: every request of a denied
/// peer is dropped and counted, none signed.
#[test]
fn a_denied_network_gets_no_tcp_answer() {
    let pq = MlDsa44KeyPair::from_seed(&[59; 32]);
    let limit = LimitConfig {
        allow: Vec::new(),
        deny: vec!["127.0.0.0/8".parse().unwrap()],
        ..LimitConfig::default()
    };
    let engine = engine_limited(vec![KeySource::from(pq.clone())], limit);
    let reqs: Vec<Vec<u8>> = (0..3)
        .map(|i| request(Offer::single(ml_dsa()), i))
        .collect();
    let (answered, _held) = lockstep(&engine, &reqs, &pq);
    assert_eq!(answered, 0);
    let st = engine.tcp_stats().unwrap();
    assert_eq!(st.open, 1, "a denied request does not close the connection");
    assert_eq!(st.drops[Drop::Denied as usize], 3);
    assert_eq!(st.signatures, 0);
    engine.shutdown().unwrap();
}

/// A peer that pipelines ML-DSA-44 requests and never reads their 6.4 KB
/// answers fills both socket buffers within a few dozen; the server's
/// write then stalls and the write deadline ends the connection, counted,
/// with the handler's memory bounded by its one output buffer.
#[test]
fn a_peer_that_never_reads_its_ml_dsa_answers_is_closed_by_the_write_deadline() {
    let pq = MlDsa44KeyPair::from_seed(&[60; 32]);
    let tcp = TcpConfig {
        write_timeout: Duration::from_millis(300),
        read_timeout: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(3600),
        max_requests: 1_000_000,
        ..TcpConfig::default()
    };
    let engine = engine_tcp(vec![KeySource::from(pq)], LimitConfig::default(), tcp);
    let mut c = TcpStream::connect(engine.tcp_local()[0]).unwrap();
    c.set_write_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let r = request(Offer::single(ml_dsa()), 1);
    let closed = |e: &Engine| e.tcp_stats().unwrap().closed[Close::WriteTimeout as usize];
    let started = std::time::Instant::now();
    let mut off = 0;
    // Bounded: the deadline ends it within a second or so of the buffers
    // filling; PATIENCE only stops a broken server from hanging the test.
    while closed(&engine) == 0 {
        assert!(
            started.elapsed() < 2 * PATIENCE,
            "the server kept the unread connection"
        );
        match c.write(&r[off..]) {
            // Whole frames only, so the stream stays well formed.
            Ok(n) => off = (off + n) % r.len(),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            // The server shut the connection: its count follows.
            Err(_) => std::thread::park_timeout(Duration::from_millis(5)),
        }
    }
    let st = engine.tcp_stats().unwrap();
    assert_eq!(st.closed[Close::WriteTimeout as usize], 1);
    assert!(
        st.responses[usize::from(ml_dsa().id.0)] >= 2,
        "answers were written before the stall: {st:?}"
    );
    engine.shutdown().unwrap();
}
