//! One server at a time: every version, both transports, discovery,
//! retries and forced versions, against the loopback fixture.

mod common;

use std::time::Duration;

use common::{client, fast, seeded, server_for};
use gnomon_client::{Backoff, Client, Config, TcpMode};
use gnomon_protocol::serverlist::Transport;
use gnomon_protocol::{Profile, ProfileSet, PROFILES};
use gnomon_testkit::{Fixture, FixtureConfig};

fn only(p: &Profile) -> ProfileSet {
    ProfileSet::empty().with(p.id)
}

#[test]
fn discovery_finds_every_single_version_server() {
    // Each row of the table, served alone, is found by discovery from the
    // full offer list, and the answer verifies with sane values.
    let handles: Vec<_> = PROFILES
        .iter()
        .map(|p| {
            std::thread::spawn(move || {
                let f = Fixture::honest(only(p), 7);
                let a = client()
                    .query(&server_for(&f, p.name))
                    .unwrap_or_else(|e| panic!("{}: {e}", p.name));
                assert_eq!(a.verified.profile.id, p.id, "{}", p.name);
                assert_eq!(a.transport, Transport::Udp, "{}", p.name);
                // The fixture's clock is ours: offset within the radius.
                assert!(
                    a.offset_us.unsigned_abs() <= u128::from(a.verified.radius_us) + 1_000_000,
                    "{}: offset {}",
                    p.name,
                    a.offset_us
                );
                assert!(a.verified.radius_us >= 1_000_000, "{}", p.name);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn newest_version_wins_on_a_server_that_speaks_them_all() {
    let f = Fixture::honest(ProfileSet::ALL, 2);
    let a = client().query(&server_for(&f, "all")).unwrap();
    assert_eq!(a.verified.profile.name, "rfc-10049");
    assert!(!a.verified.legacy_context);
    // One request was enough: no fallback family was tried.
    assert_eq!(f.udp_received(), 1);
    assert_eq!(a.sends, 1);
}

#[test]
fn every_tcp_version_answers_over_tcp() {
    for p in PROFILES.iter().filter(|p| p.tcp) {
        let f = Fixture::honest(ProfileSet::ALL, 3);
        let mut cfg = fast();
        cfg.tcp = TcpMode::Only;
        let server = server_for(&f, p.name).with_version(p);
        let a = Client::new(cfg)
            .query(&server)
            .unwrap_or_else(|e| panic!("{}: {e}", p.name));
        assert_eq!(a.transport, Transport::Tcp, "{}", p.name);
        assert_eq!(a.verified.profile.id, p.id, "{}", p.name);
        assert_eq!(f.udp_received(), 0, "{}", p.name);
        assert_eq!(f.tcp_received(), 1, "{}", p.name);
    }
}

#[test]
fn tcp_only_refuses_versions_without_tcp() {
    let f = Fixture::honest(ProfileSet::ALL, 3);
    let mut cfg = fast();
    cfg.tcp = TcpMode::Only;
    let server = server_for(&f, "g").with_version(Profile::google());
    let err = Client::new(cfg).query(&server).unwrap_err();
    assert!(
        matches!(err, gnomon_client::QueryError::NoAnswer { .. }),
        "{err}"
    );
    assert_eq!(f.udp_received() + f.tcp_received(), 0);
}

#[test]
fn forced_version_is_answered_in_that_version() {
    let f = Fixture::honest(ProfileSet::ALL, 4);
    for name in [
        "google",
        "draft-03",
        "draft-07",
        "0x8000000b",
        "draft-12",
        "draft-14",
        "1",
    ] {
        let p = Profile::by_name(name).unwrap();
        let a = client()
            .query(&server_for(&f, name).with_version(p))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(a.verified.profile.id, p.id, "{name}");
        assert_eq!(
            a.offer.versions().len(),
            usize::from(p.version != gnomon_protocol::Version::GOOGLE)
        );
    }
}

#[test]
fn retries_follow_the_backoff_schedule() {
    let f = Fixture::start(FixtureConfig {
        drop_first_udp: 2,
        seed: 5,
        ..FixtureConfig::default()
    });
    let mut cfg = fast();
    cfg.backoff.attempts = 3;
    let a = Client::new(cfg).query(&server_for(&f, "lossy")).unwrap();
    assert_eq!(a.sends, 3);
    assert_eq!(f.udp_received(), 3);
    assert_eq!(a.transport, Transport::Udp);
    // Timing is measured from the first transmission: at least the two
    // waits that went unanswered (150 ms + 225 ms).
    assert!(a.rtt >= Duration::from_millis(375), "{:?}", a.rtt);
}

#[test]
fn silent_udp_falls_back_to_tcp() {
    let f = Fixture::start(FixtureConfig {
        udp: false,
        seed: 6,
        ..FixtureConfig::default()
    });
    let a = client().query(&server_for(&f, "tcp-only")).unwrap();
    assert_eq!(a.transport, Transport::Tcp);
    assert_eq!(a.verified.profile.name, "rfc-10049");
    // The full UDP schedule of the first family came first.
    assert_eq!(f.udp_received(), 2);
    assert_eq!(f.tcp_received(), 1);
}

#[test]
fn injected_entropy_makes_requests_repeatable() {
    let f = Fixture::honest(ProfileSet::ALL, 8);
    let s = server_for(&f, "s");
    let a = seeded(9).query(&s).unwrap();
    let b = seeded(9).query(&s).unwrap();
    let c = seeded(10).query(&s).unwrap();
    assert_eq!(a.request, b.request);
    assert_ne!(a.request, c.request);
    assert_eq!(a.rand, b.rand);
}

#[test]
fn ipv6_loopback_and_host_names() {
    let f6 = Fixture::start(FixtureConfig {
        ipv6: true,
        seed: 11,
        ..FixtureConfig::default()
    });
    let target = format!("[::1]:{}", f6.addr().port());
    let s = gnomon_client::Server::at(&target, f6.public_key()).unwrap();
    let a = client().query(&s).unwrap();
    assert!(a.peer.is_ipv6());

    let f4 = Fixture::honest(ProfileSet::ALL, 12);
    let s = gnomon_client::Server::at(&format!("localhost:{}", f4.addr().port()), f4.public_key())
        .unwrap();
    let a = client().query(&s).unwrap();
    assert_eq!(a.peer.port(), f4.addr().port());
}

#[test]
fn defaults_are_the_rfc_schedule() {
    let c = Config::default();
    assert_eq!(c.backoff, Backoff::QUERY);
    assert_eq!(c.backoff.initial, Duration::from_secs(1));
    assert_eq!(c.tcp, TcpMode::Fallback);
    assert_eq!(c.request_size, 1024);
}
