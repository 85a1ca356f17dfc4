//! The candidates against each other: the same public key from the same
//! seed, byte-identical deterministic signatures (and hedged ones, for a
//! given rnd, where the API takes one), and each verifies every other's.
use mldsa_candidates::{keygen, message, verify, Keys, CALLER_RND, CTX_RESPONSE, NAMES, SEED};

#[test]
fn same_public_key_from_the_same_seed() {
    for seed in [SEED, [0u8; 32], [0xff; 32]] {
        let pk = keygen(0, &seed);
        for (i, name) in NAMES.iter().enumerate() {
            assert_eq!(keygen(i, &seed), pk, "{name}");
        }
    }
}

#[test]
fn signatures_agree_and_cross_verify() {
    let keys = Keys::new(&SEED);
    let pk = keygen(1, &SEED);
    for len in [0, 92, 1352] {
        let msg = message(len);
        for rnd in [None, Some([0x42u8; 32])] {
            let sigs: Vec<_> = (0..NAMES.len())
                .map(|i| keys.sign(i, &msg, CTX_RESPONSE, rnd.as_ref()).unwrap())
                .collect();
            for (i, sig) in sigs.iter().enumerate() {
                if CALLER_RND[i] {
                    assert_eq!(sig[..], sigs[0][..], "{} differs, len {len} rnd {rnd:?}", NAMES[i]);
                }
                for (j, verifier) in NAMES.iter().enumerate() {
                    assert!(verify(j, &pk, &msg, CTX_RESPONSE, sig), "{verifier} rejects {}'s", NAMES[i]);
                    assert!(!verify(j, &pk, &msg, b"", sig), "{verifier} accepts {}'s without ctx", NAMES[i]);
                }
            }
        }
    }
}

#[test]
fn aws_lc_signs_hedged_only() {
    // Two signatures of the same message differ: no deterministic mode.
    let keys = Keys::new(&SEED);
    let msg = message(92);
    let a = keys.sign(3, &msg, CTX_RESPONSE, None).unwrap();
    let b = keys.sign(3, &msg, CTX_RESPONSE, None).unwrap();
    assert_ne!(a[..], b[..]);
    // the Rust crates' deterministic signature differs from both
    assert_ne!(keys.sign(0, &msg, CTX_RESPONSE, None).unwrap()[..], a[..]);
}

#[test]
fn context_longer_than_255_is_refused() {
    let keys = Keys::new(&SEED);
    let ctx = [7u8; 256];
    for (i, name) in NAMES.iter().enumerate() {
        assert!(keys.sign(i, b"m", &ctx, None).is_none(), "{name} signs with a 256-byte ctx");
    }
}
