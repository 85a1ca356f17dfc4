//! Every verification failure is its own error, and every tolerated
//! deployment deviation is accepted on purpose (the disputed tree orientation; deployed versions that differ from their drafts).
//! Responses are forged with the test keys, so each check is reached with
//! every other check passing.

use crate::common;

use common::*;
use ed25519_dalek::{Signer, SigningKey};
use gnomon_protocol::merkle::{Orientation, PathError};
use gnomon_protocol::profile::SREP_DRAFT;
use gnomon_protocol::wire::{unframe, write_frame_header, write_message, Message};
use gnomon_protocol::{
    verify_response, Acceptor, Offer, Profile, ProfileSet, ResponderOptions, Tag, VerifyError,
    Version,
};

type Fields = Vec<(Tag, Vec<u8>)>;

fn fields(msg: &[u8]) -> Fields {
    Message::parse(msg)
        .unwrap()
        .iter()
        .map(|(t, v)| (t, v.to_vec()))
        .collect()
}

fn encode(f: &Fields) -> Vec<u8> {
    let mut f = f.clone();
    f.sort_by_key(|e| e.0);
    let refs: Vec<(Tag, &[u8])> = f.iter().map(|(t, v)| (*t, &v[..])).collect();
    let mut out = vec![0u8; 4096];
    let n = write_message(&mut out, &refs).unwrap();
    out.truncate(n);
    out
}

fn set(f: &mut Fields, tag: Tag, value: Vec<u8>) {
    f.retain(|e| e.0 != tag);
    f.push((tag, value));
}

/// Rewrite a response: `top` edits the top level, `srep` edits SREP, which
/// is then signed again with the online key under `ctx`.
fn forge(
    resp: &[u8],
    online: &SigningKey,
    ctx: &[u8],
    top: impl FnOnce(&mut Fields),
    srep: impl FnOnce(&mut Fields),
) -> Vec<u8> {
    let framed = resp.starts_with(b"ROUGHTIM");
    let body = if framed { unframe(resp).unwrap() } else { resp };
    let mut t = fields(body);
    let mut s = fields(Message::parse(body).unwrap().require(Tag::SREP).unwrap());
    srep(&mut s);
    let srep_bytes = encode(&s);
    let sig = online.sign(&[ctx, &srep_bytes[..]].concat()).to_bytes();
    set(&mut t, Tag::SREP, srep_bytes);
    set(&mut t, Tag::SIG, sig.to_vec());
    top(&mut t);
    let msg = encode(&t);
    if !framed {
        return msg;
    }
    let mut out = vec![0u8; 12 + msg.len()];
    write_frame_header(&mut out, msg.len()).unwrap();
    out[12..].copy_from_slice(&msg);
    out
}

struct Case {
    server: Server,
    req: Vec<u8>,
    resp: Vec<u8>,
    online: SigningKey,
}

fn case(profile: &'static Profile) -> Case {
    let server = Server::new(21);
    let req = request(profile, 3, 1024);
    let sink = server.answer(
        profile,
        std::slice::from_ref(&req),
        ResponderOptions::default(),
        NOW_US,
    );
    let resp = sink.response(0).unwrap().to_vec();
    let online = SigningKey::from_bytes(&server.online.seed());
    Case {
        server,
        req,
        resp,
        online,
    }
}

impl Case {
    fn verify(&self, resp: &[u8]) -> Result<gnomon_protocol::Verified, VerifyError> {
        verify_response(&self.req, resp, &self.server.long_term.public())
    }
    fn forge(&self, top: impl FnOnce(&mut Fields), srep: impl FnOnce(&mut Fields)) -> Vec<u8> {
        let ctx = verify_ctx(&self.req);
        forge(&self.resp, &self.online, ctx, top, srep)
    }
}

fn verify_ctx(req: &[u8]) -> &'static [u8] {
    let p = Acceptor::default().parse(req).unwrap().profile;
    p.contexts.srep
}

#[test]
fn forging_without_changes_still_verifies() {
    for name in ["google", "draft-02", "draft-07", "draft-11", "rfc-10049"] {
        let c = case(Profile::by_name(name).unwrap());
        c.verify(&c.forge(|_| {}, |_| {})).unwrap();
    }
}

#[test]
fn signatures() {
    let c = case(Profile::rfc());
    let other = gnomon_protocol::KeyPair::from_seed(&[99; 32]).public();
    assert_eq!(
        verify_response(&c.req, &c.resp, &other),
        Err(VerifyError::DelegationSignature)
    );
    let mut bad = c.resp.clone();
    let sig_at = 12 + 8 * 7; // first value of the top-level message is SIG
    bad[sig_at] ^= 1;
    assert_eq!(c.verify(&bad), Err(VerifyError::ResponseSignature));
}

#[test]
fn framing_and_structure() {
    let c = case(Profile::rfc());
    assert!(matches!(
        c.verify(&c.resp[..c.resp.len() - 4]),
        Err(VerifyError::Framing(_))
    ));
    assert!(matches!(
        verify_response(b"junk", &c.resp, &[0; 32]),
        Err(VerifyError::Request(_))
    ));
    let no_cert = c.forge(|t| t.retain(|e| e.0 != Tag::CERT), |_| {});
    assert!(matches!(c.verify(&no_cert), Err(VerifyError::Message(_))));
}

#[test]
fn bare_answers_to_framed_requests_only_where_the_profile_allows() {
    // pyroughtime 1.0.1 answers framed draft-07 requests with a bare
    // message; the header is not signed, so early drafts accept that.
    for p in gnomon_protocol::PROFILES.iter() {
        if p.framing != gnomon_protocol::profile::Framing::Packet {
            continue;
        }
        let c = case(p);
        let bare = &c.resp[12..];
        let result = c.verify(bare);
        if p.bare_response_ok {
            let v = result.unwrap_or_else(|e| panic!("{}: {e:?}", p.name));
            assert_eq!(v.profile.id, p.id);
        } else {
            assert!(
                matches!(result, Err(VerifyError::Framing(_))),
                "{}: {result:?}",
                p.name
            );
        }
        // A bare answer is still checked: a flipped signature bit fails.
        let mut bad = bare.to_vec();
        bad[8 * 7] ^= 1;
        assert!(c.verify(&bad).is_err(), "{}", p.name);
    }
    let early: Vec<_> = gnomon_protocol::PROFILES
        .iter()
        .filter(|p| p.bare_response_ok)
        .map(|p| p.name)
        .collect();
    assert!(
        early.contains(&"draft-07") && !early.contains(&"draft-08"),
        "{early:?}"
    );
}

#[test]
fn version_checks() {
    let c = case(Profile::rfc());
    let unknown = c.forge(
        |_| {},
        |s| set(s, Tag::VER, 0x8000_000du32.to_le_bytes().to_vec()),
    );
    assert_eq!(
        c.verify(&unknown),
        Err(VerifyError::UnknownVersion(0x8000_000d))
    );
    let c12 = c.forge(
        |_| {},
        |s| set(s, Tag::VER, 0x8000_000cu32.to_le_bytes().to_vec()),
    );
    assert_eq!(
        c.verify(&c12),
        Err(VerifyError::NotOffered(Version::DRAFT_12_TO_19))
    );
    // VER only at top level, none signed: not where version 1 puts it.
    let moved = c.forge(
        |t| set(t, Tag::VER, 1u32.to_le_bytes().to_vec()),
        |s| s.retain(|e| e.0 != Tag::VER),
    );
    assert_eq!(c.verify(&moved), Err(VerifyError::VersionPlacement));
    // roughenough 1.x's VER=1: top-level VER, no TYPE.
    let legacy = c.forge(
        |t| {
            set(t, Tag::VER, 1u32.to_le_bytes().to_vec());
            t.retain(|e| e.0 != Tag::TYPE);
        },
        |s| s.retain(|e| e.0 != Tag::VER),
    );
    assert_eq!(c.verify(&legacy), Err(VerifyError::LegacyVersionOne));
    let unsorted = c.forge(
        |_| {},
        |s| {
            set(
                s,
                Tag::VERS,
                [0x8000_000cu32, 1]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
            )
        },
    );
    assert_eq!(c.verify(&unsorted), Err(VerifyError::Vers));
    let missing = c.forge(
        |_| {},
        |s| set(s, Tag::VERS, 0x8000_000cu32.to_le_bytes().to_vec()),
    );
    assert_eq!(c.verify(&missing), Err(VerifyError::Vers));
}

#[test]
fn type_must_be_one() {
    let c = case(Profile::rfc());
    let two = c.forge(|t| set(t, Tag::TYPE, 2u32.to_le_bytes().to_vec()), |_| {});
    assert_eq!(c.verify(&two), Err(VerifyError::Type));
    let none = c.forge(|t| t.retain(|e| e.0 != Tag::TYPE), |_| {});
    assert_eq!(c.verify(&none), Err(VerifyError::Type));
}

#[test]
fn downgrade_is_detected_through_signed_vers() {
    // The client offers 1 and 0x8000000c; the server speaks both (VERS) but
    // answers 0x8000000c.
    let server = Server::new(5);
    let offer = Offer::new(&[Profile::rfc(), Profile::by_name("draft-14").unwrap()]).unwrap();
    let mut req = vec![0u8; 1024];
    offer.build(&[7; 32], None, 1024, &mut req).unwrap();
    let only_c = Acceptor {
        profiles: ProfileSet::empty().with(Profile::by_name("draft-14").unwrap().id),
        ..Acceptor::default()
    };
    let parsed = only_c.parse(&req).unwrap();
    let profile = parsed.profile;
    let cert = server.cert(profile);
    let ctx = server.context(profile, &cert, NOW_US);
    let mut sink = VecSink::new(1);
    gnomon_protocol::Responder::new(4, ResponderOptions::default()).respond(
        &ctx,
        &[parsed],
        &mut sink,
    );
    assert_eq!(
        verify_response(&req, sink.response(0).unwrap(), &server.long_term.public()),
        Err(VerifyError::Downgrade {
            answered: Version::DRAFT_12_TO_19,
            better: Version::RFC
        })
    );
}

#[test]
fn nonce_copies() {
    let c = case(Profile::rfc());
    let other = c.forge(|t| set(t, Tag::NONC, vec![0; 32]), |_| {});
    assert_eq!(c.verify(&other), Err(VerifyError::NonceMismatch));
    let gone = c.forge(|t| t.retain(|e| e.0 != Tag::NONC), |_| {});
    assert_eq!(c.verify(&gone), Err(VerifyError::NonceMissing));
    // Drafts 01–02 sign the nonce inside SREP.
    let d2 = case(Profile::by_name("draft-02").unwrap());
    let bad = d2.forge(|_| {}, |s| set(s, Tag::NONC, vec![0; 64]));
    assert_eq!(d2.verify(&bad), Err(VerifyError::NonceMismatch));
    // Deployed 0x80000003 and 08–11 left the copy out: accepted,
    // since the Merkle leaf binds the nonce anyway.
    for name in ["draft-03", "draft-11"] {
        let c = case(Profile::by_name(name).unwrap());
        c.verify(&c.forge(|t| t.retain(|e| e.0 != Tag::NONC), |_| {}))
            .unwrap();
    }
    // Google never has one; Cloudflare adds one, which is ignored.
    let g = Server::new(4);
    let req = request(Profile::google(), 1, 1024);
    let opts = ResponderOptions {
        google_nonce: true,
        ..ResponderOptions::default()
    };
    let sink = g.answer(Profile::google(), std::slice::from_ref(&req), opts, NOW_US);
    assert_eq!(sink.response(0).unwrap().len(), 432);
    verify_response(&req, sink.response(0).unwrap(), &g.long_term.public()).unwrap();
}

#[test]
fn merkle_proofs() {
    let c = case(Profile::rfc());
    let bits = c.forge(|t| set(t, Tag::INDX, 2u32.to_le_bytes().to_vec()), |_| {});
    assert_eq!(
        c.verify(&bits),
        Err(VerifyError::Path(PathError::IndexBits))
    );
    let ragged = c.forge(|t| set(t, Tag::PATH, vec![0; 28]), |_| {});
    assert_eq!(c.verify(&ragged), Err(VerifyError::Path(PathError::Length)));
    let root = c.forge(|_| {}, |s| set(s, Tag::ROOT, vec![0; 32]));
    assert_eq!(c.verify(&root), Err(VerifyError::Root));
    let wrong_len = c.forge(|_| {}, |s| set(s, Tag::ROOT, vec![0; 64]));
    assert!(matches!(c.verify(&wrong_len), Err(VerifyError::Message(_))));
}

#[test]
fn node_first_trees_are_accepted_once() {
    // A two-leaf tree built the way drafts 05–15 describe: for leaf 0,
    // root = H(0x01 ‖ sibling ‖ leaf).
    let c = case(Profile::by_name("draft-08").unwrap());
    let nonce = Acceptor::default().parse(&c.req).unwrap().nonce.to_vec();
    let alg = Profile::by_name("draft-08").unwrap().hash;
    let (mut leaf, mut sib, mut root) = ([0u8; 64], [0u8; 64], [0u8; 64]);
    alg.leaf(&nonce, &mut leaf);
    alg.leaf(b"another client", &mut sib);
    alg.node(&sib[..32], &leaf[..32], &mut root);
    let forged = c.forge(
        |t| {
            set(t, Tag::PATH, sib[..32].to_vec());
            set(t, Tag::INDX, 0u32.to_le_bytes().to_vec());
        },
        |s| set(s, Tag::ROOT, root[..32].to_vec()),
    );
    assert_eq!(
        c.verify(&forged).unwrap().orientation,
        Orientation::NodeFirst
    );
}

#[test]
fn times() {
    let c = case(Profile::rfc());
    let early = c.forge(|_| {}, |s| set(s, Tag::MIDP, 5u64.to_le_bytes().to_vec()));
    assert_eq!(c.verify(&early), Err(VerifyError::OutsideDelegation));
    let zero = c.forge(|_| {}, |s| set(s, Tag::RADI, 0u32.to_le_bytes().to_vec()));
    assert_eq!(c.verify(&zero), Err(VerifyError::ZeroRadius));
    // Draft 07: MJD-µs. All ones is "no limit" for MAXT but no midpoint; the
    // certificate window admits it, so the decoding check is what fails.
    let d7 = Profile::by_name("draft-07").unwrap();
    let server = Server::new(8);
    let req = request(d7, 0, 1024);
    let cert = gnomon_protocol::Certificate::mint(
        &server.long_term,
        &server.online.public(),
        0,
        u64::MAX,
        d7,
    );
    let parsed = Acceptor::default().parse(&req).unwrap();
    let ctx = gnomon_protocol::BatchContext {
        profile: d7,
        now_us: NOW_US,
        radius_us: 5,
        online: &server.online,
        cert: &cert,
        vers: &[],
    };
    let mut sink = VecSink::new(1);
    gnomon_protocol::Responder::new(1, ResponderOptions::default()).respond(
        &ctx,
        &[parsed],
        &mut sink,
    );
    let resp = sink.response(0).unwrap().to_vec();
    let online = SigningKey::from_bytes(&server.online.seed());
    let ok = verify_response(&req, &resp, &server.long_term.public()).unwrap();
    assert_eq!(ok.midpoint_us, NOW_US);
    assert_eq!(ok.radius_us, 5);
    let bad = forge(
        &resp,
        &online,
        SREP_DRAFT,
        |_| {},
        |s| set(s, Tag::MIDP, u64::MAX.to_le_bytes().to_vec()),
    );
    assert_eq!(
        verify_response(&req, &bad, &server.long_term.public()),
        Err(VerifyError::Time)
    );
}

#[test]
fn version_one_signed_with_draft_strings_is_accepted_and_flagged() {
    // Draft-19 servers answered VER=1 with the capital-T strings.
    let c = case(Profile::rfc());
    let old_cert = gnomon_protocol::Certificate::mint(
        &c.server.long_term,
        &c.server.online.public(),
        NOW_US - 1_000_000_000,
        NOW_US + 1_000_000_000,
        Profile::by_name("draft-14").unwrap(),
    );
    let forged = forge(
        &c.resp,
        &c.online,
        SREP_DRAFT,
        |t| set(t, Tag::CERT, old_cert.bytes().to_vec()),
        |_| {},
    );
    let v = c.verify(&forged).unwrap();
    assert!(v.legacy_context);
    // Mixed: RFC delegation with a draft SREP signature is no valid set.
    let mixed = forge(&c.resp, &c.online, SREP_DRAFT, |_| {}, |_| {});
    assert_eq!(c.verify(&mixed), Err(VerifyError::ResponseSignature));
    // And draft 0x8000000c never accepts the RFC strings.
    let c14 = case(Profile::by_name("draft-14").unwrap());
    let rfc_signed = c14.forge(|_| {}, |_| {});
    c14.verify(&rfc_signed).unwrap();
    let wrong = forge(
        &c14.resp,
        &c14.online,
        gnomon_protocol::profile::SREP_RFC,
        |_| {},
        |_| {},
    );
    assert_eq!(c14.verify(&wrong), Err(VerifyError::ResponseSignature));
}

#[test]
fn grease_breaks_only_the_signature() {
    for name in ["google", "draft-07", "draft-11", "rfc-10049"] {
        let c = case(Profile::by_name(name).unwrap());
        for bit in [0u16, 7, 100, 511] {
            let mut greased = c.resp.clone();
            assert!(gnomon_protocol::responder::grease_signature(
                Profile::by_name(name).unwrap(),
                &mut greased,
                bit
            ));
            assert_eq!(
                c.verify(&greased),
                Err(VerifyError::ResponseSignature),
                "{name} bit {bit}"
            );
            // Everything but the signature is untouched.
            let diff = greased.iter().zip(&c.resp).filter(|(a, b)| a != b).count();
            assert_eq!(diff, 1);
        }
    }
    assert!(!gnomon_protocol::responder::grease_signature(
        Profile::rfc(),
        &mut [0u8; 8],
        0
    ));
}

/// Drafts 01–07 put µs-of-day in 40 bits: a MIDP on the day before MAXT with
/// an oversized µs field orders below MAXT as a raw word but means a time
/// ≈ 11.7 days after it. Every MJD profile must refuse it, accept a leap
/// second (23:59:60) and refuse anything past one.
#[test]
fn an_mjd_midpoint_past_the_delegation_never_verifies() {
    const DAY_US: u64 = 86_400_000_000;
    let mjd: Vec<&'static Profile> = gnomon_protocol::PROFILES
        .iter()
        .filter(|p| p.time == gnomon_protocol::profile::TimeEncoding::MjdMicros)
        .collect();
    assert_eq!(mjd.len(), 7, "drafts 01–07 use MJD-µs");
    for p in mjd {
        let c = case(p);
        // The case's window is NOW ± 1 h and NOW is just past midnight, so
        // MINT lies on the day before NOW's day and MAXT on NOW's day.
        let today = NOW_US / DAY_US + 40_587;
        let midp = |day: u64, us: u64| ((day << 40) | us).to_le_bytes().to_vec();
        let far = c.forge(
            |_| {},
            |s| set(s, Tag::MIDP, midp(today - 1, (1 << 40) - 1)),
        );
        assert_eq!(c.verify(&far), Err(VerifyError::Time), "{}", p.name);
        let past_leap = c.forge(
            |_| {},
            |s| set(s, Tag::MIDP, midp(today - 1, DAY_US + 1_000_000)),
        );
        assert_eq!(c.verify(&past_leap), Err(VerifyError::Time), "{}", p.name);
        // 23:59:60.5 on the day before is 00:00:00.5 today: inside.
        let leap = c.forge(
            |_| {},
            |s| set(s, Tag::MIDP, midp(today - 1, DAY_US + 500_000)),
        );
        let v = c
            .verify(&leap)
            .unwrap_or_else(|e| panic!("{}: {e:?}", p.name));
        assert_eq!(v.midpoint_us, (NOW_US / DAY_US) * DAY_US + 500_000);
    }
}
