//! gnomon's conformance corpus (`tests/vectors/` at the repository root).
//!
//! Two kinds of check. First, the committed files are byte for byte what the
//! generator writes today, so a change to the wire format is a corpus diff.
//! Second, every file is read back as plain JSON, independently of the
//! generator's types, and each claim in it is checked: positive responses
//! verify to the listed values, negative ones fail with the listed class,
//! chain links recompute, the report proves the listed pairs, and the fixed
//! parameters decode the way the drafts and RFC 10049 say they should.
//!
//! The corpus covers the Ed25519 rows ([`corpus_profiles`]): the one
//! post-quantum row is pinned by the exchange captured from the only other
//! implementation (`vectors_tannerryan_pq.rs`) and by NIST's vectors
//! (`ml_dsa.rs`); a generated 6.4 KB answer per case would add nothing a
//! second implementation has checked.

use crate::corpus_gen;
use crate::corpus_read;

use std::collections::BTreeSet;

use corpus_read::*;
use gnomon_protocol::profile::{Batching, LeafInput, NoncePlace};
use gnomon_protocol::report::Link;
use gnomon_protocol::request::srv_for;
use gnomon_protocol::verify::{check_certificate, SentRequest};
use gnomon_protocol::wire::Message;
use gnomon_protocol::{
    chain_nonce, parse_report, verify_response, Acceptor, Measurement, ParsedReport, Profile, Tag,
};
use serde_json::Value;

#[test]
fn committed_corpus_is_what_the_generator_writes() {
    let dir = corpus_dir();
    let generated = corpus_gen::generate();
    let mut stale = Vec::new();
    for (name, text) in &generated {
        let committed = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        if committed != *text {
            let line = committed
                .lines()
                .zip(text.lines())
                .position(|(a, b)| a != b)
                .map_or(0, |i| i + 1);
            stale.push(format!("{name} (first difference at line {line})"));
        }
    }
    assert!(
        stale.is_empty(),
        "corpus out of date: {stale:?}\nIf the change is intended, run \
         `cargo run -p gnomon-protocol --example gen_corpus -- tests/vectors` \
         from the repository root and commit the diff."
    );
    // Nothing in the directory that the generator does not write.
    let expected: BTreeSet<String> = generated
        .iter()
        .map(|(n, _)| n.clone())
        .chain(["README.md".to_string()])
        .collect();
    let present: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("corpus directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(present, expected);
}

#[test]
fn corpus_stays_small() {
    let total: u64 = std::fs::read_dir(corpus_dir())
        .expect("corpus directory")
        .map(|e| e.expect("entry").metadata().expect("metadata").len())
        .sum();
    assert!(total < 1_000_000, "corpus is {total} bytes");
}

fn profile_file(p: &Profile) -> Value {
    let f = load(&format!("{}.json", p.name));
    assert_eq!(st(&f["profile"], "name"), p.name);
    f
}

fn request_bytes(f: &Value, id: &str) -> Vec<u8> {
    let r = arr(f, "requests")
        .iter()
        .find(|r| st(r, "id") == id)
        .unwrap_or_else(|| panic!("request {id} not listed"));
    hx(r, "request_hex")
}

fn long_term(f: &Value) -> [u8; 32] {
    key32(&hx(&f["long_term_key"], "public_hex"))
}

#[test]
fn every_positive_response_verifies_as_listed() {
    let mut checked = 0;
    for p in corpus_gen::corpus_profiles() {
        let f = profile_file(p);
        let public = long_term(&f);
        for b in arr(&f, "batches") {
            let ids = arr(b, "requests");
            let responses = arr(b, "responses");
            assert_eq!(ids.len(), responses.len());
            for (i, r) in responses.iter().enumerate() {
                let what = format!("{} {} #{i}", p.name, st(b, "name"));
                assert_eq!(r["request"], ids[i], "{what}");
                let request = request_bytes(&f, st(r, "request"));
                let response = hx(r, "response_hex");
                assert_eq!(response.len() as u64, num(r, "response_len"), "{what}");
                assert!(response.len() <= request.len(), "{what}: amplification");
                let v = verify_response(&request, &response, &public)
                    .unwrap_or_else(|e| panic!("{what}: {e:?}"));
                check_expect(&v, &response, &r["expect"], &what);
                // Our reading of the encodings, independent of time.rs.
                let (mid, rad, midp, radi) = reading(p, NOW_US);
                let e = &r["expect"];
                assert_eq!(
                    (dec(e, "midpoint_unix_us"), dec(e, "radius_us")),
                    (mid, rad),
                    "{what}"
                );
                assert_eq!(
                    (dec(e, "midp_raw"), num(e, "radi_raw")),
                    (midp, u64::from(radi)),
                    "{what}"
                );
                // One batch, one tree: INDX is the position, ROOT is shared.
                assert_eq!(num(e, "indx"), i as u64, "{what}");
                let want_depth = if responses.len() == 1 { 0 } else { 3 };
                assert_eq!(num(e, "path_depth"), want_depth, "{what}");
                let root = Message::parse(body(&response))
                    .and_then(|m| m.nested(Tag::SREP))
                    .and_then(|s| s.require(Tag::ROOT).map(<[u8]>::to_vec))
                    .unwrap();
                assert_eq!(root, hx(b, "root_hex"), "{what}");
                checked += 1;
            }
        }
    }
    // 15 singles of r0, 3 of r5 (12+), 13 batches of 5 (not drafts 01-02).
    assert_eq!(checked, 15 + 3 + 13 * 5);
}

#[test]
fn batches_follow_each_profiles_policy() {
    for p in corpus_gen::corpus_profiles() {
        let f = profile_file(p);
        let batches = arr(&f, "batches");
        let names: Vec<&str> = batches.iter().map(|b| st(b, "name")).collect();
        let mut want = vec!["single-r0"];
        if p.leaf == LeafInput::Packet {
            want.push("single-r5");
        }
        if p.batching != Batching::Never {
            want.push("batch-of-5");
        }
        assert_eq!(names, want, "{}", p.name);
        for b in batches {
            assert_eq!(num(b, "signatures"), 1, "{}", p.name);
            let disputed = b["batch_disputed"].as_bool().unwrap();
            let want = st(b, "name") == "batch-of-5" && p.batching == Batching::OrientationDisputed;
            assert_eq!(disputed, want, "{} {}", p.name, st(b, "name"));
        }
    }
}

/// The corpus's mutation applied to its base response.
fn mutate(f: &Value, n: &Value) -> Vec<u8> {
    let (batch, req) = st(n, "derived_from")
        .split_once('/')
        .expect("batch/request");
    let b = arr(f, "batches")
        .iter()
        .find(|b| st(b, "name") == batch)
        .expect("base batch listed");
    let r = arr(b, "responses")
        .iter()
        .find(|r| st(r, "request") == req)
        .expect("base response listed");
    let mut bytes = hx(r, "response_hex");
    let m = &n["mutation"];
    match st(m, "kind") {
        "xor" => bytes[num(m, "offset") as usize] ^= num(m, "mask") as u8,
        "truncate" => bytes.truncate(num(m, "length") as usize),
        "none" => {}
        other => panic!("unknown mutation {other}"),
    }
    bytes
}

#[test]
fn every_negative_case_fails_with_its_class() {
    let mut seen = BTreeSet::new();
    for p in corpus_gen::corpus_profiles() {
        let f = profile_file(p);
        let public = long_term(&f);
        let negatives = arr(&f, "negative");
        let names: Vec<&str> = negatives.iter().map(|n| st(n, "name")).collect();
        // The single-cause cases every profile must have.
        for must in [
            "srep-signature",
            "cert-signature",
            "midp",
            "indx-beyond-path",
            "truncated",
        ] {
            assert!(names.contains(&must), "{}: no {must}", p.name);
        }
        for n in negatives {
            let what = format!("{} {}", p.name, st(n, "name"));
            let response = hx(n, "response_hex");
            assert_eq!(response, mutate(&f, n), "{what}: mutation");
            let request = request_bytes(&f, st(n, "request"));
            let err = verify_response(&request, &response, &public)
                .expect_err(&format!("{what} verified"));
            assert_eq!(class(&err), st(n, "error_class"), "{what}: {err:?}");
            seen.insert(st(n, "error_class").to_string());
        }
        // A response with an unsigned NONC copy must be checked against it.
        assert_eq!(
            names.contains(&"nonce-copy"),
            p.nonce_place == NoncePlace::TopLevel,
            "{}",
            p.name
        );
    }
    let all: BTreeSet<String> = [
        "DelegationSignature",
        "Framing",
        "IndexBits",
        "Message",
        "NonceMismatch",
        "NotOffered",
        "ResponseSignature",
        "Root",
        "Type",
        "UnknownVersion",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(seen, all);
}

#[test]
fn keys_certificates_and_requests_match_the_fixed_parameters() {
    for p in corpus_gen::corpus_profiles() {
        let f = profile_file(p);
        let public = check_key(&f["long_term_key"]);
        let online = check_key(&f["online_key"]);
        assert_eq!(dec(&f["fixed"], "now_unix_us"), NOW_US);

        let c = &f["certificate"];
        let cert = hx(c, "cert_hex");
        check_certificate(&cert, p, &public).unwrap_or_else(|e| panic!("{}: {e:?}", p.name));
        let dele = Message::parse(&cert)
            .and_then(|m| m.nested(Tag::DELE))
            .unwrap();
        assert_eq!(dele.fixed::<32>(Tag::PUBK).unwrap(), &online);
        let (mint, maxt) = (dec(c, "mint_unix_us"), dec(c, "maxt_unix_us"));
        assert_eq!(
            (mint, maxt),
            (1_790_812_800 * SECOND, 1_793_491_200 * SECOND)
        );
        // Whole-second window: every encoding is exact.
        for (raw, us) in [(dec(c, "mint_raw"), mint), (dec(c, "maxt_raw"), maxt)] {
            assert_eq!(raw, reading_raw(p, us), "{}", p.name);
        }
        assert_eq!(dele.u64(Tag::MINT).unwrap(), dec(c, "mint_raw"));
        assert_eq!(dele.u64(Tag::MAXT).unwrap(), dec(c, "maxt_raw"));
        let ctx = hx(&f["profile"], "dele_context_hex");
        assert_eq!(ctx, p.contexts.dele, "{}", p.name);

        for r in arr(&f, "requests") {
            let what = format!("{} {}", p.name, st(r, "id"));
            let bytes = hx(r, "request_hex");
            assert_eq!(bytes.len() as u64, num(r, "size"), "{what}");
            let nonce = hx(r, "nonce_hex");
            assert_eq!(nonce[..], derive(st(r, "nonce_label"))[..p.nonce_len]);
            let parsed = Acceptor::default().parse(&bytes).expect(&what);
            assert_eq!(parsed.profile.name, p.name, "{what}");
            assert_eq!(parsed.nonce, &nonce[..], "{what}");
            let srv = r.get("srv_hex").map(|_| hx(r, "srv_hex"));
            assert_eq!(srv.is_some(), p.srv, "{what}");
            if let Some(s) = srv {
                assert_eq!(s, srv_for(&public), "{what}");
                assert_eq!(parsed.srv.map(|s| s.to_vec()), Some(s), "{what}");
            }
        }
    }
}

#[test]
fn chain_links_recompute_and_every_step_verifies() {
    let f = load("chain.json");
    let steps = arr(&f, "steps");
    let names: Vec<&str> = steps.iter().map(|s| st(s, "profile")).collect();
    assert_eq!(
        names,
        [
            "google",
            "draft-02",
            "draft-07",
            "draft-11",
            "draft-14",
            "rfc-10049",
            "google"
        ]
    );
    let mut m = Measurement::new();
    let mut verified = Vec::new();
    for (k, s) in steps.iter().enumerate() {
        let what = format!("chain step {k} ({})", st(s, "profile"));
        let p = Profile::by_name(st(s, "profile")).unwrap();
        let public = check_key(&s["long_term_key"]);
        let rand = hx(s, "rand_hex");
        assert_eq!(
            rand[..],
            derive(st(s, "rand_label"))[..p.nonce_len],
            "{what}"
        );
        let nonce = hx(s, "nonce_hex");
        let request = hx(s, "request_hex");
        let response = hx(s, "response_hex");
        assert_eq!(
            SentRequest::parse(&request).unwrap().nonce,
            &nonce[..],
            "{what}"
        );
        if k == 0 {
            assert_eq!(nonce, rand, "{what}: the first nonce is rand");
        } else {
            let previous = hx(&steps[k - 1], "response_hex");
            let mut out = [0u8; 64];
            let n = chain_nonce(p, &previous, &rand, &mut out).unwrap();
            assert_eq!(out[..n], nonce[..], "{what}: chain.rs");
            assert_eq!(chain_by_hand(p.name, &previous, &rand), nonce, "{what}");
        }
        let v = verify_response(&request, &response, &public).expect(&what);
        check_expect(&v, &response, &s["expect"], &what);
        let now = dec(s, "now_unix_us");
        assert_eq!(now, NOW_US + k as u64 * SECOND, "{what}");
        let (mid, rad, _, _) = reading(p, now);
        assert_eq!((v.midpoint_us, v.radius_us), (mid, rad), "{what}");
        m.record(&request, &response, &rand, &public)
            .unwrap_or_else(|e| panic!("{what}: {e:?}"));
        verified.push(v);
    }
    assert!(m.contradictions().is_empty());
    assert!(arr(&f, "contradictions").is_empty());
    let check = m.report().verify();
    assert!(check.all_valid());
    assert!(check.entries[1..]
        .iter()
        .all(|e| e.link == Ok(Link::Chained)));
}

#[test]
fn malfeasance_report_proves_the_listed_pairs() {
    let path = corpus_dir().join("malfeasance-report.json");
    let json = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let expected = load("malfeasance-report.expected.json");
    let report = match parse_report(&json).expect("report parses") {
        ParsedReport::Current(r) => r,
        ParsedReport::Legacy(_) => panic!("parsed as the pre-12 form"),
    };
    let entries = arr(&expected, "entries");
    assert_eq!(report.entries.len(), entries.len());
    assert!(report.entries[0].rand.is_none(), "first entry has no rand");
    let check = report.verify();
    let mut intervals = Vec::new();
    for (k, (e, want)) in report.entries.iter().zip(entries).enumerate() {
        let what = format!("report entry {k}");
        assert_eq!(e.public_key, hx(want, "public_key_hex"), "{what}");
        let outcome = &check.entries[k];
        let v = outcome
            .response
            .unwrap_or_else(|err| panic!("{what}: {err:?}"));
        check_expect(&v, &e.response, &want["expect"], &what);
        let link = match outcome.link {
            Ok(Link::First) => "first",
            Ok(Link::Chained) => "chained",
            Err(err) => panic!("{what}: {err:?}"),
        };
        assert_eq!(link, st(want, "link"), "{what}");
        let (mid, rad) = (v.midpoint_us, v.radius_us);
        intervals.push((mid - rad, mid + rad));
    }
    // The causal rule by hand: i before j contradict when i's earliest is
    // after j's latest.
    let mut by_hand = Vec::new();
    for i in 0..intervals.len() {
        for j in i + 1..intervals.len() {
            if intervals[i].0 > intervals[j].1 {
                by_hand.push((i, j));
            }
        }
    }
    let listed: Vec<(usize, usize)> = arr(&expected, "contradictions")
        .iter()
        .map(|p| {
            (
                p[0].as_u64().unwrap() as usize,
                p[1].as_u64().unwrap() as usize,
            )
        })
        .collect();
    assert_eq!(by_hand, listed);
    assert_eq!(check.contradictions, listed);
    let liar = num(&expected, "liar") as usize;
    assert!(listed.iter().all(|&(i, j)| i == liar || j == liar));
    assert_eq!(
        check.is_proof_of_malfeasance(),
        expected["proof_of_malfeasance"].as_bool().unwrap()
    );
    assert!(check.is_proof_of_malfeasance());
}

#[test]
fn batch_trees_are_hash_first_and_padded_with_the_first_node() {
    let mut checked = 0;
    for p in corpus_gen::corpus_profiles() {
        let f = profile_file(p);
        let Some(b) = arr(&f, "batches")
            .iter()
            .find(|b| st(b, "name") == "batch-of-5")
        else {
            continue;
        };
        // Leaves, then levels: an odd level gets a copy of its first node.
        let mut level: Vec<Vec<u8>> = arr(b, "requests")
            .iter()
            .map(|id| {
                let request = request_bytes(&f, id.as_str().unwrap());
                let input = match p.leaf {
                    LeafInput::Nonce => SentRequest::parse(&request).unwrap().nonce.to_vec(),
                    LeafInput::Packet => request,
                };
                merkle_hash(p, &[&[0], &input])
            })
            .collect();
        let mut levels = Vec::new();
        while level.len() > 1 {
            if level.len() % 2 == 1 {
                level.push(level[0].clone());
            }
            let up = level
                .chunks(2)
                .map(|pair| merkle_hash(p, &[&[1], &pair[0], &pair[1]]))
                .collect();
            levels.push(std::mem::replace(&mut level, up));
        }
        assert_eq!(level[0], hx(b, "root_hex"), "{}", p.name);
        // PATH of leaf i: its sibling on each level, leaf level first.
        for (i, r) in arr(b, "responses").iter().enumerate() {
            let response = hx(r, "response_hex");
            let path = Message::parse(body(&response))
                .and_then(|m| m.require(Tag::PATH).map(<[u8]>::to_vec))
                .unwrap();
            let want: Vec<u8> = levels
                .iter()
                .enumerate()
                .flat_map(|(d, l)| l[(i >> d) ^ 1].clone())
                .collect();
            assert_eq!(path, want, "{} leaf {i}", p.name);
        }
        checked += 1;
    }
    assert_eq!(checked, 13);
}
