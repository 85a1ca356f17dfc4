//! Raw captures kept by butterfield (`butterfield/*.bin`): other servers'
//! deployed formats, mostly without their requests or keys. What can be
//! checked is checked: parsing, signatures where the key is known, time
//! encodings, and the verifier's verdict where a request exists or can be
//! rebuilt.

use crate::vectorfiles;

use gnomon_protocol::profile::{TimeEncoding, SREP_DRAFT, SREP_RFC};
use gnomon_protocol::verify::{check_certificate, SentRequest};
use gnomon_protocol::wire::Message;
use gnomon_protocol::{
    verify_response, Acceptor, Offer, Profile, RequestError, Tag, VerifyError, Version,
};
use vectorfiles::{body, ed25519_ok, interop_pub, read, signed_parts};

fn bin(name: &str) -> Vec<u8> {
    read(&format!("butterfield/{name}"))
}

const DAY_US: u64 = 86_400_000_000;

#[test]
fn google_request_bin_parses_as_google() {
    let req = bin("google-request.bin");
    let r = Acceptor::default().parse(&req).unwrap();
    assert_eq!(r.profile.name, "google");
    assert_eq!(r.nonce.len(), 64);
    assert_eq!(&r.nonce[..4], &[0x69, 0x9f, 0xe6, 0xe2]);
    assert_eq!(r.packet.len(), 1024);
    let sent = SentRequest::parse(&req).unwrap();
    assert!(!sent.framed);
    assert_eq!(sent.primary().unwrap().name, "google");
}

/// Cloudflare's deployed "0x80000003": no NONC, MJD-µs times, SREP signed
/// with the common response context.
#[test]
fn cloudflare_response_bin_is_mjd_0x80000003() {
    let resp = bin("cloudflare-response.bin");
    let msg = Message::parse(body(&resp)).unwrap();
    assert_eq!(msg.u32(Tag::VER).unwrap(), 0x8000_0003);
    assert_eq!(msg.get(Tag::NONC), None);
    let p = Profile::for_wire(Version::draft(3), false).unwrap();
    assert!(
        !p.nonce_copy_required,
        "draft-03 must tolerate the missing NONC"
    );
    assert_eq!(p.time, TimeEncoding::MjdMicros);

    let s = signed_parts(&msg);
    assert!(ed25519_ok(&s.online, SREP_DRAFT, s.srep, s.srep_sig));
    assert!(!ed25519_ok(&s.online, SREP_RFC, s.srep, s.srep_sig));

    let srep = msg.nested(Tag::SREP).unwrap();
    assert_eq!(srep.u32(Tag::RADI).unwrap(), 1_000_000);
    let midp = srep.u64(Tag::MIDP).unwrap();
    assert_eq!(midp >> 40, 60_182, "MJD of 2023-08-26");
    let unix = p.time.decode(midp).unwrap();
    assert_eq!(unix / DAY_US, 19_595, "2023-08-26 is Unix day 19595");
    let dele = Message::parse(s.dele).unwrap();
    let (mint, maxt) = (dele.u64(Tag::MINT).unwrap(), dele.u64(Tag::MAXT).unwrap());
    assert!(mint <= midp && midp <= maxt);
}

/// roughenough 1.x's "version 1" is not RFC 10049: the verifier
/// names it, and a server does not take its request for version 1.
#[test]
fn roughenough_request_and_response_bin_are_legacy_version_one() {
    let req = bin("roughenough-request.bin");
    let resp = bin("roughenough-response.bin");
    assert_eq!(
        verify_response(&req, &resp, &interop_pub()),
        Err(VerifyError::LegacyVersionOne)
    );
    assert_eq!(
        Acceptor::default().parse(&req).unwrap_err(),
        RequestError::Unsupported
    );
    let msg = Message::parse(body(&resp)).unwrap();
    assert_eq!(msg.u32(Tag::VER).unwrap(), 1);
    assert_eq!((msg.get(Tag::TYPE), msg.get(Tag::NONC)), (None, None));
    let s = signed_parts(&msg);
    assert!(ed25519_ok(&s.online, SREP_DRAFT, s.srep, s.srep_sig));
}

/// Signed by the interop key under the `--` context, and without NONC. The
/// request is lost and ROOT binds its nonce, so the response is checked
/// against a rebuilt request with another nonce: the verifier must get past
/// both signatures and the missing NONC and fail only at the Merkle root.
#[test]
fn draft11_response_bin_signatures_verify_without_nonce() {
    let resp = bin("draft11-response.bin");
    let msg = Message::parse(body(&resp)).unwrap();
    assert_eq!(msg.get(Tag::NONC), None);
    let p = Profile::by_name("draft-11").unwrap();
    let cert = msg.require(Tag::CERT).unwrap();
    assert_eq!(check_certificate(cert, p, &interop_pub()), Ok(()));
    let s = signed_parts(&msg);
    assert!(ed25519_ok(&s.online, SREP_DRAFT, s.srep, s.srep_sig));
    let midp = msg.nested(Tag::SREP).unwrap().u64(Tag::MIDP).unwrap();
    assert_eq!(
        p.time.decode(midp).unwrap() / DAY_US,
        20_032,
        "2024-11-05 in seconds"
    );

    let mut req = vec![0u8; 1024];
    Offer::single(p)
        .build(&[7; 32], None, 1024, &mut req)
        .unwrap();
    assert_eq!(
        verify_response(&req, &resp, &interop_pub()),
        Err(VerifyError::Root)
    );
    let mut other_key = interop_pub();
    other_key[31] ^= 1;
    assert_eq!(
        verify_response(&req, &resp, &other_key),
        Err(VerifyError::DelegationSignature)
    );
}

/// The request of this capture is not included, but it can be rebuilt: a
/// plain 1024-byte draft-14 request (VER, NONC, TYPE, ZZZZ; no SRV) with the
/// NONC the reply echoes hashes to its ROOT. So the whole reply verifies.
#[test]
fn roughenough_response_14_bin_verifies_with_rebuilt_request() {
    let resp = bin("roughenough-response-14.bin");
    let msg = Message::parse(body(&resp)).unwrap();
    let nonce = msg.require(Tag::NONC).unwrap();
    let p = Profile::by_name("draft-14").unwrap();
    let cert = msg.require(Tag::CERT).unwrap();
    assert_eq!(check_certificate(cert, p, &interop_pub()), Ok(()));
    let s = signed_parts(&msg);
    assert!(ed25519_ok(&s.online, SREP_DRAFT, s.srep, s.srep_sig));

    let mut req = vec![0u8; 1024];
    Offer::single(p).build(nonce, None, 1024, &mut req).unwrap();
    let v = verify_response(&req, &resp, &interop_pub()).unwrap();
    assert_eq!(v.profile.name, "draft-14");
    assert!(!v.legacy_context);
    assert_eq!(v.radius_us, 5_000_000);
    assert_eq!(v.online_key, s.online);
}
