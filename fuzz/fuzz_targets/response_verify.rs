//! Any response, against a fixed valid request of each version or against
//! an arbitrary request. Verification never panics, and anything that
//! verifies carries exactly the time the fixture signed: the fixture signs
//! nothing else, so another midpoint would be a forgery or a response read
//! in the wrong version's encoding.
#![no_main]

use std::sync::OnceLock;

use gnomon_fuzz::{exchange, expected_midpoint, expected_radius, fixture};
use gnomon_protocol::{verify_response, Scheme, Verified, PROFILES};
use libfuzzer_sys::fuzz_target;

fn requests() -> &'static [Vec<u8>] {
    static R: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    R.get_or_init(|| PROFILES.iter().map(|p| exchange(p).0).collect())
}

fn check(v: &Verified) {
    assert_eq!(
        Some(v.midpoint_us),
        expected_midpoint(v.profile),
        "{}",
        v.profile.name
    );
    assert_eq!(
        v.radius_us,
        expected_radius(v.profile),
        "{}",
        v.profile.name
    );
    assert_eq!(v.online_key, fixture().online_id(v.profile.scheme));
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let f = fixture();
    if mode < 0x80 {
        // Byte 0 picks the request; the rest is the response.
        let i = usize::from(mode) % PROFILES.len();
        if let Ok(v) = verify_response(&requests()[i], rest, f.key(&PROFILES[i])) {
            assert_eq!(v.profile.id, PROFILES[i].id);
            check(&v);
        }
    } else if rest.len() >= 2 {
        // Bytes 1–2 say how much of the rest is the request.
        let split = usize::from(u16::from_le_bytes([rest[0], rest[1]]));
        let rest = &rest[2..];
        let (req, resp) = rest.split_at(split.min(rest.len()));
        // Either identity: a response must not verify under the key of
        // another scheme, nor in a profile of another scheme.
        for scheme in [Scheme::Ed25519, Scheme::MlDsa44] {
            if let Ok(v) = verify_response(req, resp, f.key_of(scheme)) {
                assert_eq!(v.profile.scheme, scheme, "{}", v.profile.name);
                check(&v);
            }
        }
    }
});
