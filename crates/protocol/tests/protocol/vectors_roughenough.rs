//! roughenough's protocol test data (`roughenough/`): draft 0x8000000c
//! captures and a synthetic encoding vector, and the RFC 10049 version-1
//! exchange from its 2.2.0 release, which is the only external vector signed
//! with the RFC's lower-case "Roughtime" context strings.
//!
//! The server-list files there belong to the server-list tests.

use crate::vectorfiles;

use gnomon_protocol::merkle::{climb, Orientation, PathError};
use gnomon_protocol::profile::{DELE_PLAIN, DELE_RFC, SREP_DRAFT, SREP_RFC};
use gnomon_protocol::request::srv_for;
use gnomon_protocol::verify::check_certificate;
use gnomon_protocol::wire::{self, Message};
use gnomon_protocol::{verify_response, Acceptor, KeyPair, Profile, Tag, VerifyError};
use vectorfiles::{body, ed25519_ok, read, signed_parts, unb64_32, INT08H_PUB_B64};

const DRAFT: &str = "roughenough/roughenough-protocol-testdata";
const V1: &str = "roughenough/roughenough-protocol-2.2.0-testdata";
const FOREVER: u64 = u64::MAX;

fn file(dir: &str, name: &str) -> Vec<u8> {
    read(&format!("{dir}/{name}"))
}

#[test]
fn rfc_response_071039e5_verifies_as_draft_14() {
    let req = file(DRAFT, "rfc-request.071039e5");
    let resp = file(DRAFT, "rfc-response.071039e5");
    let key = unb64_32(INT08H_PUB_B64);
    let v = verify_response(&req, &resp, &key).unwrap();
    assert_eq!(v.profile.name, "draft-14");
    // Drafts 12+ sign with "RoughTime v1 …" without dashes: the profile's
    // own contexts, not a fallback.
    assert!(!v.legacy_context);
    assert_eq!(v.midpoint_us, 0x682f_8402 * 1_000_000); // 2025-05-22T20:07:30Z
    assert_eq!(v.radius_us, 5_000_000);
    assert_eq!((v.mint_us, v.maxt_us), (0, FOREVER));
    assert_eq!(v.path_depth, 0);
    assert_eq!(
        hex::encode(v.online_key),
        "b9045bea9dccd4ba0c34181f5cf6994300d49b3b8611559518e01bbe66f9c583"
    );
    let parsed = Acceptor::default().parse(&req).unwrap();
    assert_eq!(parsed.profile.name, "draft-14");
    assert_eq!(parsed.srv, None);
    assert_eq!(hex::encode(&parsed.nonce[..4]), "071039e5");
}

/// This request names a key by SRV that is not int08h's; a server holding
/// int08h's key compares SRV with its own and must drop the request.
#[test]
fn rfc_request_srv_417aa962_names_another_key() {
    let req = file(DRAFT, "rfc-request.SRV.417aa962");
    let r = Acceptor::default().parse(&req).unwrap();
    assert_eq!(r.profile.name, "draft-14");
    assert_eq!(hex::encode(&r.nonce[..4]), "417aa962");
    let srv = r.srv.expect("SRV present");
    assert_eq!(&srv[..3], &[0xee, 0xf0, 0x88]);
    let int08h = unb64_32(INT08H_PUB_B64);
    assert_ne!(
        *srv,
        srv_for(&int08h),
        "server with int08h's key must drop it"
    );
    // The same comparison accepts the right key: a request built for
    // int08h's key carries exactly srv_for(int08h).
    let own = srv_for(&int08h);
    let mut built = vec![0u8; 1024];
    gnomon_protocol::Offer::single(Profile::by_name("draft-14").unwrap())
        .build(r.nonce, Some(&own), 1024, &mut built)
        .unwrap();
    assert_eq!(Acceptor::default().parse(&built).unwrap().srv, Some(&own));
}

/// The only batched 0x8000000c reply known; its request is lost, so only its
/// structure and SREP signature can be checked.
#[test]
fn rfc_response_path8_index2_4c16c619_parses_and_srep_verifies() {
    let resp = file(DRAFT, "rfc-response.path8.index2.4c16c619");
    let msg = Message::parse(body(&resp)).unwrap();
    assert_eq!(msg.u32(Tag::INDX).unwrap(), 2);
    let path = msg.require(Tag::PATH).unwrap();
    assert_eq!(path.len(), 8 * 32);
    assert_eq!(
        hex::encode(&msg.require(Tag::NONC).unwrap()[..4]),
        "4c16c619"
    );
    assert_eq!(msg.get(Tag::TYPE), Some(&[1, 0, 0, 0][..]));
    let srep = msg.nested(Tag::SREP).unwrap();
    assert_eq!(srep.u32(Tag::VER).unwrap(), 0x8000_000c);
    // INDX 2 fits in 8 levels: the proof is well formed, only unverifiable.
    let leaf = [0u8; 64];
    let p = Profile::by_name("draft-14").unwrap();
    assert!(climb(p.hash, &leaf, path, 2, Orientation::HashFirst).is_ok());
    let s = signed_parts(&msg);
    assert!(ed25519_ok(&s.online, SREP_DRAFT, s.srep, s.srep_sig));
    assert!(!ed25519_ok(&s.online, SREP_RFC, s.srep, s.srep_sig));
}

/// A synthetic encoding vector: filler values, invalid on purpose.
#[test]
fn golden_response_phase8_round_trips_and_fails_verification() {
    let resp = file(DRAFT, "golden-response.phase8");
    let inner = body(&resp);
    let msg = Message::parse(inner).unwrap();
    assert_eq!(rebuild(&msg), inner);
    for tag in [Tag::SREP, Tag::CERT] {
        let nested = msg.nested(tag).unwrap();
        assert_eq!(rebuild(&nested), msg.require(tag).unwrap(), "{tag}");
    }
    let dele = msg.nested(Tag::CERT).unwrap().nested(Tag::DELE).unwrap();
    assert_eq!(rebuild(&dele).len(), 72);
    let mut framed = vec![0u8; wire::PACKET_HEADER];
    wire::write_frame_header(&mut framed, inner.len()).unwrap();
    framed.extend_from_slice(&rebuild(&msg));
    assert_eq!(framed, resp);

    // INDX = 7 with two PATH entries leaves a bit set: a proof error even
    // before any hash is compared.
    let path = msg.require(Tag::PATH).unwrap();
    assert_eq!((path.len(), msg.u32(Tag::INDX).unwrap()), (64, 7));
    let p = Profile::by_name("draft-14").unwrap();
    assert_eq!(
        climb(p.hash, &[0; 64], path, 7, Orientation::HashFirst),
        Err(PathError::IndexBits)
    );
    // Against a matching-format request, with the key it claims to delegate
    // to or any other, the filler signatures fail first.
    let req = file(DRAFT, "rfc-request.071039e5");
    let s = signed_parts(&msg);
    for key in [s.online, unb64_32(INT08H_PUB_B64)] {
        assert_eq!(
            verify_response(&req, &resp, &key),
            Err(VerifyError::DelegationSignature)
        );
    }
    assert!(!ed25519_ok(&s.online, SREP_DRAFT, s.srep, s.srep_sig));
}

fn rebuild(msg: &Message<'_>) -> Vec<u8> {
    let entries: Vec<(Tag, &[u8])> = msg.iter().collect();
    let mut out = vec![0u8; msg.bytes().len()];
    let n = wire::write_message(&mut out, &entries).unwrap();
    out.truncate(n);
    out
}

const V1_PUB_B64: &str = "GX9rI+FshTLGq8g4+s1ep4m+DHaykgM0A5v6iz02jWE=";

#[test]
fn rfc10049_response_104172a3_verifies_as_version_1() {
    let req = file(V1, "rfc10049-request.104172a3");
    let resp = file(V1, "rfc10049-response.104172a3");
    let key = unb64_32(V1_PUB_B64);
    assert_eq!(KeyPair::from_seed(&[0x2a; 32]).public(), key);
    let parsed = Acceptor::default().parse(&req).unwrap();
    assert_eq!(parsed.profile.name, "rfc-10049");
    assert_eq!(parsed.srv, None);
    assert_eq!(
        hex::encode(parsed.nonce),
        "104172a3d405366798c9fa2b5c8dbeef205182b3e4154677a8d90a3b6c9dceff"
    );
    let v = verify_response(&req, &resp, &key).unwrap();
    assert_eq!(v.profile.name, "rfc-10049");
    assert!(!v.legacy_context, "RFC strings, not the draft's");
    assert_eq!(v.midpoint_us, 1_791_158_400_000_000); // 2026-10-05T00:00:00Z
    assert_eq!(v.radius_us, 5_000_000);
}

/// The vector's two signatures hold only under the RFC's lower-case strings:
/// forcing the capital-T draft strings must fail for both.
#[test]
fn rfc10049_response_104172a3_fails_under_capital_t_contexts() {
    let resp = file(V1, "rfc10049-response.104172a3");
    let msg = Message::parse(body(&resp)).unwrap();
    let s = signed_parts(&msg);
    let key = unb64_32(V1_PUB_B64);
    assert!(ed25519_ok(&s.online, SREP_RFC, s.srep, s.srep_sig));
    assert!(!ed25519_ok(&s.online, SREP_DRAFT, s.srep, s.srep_sig));
    assert!(ed25519_ok(&key, DELE_RFC, s.dele, s.cert_sig));
    assert!(!ed25519_ok(&key, DELE_PLAIN, s.dele, s.cert_sig));
    // The same through the crate: the CERT checks under version 1's
    // context and not under draft 14's.
    let cert = msg.require(Tag::CERT).unwrap();
    assert_eq!(check_certificate(cert, Profile::rfc(), &key), Ok(()));
    let draft14 = Profile::by_name("draft-14").unwrap();
    assert_eq!(
        check_certificate(cert, draft14, &key),
        Err(VerifyError::DelegationSignature)
    );
    // Version 1 falls back to the capital-T strings; the fallback
    // must not rescue a broken SREP signature. Flip one SREP byte (RADI).
    let mut bad = resp.clone();
    let srep_at = resp
        .windows(s.srep.len())
        .position(|w| w == s.srep)
        .unwrap();
    // SREP has five tags, so its first value (VER) starts at 40; RADI at 44.
    bad[srep_at + 44] ^= 1;
    let req = file(V1, "rfc10049-request.104172a3");
    assert_eq!(
        verify_response(&req, &bad, &key),
        Err(VerifyError::ResponseSignature)
    );
}
