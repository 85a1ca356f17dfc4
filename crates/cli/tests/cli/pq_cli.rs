//! The post-quantum version 0x90000001 (ML-DSA-44) from the command line:
//! `inspect` and `verify-report` on the exchange captured from
//! tannerryan/roughtime, and `query` against a loopback ML-DSA-44 server
//! that answers over TCP only.

use crate::client_support;

use client_support::{gnomon, write, FAST};
use gnomon_protocol::{ProfileSet, Scheme};
use gnomon_testkit::{base64, server_list, Fixture, FixtureConfig};

const CAPTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/external-vectors/tannerryan-ml-dsa-44"
);

fn capture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{CAPTURE}/{name}")).unwrap()
}

/// The captured server's root key, hex as the capture holds it.
fn root_hex() -> String {
    String::from_utf8(capture("root-public-key.hex"))
        .unwrap()
        .trim()
        .to_string()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

#[test]
fn inspect_decodes_and_verifies_the_captured_ml_dsa_response() {
    let key = base64(&unhex(&root_hex()));
    let resp = write("pq-resp.bin", &capture("response.bin"));
    let req = write("pq-req.bin", &capture("request.bin"));
    let r = gnomon(&[
        "inspect",
        resp.to_str().unwrap(),
        "--key",
        &key,
        "--request",
        req.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    for want in [
        "response (ROUGHTIM packet, 6408 bytes",
        "ml-dsa-44",
        "ML-DSA-44 signature, 2420 bytes",
        "online ML-DSA-44 key, 1312 bytes, sha512:",
        "online key  sha512:",
        "delegation (long-term key)  ok",
        "response (online key)       ok",
    ] {
        assert!(r.stdout.contains(want), "no {want:?} in\n{}", r.stdout);
    }
    assert!(!r.stdout.contains("Ed25519 signature"), "{}", r.stdout);

    // The same key in hex works too, and as JSON the check is there.
    let j = gnomon(&[
        "inspect",
        resp.to_str().unwrap(),
        "--key",
        &root_hex(),
        "--request",
        req.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(j.code, 0, "{}{}", j.stdout, j.stderr);
    assert!(j.stdout.contains("ml-dsa-44"), "{}", j.stdout);

    // A key of the other scheme, or another ML-DSA key, does not verify it.
    let ed = base64(&[7u8; 32]);
    let other = base64(&gnomon_protocol::MlDsa44KeyPair::from_seed(&[3; 32]).public()[..]);
    for wrong in [ed, other] {
        let bad = gnomon(&[
            "inspect",
            resp.to_str().unwrap(),
            "--key",
            &wrong,
            "--request",
            req.to_str().unwrap(),
        ]);
        assert_ne!(bad.code, 0, "{}{}", bad.stdout, bad.stderr);
        assert!(bad.stdout.contains("FAILS"), "{}", bad.stdout);
        assert!(!bad.stdout.contains("KeyScheme {"), "{}", bad.stdout);
    }
}

#[test]
fn inspect_names_the_version_of_the_captured_request() {
    let req = write("pq-req.bin", &capture("request.bin"));
    let r = gnomon(&["inspect", req.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.starts_with("request"), "{}", r.stdout);
    assert!(r.stdout.contains("0x90000001 (ml-dsa-44)"), "{}", r.stdout);
}

fn capture_report(response: &[u8]) -> String {
    format!(
        r#"{{"responses":[{{"publicKey":"{}","request":"{}","response":"{}"}}]}}"#,
        base64(&unhex(&root_hex())),
        base64(&capture("request.bin")),
        base64(response),
    )
}

#[test]
fn verify_report_checks_an_ml_dsa_exchange() {
    let good = write(
        "pq-report.json",
        capture_report(&capture("response.bin")).as_bytes(),
    );
    let r = gnomon(&["verify-report", good.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("ml-dsa-44"), "{}", r.stdout);
    let j = gnomon(&["verify-report", good.to_str().unwrap(), "--json"]);
    assert_eq!(j.code, 0, "{}{}", j.stdout, j.stderr);

    // One bit of the SREP signature flipped: the report no longer holds.
    let mut forged = capture("response.bin");
    let at = forged.len() / 2;
    forged[at] ^= 1;
    let bad = write("pq-report-bad.json", capture_report(&forged).as_bytes());
    let r = gnomon(&["verify-report", bad.to_str().unwrap()]);
    assert_ne!(r.code, 0, "{}{}", r.stdout, r.stderr);
}

fn ml_dsa_fixture(seed: u8) -> Fixture {
    Fixture::start(FixtureConfig {
        profiles: ProfileSet::ALL,
        scheme: Scheme::MlDsa44,
        seed,
        ..FixtureConfig::default()
    })
}

#[test]
fn query_with_an_ml_dsa_key_asks_over_tcp_only() {
    let f = ml_dsa_fixture(61);
    let key = f.long_term_key().bytes().to_vec();
    assert_eq!(key.len(), 1312);
    let addr = f.addr().to_string();
    let b64 = base64(&key);
    let mut args = vec!["query", addr.as_str(), "--key", b64.as_str()];
    args.extend(FAST);
    let r = gnomon(&args);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    for want in [
        "(tcp ",
        "version  ml-dsa-44 (0x90000001)",
        "scheme   ml-dsa-44",
        "online   sha512:",
    ] {
        assert!(r.stdout.contains(want), "no {want:?} in\n{}", r.stdout);
    }
    let year = r
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("time     "))
        .expect("a time line");
    assert!(year.starts_with("20"), "{year}");

    // In hex, as JSON: the scheme and version are named.
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    let mut args = vec!["query", addr.as_str(), "--key", hex.as_str(), "--json"];
    args.extend(FAST);
    let j = gnomon(&args);
    assert_eq!(j.code, 0, "{}{}", j.stdout, j.stderr);
    let v = j.json();
    // `query --json` prints the answer's fields at the top level.
    let answer = &v;
    assert_eq!(answer["scheme"], "ml-dsa-44", "{v}");
    assert_eq!(answer["version"]["name"], "ml-dsa-44", "{v}");
    assert_eq!(answer["version"]["number"], 0x9000_0001u32, "{v}");
    assert_eq!(answer["transport"], "tcp", "{v}");
    assert!(
        answer["online_key"]
            .as_str()
            .is_some_and(|k| k.starts_with("sha512:")),
        "{v}"
    );
    let midpoint = answer["midpoint_us"].as_u64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    assert!(midpoint.abs_diff(now) < 60_000_000, "{midpoint} vs {now}");

    // Two answers over TCP, and not one datagram for the ML-DSA key.
    assert_eq!(f.tcp_received(), 2);
    assert_eq!(f.udp_received(), 0, "a UDP datagram was sent");
}

#[test]
fn a_wrong_length_key_names_both_sizes() {
    let r = gnomon(&["query", "127.0.0.1:9", "--key", &base64(&[1u8; 1311])]);
    assert_eq!(r.code, 64, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("1311") && r.stderr.contains("32") && r.stderr.contains("1312"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_server_list_with_an_ml_dsa_entry_is_queried_over_tcp() {
    let f = ml_dsa_fixture(62);
    let list = server_list(&[("pq", &f, 0x9000_0001)], None);
    assert!(list.contains(r#""publicKeyType":"ml-dsa-44""#), "{list}");
    let file = write("pq-list.json", list.as_bytes());
    let mut args = vec![
        "query",
        "--servers",
        file.to_str().unwrap(),
        "--all",
        "--quorum",
        "1",
        // One server can outvote no liar: trusting it is said out loud.
        "--max-liars",
        "0",
    ];
    args.extend(FAST);
    let r = gnomon(&args);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("ml-dsa-44"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("assumes at most 0 of the 1 listed servers lie"),
        "{}",
        r.stdout
    );
    assert!(f.tcp_received() >= 1);
    assert_eq!(f.udp_received(), 0, "a UDP datagram was sent");
}

#[test]
fn a_version_of_the_other_scheme_than_the_key_is_refused() {
    let pq = base64(&gnomon_protocol::MlDsa44KeyPair::from_seed(&[4; 32]).public()[..]);
    let ed = base64(&[9u8; 32]);
    for (key, version) in [(pq.as_str(), "rfc-10049"), (ed.as_str(), "ml-dsa-44")] {
        let r = gnomon(&["query", "127.0.0.1:9", "--key", key, "--protocol", version]);
        assert_eq!(r.code, 64, "{version}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains("--protocol"), "{}", r.stderr);
    }
}

#[test]
fn udp_only_is_refused_for_an_ml_dsa_key() {
    let pq = base64(&gnomon_protocol::MlDsa44KeyPair::from_seed(&[4; 32]).public()[..]);
    let r = gnomon(&["query", "127.0.0.1:9", "--key", &pq, "--udp-only"]);
    assert_eq!(r.code, 64, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("TCP only"), "{}", r.stderr);
}
