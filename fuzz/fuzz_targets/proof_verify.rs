//! Any bytes as a relayed proof's binary bundle, checked as a device
//! checks it: the verifier never panics, a bundle that parses writes back
//! to the very same bytes (one encoding per bundle), and nothing proves an
//! interval unless the fixture signed it, so an interval given always
//! holds the instant the fixture signs.
#![no_main]

use gnomon_fuzz::{fixture, NOW_US, PROOF_DEVICE};
use gnomon_protocol::proof::{verify_proof, Proof, ProofError, ProofPolicy, ProofWorkspace};
use gnomon_protocol::Scheme;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let keys = [
        fixture().key_of(Scheme::Ed25519),
        fixture().key_of(Scheme::MlDsa44),
    ];
    // The fixture has one key per scheme: the loosest policy lets a
    // single key's bundle reach every step.
    let policy = ProofPolicy {
        max_liars: Some(0),
        quorum: 1,
        max_radius_us: None,
    };
    let mut ws = ProofWorkspace::new();
    let verdict = verify_proof(data, PROOF_DEVICE, &keys, 0, &policy, &mut ws);
    if let Ok(proof) = Proof::from_binary(data) {
        assert_eq!(proof.to_binary(), data, "a bundle with two encodings");
    }
    let interval = match &verdict {
        Ok(p) => Some(p),
        Err(ProofError::Liar { majority, .. } | ProofError::Contradiction { majority, .. }) => {
            majority.as_ref()
        }
        Err(_) => None,
    };
    if let Some(p) = interval {
        let t = i128::from(NOW_US);
        assert!(
            p.earliest_us <= t && t <= p.latest_us,
            "{p:?} misses the signed instant {t}"
        );
    }
});
