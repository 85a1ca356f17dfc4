//! The experimental post-quantum version (0x90000001, ML-DSA-44), pinned by
//! the exchange captured from tannerryan/roughtime, the only other
//! implementation (`tests/external-vectors/tannerryan-ml-dsa-44/`, README
//! there): gnomon's client accepts it, and rejects every damaged form.

use crate::vectorfiles;

use gnomon_protocol::request::srv_for;
use gnomon_protocol::scheme::{PublicKey, Scheme};
use gnomon_protocol::wire::Message;
use gnomon_protocol::{verify_response, Tag, VerifyError, Version};

struct Capture {
    key: Vec<u8>,
    request: Vec<u8>,
    response: Vec<u8>,
}

fn capture() -> Capture {
    let hex = String::from_utf8(vectorfiles::read(
        "tannerryan-ml-dsa-44/root-public-key.hex",
    ))
    .expect("hex key file is text");
    Capture {
        key: hex::decode(hex.trim()).expect("key file holds hex"),
        request: vectorfiles::read("tannerryan-ml-dsa-44/request.bin"),
        response: vectorfiles::read("tannerryan-ml-dsa-44/response.bin"),
    }
}

fn key(c: &Capture) -> PublicKey<'_> {
    PublicKey::from_bytes(&c.key).expect("1312 bytes is an ML-DSA-44 key")
}

#[test]
fn the_captured_answer_verifies_as_its_client_printed() {
    let c = capture();
    assert_eq!(key(&c).scheme(), Scheme::MlDsa44);
    let v = verify_response(&c.request, &c.response, key(&c)).expect("the capture verifies");
    assert_eq!(v.profile.name, "ml-dsa-44");
    assert_eq!(v.profile.version, Version::ML_DSA_44);
    // What tannerryan's client printed: midpoint 1795763307 s, radius 3 s.
    assert_eq!(v.midpoint_us, 1_795_763_307_000_000);
    assert_eq!(v.radius_us, 3_000_000);
    assert_eq!(v.path_depth, 0);
    assert!(v.mint_us < v.midpoint_us && v.midpoint_us < v.maxt_us);
    assert_eq!(v.maxt_us - v.mint_us, 24 * 3600 * 1_000_000);
    assert!(!v.legacy_context);
}

#[test]
fn the_request_names_the_key_by_srv_over_the_whole_ml_dsa_key() {
    let c = capture();
    let msg = Message::parse(&c.request[12..]).unwrap();
    assert_eq!(msg.require(Tag::SRV).unwrap(), srv_for(&c.key));
    assert_eq!(msg.require(Tag::VER).unwrap(), 0x9000_0001u32.to_le_bytes());
}

/// The byte offset of `tag`'s value in `response` (nested under `path`).
fn value_at(response: &[u8], path: &[Tag], tag: Tag) -> std::ops::Range<usize> {
    let mut base = 12;
    let mut msg = Message::parse(&response[12..]).unwrap();
    for t in path {
        let inner = msg.require(*t).unwrap();
        base += inner.as_ptr() as usize - msg.bytes().as_ptr() as usize;
        msg = Message::parse(inner).unwrap();
    }
    let v = msg.require(tag).unwrap();
    let start = base + (v.as_ptr() as usize - msg.bytes().as_ptr() as usize);
    start..start + v.len()
}

#[test]
fn a_forged_response_signature_is_rejected() {
    let c = capture();
    let sig = value_at(&c.response, &[], Tag::SIG);
    assert_eq!(sig.len(), 2420);
    for at in [sig.start, sig.start + 1210, sig.end - 1] {
        let mut r = c.response.clone();
        r[at] ^= 0x01;
        assert_eq!(
            verify_response(&c.request, &r, key(&c)),
            Err(VerifyError::ResponseSignature),
            "byte {at} flipped"
        );
    }
}

#[test]
fn a_forged_delegation_is_rejected() {
    let c = capture();
    let sig = value_at(&c.response, &[Tag::CERT], Tag::SIG);
    let mut r = c.response.clone();
    r[sig.start + 7] ^= 0x80;
    assert_eq!(
        verify_response(&c.request, &r, key(&c)),
        Err(VerifyError::DelegationSignature)
    );
    // A changed online key breaks the delegation's signature too.
    let pubk = value_at(&c.response, &[Tag::CERT, Tag::DELE], Tag::PUBK);
    let mut r = c.response.clone();
    r[pubk.start] ^= 1;
    assert_eq!(
        verify_response(&c.request, &r, key(&c)),
        Err(VerifyError::DelegationSignature)
    );
}

#[test]
fn a_changed_time_is_rejected() {
    let c = capture();
    let midp = value_at(&c.response, &[Tag::SREP], Tag::MIDP);
    let mut r = c.response.clone();
    r[midp.start] ^= 1;
    assert_eq!(
        verify_response(&c.request, &r, key(&c)),
        Err(VerifyError::ResponseSignature)
    );
}

#[test]
fn the_signatures_hold_only_under_their_contexts_as_parameters() {
    let c = capture();
    let r = &c.response[12..];
    let msg = Message::parse(r).unwrap();
    let cert = msg.nested(Tag::CERT).unwrap();
    let dele = cert.require(Tag::DELE).unwrap();
    let online = Message::parse(dele).unwrap().require(Tag::PUBK).unwrap();
    let srep = msg.require(Tag::SREP).unwrap();
    let (srep_sig, dele_sig) = (
        msg.require(Tag::SIG).unwrap(),
        cert.require(Tag::SIG).unwrap(),
    );
    let s = Scheme::MlDsa44;
    let dele_ctx: &[u8] = b"RoughTime v1 delegation signature\0";
    let srep_ctx: &[u8] = b"RoughTime v1 response signature\0";
    assert!(s.verify(&c.key, dele_ctx, dele, dele_sig));
    assert!(s.verify(online, srep_ctx, srep, srep_sig));
    // Wrong contexts: without the NUL, version 1's lower-case strings, the
    // other message's context, or the context prefixed as Ed25519 does.
    let rfc_dele: &[u8] = b"Roughtime v1 delegation signature\0";
    for ctx in [&dele_ctx[..dele_ctx.len() - 1], rfc_dele, srep_ctx] {
        assert!(!s.verify(&c.key, ctx, dele, dele_sig), "{ctx:?}");
    }
    assert!(!s.verify(online, &srep_ctx[..srep_ctx.len() - 1], srep, srep_sig));
    let prefixed = [srep_ctx, srep].concat();
    assert!(!s.verify(online, b"", &prefixed, srep_sig));
}

#[test]
fn every_truncation_is_rejected() {
    let c = capture();
    // Each cut (framing, header, signature, certificate, index) fails, and
    // none verifies; most lengths are tried, all would take seconds.
    for len in (0..c.response.len())
        .step_by(97)
        .chain([c.response.len() - 1, 12, 11])
    {
        let r = &c.response[..len];
        assert!(
            verify_response(&c.request, r, key(&c)).is_err(),
            "{len} of {} bytes verified",
            c.response.len()
        );
    }
    // A frame whose length field was cut to match a truncated body too.
    let mut r = c.response[..c.response.len() - 4].to_vec();
    let body = (r.len() - 12) as u32;
    r[8..12].copy_from_slice(&body.to_le_bytes());
    assert!(verify_response(&c.request, &r, key(&c)).is_err());
}

#[test]
fn an_ed25519_key_cannot_accept_it_and_the_request_must_match() {
    let c = capture();
    let ed = [7u8; 32];
    assert_eq!(
        verify_response(&c.request, &c.response, &ed),
        Err(VerifyError::KeyScheme {
            key: Scheme::Ed25519,
            answered: Scheme::MlDsa44
        })
    );
    // Another nonce: the Merkle proof fails.
    let mut q = c.request.clone();
    let nonce = Message::parse(&q[12..])
        .unwrap()
        .require(Tag::NONC)
        .unwrap()
        .as_ptr() as usize
        - q.as_ptr() as usize;
    q[nonce] ^= 1;
    assert!(verify_response(&q, &c.response, key(&c)).is_err());
}
