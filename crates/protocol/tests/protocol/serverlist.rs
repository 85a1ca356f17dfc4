//! Server lists: the draft-19 example, Cloudflare's and roughenough's lists,
//! and hand-written bad input.

use std::path::PathBuf;

use gnomon_protocol::serverlist::{
    parse_host_port, AddressError, Host, KeyEncoding, ListError, ListedVersion, Transport, Unusable,
};
use gnomon_protocol::{
    LongTermKey, MlDsa44KeyPair, Profile, ProfileSet, Scheme, ServerList, Version,
};

fn vector(rel: &str) -> Vec<u8> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/external-vectors"
    ));
    assert!(dir.is_dir(), "vector directory missing: {}", dir.display());
    let path = dir.join(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn b64(s: &str) -> LongTermKey {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD.decode(s).unwrap();
    LongTermKey::from_bytes(&bytes).unwrap()
}

#[test]
fn draft19_appendix_a() {
    let list = ServerList::parse(&vector(
        "ietf-draft-19/draft-ietf-ntp-roughtime-19-appendix-a-server-list.json",
    ))
    .unwrap();
    assert_eq!(list.servers.len(), 2);
    assert_eq!(
        list.sources,
        [
            "https://www.example.net/roughtime/ecosystem.json",
            "https://www.example.org/roughtime/ecosystem.json"
        ]
    );
    assert_eq!(
        list.reports.as_deref(),
        Some("https://www.example.net/roughtime/malfeasance")
    );
    assert!(list.ignored_urls.is_empty());

    let a = list.servers[0].status.as_ref().unwrap();
    assert_eq!(
        list.servers[0].name.as_deref(),
        Some("example.com Roughtime server")
    );
    assert_eq!(a.version, ListedVersion::Number(Version::RFC));
    assert_eq!(a.version.profile(), Some(Profile::rfc()));
    assert_eq!(
        a.public_key,
        b64("2O3mkkheDExCuhG+ZNIoWmO/IdCdLzADgUn8SnC4hME=")
    );
    assert_eq!(a.key_encoding, KeyEncoding::Base64);
    let name = Host::Name("roughtime.example.com".into());
    assert_eq!(a.addresses.len(), 2);
    assert_eq!(a.addresses[0].transport, Transport::Udp);
    assert_eq!(a.addresses[1].transport, Transport::Tcp);
    assert!(a.addresses.iter().all(|x| x.host == name && x.port == 2002));

    let b = list.servers[1].status.as_ref().unwrap();
    assert_eq!(b.addresses[0].host, Host::Ipv4([192, 0, 2, 33]));
    assert!(!b.addresses[0].host.is_ipv6());
    let mut v6 = [0u8; 16];
    v6[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    v6[12..].copy_from_slice(&[0, 2, 0, 0x33]);
    assert_eq!(b.addresses[1].host, Host::Ipv6(v6));
    assert!(b.addresses[1].host.is_ipv6());
    assert_eq!(b.addresses[1].port, 2002);
    assert_eq!(list.usable().count(), 2);
}

#[test]
fn cloudflare_ecosystem_uses_version_strings() {
    let list = ServerList::parse(&vector("cloudflare-roughtime/ecosystem.json")).unwrap();
    let names: Vec<_> = list
        .servers
        .iter()
        .map(|s| s.name.as_deref().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "Cloudflare-Roughtime-2",
            "int08h-Roughtime",
            "roughtime.se",
            "time.txryan.com"
        ]
    );
    for (name, s) in list.usable() {
        assert_eq!(s.version, ListedVersion::IetfString, "{name:?}");
        // "IETF-Roughtime" names no draft: every framed profile is a candidate.
        assert_eq!(s.version.profile(), None);
        let c = s.version.candidates();
        assert!(
            c.contains(Profile::rfc().id) && c.contains(Profile::by_name("draft-11").unwrap().id)
        );
        assert!(!c.contains(Profile::google().id));
        assert_eq!(s.key_encoding, KeyEncoding::Base64);
    }
    let cf = list.servers[0].status.as_ref().unwrap();
    assert_eq!(
        cf.addresses[0].host,
        Host::Name("roughtime.cloudflare.com".into())
    );
    assert_eq!(cf.addresses[0].port, 2003);
    let int08h = list.servers[1].status.as_ref().unwrap();
    assert_eq!(
        int08h.public_key,
        b64("AW5uAoTSTDfG5NfY1bTh08GUnOqlRb+HVhbJ3ODJvsE=")
    );
    assert_eq!(list.usable().count(), 4);
}

#[test]
fn roughenough_client_lists() {
    let cf = ServerList::parse(&vector(
        "roughenough/roughenough-client-testdata/serverlist-cloudflare.json",
    ))
    .unwrap();
    assert_eq!(cf.usable().count(), 4);

    let local = ServerList::parse(&vector(
        "roughenough/roughenough-client-testdata/serverlist-localhost.json",
    ))
    .unwrap();
    let mut ports = Vec::new();
    for (_, s) in local.usable() {
        // Hex is not what the drafts allow; it is accepted and recorded.
        assert_eq!(s.key_encoding, KeyEncoding::Hex);
        assert_eq!(s.public_key.bytes()[..4], [0x3b, 0x6a, 0x27, 0xbc]);
        assert_eq!(s.public_key.bytes()[31], 0x29);
        assert_eq!(s.addresses[0].host, Host::Ipv4([127, 0, 0, 1]));
        ports.push(s.addresses[0].port);
    }
    assert_eq!(ports, [2001, 2002, 2003, 2004]);
}

const KEY: &str = "2O3mkkheDExCuhG+ZNIoWmO/IdCdLzADgUn8SnC4hME=";

fn one(server: &str) -> Result<ListedVersion, Unusable> {
    let json = format!(r#"{{"servers":[{server}]}}"#);
    let list = ServerList::parse(json.as_bytes()).unwrap();
    assert_eq!(list.servers.len(), 1);
    list.servers[0].status.clone().map(|s| s.version)
}

fn server(version: &str, key_type: &str, key: &str, address: &str) -> String {
    format!(
        r#"{{"name":"x","version":{version},"publicKeyType":"{key_type}","publicKey":"{key}",
            "addresses":[{{"protocol":"udp","address":"{address}"}}]}}"#
    )
}

#[test]
fn versions_map_to_profiles() {
    let cases: [(&str, Option<&str>); 8] = [
        ("3000600613", Some("google")),
        ("1", Some("rfc-10049")),
        ("2147483660", Some("draft-14")),
        ("2147483655", Some("draft-07")),
        (r#""Google-Roughtime""#, Some("google")),
        (r#""IETF-Roughtime""#, None),
        (r#""0x8000000b""#, Some("draft-11")),
        (r#""1""#, Some("rfc-10049")),
    ];
    for (v, want) in cases {
        let got = one(&server(v, "ed25519", KEY, "h.example:1")).unwrap();
        assert_eq!(got.profile().map(|p| p.name), want, "{v}");
    }
    assert_eq!(
        ListedVersion::GoogleString.candidates(),
        ProfileSet::empty().with(Profile::google().id)
    );
}

#[test]
fn one_bad_server_does_not_sink_the_list() {
    let good = server("1", "ed25519", KEY, "192.0.2.1:5319");
    let other = server("1", "rsa-2048", "AAAA", "192.0.2.2:5319");
    let json = format!(r#"{{"servers":[{good},{other},7]}}"#);
    let list = ServerList::parse(json.as_bytes()).unwrap();
    assert!(list.servers[0].status.is_ok());
    assert_eq!(list.servers[1].status, Err(Unusable::KeyType));
    assert_eq!(list.servers[1].name.as_deref(), Some("x"));
    assert_eq!(list.servers[2].status, Err(Unusable::NotAnObject));
    assert_eq!(list.usable().count(), 1);
}

#[test]
fn unusable_servers_say_why() {
    let cases: [(String, Unusable); 11] = [
        (
            server("1", "ed25519", "AAAA", "a.b:1"),
            Unusable::KeyLength(Scheme::Ed25519, 3),
        ),
        (server("1", "ed25519", "!!", "a.b:1"), Unusable::KeyEncoding),
        (
            server("2", "ed25519", KEY, "a.b:1"),
            Unusable::UnknownVersion(2),
        ),
        (
            server("0", "ed25519", KEY, "a.b:1"),
            Unusable::UnknownVersion(0),
        ),
        (
            server("2147483661", "ed25519", KEY, "a.b:1"),
            Unusable::UnknownVersion(0x8000_000d),
        ),
        (
            server("4294967296", "ed25519", KEY, "a.b:1"),
            Unusable::BadVersion,
        ),
        (server("-1", "ed25519", KEY, "a.b:1"), Unusable::BadVersion),
        (
            server(r#""Roughtime-9""#, "ed25519", KEY, "a.b:1"),
            Unusable::BadVersion,
        ),
        (
            server("[1]", "ed25519", KEY, "a.b:1"),
            Unusable::WrongType("version"),
        ),
        (
            server("1", "ed25519", KEY, "a.b"),
            Unusable::NoAddress(Some(AddressError::MissingPort)),
        ),
        (
            r#"{"version":1,"publicKeyType":"ed25519","publicKey":"x"}"#.to_string(),
            Unusable::KeyEncoding,
        ),
    ];
    for (json, want) in cases {
        assert_eq!(one(&json), Err(want), "{json}");
    }
    let missing = [
        (
            r#"{"version":1,"publicKey":"x","addresses":[]}"#,
            "publicKeyType",
        ),
        (
            r#"{"version":1,"publicKeyType":"ed25519","addresses":[]}"#,
            "publicKey",
        ),
    ];
    for (json, field) in missing {
        assert_eq!(one(json), Err(Unusable::Missing(field)), "{json}");
    }
    let no_addr =
        format!(r#"{{"version":1,"publicKeyType":"ed25519","publicKey":"{KEY}","addresses":[]}}"#);
    assert_eq!(one(&no_addr), Err(Unusable::NoAddress(None)));
}

#[test]
fn bad_addresses_are_skipped_with_reasons() {
    let json = format!(
        r#"{{"servers":[{{"name":"m","version":1,"publicKeyType":"ed25519","publicKey":"{KEY}",
        "addresses":[{{"protocol":"quic","address":"a.example:1"}},
                     {{"protocol":"udp"}},
                     {{"protocol":"TCP","address":"[::1]:65535"}}]}}]}}"#
    );
    let list = ServerList::parse(json.as_bytes()).unwrap();
    let s = list.servers[0].status.as_ref().unwrap();
    assert_eq!(s.addresses.len(), 1);
    assert_eq!(s.addresses[0].transport, Transport::Tcp);
    assert_eq!(s.addresses[0].port, 65535);
    assert_eq!(
        s.skipped_addresses,
        [(0, AddressError::Protocol), (1, AddressError::Shape)]
    );
}

#[test]
fn host_port_parsing() {
    let mut v6_1 = [0u8; 16];
    v6_1[15] = 1;
    let ok: [(&str, Host, u16); 7] = [
        ("192.0.2.33:2002", Host::Ipv4([192, 0, 2, 33]), 2002),
        ("0.0.0.0:0", Host::Ipv4([0; 4]), 0),
        ("[::1]:5319", Host::Ipv6(v6_1), 5319),
        (
            "Roughtime.Example.COM.:2003",
            Host::Name("roughtime.example.com".into()),
            2003,
        ),
        ("localhost:2002", Host::Name("localhost".into()), 2002),
        ("a-b.c1:9", Host::Name("a-b.c1".into()), 9),
        (
            "[::ffff:192.0.2.1]:1",
            Host::Ipv6([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1]),
            1,
        ),
    ];
    for (s, host, port) in ok {
        assert_eq!(parse_host_port(s), Ok((host, port)), "{s}");
    }
    let long_label = format!("{}.example:1", "a".repeat(64));
    let bad: [(&str, AddressError); 19] = [
        ("example.com", AddressError::MissingPort),
        ("example.com:", AddressError::Port),
        ("example.com:65536", AddressError::Port),
        ("example.com:+80", AddressError::Port),
        ("example.com:080000", AddressError::Port),
        (":2002", AddressError::EmptyHost),
        ("2001:db8::1:2002", AddressError::UnbracketedIpv6),
        ("[2001:db8::1:2002", AddressError::Brackets),
        ("[::1]x:2002", AddressError::Brackets),
        ("[::1]", AddressError::MissingPort),
        ("[fe80::1%eth0]:2002", AddressError::ZoneId),
        ("[1::2::3]:2002", AddressError::Ipv6),
        ("[example.com]:2002", AddressError::Ipv6),
        ("256.0.0.1:2002", AddressError::Ipv4),
        ("1.2.3:2002", AddressError::Ipv4),
        ("01.2.3.4:2002", AddressError::Ipv4),
        ("-bad.example:1", AddressError::Hostname),
        ("under_score.example:1", AddressError::Hostname),
        (&long_label, AddressError::Hostname),
    ];
    for (s, want) in bad {
        assert_eq!(parse_host_port(s), Err(want), "{s}");
    }
}

#[test]
fn documents_that_are_not_lists() {
    let cases: [(&[u8], ListError); 6] = [
        (b"", ListError::Json { line: 1, column: 0 }),
        (b"[1]", ListError::NotAnObject),
        (b"{}", ListError::NoServers),
        (br#"{"servers":{}}"#, ListError::WrongType("servers")),
        (
            br#"{"servers":[],"sources":"https://x"}"#,
            ListError::WrongType("sources"),
        ),
        (
            br#"{"servers":[],"reports":[]}"#,
            ListError::WrongType("reports"),
        ),
    ];
    for (json, want) in cases {
        assert_eq!(
            ServerList::parse(json),
            Err(want),
            "{:?}",
            String::from_utf8_lossy(json)
        );
    }
}

#[test]
fn urls_must_be_https() {
    let json = br#"{"servers":[],"sources":["http://a/list","HTTPS://b/list"],
                   "reports":"ftp://c/r"}"#;
    let list = ServerList::parse(json).unwrap();
    assert_eq!(list.sources, ["HTTPS://b/list"]);
    assert_eq!(list.reports, None);
    assert_eq!(list.ignored_urls, ["http://a/list", "ftp://c/r"]);
}

/// The list the docs point newcomers to must stay usable: every entry
/// parses, with a distinct key and at least one address, and there are
/// enough of them for the default quorum and the RFC's three.
#[test]
fn the_example_list_in_examples_is_usable() {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/servers.json"
    ));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let list = ServerList::parse(&bytes).unwrap();
    assert!(list.servers.len() >= 3, "{list:?}");
    let mut keys = std::collections::HashSet::new();
    for s in &list.servers {
        let usable = s
            .status
            .as_ref()
            .unwrap_or_else(|e| panic!("{:?} unusable: {e:?}", s.name));
        assert!(!usable.addresses.is_empty(), "{:?}", s.name);
        assert!(
            keys.insert(usable.public_key.clone()),
            "{:?}: key repeated",
            s.name
        );
    }
}

/// examples/servers-pq.json, tannerryan's public server in both schemes
/// as its own list publishes it: the ML-DSA-44 entry reads as a 1312-byte
/// key, reached over TCP only, whose one candidate of its scheme is
/// 0x90000001.
#[test]
fn the_post_quantum_example_list_names_a_tcp_ml_dsa_server() {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/servers-pq.json"
    ));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let list = ServerList::parse(&bytes).unwrap();
    let schemes: Vec<Scheme> = list
        .servers
        .iter()
        .map(|s| {
            let usable = s
                .status
                .as_ref()
                .unwrap_or_else(|e| panic!("{:?} unusable: {e:?}", s.name));
            usable.public_key.scheme()
        })
        .collect();
    assert_eq!(schemes, [Scheme::MlDsa44, Scheme::Ed25519]);
    let pq = list.servers[0].status.as_ref().unwrap();
    assert_eq!(pq.public_key.bytes().len(), 1312);
    assert!(pq.addresses.iter().all(|a| a.transport == Transport::Tcp));
    let offered: Vec<&str> =
        ProfileSet(pq.version.candidates().0 & ProfileSet::ALL.of_scheme(Scheme::MlDsa44).0)
            .iter()
            .map(|p| p.name)
            .collect();
    assert_eq!(offered, ["ml-dsa-44"]);
}

fn pq_key() -> Vec<u8> {
    MlDsa44KeyPair::from_seed(&[5; 32]).public().to_vec()
}

#[test]
fn ml_dsa_44_entries_are_usable_with_their_key() {
    use base64::Engine;
    let key = pq_key();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&key);
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    // The type is matched without regard to case; base64 and hex both read.
    for (kind, text, encoding) in [
        ("ml-dsa-44", &b64, KeyEncoding::Base64),
        ("ML-DSA-44", &b64, KeyEncoding::Base64),
        ("Ml-Dsa-44", &hex, KeyEncoding::Hex),
    ] {
        let json = format!(
            r#"{{"servers":[{}]}}"#,
            server("2415919105", kind, text, "pq.example:2002")
        );
        let list = ServerList::parse(json.as_bytes()).unwrap();
        let s = list.servers[0]
            .status
            .as_ref()
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(s.public_key.scheme(), Scheme::MlDsa44, "{kind}");
        assert_eq!(s.public_key.bytes(), key.as_slice(), "{kind}");
        assert_eq!(s.key_encoding, encoding, "{kind}");
        assert_eq!(s.version.profile().map(|p| p.name), Some("ml-dsa-44"));
    }
}

#[test]
fn a_key_of_the_wrong_length_for_its_type_is_unusable() {
    use base64::Engine;
    let std = base64::engine::general_purpose::STANDARD;
    let pq_b64 = std.encode(pq_key());
    // An Ed25519 key called ML-DSA-44, and an ML-DSA-44 key called Ed25519.
    let cases = [
        (
            server("2415919105", "ml-dsa-44", KEY, "a.b:1"),
            Unusable::KeyLength(Scheme::MlDsa44, 32),
        ),
        (
            server("1", "ed25519", &pq_b64, "a.b:1"),
            Unusable::KeyLength(Scheme::Ed25519, 1312),
        ),
        (
            server("2415919105", "ml-dsa-44", &std.encode([1u8; 1311]), "a.b:1"),
            Unusable::KeyLength(Scheme::MlDsa44, 1311),
        ),
    ];
    for (entry, want) in cases {
        let json = format!(r#"{{"servers":[{entry}]}}"#);
        let list = ServerList::parse(json.as_bytes()).unwrap();
        assert_eq!(list.servers[0].status, Err(want));
    }
    let said = Unusable::KeyLength(Scheme::MlDsa44, 32).to_string();
    assert!(
        said.contains("32") && said.contains("1312") && said.contains("ML-DSA-44"),
        "{said}"
    );
    let said = Unusable::KeyLength(Scheme::Ed25519, 1312).to_string();
    assert!(said.contains("1312") && said.contains("has 32"), "{said}");
    let said = Unusable::KeyType.to_string();
    assert!(!said.contains("is not ed25519"), "{said}");
    assert!(said.contains("ml-dsa-44"), "{said}");
}
