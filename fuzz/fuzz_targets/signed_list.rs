//! Any bytes as a monitor's signed server list. Two ways in:
//!
//! - the bytes as a document under a signature the fuzzer also chooses:
//!   checking never panics, and nothing is accepted, since only the
//!   fixture's key is pinned and the fuzzer cannot sign with it;
//! - the bytes as a document the fixture's key signs: it is accepted
//!   exactly when its header and list parse and it has not expired, one
//!   flipped byte of the document or of the signature is refused, and
//!   merging what was accepted writes a list that parses.
#![no_main]

use ed25519_dalek::{Signer, SigningKey};
use gnomon_protocol::signed_list::{self, sshsig, MonitorKey, Pins, Seen, NAMESPACE};
use gnomon_protocol::ServerList;
use libfuzzer_sys::fuzz_target;

/// The time the lists are checked at: 2026-10-05T00:00:00Z.
const NOW: i64 = 1_791_158_400;

fn key() -> SigningKey {
    SigningKey::from_bytes(&[0x5a; 32])
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let signer = key();
    let public = signer.verifying_key().to_bytes();
    let pins = Pins::new(vec![MonitorKey::from_ed25519(public, "fuzz")], 1).expect("one key");
    let seen = Seen::default();

    if selector & 1 == 0 {
        // The fuzzer's own signature: split the input where it says.
        let cut = usize::from(selector >> 1).min(rest.len());
        let (signature, document) = rest.split_at(rest.len() - cut);
        assert!(
            pins.check(document, signature, NOW, &seen).is_err(),
            "a list the pinned key never signed was accepted"
        );
        let _ = sshsig::signer_of(signature);
        return;
    }

    let document = rest;
    let signed = signer.sign(&sshsig::signed_data(NAMESPACE, document));
    let signature = sshsig::armor(&public, NAMESPACE, &signed.to_bytes());
    sshsig::verify(signature.as_bytes(), document, NAMESPACE, &public)
        .expect("what the key signed verifies");

    let fresh = signed_list::header(document)
        .map(|h| NOW < h.expires_unix)
        .unwrap_or(false)
        && ServerList::parse(document).is_ok();
    let checked = pins.check(document, signature.as_bytes(), NOW, &seen);
    assert_eq!(
        checked.is_ok(),
        fresh,
        "accepted {:?} against the header's word",
        checked.err()
    );

    if !document.is_empty() {
        let mut changed = document.to_vec();
        let at = usize::from(selector >> 1) % changed.len();
        changed[at] ^= 0x01;
        assert!(
            pins.check(&changed, signature.as_bytes(), NOW, &seen)
                .is_err(),
            "a changed byte passed"
        );
    }
    let mut bad_sig = signature.clone().into_bytes();
    let at = 40 + usize::from(selector >> 1) % (bad_sig.len() - 80);
    bad_sig[at] = if bad_sig[at] == b'A' { b'B' } else { b'A' };
    assert!(
        pins.check(document, &bad_sig, NOW, &seen).is_err(),
        "a changed signature passed"
    );

    if let Ok(accepted) = checked {
        let merged = pins.merge(&[accepted], NOW);
        ServerList::parse(&merged.document).expect("a merged list parses");
    }
});
