//! Fresh proofs only: a device value shorter than 16 bytes is refused
//! wherever a bundle is made or read (a relay could guess it and prepare
//! the bundle in advance), and a bundle the relay held is counted through
//! the device's elapsed time, which then keeps the true now in the
//! interval.

use gnomon_protocol::proof::{check_device_value, ProofFormError, MIN_DEVICE_NONCE};
use gnomon_protocol::Measurement;

use super::*;

/// Sixteen bytes, the shortest value accepted.
const D16: &[u8] = b"sixteen bytes D.";
/// One byte fewer.
const D15: &[u8] = b"fifteen bytes D";

/// `bundle` (whose D is `from`) with its D replaced by `to`.
fn with_device(bundle: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    assert_eq!(&bundle[7..7 + from.len()], from);
    let mut out = bundle[..6].to_vec();
    out.push(to.len() as u8);
    out.extend_from_slice(to);
    out.extend_from_slice(&bundle[7 + from.len()..]);
    out
}

#[test]
fn the_bounds_are_16_and_64_bytes() {
    assert_eq!((D16.len(), D15.len()), (16, 15));
    assert_eq!(MIN_DEVICE_NONCE, 16);
    assert_eq!(check_device_value(D16), Ok(()));
    assert_eq!(check_device_value(&[7; MAX_DEVICE_VALUE]), Ok(()));
    for n in [0, 1, 8, 15, MAX_DEVICE_VALUE + 1] {
        assert_eq!(
            check_device_value(&vec![7; n]),
            Err(ProofError::DeviceValueLength(n)),
            "{n} bytes"
        );
    }
    let msg = ProofError::DeviceValueLength(15).to_string();
    assert!(msg.contains("15 bytes") && msg.contains("16"), "{msg}");
}

#[test]
fn a_16_byte_value_makes_a_bundle_that_proves_the_true_now() {
    let servers = relay::servers(3);
    let proof = relay::proof(&servers, D16, &relay::honest(3, T0, GAP_US), 0);
    let bundle = proof.to_binary();
    assert_eq!(ProofView::parse(&bundle).unwrap().device(), D16);
    let p = verify(&bundle, D16, &rfc_keys(&servers)).unwrap();
    assert!(holds_true_now(&p), "{p:?}");
    assert_eq!(Proof::from_json(proof.to_json().as_bytes()).unwrap(), proof);
}

#[test]
fn a_15_byte_value_is_refused_by_the_relay_and_in_both_forms() {
    // The relay's measurement and the bundle it would make.
    assert_eq!(
        Measurement::bound(D15).err(),
        Some(ProofFormError::DeviceLength(15))
    );
    assert!(Measurement::bound(D16).is_ok());
    let servers = relay::servers(3);
    let proof = relay::proof(&servers, D16, &relay::honest(3, T0, GAP_US), 0);
    assert_eq!(
        Proof::new(D15.to_vec(), proof.report().clone()),
        Err(ProofFormError::DeviceLength(15))
    );
    // The binary form: the same bundle with a 15-byte D is refused at
    // parse, before any signature, whichever value the device holds.
    let short = with_device(&proof.to_binary(), D16, D15);
    assert_eq!(
        ProofView::parse(&short).err(),
        Some(ProofError::DeviceValueLength(15))
    );
    assert_eq!(
        Proof::from_binary(&short).err(),
        Some(ProofError::DeviceValueLength(15))
    );
    let keys = rfc_keys(&servers);
    assert_eq!(
        verify(&short, D15, &keys),
        Err(ProofError::DeviceValueLength(15))
    );
    // Put back to 16 bytes, the very bundle parses again: only the
    // length was refused.
    assert!(verify(&with_device(&short, D15, D16), D16, &keys).is_ok());
    // The JSON form.
    let mut doc: serde_json::Value = serde_json::from_str(&proof.to_json()).unwrap();
    doc["deviceNonce"] = base64_of(D15).into();
    assert_eq!(
        Proof::from_json(doc.to_string().as_bytes()),
        Err(ProofFormError::DeviceLength(15))
    );
    doc["deviceNonce"] = base64_of(D16).into();
    assert_eq!(Proof::from_json(doc.to_string().as_bytes()).unwrap(), proof);
}

fn base64_of(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// The case: a bundle the relay held 25 s. Counted in the
/// device's elapsed time, the interval holds the true now; with the old
/// default of 0 it would have ended before it.
#[test]
fn a_held_bundle_with_a_truthful_elapsed_holds_the_true_now() {
    const HELD_US: u64 = 25_000_000;
    let servers = relay::servers(3);
    let asks = relay::honest(3, T0, GAP_US);
    let last = asks.last().unwrap().midpoint_us;
    let bundle = relay::proof(&servers, D, &asks, 0).to_binary();
    let true_now = i128::from(last + HELD_US);
    let keys = rfc_keys(&servers);
    // The held bundle is wider than the default 10 s allows.
    let policy = ProofPolicy {
        max_radius_us: Some(20_000_000),
        ..ProofPolicy::default()
    };
    let at = |elapsed_us: u64| {
        let mut ws = ProofWorkspace::new();
        verify_proof(&bundle, D, &keys, elapsed_us, &policy, &mut ws).unwrap()
    };
    let truthful = at(last - T0 + HELD_US);
    assert!(
        truthful.earliest_us <= true_now && true_now <= truthful.latest_us,
        "{truthful:?} misses {true_now}"
    );
    let unheld = at(0);
    assert!(unheld.latest_us < true_now, "{unheld:?}");
}
