//! roughly's interop captures (`roughly/packets.json`): eleven exchanges with
//! other implementations, in both directions.
//!
//! Role 1 (roughly was the client): the captured responses must verify with
//! our client against the server's key, as the version we expect. Role 0
//! (roughly was the server): our server must choose the expected version for
//! each foreign client's request and answer it verifiably; roughly's own
//! captured answers must verify too.

use crate::common;
use crate::vectorfiles;

use common::{VecSink, NOW_US, RADIUS_US};
use gnomon_protocol::request::srv_for;
use gnomon_protocol::{
    verify_response, Acceptor, BatchContext, Certificate, KeyPair, Profile, Responder,
    ResponderOptions,
};
use vectorfiles::{interop_pub, interop_seed, roughly, unb64_32, Capture, NETNOD_PUB_B64};

/// (role, other) → the profile name the exchange runs in, in file order.
const EXPECTED: [(u64, &str, &str); 11] = [
    (1, "cloudflare", "draft-11"),
    (1, "pyroughtime", "draft-14"),
    (1, "butterfield", "draft-14"),
    (1, "roughtimed", "draft-14"),
    // Cloudflare's client lists 0x8000000b before 0x80000008.
    (0, "cloudflare", "draft-11"),
    // A 0x8000000c request without TYPE: drafts 12–13.
    (0, "craggy", "draft-12"),
    (0, "node-roughtime", "google"),
    // The 1036-byte packet (message 1024).
    (0, "pyroughtime", "draft-14"),
    (0, "roughenough", "draft-14"),
    (0, "vroughtime", "google"),
    (1, "some-draft-7-server", "draft-07"),
];

fn expected(c: &Capture) -> &'static str {
    EXPECTED
        .iter()
        .find(|e| e.0 == c.role && e.1 == c.other)
        .unwrap_or_else(|| panic!("unexpected capture {} {}", c.role, c.other))
        .2
}

/// Every server in the captures used the interop key, except Netnod's.
fn server_key(c: &Capture) -> [u8; 32] {
    if c.other == "some-draft-7-server" {
        unb64_32(NETNOD_PUB_B64)
    } else {
        interop_pub()
    }
}

#[test]
fn packets_json_has_the_eleven_listed_exchanges() {
    let all = roughly();
    assert_eq!(all.len(), EXPECTED.len());
    for (c, e) in all.iter().zip(EXPECTED.iter()) {
        assert_eq!((c.role, c.other.as_str()), (e.0, e.1));
    }
}

#[test]
fn packets_json_role_1_responses_verify() {
    for c in roughly().iter().filter(|c| c.role == 1) {
        let v = verify_response(&c.request, &c.response, &server_key(c))
            .unwrap_or_else(|e| panic!("{}: {e:?}", c.other));
        assert_eq!(v.profile.name, expected(c), "{}", c.other);
        assert!(!v.legacy_context, "{}", c.other);
        assert_eq!(v.path_depth, 0, "{}", c.other);
    }
}

/// The only draft-07 vector: SHA-512/256 leaves, MJD-µs time, µs radius.
#[test]
fn packets_json_draft_7_server_uses_mjd_and_sha512_256() {
    let c = roughly()
        .into_iter()
        .find(|c| c.other == "some-draft-7-server")
        .expect("draft-7 capture");
    let v = verify_response(&c.request, &c.response, &unb64_32(NETNOD_PUB_B64)).unwrap();
    let p = v.profile;
    assert_eq!(p.hash, gnomon_protocol::profile::HashAlg::Sha512_256);
    assert_eq!(p.time, gnomon_protocol::profile::TimeEncoding::MjdMicros);
    assert_eq!(v.radius_us, 22);
    // MIDP's MJD day 61073 is 2026-02-02, Unix day 20486.
    assert_eq!(v.midpoint_us / 86_400_000_000, 20_486);
    // Any other long-term key fails: the key is Netnod's.
    let mut wrong = unb64_32(NETNOD_PUB_B64);
    wrong[0] ^= 1;
    assert!(verify_response(&c.request, &c.response, &wrong).is_err());
}

#[test]
fn packets_json_role_0_requests_choose_the_expected_version() {
    for c in roughly().iter().filter(|c| c.role == 0) {
        let r = Acceptor::default()
            .parse(&c.request)
            .unwrap_or_else(|e| panic!("{}: {e:?}", c.other));
        assert_eq!(r.profile.name, expected(c), "{}", c.other);
        // Where a client named a key, it named the interop key.
        if let Some(srv) = r.srv {
            assert_eq!(*srv, srv_for(&interop_pub()), "{}", c.other);
        }
    }
}

#[test]
fn packets_json_role_0_roughly_responses_verify() {
    for c in roughly().iter().filter(|c| c.role == 0) {
        let v = verify_response(&c.request, &c.response, &interop_pub())
            .unwrap_or_else(|e| panic!("{}: {e:?}", c.other));
        assert_eq!(v.profile.name, expected(c), "{}", c.other);
    }
}

/// Our server, holding the interop key, answers each foreign request; our
/// client must accept the answer as the same version.
#[test]
fn packets_json_role_0_requests_get_verifiable_answers_from_us() {
    let long_term = KeyPair::from_seed(&interop_seed());
    assert_eq!(long_term.public(), interop_pub());
    let online = KeyPair::from_seed(&[0x5a; 32]);
    // Every numbered version we speak, ascending, as a real server lists them.
    let vers = gnomon_protocol::ProfileSet::ALL.versions();
    let mut responder = Responder::new(1, ResponderOptions::default());
    for c in roughly().iter().filter(|c| c.role == 0) {
        let r = Acceptor::default().parse(&c.request).unwrap();
        let p: &'static Profile = r.profile;
        let cert = Certificate::mint(
            &long_term,
            &online.public(),
            NOW_US - 3_600_000_000,
            NOW_US + 3_600_000_000,
            p,
        );
        let ctx = BatchContext {
            profile: p,
            now_us: NOW_US,
            radius_us: RADIUS_US,
            online: &online,
            cert: &cert,
            vers: &vers,
        };
        let mut sink = VecSink::new(1);
        responder.respond(&ctx, &[r], &mut sink);
        let ours = sink
            .response(0)
            .unwrap_or_else(|| panic!("{}: {:?}", c.other, sink.results[0]));
        assert!(ours.len() <= c.request.len(), "{}: amplification", c.other);
        let v = verify_response(&c.request, ours, &interop_pub())
            .unwrap_or_else(|e| panic!("{}: our answer: {e:?}", c.other));
        assert_eq!(v.profile.id, p.id, "{}", c.other);
        assert!(v.earliest_us() <= i128::from(NOW_US - u64::from(RADIUS_US)));
        assert!(v.latest_us() >= i128::from(NOW_US + u64::from(RADIUS_US)));
    }
}
