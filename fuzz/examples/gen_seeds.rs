//! Writes the seed corpora under `fuzz/seeds/<target>/`: one valid input per
//! profile for each target, so the fuzzers start from messages that reach
//! the deep checks instead of dying at the header. Deterministic; rerun
//! after a wire-format change with `cargo run --example gen_seeds` in `fuzz/`.

use std::fs;
use std::path::{Path, PathBuf};

use gnomon_fuzz::{bound_chain, chain, exchange, join_datagrams, request, PROOF_DEVICE};
use gnomon_protocol::wire::{self, Message};
use gnomon_protocol::{Offer, Profile, Tag, PROFILES};

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    fs::write(dir.join(name), bytes).expect("write seed");
}

fn fresh(root: &Path, target: &str) -> PathBuf {
    let dir = root.join(target);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("create seed dir");
    dir
}

/// The message inside a datagram (bare for Google).
fn body(datagram: &[u8]) -> &[u8] {
    wire::unframe(datagram).unwrap_or(datagram)
}

/// A 512-byte draft-03 request with a 32-byte nonce, which `Offer` does not
/// build: deployed 0x80000003 clients sent it.
fn draft03_short_nonce() -> Vec<u8> {
    let p = Profile::by_name("draft-03").expect("draft-03");
    let body = 512 - wire::PACKET_HEADER;
    let nonce = [0x33u8; 32];
    let pad = vec![0u8; body - wire::message_len([0, 4, nonce.len()])];
    let ver = p.version.0.to_le_bytes();
    let mut out = vec![0u8; 512];
    wire::write_frame_header(&mut out, body).expect("frame");
    wire::write_message(
        &mut out[wire::PACKET_HEADER..],
        &[
            (Tag::PAD_DRAFT, &pad),
            (Tag::VER, &ver),
            (Tag::NONC, &nonce),
        ],
    )
    .expect("message");
    out
}

/// An Ethernet frame carrying `payload` from `from` to `to` over UDP, its
/// checksums right: written as the reply `to` would send `from`, then
/// turned around by the path's own `reply_in_place`, which fills in the
/// lengths and checksums.
fn udp_frame(from: std::net::SocketAddr, to: std::net::SocketAddr, payload: &[u8]) -> Vec<u8> {
    use std::net::IpAddr;
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    let ip = match (to.ip(), from.ip()) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            f.extend_from_slice(&[0x08, 0x00]);
            let total = (20 + 8 + payload.len()) as u16;
            let mut h = vec![0x45, 0];
            h.extend_from_slice(&total.to_be_bytes());
            h.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
            h.extend_from_slice(&src.octets());
            h.extend_from_slice(&dst.octets());
            h
        }
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            f.extend_from_slice(&[0x86, 0xdd]);
            let mut h = vec![0x60, 0, 0, 0];
            h.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
            h.extend_from_slice(&[17, 64]);
            h.extend_from_slice(&src.octets());
            h.extend_from_slice(&dst.octets());
            h
        }
        _ => panic!("one family"),
    };
    f.extend_from_slice(&ip);
    f.extend_from_slice(&to.port().to_be_bytes());
    f.extend_from_slice(&from.port().to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    let start = f.len();
    f.extend_from_slice(payload);
    let d = gnomon_server::xdp::frame::Datagram {
        from: to,
        to: from,
        payload: start..f.len(),
    };
    let len = gnomon_server::xdp::frame::reply_in_place(&mut f, &d, payload).expect("a frame");
    f.truncate(len);
    f
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let parse = fresh(&root, "request_parse");
    let verify = fresh(&root, "response_verify");
    let roundtrip = fresh(&root, "message_roundtrip");
    let respond = fresh(&root, "responder");
    let report = fresh(&root, "report_verify");

    for (i, p) in PROFILES.iter().enumerate() {
        let (req, resp) = exchange(p);
        write(&parse, p.name, &req);

        let mut fixed = vec![i as u8];
        fixed.extend_from_slice(&resp);
        write(&verify, p.name, &fixed);
        let mut pair = vec![0x80];
        pair.extend_from_slice(&(req.len() as u16).to_le_bytes());
        pair.extend_from_slice(&req);
        pair.extend_from_slice(&resp);
        write(&verify, &format!("{}-pair", p.name), &pair);

        write(&roundtrip, &format!("{}-request", p.name), body(&req));
        write(&roundtrip, &format!("{}-response", p.name), body(&resp));
        let cert = Message::parse(body(&resp))
            .and_then(|m| m.nested(Tag::CERT))
            .expect("fixture response has CERT");
        write(&roundtrip, &format!("{}-cert", p.name), cert.bytes());

        // Small datagrams keep the seed files small; 512 bytes still holds
        // a batch of two for every profile.
        let a = request(p, 1, 512);
        let b = request(p, 2, 512);
        write(
            &respond,
            p.name,
            &[&[0u8][..], &join_datagrams(&[&a, &b])].concat(),
        );
    }

    // One request offering several versions, with SRV: the acceptor's choice
    // and the VER list rules are only reached this way.
    let multi = [
        Profile::by_name("draft-14").expect("draft-14"),
        Profile::rfc(),
    ];
    let offer = Offer::new(&multi).expect("compatible offer");
    let mut out = vec![0u8; 1024];
    let n = offer
        .build(&[7u8; 32], Some(&[9u8; 32]), 1024, &mut out)
        .expect("multi-version request");
    write(&parse, "multi-version", &out[..n]);
    write(
        &respond,
        "multi-version-batch",
        &[&[3u8][..], &join_datagrams(&[&out[..n], &out[..n]])].concat(),
    );
    // Draft 03 takes 32- and 64-byte nonces; a batch mixing them once
    // produced a malformed answer.
    let short = draft03_short_nonce();
    let long = request(Profile::by_name("draft-03").expect("draft-03"), 3, 512);
    write(
        &respond,
        "draft-03-mixed-nonces",
        &[&[0u8][..], &join_datagrams(&[&long, &short])].concat(),
    );
    write(&parse, "draft-03-short-nonce", &short);
    // Valid reports: chains of three in the three 12+ formats, and the
    // pre-12 form, which parses but never verifies.
    for name in ["draft-12", "draft-14", "rfc-10049", "ml-dsa-44"] {
        let p = Profile::by_name(name).expect("profile");
        let json = chain(p, 3).report().to_json();
        write(&report, name, json.as_bytes());
    }
    write(
        &report,
        "legacy",
        br#"{"nonces":["AAEC","AwQF"],"responses":["BgcI","CQoL"]}"#,
    );
    // Frames for the AF_XDP path: a version-1 request to each served
    // address the target's program knows, and one to a port it does not.
    let frames = fresh(&root, "xdp_frame");
    let req = request(Profile::rfc(), 4, 1024);
    for (name, client, server) in [
        ("udp4-served", "10.77.0.2:40000", "10.77.0.1:2002"),
        ("udp6-served", "[fd77::2]:40000", "[fd77::1]:2002"),
        ("udp4-other-port", "10.77.0.2:40000", "10.77.0.1:2003"),
    ] {
        write(
            &frames,
            name,
            &udp_frame(client.parse().unwrap(), server.parse().unwrap(), &req),
        );
    }
    // Relayed proofs (binary form) bound to the fuzz device value: the
    // RFC's and draft 14's formats, and the post-quantum scheme.
    let proof = fresh(&root, "proof_verify");
    for (name, n) in [("rfc-10049", 3), ("draft-14", 2), ("ml-dsa-44", 1)] {
        let p = Profile::by_name(name).expect("profile");
        let bundle = bound_chain(p, n, PROOF_DEVICE)
            .proof()
            .expect("bound")
            .expect("a bundle")
            .to_binary();
        write(&proof, name, &bundle);
    }
    println!("seeds written under {}", root.display());
}
