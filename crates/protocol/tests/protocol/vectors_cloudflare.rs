//! Cloudflare's generated vectors (`cloudflare-roughtime/roughtime_*.json`):
//! Google, draft 08 and draft 11, in batches of 1, 10 and 100.
//!
//! Client side: every reply verifies against its request. Server side: our
//! responder, given the generator's fixed parameters and seeds, reproduces
//! every reply byte for byte, which pins tag order, tree padding (non-power-of-two batches),
//! Google's extra NONC, contexts and time units all at once.

use crate::common;
use crate::vectorfiles;

use common::VecSink;
use gnomon_protocol::merkle::{climb, Orientation};
use gnomon_protocol::profile::Framing;
use gnomon_protocol::verify::SentRequest;
use gnomon_protocol::wire::Message;
use gnomon_protocol::{
    verify_response, Acceptor, BatchContext, Certificate, KeyPair, Profile, Request, Responder,
    ResponderOptions, Tag,
};
use vectorfiles::{assert_same_bytes, body, cloudflare, unhex32};

/// Public keys the README gives for the generator's two seeds.
const ROOT_PUB: &str = "1ce90cc9d5476809f9088f52018d9a8e5b8449951e2468e13de00d0234d50d14";
const ONLINE_PUB: &str = "81d19b7ff58d408302a83f24da533dde16b71f80f8c1b8ce2798ae1571de3779";

/// The generator's fixed MIDP, RADI and MAXT (MINT is 0). IETF files encode
/// them in seconds and Google in µs, but the instants are the same.
const MIDP_US: u64 = 50_000_000;
const RADI_US: u32 = 5_000_000;
const MAXT_US: u64 = 100_000_000;

fn profile(name: &str) -> &'static Profile {
    Profile::by_name(name).unwrap_or_else(|| panic!("no profile {name}"))
}

fn client_side(rel: &str, profile_name: &str, depth: u8) {
    let b = cloudflare(rel);
    let root = KeyPair::from_seed(&b.root_seed.unwrap());
    assert_eq!(root.public(), unhex32(ROOT_PUB), "{rel}: root_key seed");
    let online = KeyPair::from_seed(&b.online_seed.unwrap()).public();
    assert_eq!(online, unhex32(ONLINE_PUB), "{rel}: online_key seed");
    for (i, (req, reply)) in b.requests.iter().zip(&b.replies).enumerate() {
        let v = verify_response(req, reply, &root.public())
            .unwrap_or_else(|e| panic!("{rel} reply {i}: {e:?}"));
        assert_eq!(v.profile.name, profile_name, "{rel} reply {i}");
        assert_eq!(v.midpoint_us, MIDP_US, "{rel} reply {i}");
        assert_eq!(v.radius_us, u64::from(RADI_US), "{rel} reply {i}");
        assert_eq!((v.mint_us, v.maxt_us), (0, MAXT_US), "{rel} reply {i}");
        assert_eq!(v.online_key, online, "{rel} reply {i}");
        assert_eq!(v.path_depth, depth, "{rel} reply {i}");
        assert_eq!(v.orientation, Orientation::HashFirst, "{rel} reply {i}");
        assert!(!v.legacy_context, "{rel} reply {i}");
    }
}

fn server_side(rel: &str, profile_name: &str) {
    let b = cloudflare(rel);
    let profile = profile(profile_name);
    let google = profile.framing == Framing::Bare;
    let long_term = KeyPair::from_seed(&b.root_seed.unwrap());
    let online = KeyPair::from_seed(&b.online_seed.unwrap());
    let cert = Certificate::mint(&long_term, &online.public(), 0, MAXT_US, profile);
    let acceptor = Acceptor::default();
    let reqs: Vec<Request<'_>> = b
        .requests
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let r = acceptor
                .parse(r)
                .unwrap_or_else(|e| panic!("{rel} request {i}: {e:?}"));
            assert_eq!(r.profile.name, profile_name, "{rel} request {i}");
            r
        })
        .collect();
    let ctx = BatchContext {
        profile,
        now_us: MIDP_US,
        radius_us: RADI_US,
        online: &online,
        cert: &cert,
        // 08–11 carry no VERS.
        vers: &[],
    };
    let mut responder = Responder::new(
        reqs.len(),
        ResponderOptions {
            batch_disputed: true,
            google_nonce: google,
        },
    );
    let mut sink = VecSink::new(reqs.len());
    let stats = responder.respond(&ctx, &reqs, &mut sink);
    assert_eq!(stats.signatures, 1, "{rel}: one batch, one signature");
    assert_eq!(stats.responses, reqs.len(), "{rel}");
    for (i, theirs) in b.replies.iter().enumerate() {
        let ours = sink
            .response(i)
            .unwrap_or_else(|| panic!("{rel} reply {i}: {:?}", sink.results[i]));
        assert_same_bytes(ours, theirs, &format!("{rel} reply {i}"));
    }
}

/// Cloudflare builds hash-first trees even for drafts whose text says
/// node-first (implementations disagree on it): each batched proof must fail when climbed node-first,
/// and the verifier must say it used hash-first.
fn batched_proofs_fail_node_first(rel: &str, profile_name: &str) {
    let b = cloudflare(rel);
    let p = profile(profile_name);
    let len = p.hash_len();
    let root_pub = KeyPair::from_seed(&b.root_seed.unwrap()).public();
    let mut odd = 0;
    for (i, (req, reply)) in b.requests.iter().zip(&b.replies).enumerate() {
        let v = verify_response(req, reply, &root_pub)
            .unwrap_or_else(|e| panic!("{rel} reply {i}: {e:?}"));
        assert_eq!(v.orientation, Orientation::HashFirst, "{rel} reply {i}");
        let msg = Message::parse(body(reply)).unwrap();
        let root = msg.nested(Tag::SREP).unwrap().require(Tag::ROOT).unwrap();
        let path = msg.require(Tag::PATH).unwrap();
        let indx = msg.u32(Tag::INDX).unwrap();
        assert_eq!(indx as usize, i, "{rel}: INDX is the request's position");
        assert!(
            !path.is_empty(),
            "{rel} reply {i}: batched reply has a PATH"
        );
        let mut leaf = [0u8; 64];
        p.hash
            .leaf(SentRequest::parse(req).unwrap().nonce, &mut leaf);
        let hash_first = climb(p.hash, &leaf, path, indx, Orientation::HashFirst).unwrap();
        assert_eq!(&hash_first[..len], root, "{rel} reply {i}");
        let node_first = climb(p.hash, &leaf, path, indx, Orientation::NodeFirst).unwrap();
        assert_ne!(
            &node_first[..len],
            root,
            "{rel} reply {i} verified node-first"
        );
        odd += usize::from(indx % 2 == 1);
    }
    assert_eq!(odd, b.replies.len() / 2, "{rel}: half the leaves are odd");
}

macro_rules! per_file {
    ($($name:ident: $file:literal, $profile:literal, $depth:literal;)*) => {
        mod client {
            $(#[test]
            fn $name() {
                super::client_side(concat!("cloudflare-roughtime/", $file), $profile, $depth);
            })*
        }
        mod server_reproduces_bytes {
            $(#[test]
            fn $name() {
                super::server_side(concat!("cloudflare-roughtime/", $file), $profile);
            })*
        }
    };
}

per_file! {
    google_001: "roughtime_google_001.json", "google", 0;
    google_010: "roughtime_google_010.json", "google", 4;
    google_100: "roughtime_google_100.json", "google", 7;
    draft08_001: "roughtime_ietf_draft08_001.json", "draft-08", 0;
    draft08_010: "roughtime_ietf_draft08_010.json", "draft-08", 4;
    draft08_100: "roughtime_ietf_draft08_100.json", "draft-08", 7;
    draft11_001: "roughtime_ietf_draft11_001.json", "draft-11", 0;
    draft11_010: "roughtime_ietf_draft11_010.json", "draft-11", 4;
    draft11_100: "roughtime_ietf_draft11_100.json", "draft-11", 7;
}

macro_rules! batched {
    ($($name:ident: $file:literal, $profile:literal;)*) => {
        mod node_first_fails {
            $(#[test]
            fn $name() {
                super::batched_proofs_fail_node_first(
                    concat!("cloudflare-roughtime/", $file),
                    $profile,
                );
            })*
        }
    };
}

batched! {
    google_010: "roughtime_google_010.json", "google";
    google_100: "roughtime_google_100.json", "google";
    draft08_010: "roughtime_ietf_draft08_010.json", "draft-08";
    draft08_100: "roughtime_ietf_draft08_100.json", "draft-08";
    draft11_010: "roughtime_ietf_draft11_010.json", "draft-11";
    draft11_100: "roughtime_ietf_draft11_100.json", "draft-11";
}
