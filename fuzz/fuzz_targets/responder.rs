//! Datagrams as a server receives them: each one the acceptor takes is
//! answered in one batch, and every answer fits its request and verifies
//! with the time the fixture signed.
#![no_main]

use gnomon_fuzz::{
    answer, expected_midpoint, expected_radius, fixture, split_datagrams, MAX_BATCH,
};
use gnomon_protocol::responder::RespondError;
use gnomon_protocol::{verify_response, Acceptor, ResponderOptions};
use libfuzzer_sys::fuzz_target;

/// Above every profile's smallest response, so never `TooSmall`.
const SURELY_BIG_ENOUGH: usize = 512;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let options = ResponderOptions {
        batch_disputed: flags & 1 != 0,
        google_nonce: flags & 2 != 0,
    };
    let acceptor = Acceptor {
        min_size: 0,
        ..Acceptor::default()
    };
    let requests: Vec<_> = split_datagrams(rest, MAX_BATCH)
        .into_iter()
        .filter_map(|d| acceptor.parse(d).ok())
        .collect();
    let Some(first) = requests.first() else {
        return;
    };
    let profile = first.profile;
    let answers = answer(profile, &requests, options);
    for (i, req) in requests.iter().enumerate() {
        let result = answers.results[i].expect("every request is finished");
        let len = match result {
            Ok(len) => len,
            Err(RespondError::MixedProfiles) if req.profile.id != profile.id => continue,
            Err(RespondError::TooSmall) if req.packet.len() < SURELY_BIG_ENOUGH => continue,
            Err(e) => panic!("request {i} ({}) dropped: {e:?}", req.profile.name),
        };
        // Only a profile that never goes over UDP may answer more than
        // it was asked with.
        assert!(
            len <= req.packet.len() || !profile.udp,
            "amplification: {len} > {}",
            req.packet.len()
        );
        let resp = &answers.bufs[i][..len];
        let v = verify_response(req.packet, resp, fixture().key(profile))
            .unwrap_or_else(|e| panic!("request {i} ({}): {e:?}", req.profile.name));
        assert_eq!(v.profile.id, profile.id);
        assert_eq!(Some(v.midpoint_us), expected_midpoint(profile));
        assert_eq!(v.radius_us, expected_radius(profile));
    }
});
