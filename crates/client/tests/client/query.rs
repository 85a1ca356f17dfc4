//! One server at a time: every version, both transports, discovery,
//! retries and forced versions, against the loopback fixture.

use crate::common;

use std::time::Duration;

use common::{client, fast, fixture_for, seeded, server_for};
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
                let f = fixture_for(p, only(p), 7);
                let mut cfg = fast();
                cfg.version_fallback = true;
                let a = Client::new(cfg)
                    .query(&server_for(&f, p.name))
                    .unwrap_or_else(|e| panic!("{}: {e}", p.name));
                assert_eq!(a.verified.profile.id, p.id, "{}", p.name);
                // UDP first wherever the profile is served over UDP; the
                // others (ML-DSA-44) over TCP, without one datagram.
                let want = if p.udp {
                    Transport::Udp
                } else {
                    Transport::Tcp
                };
                assert_eq!(a.transport, want, "{}", p.name);
                if !p.udp {
                    assert_eq!(f.udp_received(), 0, "{}", p.name);
                }
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
        let f = fixture_for(p, ProfileSet::ALL, 3);
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

#[test]
fn silence_on_new_versions_never_downgrades_by_default() {
    // A server that speaks everything, but whose version 1 and draft 08+
    // requests are dropped (as an on-path dropper would): only draft 07 and
    // older would get through.
    let f = Fixture::start(FixtureConfig {
        silent_on: gnomon_testkit::modern_profiles(),
        seed: 9,
        ..FixtureConfig::default()
    });
    let err = client().query(&server_for(&f, "dropped")).unwrap_err();
    match &err {
        gnomon_client::QueryError::NoAnswer { offered, .. } => {
            assert_eq!(offered, &["rfc-10049", "draft-12"]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(f.answered(), 0);
    // A server list naming draft 07 keeps the client at draft 07 as well:
    // no fall back to draft 04 or Google when draft 07 is silenced.
    let g = Fixture::start(FixtureConfig {
        silent_on: gnomon_testkit::profiles(&["draft-07", "draft-06", "draft-05", "draft-03"]),
        seed: 10,
        ..FixtureConfig::default()
    });
    let json = format!(
        r#"{{"servers":[{{"name":"d7","version":2147483655,"publicKeyType":"ed25519","publicKey":"{}","addresses":[{{"protocol":"udp","address":"{}"}}]}}]}}"#,
        gnomon_testkit::base64(&g.public_key()),
        g.addr(),
    );
    let list = gnomon_protocol::ServerList::parse(json.as_bytes()).unwrap();
    let listed = gnomon_client::Server::from_list(&list);
    let err = client().query(&listed[0]).unwrap_err();
    assert!(
        matches!(err, gnomon_client::QueryError::NoAnswer { .. }),
        "{err:?}"
    );
    assert_eq!(g.answered(), 0);
    // Asked for explicitly, the fallback finds draft 07.
    let mut cfg = fast();
    cfg.version_fallback = true;
    let a = Client::new(cfg).query(&server_for(&f, "dropped")).unwrap();
    assert_eq!(a.verified.profile.name, "draft-07");
}

/// An ML-DSA-44 server on loopback (UDP and TCP bound on one port).
fn ml_dsa(seed: u8) -> Fixture {
    Fixture::start(FixtureConfig {
        scheme: gnomon_protocol::Scheme::MlDsa44,
        seed,
        ..FixtureConfig::default()
    })
}

#[test]
fn an_ml_dsa_key_is_asked_0x90000001_over_tcp_and_never_over_udp() {
    let f = ml_dsa(80);
    assert_eq!(f.long_term_key().bytes().len(), 1312);
    let a = client().query(&server_for(&f, "pq")).unwrap();
    assert_eq!(a.verified.profile.name, "ml-dsa-44");
    assert_eq!(a.transport, Transport::Tcp);
    assert_eq!(a.offer.versions(), [gnomon_protocol::Version::ML_DSA_44]);
    // A whole 6.4 KB answer was read and verified.
    assert!(a.response.len() >= 6408, "{}", a.response.len());
    assert!(
        a.offset_us.unsigned_abs() <= u128::from(a.verified.radius_us) + 1_000_000,
        "offset {}",
        a.offset_us
    );
    assert_eq!(f.udp_received(), 0, "a datagram was sent for an ML-DSA key");
    assert_eq!(f.tcp_received(), 1);
}

#[test]
fn an_ml_dsa_key_with_udp_only_asks_nobody() {
    let f = ml_dsa(81);
    let mut cfg = fast();
    cfg.tcp = TcpMode::Never;
    let err = Client::new(cfg).query(&server_for(&f, "pq")).unwrap_err();
    assert!(
        matches!(err, gnomon_client::QueryError::NoAnswer { .. }),
        "{err}"
    );
    assert_eq!(f.udp_received() + f.tcp_received(), 0);
}

#[test]
fn an_ed25519_key_never_offers_0x90000001() {
    // A server speaking every version of both schemes on one port cannot
    // be: an Ed25519 fixture answers only Ed25519 versions, and the
    // client's offers to its key never name ML-DSA-44.
    let f = Fixture::honest(ProfileSet::ALL, 82);
    let a = client().query(&server_for(&f, "ed")).unwrap();
    assert_eq!(a.verified.profile.scheme, gnomon_protocol::Scheme::Ed25519);
    assert!(!a
        .offer
        .versions()
        .contains(&gnomon_protocol::Version::ML_DSA_44));
    let req = gnomon_protocol::verify::SentRequest::parse(&a.request).unwrap();
    assert!(!req.ver.is_empty());
    assert!(req
        .ver
        .chunks_exact(4)
        .all(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]) != 0x9000_0001));
}
