//! Servers that do not answer, answer garbage or half an answer, or are not
//! there: clear errors, bounded time.

use crate::common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use common::{client, fast, server_for};
use gnomon_client::{Client, QueryError, Rejection, Server, TcpMode};
use gnomon_protocol::serverlist::Transport;
use gnomon_protocol::{Profile, VerifyError, WireError};
use gnomon_testkit::{Fixture, FixtureConfig, Mode};

fn with_mode(mode: Mode, seed: u8) -> Fixture {
    Fixture::start(FixtureConfig {
        mode,
        seed,
        ..FixtureConfig::default()
    })
}

#[test]
fn a_silent_server_is_no_answer_within_the_worst_case() {
    let f = with_mode(Mode::Silent, 61);
    let mut cfg = fast();
    cfg.version_fallback = true;
    let bound = cfg.worst_case(5);
    let start = Instant::now();
    let err = Client::new(cfg)
        .query(&server_for(&f, "silent"))
        .unwrap_err();
    let took = start.elapsed();
    match &err {
        QueryError::NoAnswer {
            refused,
            udp_sent,
            offered,
            ..
        } => {
            assert!(!refused);
            // 2 attempts for the first family, 1 for each of the 4 others.
            assert_eq!(*udp_sent, 6);
            assert_eq!(
                offered,
                &["rfc-10049", "draft-12", "draft-07", "draft-04", "google"]
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(f.udp_received(), 6);
    assert!(
        took <= bound + Duration::from_millis(500),
        "{took:?} > {bound:?}"
    );
    assert!(err.to_string().starts_with("no answer after"), "{err}");
}

#[test]
fn a_deadline_cuts_discovery_short() {
    let f = with_mode(Mode::Silent, 62);
    let mut cfg = fast();
    // Without the deadline two attempts would wait 1 s + 1.5 s: a bound
    // of 2 s tells the two apart with room for a loaded machine.
    cfg.backoff.initial = Duration::from_secs(1);
    cfg.deadline = Some(Duration::from_millis(200));
    let start = Instant::now();
    let err = Client::new(cfg)
        .query(&server_for(&f, "silent"))
        .unwrap_err();
    assert!(matches!(err, QueryError::NoAnswer { .. }));
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn a_closed_port_is_refused_at_once() {
    let port = {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap().port()
    };
    let mut cfg = fast();
    // Long timeouts: only the ICMP error can make this quick.
    cfg.backoff.initial = Duration::from_secs(5);
    let start = Instant::now();
    let s = Server::at(&format!("127.0.0.1:{port}"), [7; 32]).unwrap();
    let err = Client::new(cfg).query(&s).unwrap_err();
    assert!(
        matches!(err, QueryError::NoAnswer { refused: true, .. }),
        "{err:?}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert!(err.to_string().contains("connection refused"), "{err}");
}

#[test]
fn garbage_is_an_invalid_answer_and_stops_discovery() {
    let f = with_mode(Mode::Garbage, 63);
    let mut cfg = fast();
    cfg.version_fallback = true;
    cfg.tcp = TcpMode::Never;
    let err = Client::new(cfg)
        .query(&server_for(&f, "garbage"))
        .unwrap_err();
    match err {
        QueryError::Invalid {
            rejection: Rejection::Verify(VerifyError::Framing(WireError::NoMagic)),
            transport: Transport::Udp,
            ..
        } => {}
        other => panic!("{other:?}"),
    }
    // Every attempt of the first family was made (a datagram anyone could
    // have sent ends nothing), and no older family followed, even with
    // fallback allowed: an invalid answer is not silence.
    assert_eq!(f.udp_received(), 2);
    assert_eq!(f.tcp_received(), 0);
}

#[test]
fn a_google_server_answering_garbage_is_invalid_too() {
    let f = with_mode(Mode::Garbage, 64);
    let s = server_for(&f, "g").with_version(Profile::google());
    let err = client().query(&s).unwrap_err();
    assert!(err.is_invalid(), "{err:?}");
}

#[test]
fn truncated_answers_are_invalid_over_udp_and_tcp() {
    let f = with_mode(Mode::Truncated, 65);
    let mut cfg = fast();
    cfg.tcp = TcpMode::Never;
    let err = Client::new(cfg).query(&server_for(&f, "half")).unwrap_err();
    match err {
        QueryError::Invalid {
            rejection: Rejection::Verify(VerifyError::Framing(WireError::FrameLength)),
            ..
        } => {}
        other => panic!("{other:?}"),
    }
    let mut cfg = fast();
    cfg.tcp = TcpMode::Only;
    let err = Client::new(cfg).query(&server_for(&f, "half")).unwrap_err();
    match &err {
        QueryError::Invalid {
            rejection: Rejection::TcpClosed { got, want },
            transport: Transport::Tcp,
            ..
        } => assert!(got < want, "{got} {want}"),
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("TCP stream ended"), "{err}");
}

#[test]
fn an_unresolvable_name_says_so() {
    let s = Server::at("no-such-host.invalid:5319", [1; 32]).unwrap();
    let err = client().query(&s).unwrap_err();
    assert!(matches!(err, QueryError::Resolve { .. }), "{err:?}");
}

#[test]
fn one_forged_datagram_does_not_end_the_query() {
    // The first request is answered by garbage alone; the retransmission
    // gets the real answer, which must be taken.
    let f = with_mode(Mode::GarbageFirst, 66);
    let mut cfg = fast();
    cfg.tcp = TcpMode::Never;
    let a = Client::new(cfg)
        .query(&server_for(&f, "raced"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.verified.profile.name, "rfc-10049");
    assert_eq!(a.sends, 2);
    assert_eq!(f.udp_received(), 2);
}

#[test]
fn one_forged_icmp_refusal_does_not_end_the_query() {
    // The first request draws a forged "port unreachable" and no answer;
    // the next attempt, sent at once, gets the real one.
    const TEST: &str = "failures::one_forged_icmp_refusal_does_not_end_the_query";
    if !gnomon_testkit::is_root() {
        return gnomon_testkit::skip(TEST, "needs root for a raw ICMP socket");
    }
    let f = with_mode(Mode::RefusedFirst, 67);
    let mut cfg = fast();
    cfg.tcp = TcpMode::Never;
    // Long timeouts: the second attempt must follow the refusal at once.
    cfg.backoff.initial = Duration::from_secs(5);
    let start = Instant::now();
    let a = Client::new(cfg)
        .query(&server_for(&f, "refused once"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.sends, 2);
    assert_eq!(f.udp_received(), 2);
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "{:?}",
        start.elapsed()
    );
}
