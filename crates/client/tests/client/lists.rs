//! Server lists in both forms become servers the client can ask.

use crate::common;
use common::client;
use gnomon_client::{Server, Versions};
use gnomon_protocol::serverlist::Transport;
use gnomon_protocol::{Profile, ServerList};
use gnomon_testkit::{base64, profiles, server_list, Fixture, FixtureConfig};

#[test]
fn rfc_list_servers_are_offered_up_to_their_listed_version() {
    let a = Fixture::honest(profiles(&["draft-08", "draft-11"]), 71);
    let b = Fixture::honest(profiles(&["google"]), 72);
    let json = server_list(&[("a", &a, 0x8000_000b), ("b", &b, 3_000_600_613)], None);
    let list = ServerList::parse(json.as_bytes()).unwrap();
    let servers = Server::from_list(&list);
    assert_eq!(servers.len(), 2);
    let Versions::Discover(set) = servers[0].versions else {
        panic!()
    };
    assert!(set.contains(Profile::by_name("draft-11").unwrap().id));
    assert!(
        !set.contains(Profile::rfc().id),
        "nothing newer than listed"
    );
    let Versions::Discover(set) = servers[1].versions else {
        panic!()
    };
    assert_eq!(set.iter().map(|p| p.name).collect::<Vec<_>>(), ["google"]);
    let ans = client().query(&servers[0]).unwrap();
    assert_eq!(ans.verified.profile.name, "draft-11");
    assert_eq!(
        client().query(&servers[1]).unwrap().verified.profile.name,
        "google"
    );
}

#[test]
fn legacy_string_versions_ipv6_and_names() {
    let v6 = Fixture::start(FixtureConfig {
        ipv6: true,
        profiles: profiles(&["1", "draft-14"]),
        seed: 73,
        ..FixtureConfig::default()
    });
    let g = Fixture::honest(profiles(&["google"]), 74);
    let json = format!(
        r#"{{"servers":[
          {{"name":"ietf","version":"IETF-Roughtime","publicKeyType":"ed25519","publicKey":"{k1}",
            "addresses":[{{"protocol":"udp","address":"[::1]:{p1}"}}]}},
          {{"name":"google","version":"Google-Roughtime","publicKeyType":"ed25519","publicKey":"{k2}",
            "addresses":[{{"protocol":"udp","address":"localhost:{p2}"}}]}}
        ]}}"#,
        k1 = base64(&v6.public_key()),
        p1 = v6.addr().port(),
        k2 = base64(&g.public_key()),
        p2 = g.addr().port(),
    );
    let list = ServerList::parse(json.as_bytes()).unwrap();
    let servers = Server::from_list(&list);
    assert_eq!(servers.len(), 2);
    assert_eq!(servers[0].name, "ietf");
    assert!(servers[0]
        .addresses
        .iter()
        .all(|a| a.transport == Transport::Udp));
    let a = client().query(&servers[0]).unwrap();
    assert_eq!(a.verified.profile.name, "rfc-10049");
    assert!(a.peer.is_ipv6());
    let b = client().query(&servers[1]).unwrap();
    assert_eq!(b.verified.profile.name, "google");
}
