//! Server lists naming ML-DSA-44 servers (the post-quantum 0x90000001,
//! TCP only) in `gnomon sync` and `gnomon watch`: beside an Ed25519
//! server they count toward the consensus and show as healthy, asked over
//! TCP and never by datagram.

use crate::sync_support;
use crate::watch_support;

use std::path::PathBuf;
use std::time::Duration;

use gnomon_protocol::{ProfileSet, Scheme};
use gnomon_testkit::{server_list, Fixture, FixtureConfig};
use sync_support::{sync, tempdir, FAST};
use watch_support::{check, server, Watch};

fn fixture(scheme: Scheme, seed: u8) -> Fixture {
    Fixture::start(FixtureConfig {
        profiles: ProfileSet::ALL,
        scheme,
        seed,
        ..FixtureConfig::default()
    })
}

/// Two ML-DSA-44 servers and one Ed25519 server, all honest, and their
/// list in `test`'s directory.
fn lineup(test: &str) -> ([Fixture; 3], PathBuf, PathBuf) {
    let f = [
        fixture(Scheme::MlDsa44, 71),
        fixture(Scheme::MlDsa44, 72),
        fixture(Scheme::Ed25519, 73),
    ];
    let list = server_list(
        &[
            ("pq-a", &f[0], 0x9000_0001),
            ("pq-b", &f[1], 0x9000_0001),
            ("ed", &f[2], 1),
        ],
        None,
    );
    assert_eq!(list.matches(r#""publicKeyType":"ml-dsa-44""#).count(), 2);
    let dir = tempdir(test);
    let path = dir.join("servers.json");
    std::fs::write(&path, list).unwrap();
    (f, path, dir)
}

#[test]
fn sync_counts_ml_dsa_servers_toward_the_consensus() {
    let (f, list, dir) = lineup("pq_sync");
    let mut args = vec![
        "--servers",
        list.to_str().unwrap(),
        "--state-dir",
        dir.to_str().unwrap(),
        "--max-radius",
        "1m",
        "--once",
        "--json",
    ];
    args.extend_from_slice(&FAST);
    let r = sync(&args, None);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let j = r.json();
    let mut agreeing: Vec<&str> = j["consensus"]["agreeing"]
        .as_array()
        .unwrap_or_else(|| panic!("no consensus in {j}"))
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    agreeing.sort_unstable();
    assert_eq!(agreeing, ["ed", "pq-a", "pq-b"], "{j}");
    for pq in &f[..2] {
        assert!(pq.tcp_received() >= 1, "an ML-DSA-44 server was not asked");
        assert_eq!(
            pq.udp_received(),
            0,
            "a datagram went to an ML-DSA-44 server"
        );
    }
}

#[test]
fn watch_shows_ml_dsa_servers_healthy() {
    let (f, list, _dir) = lineup("pq_watch");
    let watch = Watch::start(&list);
    let api = watch.first_round(Duration::from_secs(90));
    for name in ["pq-a", "pq-b"] {
        let s = server(&api, name);
        assert_eq!(s["state"], "ok", "{s}");
        assert_eq!(s["version"], "ml-dsa-44", "{s}");
        // Not asked over UDP, which its version never uses; its 6.4 KB
        // answer came over TCP, which is no amplification.
        assert_eq!(s["udp"], serde_json::Value::Null, "{s}");
        assert_eq!(check(s, "reachable"), "ok", "{s}");
        assert_eq!(check(s, "size"), "ok", "{s}");
    }
    assert_eq!(server(&api, "ed")["state"], "ok");
    for pq in &f[..2] {
        assert!(pq.tcp_received() >= 1, "an ML-DSA-44 server was not asked");
        assert_eq!(
            pq.udp_received(),
            0,
            "a datagram went to an ML-DSA-44 server"
        );
    }
}
