//! A relay for the proof tests: a measurement bound to a device value,
//! answered by the deterministic servers of `common` at chosen times.

use gnomon_protocol::request::srv_for;
use gnomon_protocol::{
    Acceptor, Measurement, Offer, Profile, Proof, PublicKey, Responder, ResponderOptions,
};

use super::{Server, VecSink};

/// One query of the relay's sequence.
#[derive(Clone, Copy, Debug)]
pub struct Ask {
    /// Index of the server.
    pub server: usize,
    /// The profile asked.
    pub profile: &'static Profile,
    /// MIDP the server signs, Unix µs.
    pub midpoint_us: u64,
    /// RADI the server signs, µs.
    pub radius_us: u32,
}

/// `n` servers with distinct keys.
pub fn servers(n: usize) -> Vec<Server> {
    (0..n).map(|i| Server::new(40 + 2 * i as u8)).collect()
}

/// The pinned keys of `servers` for `profile`'s scheme.
pub fn keys<'a>(servers: &'a [Server], profile: &Profile) -> Vec<PublicKey<'a>> {
    servers.iter().map(|s| s.public(profile)).collect()
}

/// The response of `server` to `request` at `midpoint_us ± radius_us`.
pub fn answer(server: &Server, ask: &Ask, request: &[u8]) -> Vec<u8> {
    let acceptor = Acceptor::default();
    let parsed = acceptor.parse(request).expect("request parses");
    assert_eq!(parsed.profile.id, ask.profile.id);
    let cert = server.cert(ask.profile);
    let mut ctx = server.context(ask.profile, &cert, ask.midpoint_us);
    ctx.radius_us = ask.radius_us;
    let mut responder = if ask.profile.udp {
        Responder::new(1024, ResponderOptions::default())
    } else {
        Responder::for_stream(1024, ResponderOptions::default())
    };
    let mut sink = VecSink::new(1);
    responder.respond(&ctx, &[parsed], &mut sink);
    sink.response(0)
        .unwrap_or_else(|| panic!("{:?}", sink.results[0]))
        .to_vec()
}

/// The request of `ask` with `nonce`, addressed to the key `public`.
pub fn request_for(ask: &Ask, public: PublicKey<'_>, nonce: &[u8]) -> Vec<u8> {
    let mut request = vec![0u8; 1024];
    let len = Offer::single(ask.profile)
        .build(nonce, Some(&srv_for(public.bytes())), 1024, &mut request)
        .unwrap();
    request.truncate(len);
    request
}

/// Run `asks` as a sequence bound to `device`; rand values come from `seed`.
pub fn measure(servers: &[Server], device: &[u8], asks: &[Ask], seed: u8) -> Measurement {
    let mut m = Measurement::bound(device).expect("device value");
    for (k, ask) in asks.iter().enumerate() {
        let server = &servers[ask.server];
        let public = server.public(ask.profile);
        let rand: Vec<u8> = (0..ask.profile.nonce_len)
            .map(|b| (k * 37 + b * 11) as u8 ^ seed)
            .collect();
        let mut nonce = [0u8; 64];
        let n = m.next_nonce(ask.profile, &rand, &mut nonce).unwrap();
        let request = request_for(ask, public, &nonce[..n]);
        let response = answer(server, ask, &request);
        m.record(&request, &response, &rand, public)
            .unwrap_or_else(|e| panic!("ask {k}: {e:?}"));
    }
    m
}

/// The proof of `asks` bound to `device`.
pub fn proof(servers: &[Server], device: &[u8], asks: &[Ask], seed: u8) -> Proof {
    measure(servers, device, asks, seed)
        .proof()
        .expect("bound")
        .expect("fits a bundle")
}

/// The RFC's sequence over `n` honest servers: each asked twice in the
/// same order, the k-th answer signed at `t0 + (k + 1) × gap_us`.
pub fn honest(n: usize, t0: u64, gap_us: u64) -> Vec<Ask> {
    (0..2 * n)
        .map(|k| Ask {
            server: k % n,
            profile: Profile::rfc(),
            midpoint_us: t0 + (k as u64 + 1) * gap_us,
            radius_us: super::RADIUS_US,
        })
        .collect()
}
