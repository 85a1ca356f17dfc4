//! `gnomon inspect` on real requests and responses from the fixture.

use crate::client_support;
use client_support::{gnomon, write};
use gnomon_client::{Client, Config, Server};
use gnomon_protocol::{Profile, ProfileSet};
use gnomon_testkit::{base64, Fixture};

fn exchange(f: &Fixture, p: &'static Profile) -> (Vec<u8>, Vec<u8>) {
    let s = Server::at(&f.addr().to_string(), f.public_key())
        .unwrap()
        .with_version(p);
    let a = Client::new(Config::default()).query(&s).unwrap();
    (a.request, a.response)
}

fn hex(v: &[u8]) -> String {
    v.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_version_1_response_decodes_with_times_and_verified_signatures() {
    let f = Fixture::honest(ProfileSet::ALL, 41);
    let (req, resp) = exchange(&f, Profile::rfc());
    let resp_file = write("resp.b64", base64(&resp).as_bytes());
    let req_file = write("req.bin", &req);
    let key = base64(&f.public_key());
    let r = gnomon(&[
        "inspect",
        resp_file.to_str().unwrap(),
        "--key",
        &key,
        "--request",
        req_file.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    for want in [
        "response (ROUGHTIM packet, ",
        "version  rfc-10049 (VER 1, signed)",
        "SREP",
        "MIDP",
        "Z (raw ",
        "VERS",
        "1 (rfc-10049), 0x8000000c (drafts 12–19)",
        "PUBK",
        "delegation (long-term key)  ok",
        "response (online key)       ok",
        "full check with the request ok",
    ] {
        assert!(r.stdout.contains(want), "{want}: {}", r.stdout);
    }
    let j = gnomon(&[
        "inspect",
        "--base64",
        &base64(&resp),
        "--key",
        &key,
        "--json",
    ])
    .json();
    assert_eq!(j["kind"], "response");
    assert_eq!(j["version"]["profile"], "rfc-10049");
    assert_eq!(j["signatures"]["delegation_ok"], true);
    assert_eq!(j["signatures"]["response_ok"], true);
    let srep = j["tags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tag"] == "SREP")
        .unwrap();
    let midp = srep["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tag"] == "MIDP")
        .unwrap();
    assert!(midp["meaning"].as_str().unwrap().contains("Z (raw"));
}

#[test]
fn requests_of_any_version_show_their_offer() {
    let f = Fixture::honest(ProfileSet::ALL, 42);
    let (req, _) = exchange(&f, Profile::by_name("draft-07").unwrap());
    let r = gnomon(&["inspect", "--hex", &hex(&req)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .starts_with("request (ROUGHTIM packet, 1024 bytes)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("request in draft-07 format"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("offered: 0x80000007 (draft-07)"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("padding, "), "{}", r.stdout);

    let (greq, gresp) = exchange(&f, Profile::google());
    let g = gnomon(&[
        "inspect",
        write("g.bin", &gresp).to_str().unwrap(),
        "--key",
        &base64(&f.public_key()),
    ]);
    assert_eq!(g.code, 0, "{}{}", g.stdout, g.stderr);
    assert!(g.stdout.contains("response (bare message"), "{}", g.stdout);
    assert!(g.stdout.contains("Google (bare message)"), "{}", g.stdout);
    let gq = gnomon(&["inspect", "--hex", &hex(&greq), "--json"]).json();
    assert_eq!(gq["kind"], "request");
    assert_eq!(gq["version"]["profile"], "google");
}

#[test]
fn a_wrong_key_fails_and_garbage_is_invalid() {
    let f = Fixture::honest(ProfileSet::ALL, 43);
    let other = Fixture::honest(ProfileSet::ALL, 44);
    let (_, resp) = exchange(&f, Profile::rfc());
    let r = gnomon(&[
        "inspect",
        "--base64",
        &base64(&resp),
        "--key",
        &base64(&other.public_key()),
    ]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("delegation (long-term key)  FAILS"),
        "{}",
        r.stdout
    );

    let g = gnomon(&["inspect", "--hex", "0102030405"]);
    assert_eq!(g.code, 2, "{}{}", g.stdout, g.stderr);
    assert!(g.stderr.contains("not a Roughtime message"), "{}", g.stderr);
    let t = gnomon(&["inspect", "--base64", &base64(&resp[..resp.len() / 2])]);
    assert_eq!(t.code, 2);
    assert_eq!(gnomon(&["inspect", "/no/such/file"]).code, 64);
    assert_eq!(gnomon(&["inspect"]).code, 64);
}

/// A reader that stops early (`| head`) ends the tool quietly, not with a
/// panic about a broken pipe.
#[test]
fn a_closed_stdout_is_not_a_panic() {
    use std::process::Stdio;
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/external-vectors/butterfield/draft11-response.bin"
    );
    assert!(
        std::path::Path::new(file).exists(),
        "tests/external-vectors missing from the checkout"
    );
    // The read end is closed before the tool starts: its first write fails.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(["inspect", file])
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_ne!(
        out.status.code(),
        Some(101),
        "101 is Rust's panic exit status"
    );
}
