//! Sturdy Statistics' EDN vectors (`sturdy-roughtime-protocol/`): the
//! Cloudflare batches again, with pre-derived public keys, plus a repackaging
//! of roughenough's draft-14 exchange and a comment-only note on its path8
//! reply.

use crate::vectorfiles;

use gnomon_protocol::merkle::{climb, Orientation};
use gnomon_protocol::verify::SentRequest;
use gnomon_protocol::wire::Message;
use gnomon_protocol::{verify_response, KeyPair, Profile, Tag};
use vectorfiles::{body, cloudflare, edn_str, edn_strs, read, read_text, sturdy, unb64_32};

const CF_ROOT_PUB: &str = "1ce90cc9d5476809f9088f52018d9a8e5b8449951e2468e13de00d0234d50d14";

/// Same exchange as the Cloudflare file, keys consistent, every reply verifies
/// with the pre-derived long-term key.
fn same_as_cloudflare(edn: &str, json: &str, profile: &str) {
    let s = sturdy(&format!("sturdy-roughtime-protocol/{edn}"));
    let c = cloudflare(&format!("cloudflare-roughtime/{json}"));
    assert_eq!(s.requests, c.requests, "{edn}: requests differ from {json}");
    assert_eq!(s.replies, c.replies, "{edn}: replies differ from {json}");
    assert_eq!(s.root_seed, c.root_seed, "{edn}: :lt-prv");
    assert_eq!(s.online_seed, c.online_seed, "{edn}: :online-prv");
    let lt_pub = s.root_pub.expect(":lt-pub");
    assert_eq!(hex::encode(lt_pub), CF_ROOT_PUB, "{edn}");
    assert_eq!(KeyPair::from_seed(&s.root_seed.unwrap()).public(), lt_pub);
    let online_pub = s.online_pub.expect(":online-pub");
    assert_eq!(
        KeyPair::from_seed(&s.online_seed.unwrap()).public(),
        online_pub
    );
    for (i, (req, reply)) in s.requests.iter().zip(&s.replies).enumerate() {
        let v = verify_response(req, reply, &lt_pub)
            .unwrap_or_else(|e| panic!("{edn} reply {i}: {e:?}"));
        assert_eq!(v.profile.name, profile, "{edn} reply {i}");
        assert_eq!(v.online_key, online_pub, "{edn} reply {i}");
    }
}

/// The `_001` files also state the nonce, the message length and the
/// version(s) the reply carries.
fn single_extras(edn: &str, msg_len: usize, resp_vers: &[u32]) {
    let text = read_text(&format!("sturdy-roughtime-protocol/{edn}"));
    let s = sturdy(&format!("sturdy-roughtime-protocol/{edn}"));
    let sent = SentRequest::parse(&s.requests[0]).unwrap();
    let nonce = edn_str(&text, ":nonce").expect(":nonce");
    assert_eq!(hex::encode(sent.nonce), nonce, "{edn}");
    assert!(text.contains(&format!(":msg-len {msg_len}")), "{edn}");
    assert_eq!(body(&s.requests[0]).len(), msg_len, "{edn}");
    let reply = Message::parse(body(&s.replies[0])).unwrap();
    let srep = reply.nested(Tag::SREP).unwrap();
    // 08/11 put one VER at top level, 12+ a VERS list in SREP, Google neither.
    let listed = srep.get(Tag::VERS).or(reply.get(Tag::VER)).unwrap_or(&[]);
    let got: Vec<u32> = listed
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, resp_vers, "{edn}: :resp-vers");
}

macro_rules! same_files {
    ($($name:ident: $edn:literal = $json:literal, $profile:literal;)*) => {
        mod same_as_cloudflare {
            $(#[test]
            fn $name() {
                super::same_as_cloudflare($edn, $json, $profile);
            })*
        }
    };
}

same_files! {
    google_001: "single-request/roughtime_google_001.edn" = "roughtime_google_001.json", "google";
    google_010: "batch-request/roughtime_google_010.edn" = "roughtime_google_010.json", "google";
    google_100: "batch-request/roughtime_google_100.edn" = "roughtime_google_100.json", "google";
    draft08_001: "single-request/roughtime_ietf_draft08_001.edn"
        = "roughtime_ietf_draft08_001.json", "draft-08";
    draft08_010: "batch-request/roughtime_ietf_draft08_010.edn"
        = "roughtime_ietf_draft08_010.json", "draft-08";
    draft08_100: "batch-request/roughtime_ietf_draft08_100.edn"
        = "roughtime_ietf_draft08_100.json", "draft-08";
    draft11_001: "single-request/roughtime_ietf_draft11_001.edn"
        = "roughtime_ietf_draft11_001.json", "draft-11";
    draft11_010: "batch-request/roughtime_ietf_draft11_010.edn"
        = "roughtime_ietf_draft11_010.json", "draft-11";
    draft11_100: "batch-request/roughtime_ietf_draft11_100.edn"
        = "roughtime_ietf_draft11_100.json", "draft-11";
}

#[test]
fn single_request_extras() {
    single_extras("single-request/roughtime_google_001.edn", 1024, &[]);
    single_extras(
        "single-request/roughtime_ietf_draft08_001.edn",
        1012,
        &[0x8000_0008],
    );
    single_extras(
        "single-request/roughtime_ietf_draft11_001.edn",
        1012,
        &[0x8000_000b],
    );
    single_extras(
        "single-request/roughtime_ietf_draft14_001.edn",
        1012,
        &[0, 0x8000_000c],
    );
}

#[test]
fn draft14_001_is_roughenoughs_exchange_and_verifies() {
    let edn = "sturdy-roughtime-protocol/single-request/roughtime_ietf_draft14_001.edn";
    let s = sturdy(edn);
    let dir = "roughenough/roughenough-protocol-testdata";
    assert_eq!(s.requests, [read(&format!("{dir}/rfc-request.071039e5"))]);
    assert_eq!(s.replies, [read(&format!("{dir}/rfc-response.071039e5"))]);
    // Only public keys here: int08h's long-term key.
    assert_eq!(s.root_seed, None);
    let lt_pub = s.root_pub.expect(":lt-pub");
    assert_eq!(lt_pub, unb64_32(vectorfiles::INT08H_PUB_B64));
    let v = verify_response(&s.requests[0], &s.replies[0], &lt_pub)
        .unwrap_or_else(|e| panic!("{edn}: {e:?}"));
    assert_eq!(v.profile.name, "draft-14");
    assert_eq!(Some(v.online_key), s.online_pub);
    assert!(!v.legacy_context);
    let mut wrong = lt_pub;
    wrong[0] ^= 1;
    assert!(verify_response(&s.requests[0], &s.replies[0], &wrong).is_err());
}

/// This file holds no vector, only Sturdy's notes (as comments) that the
/// path8 reply's ROOT could not be reproduced from a reconstructed request.
/// Check that it stays comment-only and that the note's claim still holds.
#[test]
fn draft14_path8_indx2_is_comments_only() {
    let rel = "sturdy-roughtime-protocol/single-request/draft14_path8_indx2.edn";
    let text = read_text(rel);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty());
    for l in &lines {
        assert!(l.starts_with(";;"), "{rel}: non-comment line {l:?}");
    }
    assert!(edn_strs(&text, ":request").is_empty(), "{rel}: live data");
    assert!(edn_strs(&text, ":replies").is_empty(), "{rel}: live data");

    // The commented-out data: roughenough's path8 reply and a guessed request.
    let uncommented: String = text
        .lines()
        .map(|l| l.trim_start_matches(";;"))
        .collect::<Vec<_>>()
        .join("\n");
    let reply = vectorfiles::unhex(&edn_strs(&uncommented, ":replies")[0]);
    let request = vectorfiles::unhex(&edn_strs(&uncommented, ":request")[0]);
    assert_eq!(
        reply,
        read("roughenough/roughenough-protocol-testdata/rfc-response.path8.index2.4c16c619")
    );
    let msg = Message::parse(body(&reply)).unwrap();
    let root = msg.nested(Tag::SREP).unwrap().require(Tag::ROOT).unwrap();
    let path = msg.require(Tag::PATH).unwrap();
    let indx = msg.u32(Tag::INDX).unwrap();
    let p = Profile::by_name("draft-14").unwrap();
    let mut leaf = [0u8; 64];
    p.hash.leaf(&request, &mut leaf);
    for o in [Orientation::HashFirst, Orientation::NodeFirst] {
        let got = climb(p.hash, &leaf, path, indx, o).unwrap();
        assert_ne!(&got[..32], root, "{rel}: guessed request proves ROOT {o:?}");
    }
}
