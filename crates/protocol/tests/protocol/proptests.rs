//! Property tests: no input makes the crate panic, and mutated messages never
//! verify as anything but what the server signed.
//!
//! Inputs are either arbitrary bytes or valid requests and responses from
//! the deterministic server in `common`, damaged by one [`Edit`]. The fuzz
//! targets in `fuzz/` run the same properties for longer.

use crate::common;
use crate::props;

use std::sync::OnceLock;

use common::*;
use gnomon_protocol::merkle::{self, Orientation, PathError};
use gnomon_protocol::profile::{HashAlg, TimeEncoding};
use gnomon_protocol::responder::RespondError;
use gnomon_protocol::time::{mjd_to_unix_us, unix_us_to_mjd, FOREVER};
use gnomon_protocol::verify::check_certificate;
use gnomon_protocol::wire::{self, Message, PACKET_HEADER};
use gnomon_protocol::{
    verify_response, Acceptor, Certificate, Offer, Profile, Request, ResponderOptions, Tag,
    Verified, VerifyError, PROFILES,
};
use props::*;
use proptest::prelude::*;
use proptest::sample::Index;

const CASES: u32 = 1024;

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        // Shrinking a failure is worth it; hunting far for one here is the fuzzers' job.
        max_shrink_iters: 2048,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------
// Fixtures: one valid exchange per profile, alone and in a batch.

struct Exchange {
    request: Vec<u8>,
    response: Vec<u8>,
    verified: Verified,
}

/// Per profile: a lone response, and member 2 of a batch of 4 (a real PATH
/// wherever the profile batches at all).
fn exchanges() -> &'static [[Exchange; 2]] {
    static X: OnceLock<Vec<[Exchange; 2]>> = OnceLock::new();
    X.get_or_init(|| {
        let server = Server::new(3);
        let batched = ResponderOptions {
            batch_disputed: true,
            google_nonce: true,
        };
        PROFILES
            .iter()
            .map(|p| {
                let one = |batch: usize, opts: ResponderOptions| {
                    let reqs: Vec<Vec<u8>> = (0..batch).map(|i| request(p, i, 1024)).collect();
                    let sink = server.answer(p, &reqs, opts, NOW_US);
                    let k = batch / 2;
                    let response = sink.response(k).expect("fixture answered").to_vec();
                    let verified = verify_response(&reqs[k], &response, server.public(p))
                        .expect("fixture verifies");
                    Exchange {
                        request: reqs[k].clone(),
                        response,
                        verified,
                    }
                };
                [one(1, ResponderOptions::default()), one(4, batched)]
            })
            .collect()
    })
}

/// The fixtures' server: its key for each profile is `server().public(p)`.
fn server() -> &'static Server {
    static S: OnceLock<Server> = OnceLock::new();
    S.get_or_init(|| Server::new(3))
}

fn profile_index() -> impl Strategy<Value = usize> {
    0..PROFILES.len()
}

// ---------------------------------------------------------------------------
// Messages and framing.

proptest! {
    #![proptest_config(config(CASES))]

    #[test]
    fn message_parse_never_panics_on_arbitrary_bytes(
        bytes in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        check_message(&bytes);
    }

    #[test]
    fn message_parse_never_panics_on_small_headers(
        n in 0u32..6,
        words in prop::collection::vec(any::<u32>(), 0..14),
    ) {
        // Small tag counts make the arbitrary words land on offsets and tags.
        let mut bytes = n.to_le_bytes().to_vec();
        for w in words {
            bytes.extend_from_slice(&(w % 64).to_le_bytes());
        }
        check_message(&bytes);
    }

    #[test]
    fn valid_messages_round_trip_exactly(msg in valid_message(), e in edit()) {
        let m = Message::parse(&msg).expect("written message parses");
        exercise(&m, 0);
        check_message(&msg);
        check_message(&apply(&msg, &e));
    }

    #[test]
    fn unframe_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64), e in edit()) {
        let _ = wire::unframe(&bytes);
        let mut packet = wire::MAGIC.to_vec();
        packet.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        packet.extend_from_slice(&bytes);
        assert_eq!(wire::unframe(&packet), Ok(&bytes[..]));
        let damaged = apply(&packet, &e);
        if let Ok(body) = wire::unframe(&damaged) {
            assert_eq!(body.len() + PACKET_HEADER, damaged.len());
        }
    }
}

// ---------------------------------------------------------------------------
// Requests.

proptest! {
    #![proptest_config(config(CASES))]

    #[test]
    fn request_parsing_never_panics_on_arbitrary_bytes(
        bytes in prop::collection::vec(any::<u8>(), 0..200),
        framed in any::<bool>(),
    ) {
        let mut datagram = bytes;
        if framed {
            let len = datagram.len() as u32;
            let mut p = wire::MAGIC.to_vec();
            p.extend_from_slice(&len.to_le_bytes());
            p.extend_from_slice(&datagram);
            datagram = p;
        }
        check_parse_request(&datagram);
    }

    #[test]
    fn request_parsing_never_panics_on_damaged_requests(
        p in profile_index(),
        size in prop::sample::select(vec![256usize, 512, 1024]),
        edits in prop::collection::vec(edit(), 1..4),
    ) {
        let mut datagram = request(&PROFILES[p], 5, size);
        for e in &edits {
            datagram = apply(&datagram, e);
        }
        check_parse_request(&datagram);
    }

    #[test]
    fn offers_build_or_refuse_any_size(
        // Neighbouring rows are the ones likely to share a request format.
        picks in (profile_index(), prop::collection::vec(0usize..4, 0..4))
            .prop_map(|(base, d)| {
                let mut v = vec![base];
                v.extend(d.iter().map(|d| (base + d).min(PROFILES.len() - 1)));
                v
            }),
        nonce_len in prop_oneof![3 => Just(None), 1 => prop::option::of(0usize..80)],
        size in prop_oneof![3 => (0usize..300).prop_map(|k| 4 * k), 1 => 0usize..1200],
        room in prop_oneof![3 => Just(None), 1 => prop::option::of(0usize..1300)],
        srv in any::<bool>(),
    ) {
        let profiles: Vec<&'static Profile> = picks.iter().map(|&i| &PROFILES[i]).collect();
        let Ok(offer) = Offer::new(&profiles) else {
            return Ok(());
        };
        let mut out = vec![0u8; room.unwrap_or(size)];
        let srv_value = [0x42u8; 32];
        let nonce = vec![0x17u8; nonce_len.unwrap_or(offer.primary().nonce_len)];
        let built = offer.build(&nonce, srv.then_some(&srv_value), size, &mut out);
        let Ok(n) = built else {
            return Ok(());
        };
        assert_eq!(n, size);
        let lax = Acceptor { min_size: 0, ..Acceptor::default() };
        let req = lax.parse(&out[..n]).expect("a built request is accepted");
        check_accepted(&req, &out[..n]);
        assert_eq!(req.nonce, &nonce[..]);
        assert_eq!(req.profile.id, offer.primary().id);
    }
}

// ---------------------------------------------------------------------------
// Verification.

/// Byte ranges of a response's parts, relative to the whole datagram.
fn regions(response: &[u8]) -> Vec<(Tag, std::ops::Range<usize>)> {
    let body = wire::unframe(response).unwrap_or(response);
    let start = response.len() - body.len();
    let m = Message::parse(body).expect("fixture response parses");
    m.iter()
        .map(|(t, v)| {
            let at = v.as_ptr() as usize - body.as_ptr() as usize + start;
            (t, at..at + v.len())
        })
        .collect()
}

proptest! {
    #![proptest_config(config(CASES))]

    #[test]
    fn verify_never_panics_on_arbitrary_pairs(
        request in prop::collection::vec(any::<u8>(), 0..128),
        response in prop::collection::vec(any::<u8>(), 0..512),
        p in profile_index(),
    ) {
        let key = server().public(&PROFILES[p]);
        let _ = verify_response(&request, &response, key);
        let _ = verify_response(&exchanges()[p][0].request, &response, key);
    }

    #[test]
    fn damaged_responses_never_verify_with_another_time(
        p in profile_index(),
        batched in any::<bool>(),
        edits in prop::collection::vec(edit(), 1..3),
    ) {
        let x = &exchanges()[p][usize::from(batched)];
        let mut response = x.response.clone();
        for e in &edits {
            response = apply(&response, e);
        }
        if let Ok(v) = verify_response(&x.request, &response, server().public(&PROFILES[p])) {
            assert_same_time(&v, &x.verified);
        }
    }

    #[test]
    fn damaged_requests_never_verify_with_another_time(
        p in profile_index(),
        batched in any::<bool>(),
        e in edit(),
    ) {
        let x = &exchanges()[p][usize::from(batched)];
        let request = apply(&x.request, &e);
        if let Ok(v) = verify_response(&request, &x.response, server().public(&PROFILES[p])) {
            assert_same_time(&v, &x.verified);
        }
    }

    #[test]
    fn any_change_to_signed_or_proof_bytes_fails(
        p in profile_index(),
        batched in any::<bool>(),
        which in prop::sample::select(vec![Tag::SIG, Tag::SREP, Tag::CERT, Tag::PATH]),
        at in any::<Index>(),
        mask in 1u8..,
    ) {
        let x = &exchanges()[p][usize::from(batched)];
        let (_, range) = regions(&x.response)
            .into_iter()
            .find(|(t, _)| *t == which)
            .expect("every response has SIG, SREP, CERT and PATH");
        if range.is_empty() {
            return Ok(()); // PATH of a lone response
        }
        let mut response = x.response.clone();
        response[range.start + at.index(range.len())] ^= mask;
        let r = verify_response(&x.request, &response, server().public(&PROFILES[p]));
        assert!(r.is_err(), "{} {which}: damaged response verified", PROFILES[p].name);
    }

    #[test]
    fn index_changes_fail_or_keep_the_time(
        p in profile_index(),
        batched in any::<bool>(),
        indx in prop_oneof![0u32..8, any::<u32>()],
    ) {
        // Node-first proofs are accepted too (implementations disagree on it), so flipping every INDX
        // bit within the depth still proves the root: time must not change.
        let x = &exchanges()[p][usize::from(batched)];
        let (_, range) = regions(&x.response)
            .into_iter()
            .find(|(t, _)| *t == Tag::INDX)
            .expect("INDX");
        let mut response = x.response.clone();
        response[range].copy_from_slice(&indx.to_le_bytes());
        match verify_response(&x.request, &response, server().public(&PROFILES[p])) {
            Ok(v) => assert_same_time(&v, &x.verified),
            Err(e) => assert!(
                matches!(e, VerifyError::Path(_) | VerifyError::Root),
                "INDX change gave {e:?}"
            ),
        }
    }
}

// ---------------------------------------------------------------------------
// Certificates, Merkle paths, time.

proptest! {
    #![proptest_config(config(CASES))]

    #[test]
    fn certificate_parsing_never_panics(
        bytes in prop::collection::vec(any::<u8>(), 0..200),
        p in profile_index(),
    ) {
        let _ = Certificate::from_bytes(&bytes, &PROFILES[p]);
        let mut exact = bytes;
        exact.resize(PROFILES[p].scheme.cert_len(), 0);
        if let Ok(c) = Certificate::from_bytes(&exact, &PROFILES[p]) {
            assert_eq!(c.bytes(), &exact[..]);
        }
    }

    #[test]
    fn damaged_certificates_never_check(p in profile_index(), e in edit()) {
        let server = Server::new(3);
        let profile = &PROFILES[p];
        let cert = server.cert(profile);
        let key = server.public(profile);
        assert_eq!(check_certificate(cert.bytes(), profile, key), Ok(()));
        let damaged = apply(cert.bytes(), &e);
        if let Ok(c) = Certificate::from_bytes(&damaged, profile) {
            assert_eq!(c.bytes(), &damaged[..]);
        }
        let checked = check_certificate(&damaged, profile, key);
        assert_eq!(checked.is_ok(), damaged[..] == cert.bytes()[..]);
    }

    #[test]
    fn climb_accepts_exactly_well_formed_paths(
        alg in prop::sample::select(vec![HashAlg::Sha512, HashAlg::Sha512Trunc32, HashAlg::Sha512_256]),
        leaf in prop::collection::vec(any::<u8>(), 64),
        path_len in prop_oneof![0usize..70, (0usize..36).prop_map(|k| 32 * k)],
        indx in prop_oneof![any::<u32>(), 0u32..8],
        node_first in any::<bool>(),
    ) {
        let leaf: [u8; 64] = leaf.try_into().unwrap();
        let path: Vec<u8> = (0..path_len).map(|i| i as u8).collect();
        let orientation = if node_first { Orientation::NodeFirst } else { Orientation::HashFirst };
        let len = alg.len();
        let depth = path_len / len;
        let expected = if path_len % len != 0 || depth > merkle::MAX_DEPTH {
            Err(PathError::Length)
        } else if depth < 32 && indx >> depth != 0 {
            Err(PathError::IndexBits)
        } else {
            Ok(())
        };
        let got = merkle::climb(alg, &leaf, &path, indx, orientation);
        assert_eq!(got.map(|_| ()), expected);
        if let (Ok(root), true) = (got, depth > 0) {
            // Truncated hashes are cut at every node, so the tail is clear.
            assert!(len == 64 || root[len..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn time_decodes_any_u64(v in any::<u64>(), us in 0u64..(1 << 60)) {
        let _ = mjd_to_unix_us(v);
        for enc in [TimeEncoding::UnixMicros, TimeEncoding::MjdMicros, TimeEncoding::UnixSeconds] {
            if let Some(d) = enc.decode(v) {
                if v != FOREVER && enc != TimeEncoding::MjdMicros {
                    assert_eq!(enc.encode(d), v);
                }
            }
            let _ = (enc.encode(v), enc.encode_start(v), enc.encode_end(v));
            let _ = enc.encode_radius(v, v as u32, (v >> 32) as u32);
            let _ = enc.decode_radius(v as u32);
            // Whole-second values survive seconds; everything survives the rest.
            let t = if enc == TimeEncoding::UnixSeconds { us - us % 1_000_000 } else { us };
            assert_eq!(enc.decode(enc.encode(t)), Some(t));
        }
        assert_eq!(mjd_to_unix_us(unix_us_to_mjd(us)), Some(us));
    }
}

// ---------------------------------------------------------------------------
// The responder answers whatever the acceptor takes, and the answers verify.

fn answer_all(datagrams: &[Vec<u8>], opts: ResponderOptions) {
    let lax = Acceptor {
        min_size: 0,
        ..Acceptor::default()
    };
    let reqs: Vec<Request<'_>> = datagrams.iter().filter_map(|d| lax.parse(d).ok()).collect();
    let Some(first) = reqs.first() else {
        return;
    };
    let profile = first.profile;
    let server = Server::new(3);
    let cert = server.cert(profile);
    let ctx = server.context(profile, &cert, NOW_US);
    let mut sink = VecSink::new(reqs.len());
    let mut responder = if profile.udp {
        gnomon_protocol::Responder::new(8, opts)
    } else {
        gnomon_protocol::Responder::for_stream(8, opts)
    };
    responder.respond(&ctx, &reqs, &mut sink);
    for (i, r) in reqs.iter().enumerate() {
        let len = match sink.results[i].expect("finished") {
            Ok(len) => len,
            Err(RespondError::MixedProfiles) if r.profile.id != profile.id => continue,
            Err(RespondError::TooSmall) if r.packet.len() < 512 => continue,
            Err(e) => panic!("{} #{i} dropped: {e:?}", r.profile.name),
        };
        assert!(!profile.udp || len <= r.packet.len(), "amplification");
        let v = verify_response(r.packet, &sink.bufs[i][..len], server.public(profile))
            .unwrap_or_else(|e| panic!("{} #{i}: {e:?}", r.profile.name));
        assert_eq!(v.profile.id, profile.id);
    }
}

proptest! {
    #![proptest_config(config(CASES / 4))]

    #[test]
    fn every_accepted_request_gets_a_verifying_answer(
        members in prop::collection::vec(
            (
                profile_index(),
                prop::sample::select(vec![360usize, 512, 1024]),
                prop::option::of(edit()),
                any::<bool>(),
            ),
            1..6,
        ),
        disputed in any::<bool>(),
        google_nonce in any::<bool>(),
    ) {
        let datagrams: Vec<Vec<u8>> = members
            .iter()
            .enumerate()
            .filter_map(|(i, (p, size, e, short))| {
                let p = &PROFILES[*p];
                if *short && p.accepted_nonce_lens.contains(&32) && p.nonce_len == 64 {
                    return Some(draft03_request(&[i as u8; 32]));
                }
                let mut d = vec![0u8; *size];
                let nonce = vec![i as u8; p.nonce_len];
                let n = Offer::single(p).build(&nonce, None, *size, &mut d).ok()?;
                d.truncate(n);
                Some(e.as_ref().map_or(d.clone(), |e| apply(&d, e)))
            })
            .collect();
        answer_all(&datagrams, ResponderOptions { batch_disputed: disputed, google_nonce });
    }
}

// ---------------------------------------------------------------------------
// Regressions.

/// A draft-03 request with a 32-byte nonce, as deployed clients sent;
/// `Offer` only builds the 64-byte form.
fn draft03_request(nonce: &[u8]) -> Vec<u8> {
    let p = Profile::by_name("draft-03").unwrap();
    let body_len = 1024 - PACKET_HEADER;
    let pad = vec![0u8; body_len - wire::message_len([0, 4, nonce.len()])];
    let ver = p.version.0.to_le_bytes();
    let mut d = vec![0u8; 1024];
    wire::write_frame_header(&mut d, body_len).unwrap();
    let entries: [(Tag, &[u8]); 3] = [(Tag::PAD_DRAFT, &pad), (Tag::VER, &ver), (Tag::NONC, nonce)];
    wire::write_message(&mut d[PACKET_HEADER..], &entries).unwrap();
    d
}

#[test]
fn draft03_short_nonce_request_is_answered() {
    // The responder's layout check assumed every nonce has the profile's
    // length, and panicked in debug builds on the 32-byte form.
    answer_all(&[draft03_request(&[9; 32])], ResponderOptions::default());
}

#[test]
fn draft03_batch_with_mixed_nonce_lengths_verifies() {
    // The batch header was laid out for the first request's nonce length and
    // reused for a request whose nonce had the other accepted length.
    for lens in [[64, 32], [32, 64]] {
        let datagrams: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(i, &n)| draft03_request(&vec![i as u8 + 1; n]))
            .collect();
        answer_all(&datagrams, ResponderOptions::default());
    }
}
