//! Any datagram a server receives: parsing never panics, and whatever it
//! accepts is self-consistent and reads back the same way on the client side.
#![no_main]

use gnomon_protocol::profile::Framing;
use gnomon_protocol::verify::SentRequest;
use gnomon_protocol::{Acceptor, Profile};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let strict = Acceptor::default().parse(data);
    let lax = Acceptor {
        min_size: 0,
        ..Acceptor::default()
    };
    let Ok(req) = lax.parse(data) else {
        assert!(strict.is_err(), "the size floor only ever removes requests");
        return;
    };
    if let Ok(s) = strict {
        assert_eq!(s.profile.id, req.profile.id);
    }
    assert_eq!(req.packet, data);
    assert!(req.profile.accepted_nonce_lens.contains(&req.nonce.len()));
    // The nonce is borrowed from the datagram, not copied.
    let inside = data.as_ptr_range();
    assert!(inside.contains(&req.nonce.as_ptr()) || req.nonce.is_empty());

    let sent = SentRequest::parse(data).expect("an accepted request reads back");
    assert_eq!(sent.nonce, req.nonce);
    assert_eq!(sent.framed, req.profile.framing == Framing::Packet);
    let primary = sent
        .primary()
        .expect("an accepted request has a primary profile");
    if !sent.framed {
        assert_eq!(primary.id, Profile::google().id);
    }
    assert!(sent.offered().any(|v| v == req.profile.version) || !sent.framed);
});
