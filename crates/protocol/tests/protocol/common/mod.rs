//! Helpers shared by the integration tests: a deterministic server and
//! client built only from the public API.
#![allow(dead_code, unreachable_pub)]

use gnomon_protocol::{
    responder::RespondError, Acceptor, BatchContext, Certificate, KeyPair, MlDsa44KeyPair, Offer,
    Profile, PublicKey, Request, Responder, ResponderOptions, ResponseSink, Scheme, Sign, Version,
};

pub const NOW_US: u64 = 1_791_158_400_123_456; // 2026-10-05T00:00:00.123456Z
pub const RADIUS_US: u32 = 3_000_000;

pub struct VecSink {
    pub bufs: Vec<Vec<u8>>,
    pub results: Vec<Option<Result<usize, RespondError>>>,
}

impl VecSink {
    pub fn new(n: usize) -> Self {
        VecSink {
            // An ML-DSA-44 answer is 6.4 KB before its path.
            bufs: vec![vec![0u8; 8192]; n],
            results: vec![None; n],
        }
    }
    pub fn response(&self, i: usize) -> Option<&[u8]> {
        match self.results[i] {
            Some(Ok(len)) => Some(&self.bufs[i][..len]),
            _ => None,
        }
    }
}

impl ResponseSink for VecSink {
    fn buffer(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i]
    }
    fn finish(&mut self, i: usize, result: Result<usize, RespondError>) {
        self.results[i] = Some(result);
    }
}

/// A server with one identity per scheme; each profile is answered by
/// the identity of its scheme.
pub struct Server {
    pub long_term: KeyPair,
    pub online: KeyPair,
    pub pq_long_term: MlDsa44KeyPair,
    pub pq_online: MlDsa44KeyPair,
    pub vers: Vec<Version>,
    pub pq_vers: Vec<Version>,
    ed_public: [u8; 32],
}

impl Server {
    pub fn new(seed: u8) -> Self {
        Server {
            long_term: KeyPair::from_seed(&[seed; 32]),
            online: KeyPair::from_seed(&[seed.wrapping_add(1); 32]),
            pq_long_term: MlDsa44KeyPair::from_seed(&[seed; 32]),
            pq_online: MlDsa44KeyPair::from_seed(&[seed.wrapping_add(1); 32]),
            vers: vec![Version::RFC, Version::DRAFT_12_TO_19],
            pq_vers: vec![Version::ML_DSA_44],
            ed_public: KeyPair::from_seed(&[seed; 32]).public(),
        }
    }

    /// The long-term public key that signs `p`'s answers.
    pub fn public(&self, p: &Profile) -> PublicKey<'_> {
        match p.scheme {
            Scheme::Ed25519 => (&self.ed_public).into(),
            Scheme::MlDsa44 => self.pq_long_term.public().into(),
        }
    }

    fn keys(&self, p: &Profile) -> (&dyn Sign, &dyn Sign, &[Version]) {
        match p.scheme {
            Scheme::Ed25519 => (&self.long_term, &self.online, &self.vers),
            Scheme::MlDsa44 => (&self.pq_long_term, &self.pq_online, &self.pq_vers),
        }
    }

    fn online_public(&self, p: &Profile) -> Vec<u8> {
        match p.scheme {
            Scheme::Ed25519 => self.online.public().to_vec(),
            Scheme::MlDsa44 => self.pq_online.public().to_vec(),
        }
    }

    pub fn cert(&self, p: &Profile) -> Certificate {
        Certificate::mint(
            self.keys(p).0,
            &self.online_public(p),
            NOW_US - 3_600_000_000,
            NOW_US + 3_600_000_000,
            p,
        )
    }

    /// The responder's context for one batch of `profile` at `now_us`,
    /// signed with this server's online key under `cert`.
    pub fn context<'a>(
        &'a self,
        profile: &'static Profile,
        cert: &'a Certificate,
        now_us: u64,
    ) -> BatchContext<'a> {
        let (_, online, vers) = self.keys(profile);
        BatchContext {
            profile,
            now_us,
            radius_us: RADIUS_US,
            online,
            cert,
            vers,
        }
    }

    /// Answer raw requests as one batch of `profile`, as datagrams where
    /// the profile is served over UDP, else as from a stream.
    pub fn answer(
        &self,
        profile: &'static Profile,
        datagrams: &[Vec<u8>],
        opts: ResponderOptions,
        now_us: u64,
    ) -> VecSink {
        let acceptor = Acceptor::default();
        let reqs: Vec<Request<'_>> = datagrams
            .iter()
            .map(|d| acceptor.parse(d).expect("request parses"))
            .collect();
        for r in &reqs {
            assert_eq!(
                r.profile.id, profile.id,
                "server chose {} not {}",
                r.profile.name, profile.name
            );
        }
        let cert = self.cert(profile);
        let ctx = self.context(profile, &cert, now_us);
        let mut responder = if profile.udp {
            Responder::new(1024, opts)
        } else {
            Responder::for_stream(1024, opts)
        };
        let mut sink = VecSink::new(reqs.len());
        responder.respond(&ctx, &reqs, &mut sink);
        sink
    }
}

/// A request of `size` bytes for `profile` with a nonce derived from `i`.
pub fn request(profile: &'static Profile, i: usize, size: usize) -> Vec<u8> {
    let offer = Offer::single(profile);
    let mut nonce = vec![0u8; profile.nonce_len];
    for (k, b) in nonce.iter_mut().enumerate() {
        *b = (i * 31 + k * 7) as u8;
    }
    let mut out = vec![0u8; size];
    let n = offer.build(&nonce, None, size, &mut out).expect("build");
    out.truncate(n);
    out
}

pub mod relay;
