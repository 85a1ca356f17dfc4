//! The draft-19 Appendix B malfeasance report
//! (`ietf-draft-19/…-appendix-b-malfeasance-report.json`): three chained
//! exchanges with VER = 1.
//!
//! These responses predate RFC 10049's lower-case context strings: they are
//! signed with the draft's "RoughTime v1 …" strings although VER = 1, so our
//! client must accept them only through version 1's legacy contexts and say
//! so (`legacy_context`). The Appendix A server list belongs to the
//! server-list tests.

use crate::vectorfiles;

use gnomon_protocol::request::srv_for;
use gnomon_protocol::verify::SentRequest;
use gnomon_protocol::{verify_response, Acceptor, Verified};
use sha2::{Digest, Sha512};
use vectorfiles::{draft19_report, DRAFT19_REPORT};

fn verified() -> Vec<Verified> {
    draft19_report()
        .iter()
        .enumerate()
        .map(|(k, e)| {
            verify_response(&e.request, &e.response, &e.public_key)
                .unwrap_or_else(|err| panic!("{DRAFT19_REPORT} exchange {k}: {err:?}"))
        })
        .collect()
}

#[test]
fn appendix_b_exchanges_verify_with_draft_contexts() {
    let report = draft19_report();
    assert_eq!(report.len(), 3);
    for (k, (e, v)) in report.iter().zip(verified()).enumerate() {
        assert_eq!(v.profile.name, "rfc-10049", "exchange {k}");
        assert!(v.legacy_context, "exchange {k}: capital-T strings expected");
        assert_eq!(v.radius_us, 3_000_000, "exchange {k}");
        assert_eq!(v.path_depth, 0, "exchange {k}");
        assert_eq!((e.request.len(), e.response.len()), (1036, 416));
        let r = Acceptor::default().parse(&e.request).unwrap();
        assert_eq!(r.profile.name, "rfc-10049", "exchange {k}");
        assert_eq!(r.srv, Some(&srv_for(&e.public_key)), "exchange {k}");
    }
}

/// NONC_k = SHA-512(response_{k-1} as received, header included ‖ rand_k)[:32]
/// (the chaining rule), checked here with SHA-512 directly.
#[test]
fn appendix_b_nonces_follow_the_chaining_rule() {
    let report = draft19_report();
    assert!(report[0].rand.is_none(), "the first exchange has no rand");
    for k in 1..report.len() {
        let rand = report[k].rand.as_deref().expect("rand");
        assert_eq!(rand.len(), 32);
        let h = Sha512::new()
            .chain_update(&report[k - 1].response)
            .chain_update(rand)
            .finalize();
        let nonce = SentRequest::parse(&report[k].request).unwrap().nonce;
        assert_eq!(nonce, &h[..32], "exchange {k}");
        // Without the header, the rule of drafts 09–11, it does not hold.
        let unframed = Sha512::new()
            .chain_update(&report[k - 1].response[12..])
            .chain_update(rand)
            .finalize();
        assert_ne!(nonce, &unframed[..32], "exchange {k}");
    }
}

/// The first response is a day ahead: pairs (0,1) and (0,2) violate
/// MIDP_i − RADI_i ≤ MIDP_j + RADI_j for i before j. Which server is to blame
/// is not asserted (the README explains why).
#[test]
fn appendix_b_causality_fails_on_pairs_0_1_and_0_2() {
    let v = verified();
    let mut violations = Vec::new();
    for i in 0..v.len() {
        for j in i + 1..v.len() {
            if v[i].earliest_us() > v[j].latest_us() {
                violations.push((i, j));
            }
        }
    }
    assert_eq!(violations, [(0, 1), (0, 2)]);
    let ahead = v[0].midpoint_us - v[1].midpoint_us;
    assert!(ahead.abs_diff(86_400_000_000) < 60_000_000, "{ahead} µs");
}
