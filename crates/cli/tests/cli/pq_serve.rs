//! The experimental post-quantum version 0x90000001 (ML-DSA-44,
//! docs/PQ.md) through the built binary: `gnomon keygen --scheme
//! ml-dsa-44`, `gnomon delegate` from that root, and `gnomon serve` with an
//! Ed25519 key file and the ML-DSA-44 delegations on one port, answering
//! 0x90000001 over TCP only.

use crate::serve_support;

use std::io::Write;
use std::net::UdpSocket;
use std::os::unix::fs::PermissionsExt;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_protocol::tag::Tag;
use gnomon_protocol::wire::{unframe, Message};
use gnomon_protocol::{verify_response, Offer, Profile, Scheme, Version};
use gnomon_server::keyfile;
use gnomon_server::offline::OfflineStore;
use serve_support::peer::{connect_from, read_frame, PATIENCE};
use serve_support::{gnomon_ok, keygen, keygen_ml_dsa, ml_dsa_delegations, scratch, start_serve};

const PQ: Version = Version(0x9000_0001);

fn ml_dsa() -> &'static Profile {
    Profile::by_name("ml-dsa-44").unwrap()
}

fn request(offer: Offer, i: u8) -> Vec<u8> {
    let mut out = vec![0u8; 1024];
    let n = offer
        .build(&vec![i; offer.primary().nonce_len], None, 1024, &mut out)
        .unwrap();
    out.truncate(n);
    out
}

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
fn keygen_makes_a_private_ml_dsa_key_and_prints_its_1312_byte_public_key() {
    let dir = scratch("pq-serve-keygen");
    let path = dir.join("pq.key");
    let public = keygen_ml_dsa(&path);
    assert_eq!(public.len(), 1312);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let key = keyfile::load(&path).unwrap();
    assert_eq!(key.scheme(), Scheme::MlDsa44);
    assert_eq!(key.public(), &public[..]);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("gnomon-ml-dsa-44-key v1\n"), "{text}");
    // The default is still Ed25519, and an unknown scheme is refused.
    let ed = gnomon_ok(&["keygen", "--out", dir.join("ed.key").to_str().unwrap()]);
    assert_eq!(B64.decode(ed.trim_end()).unwrap().len(), 32);
    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(["keygen", "--scheme", "rsa", "--out"])
        .arg(dir.join("rsa.key"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ml-dsa-44"));
    assert!(!dir.join("rsa.key").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_ed25519_key_and_ml_dsa_delegations_are_served_on_one_port() {
    let dir = scratch("pq-serve-serve");
    let (ed_key, _) = keygen(&dir);
    let (delegations, pq_public) = ml_dsa_delegations(&dir, 2);
    let store = OfflineStore::load(&delegations, Some(&pq_public)).unwrap();
    assert_eq!(store.long_term_public.scheme(), Scheme::MlDsa44);
    assert_eq!(store.delegations().len(), 2);

    let mut s = start_serve(
        &[
            "--key-file",
            ed_key.to_str().unwrap(),
            "--offline-dir",
            delegations.to_str().unwrap(),
            // Pinned to the 1312-byte root: the files must be its.
            "--offline-public-key",
            &B64.encode(&pq_public),
            "--workers",
            "1",
            // This machine's clock may be unsynchronized, which a
            // configured key refuses by default.
            "--clock-unsynchronized",
            "answer-with-radius",
            "--metrics",
            "127.0.0.1:0",
        ],
        |_| {},
    );
    let ed_public = s.public;
    let tcp = s.tcp_addr();

    // TCP, 0x90000001: the ML-DSA-44 identity answers, VERS lists only it.
    let r = request(Offer::single(ml_dsa()), 1);
    let mut c = connect_from("127.0.0.1".parse().unwrap(), tcp);
    c.write_all(&r).unwrap();
    let answer = read_frame(&mut c).expect("an answer");
    let v = verify_response(
        &r,
        &answer,
        gnomon_protocol::PublicKey::from_bytes(&pq_public).unwrap(),
    )
    .unwrap();
    assert_eq!(v.profile.version, PQ);
    assert_eq!(vers(&answer), [PQ.0]);

    // `gnomon inspect` decodes that answer and checks it against the
    // request and the 1312-byte key.
    let (req_file, resp_file) = (dir.join("pq-request.bin"), dir.join("pq-response.bin"));
    std::fs::write(&req_file, &r).unwrap();
    std::fs::write(&resp_file, &answer).unwrap();
    let shown = gnomon_ok(&[
        "inspect",
        resp_file.to_str().unwrap(),
        "--request",
        req_file.to_str().unwrap(),
        "--key",
        &B64.encode(&pq_public),
    ]);
    for want in [
        "ML-DSA-44 signature, 2420 bytes",
        "online ML-DSA-44 key, 1312 bytes",
        "delegation (long-term key)  ok",
        "response (online key)       ok",
    ] {
        assert!(shown.contains(want), "no {want:?} in\n{shown}");
    }

    // gnomon's own client, given the 1312-byte key, asks 0x90000001 over
    // TCP and verifies the answer.
    let target = tcp.to_string();
    let key = B64.encode(&pq_public);
    let out = gnomon_ok(&["query", &target, "--key", &key, "--json"]);
    let json: serde_json::Value = serde_json::from_str(out.trim()).expect("query --json");
    assert_eq!(json["scheme"], "ml-dsa-44", "{out}");
    assert_eq!(json["version"]["number"], 0x9000_0001u32, "{out}");
    assert_eq!(json["transport"], "tcp", "{out}");

    // UDP: 0x90000001 alone gets nothing but a counted drop; with version
    // 1 offered too, the Ed25519 identity answers in version 1.
    const UNSUPPORTED: &str = "gnomon_dropped_total{reason=\"unsupported_version\"}";
    let dropped_before = s.metric(UNSUPPORTED);
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(PATIENCE)).unwrap();
    let pq_only = request(Offer::single(ml_dsa()), 2);
    let both = request(Offer::new(&[Profile::rfc(), ml_dsa()]).unwrap(), 3);
    udp.send_to(&pq_only, s.addr).unwrap();
    udp.send_to(&both, s.addr).unwrap();
    let mut buf = [0u8; 8192];
    let (n, _) = udp.recv_from(&mut buf).unwrap();
    let v = verify_response(&both, &buf[..n], &ed_public).unwrap();
    assert_eq!(v.profile.version, Version::RFC);
    let dropped = s.wait_metric(UNSUPPORTED, |v| v > dropped_before);
    assert_eq!(dropped, dropped_before + 1, "the 0x90000001-only datagram");
    // Both datagrams are accounted for, so an answer to the first would
    // already be queued on loopback.
    udp.set_nonblocking(true).unwrap();
    let second = udp.recv_from(&mut buf);
    assert!(
        matches!(&second, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a second UDP answer: {second:?}"
    );
    let (status, _, _) = s.terminate_bounded();
    assert!(status.success(), "{status}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `offline-public-key` takes an ML-DSA-44 root too: a directory of its
/// delegations loads under its own key and is refused under another
/// ML-DSA-44 key, naming it, before anything is served.
#[test]
fn an_ml_dsa_offline_directory_is_pinned_to_its_root() {
    let dir = scratch("pq-serve-pin");
    let (delegations, public) = ml_dsa_delegations(&dir, 1);
    let other = keygen_ml_dsa(&dir.join("other.key"));
    let check = |pin: &[u8]| {
        let file = dir.join("pinned.toml");
        std::fs::write(
            &file,
            format!(
                "offline-dir = [\"{}\"]\noffline-public-key = [\"{}\"]\n",
                delegations.display(),
                B64.encode(pin)
            ),
        )
        .unwrap();
        gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
            .args(["config", "check", "--load-keys"])
            .arg(&file)
            .output()
            .unwrap()
    };
    let ok = check(&public);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let refused = check(&other);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(64), "{err}");
    assert!(err.contains("not the expected"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
