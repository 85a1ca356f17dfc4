//! A fixed server shared by the fuzz targets and the seed generator.
//!
//! Everything is derived from constant seeds and one constant `now`, so a
//! verified response can only carry the midpoint this fixture signed: any
//! other midpoint that verifies is a forgery or a cross-version confusion.
//! The fixture holds one identity per signature scheme, and answers each
//! profile with the identity of that profile's scheme, as `gnomon serve`
//! with one Ed25519 and one ML-DSA-44 key does.

use std::sync::OnceLock;

use gnomon_protocol::request::srv_for;
use gnomon_protocol::responder::RespondError;
use gnomon_protocol::{
    Acceptor, BatchContext, Certificate, KeyPair, MlDsa44KeyPair, Offer, Profile, PublicKey,
    Request, Responder, ResponderOptions, ResponseSink, Scheme, Sign, Version, PROFILES,
};

/// 2026-10-05T00:00:00.123456Z: a fraction of a second exercises rounding.
pub const NOW_US: u64 = 1_791_158_400_123_456;
/// Radius every response is signed with.
pub const RADIUS_US: u32 = 3_000_000;
/// Versions the fixture's Ed25519 identity lists in VERS.
pub const VERS: [Version; 2] = [Version::RFC, Version::DRAFT_12_TO_19];
/// Versions its ML-DSA-44 identity lists, as `gnomon serve` lists per scheme.
pub const PQ_VERS: [Version; 1] = [Version::ML_DSA_44];

/// VERS for a response of `scheme`.
pub fn vers(scheme: Scheme) -> &'static [Version] {
    match scheme {
        Scheme::Ed25519 => &VERS,
        Scheme::MlDsa44 => &PQ_VERS,
    }
}
/// Largest batch a target hands the responder.
pub const MAX_BATCH: usize = 8;
/// Room for one response over a stream: more than an ML-DSA-44 answer with
/// a deep tree and a VERS list needs.
pub const STREAM_ROOM: usize = 8192;

/// Keys and one certificate per profile.
pub struct Fixture {
    /// The Ed25519 long-term identity.
    pub long_term: KeyPair,
    /// Its public key, which every Ed25519 verification uses.
    pub public: [u8; 32],
    /// The Ed25519 online key.
    pub online: KeyPair,
    /// The ML-DSA-44 long-term identity.
    pub pq_long_term: MlDsa44KeyPair,
    /// The ML-DSA-44 online key.
    pub pq_online: MlDsa44KeyPair,
    /// CERT for each profile, indexed like `PROFILES`, signed by the
    /// long-term key of the profile's scheme.
    pub certs: Vec<Certificate>,
}

impl Fixture {
    /// The long-term public key `p`'s responses verify with.
    pub fn key(&self, p: &Profile) -> PublicKey<'_> {
        self.key_of(p.scheme)
    }

    /// The long-term public key of `scheme`.
    pub fn key_of(&self, scheme: Scheme) -> PublicKey<'_> {
        match scheme {
            Scheme::Ed25519 => PublicKey::from(&self.public),
            Scheme::MlDsa44 => PublicKey::from(self.pq_long_term.public()),
        }
    }

    /// The online key that signs `p`'s responses.
    pub fn signer(&self, p: &Profile) -> &dyn Sign {
        match p.scheme {
            Scheme::Ed25519 => &self.online,
            Scheme::MlDsa44 => &self.pq_online,
        }
    }

    /// What `Verified::online_key` says for a response of `scheme`: the
    /// key itself for Ed25519, its SRV-style digest for ML-DSA-44.
    pub fn online_id(&self, scheme: Scheme) -> [u8; 32] {
        match scheme {
            Scheme::Ed25519 => self.online.public(),
            Scheme::MlDsa44 => srv_for(self.pq_online.public()),
        }
    }
}

/// The shared fixture, built on first use.
pub fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let long_term = KeyPair::from_seed(&[0x5a; 32]);
        let online = KeyPair::from_seed(&[0xa5; 32]);
        let pq_long_term = MlDsa44KeyPair::from_seed(&[0x6b; 32]);
        let pq_online = MlDsa44KeyPair::from_seed(&[0xb6; 32]);
        let certs = PROFILES
            .iter()
            .map(|p| {
                let (root, online): (&dyn Sign, &[u8]) = match p.scheme {
                    Scheme::Ed25519 => (&long_term, &online.public()[..]),
                    Scheme::MlDsa44 => (&pq_long_term, &pq_online.public()[..]),
                };
                Certificate::mint(
                    root,
                    online,
                    NOW_US - 3_600_000_000,
                    NOW_US + 3_600_000_000,
                    p,
                )
            })
            .collect();
        Fixture {
            public: long_term.public(),
            long_term,
            online,
            pq_long_term,
            pq_online,
            certs,
        }
    })
}

/// The midpoint a response of `p` made by this fixture carries, in Unix µs.
pub fn expected_midpoint(p: &Profile) -> Option<u64> {
    p.time.decode(p.time.encode(NOW_US))
}

/// The radius a response of `p` made by this fixture carries, in µs.
pub fn expected_radius(p: &Profile) -> u64 {
    p.time
        .decode_radius(p.time.encode_radius(NOW_US, RADIUS_US, p.min_radius))
}

/// A `size`-byte request offering only `p`, with a nonce derived from `i`.
pub fn request(p: &'static Profile, i: u8, size: usize) -> Vec<u8> {
    let nonce: Vec<u8> = (0..p.nonce_len)
        .map(|k| i.wrapping_mul(31).wrapping_add(k as u8))
        .collect();
    let mut out = vec![0u8; size];
    let n = Offer::single(p)
        .build(&nonce, None, size, &mut out)
        .expect("fixture request builds");
    out.truncate(n);
    out
}

/// Responses collected per request index.
pub struct Answers {
    /// One buffer per request; only the first `len` bytes of a finished one count.
    pub bufs: Vec<Vec<u8>>,
    /// What the responder reported for each.
    pub results: Vec<Option<Result<usize, RespondError>>>,
}

impl Answers {
    /// Response `i`, if one was written.
    pub fn response(&self, i: usize) -> Option<&[u8]> {
        match self.results[i] {
            Some(Ok(len)) => Some(&self.bufs[i][..len]),
            _ => None,
        }
    }
}

impl ResponseSink for Answers {
    fn buffer(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i]
    }
    fn finish(&mut self, i: usize, result: Result<usize, RespondError>) {
        self.results[i] = Some(result);
    }
}

/// Answer `requests` as one batch of `profile` with the fixture's keys.
/// Buffers are larger than any datagram so that only the responder's own
/// request-length cap limits a response. A profile that never goes over UDP
/// is answered as over TCP: unbounded by the request, in a buffer that
/// holds the largest response.
pub fn answer(
    profile: &'static Profile,
    requests: &[Request<'_>],
    options: ResponderOptions,
) -> Answers {
    let f = fixture();
    let ctx = BatchContext {
        profile,
        now_us: NOW_US,
        radius_us: RADIUS_US,
        online: f.signer(profile),
        cert: &f.certs[usize::from(profile.id.0)],
        vers: vers(profile.scheme),
    };
    let longest = requests.iter().map(|r| r.packet.len()).max().unwrap_or(0);
    let (responder, room) = if profile.udp {
        (Responder::new(MAX_BATCH, options), longest + 64)
    } else {
        (Responder::for_stream(MAX_BATCH, options), STREAM_ROOM)
    };
    let mut sink = Answers {
        bufs: vec![vec![0u8; room]; requests.len()],
        results: vec![None; requests.len()],
    };
    let mut responder = responder;
    responder.respond(&ctx, requests, &mut sink);
    sink
}

/// A valid request for `p` and the fixture's answer to it.
pub fn exchange(p: &'static Profile) -> (Vec<u8>, Vec<u8>) {
    let req = request(p, 1, 1024);
    let parsed = Acceptor::default()
        .parse(&req)
        .expect("fixture request parses");
    let answers = answer(p, &[parsed], ResponderOptions::default());
    let resp = answers
        .response(0)
        .expect("fixture request answered")
        .to_vec();
    (req, resp)
}

/// Splits fuzz input into datagrams: each is a little-endian `u16` length
/// and that many bytes (the last one may be cut short).
pub fn split_datagrams(mut data: &[u8], max: usize) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while data.len() >= 2 && out.len() < max {
        let len = usize::from(u16::from_le_bytes([data[0], data[1]]));
        let rest = &data[2..];
        let take = len.min(rest.len());
        out.push(&rest[..take]);
        data = &rest[take..];
    }
    out
}

/// The inverse of [`split_datagrams`], for seeds.
pub fn join_datagrams(datagrams: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for d in datagrams {
        out.extend_from_slice(&(d.len() as u16).to_le_bytes());
        out.extend_from_slice(d);
    }
    out
}

/// A measurement sequence of `n` chained exchanges with the fixture, all
/// in `p`'s format: the input a valid malfeasance report is made from.
pub fn chain(p: &'static Profile, n: u8) -> gnomon_protocol::Measurement {
    extend(gnomon_protocol::Measurement::new(), p, n)
}

/// The device value the proof seeds are bound to (`proof_verify`).
pub const PROOF_DEVICE: &[u8] = b"gnomon fuzz device value";

/// As [`chain`], its first nonce bound to `device`: a relayed proof.
pub fn bound_chain(p: &'static Profile, n: u8, device: &[u8]) -> gnomon_protocol::Measurement {
    let m = gnomon_protocol::Measurement::bound(device).expect("a device value of 16 to 64 bytes");
    extend(m, p, n)
}

/// `n` more exchanges with the fixture on `m`, each chained from the last.
fn extend(
    mut m: gnomon_protocol::Measurement,
    p: &'static Profile,
    n: u8,
) -> gnomon_protocol::Measurement {
    for k in 0..n {
        let rand = vec![k.wrapping_mul(17).wrapping_add(1); p.nonce_len];
        let mut nonce = [0u8; 64];
        let len = m
            .next_nonce(p, &rand, &mut nonce)
            .expect("rand has the nonce length");
        let mut req = vec![0u8; 1024];
        Offer::single(p)
            .build(&nonce[..len], None, 1024, &mut req)
            .expect("chained request builds");
        let parsed = Acceptor::default()
            .parse(&req)
            .expect("chained request parses");
        let answers = answer(p, &[parsed], ResponderOptions::default());
        let resp = answers
            .response(0)
            .expect("chained request answered")
            .to_vec();
        m.record(&req, &resp, &rand, fixture().key(p))
            .expect("chained exchange records");
    }
    m
}

/// A byte-level change to a datagram, as a structured fuzz input.
#[derive(arbitrary::Arbitrary, Debug)]
pub enum ByteEdit {
    /// Flip one bit.
    Flip {
        /// Byte offset; ignored past the end.
        at: u16,
        /// Bit number, modulo 8.
        bit: u8,
    },
    /// Overwrite one byte.
    Set {
        /// Byte offset; ignored past the end.
        at: u16,
        /// The new byte.
        value: u8,
    },
    /// Keep this many bytes.
    Truncate(u16),
    /// Add bytes at the end.
    Append(Vec<u8>),
}

impl ByteEdit {
    /// Apply the change to `bytes`.
    pub fn apply(&self, bytes: &mut Vec<u8>) {
        match self {
            ByteEdit::Flip { at, bit } => {
                if let Some(b) = bytes.get_mut(usize::from(*at)) {
                    *b ^= 1 << (bit % 8);
                }
            }
            ByteEdit::Set { at, value } => {
                if let Some(b) = bytes.get_mut(usize::from(*at)) {
                    *b = *value;
                }
            }
            ByteEdit::Truncate(n) => bytes.truncate(usize::from(*n)),
            ByteEdit::Append(more) => bytes.extend_from_slice(more),
        }
    }
}

/// The request a client of `offer` sends: the nonce repeats `seed`'s
/// bytes, the size is `extra_words` 4-byte words above 8 or, where that
/// cannot hold the request, the next size that can (1024 always can).
pub fn client_request(
    offer: &Offer,
    seed: u64,
    extra_words: u8,
    srv: Option<&[u8; 32]>,
) -> Vec<u8> {
    let nonce: Vec<u8> = seed
        .to_le_bytes()
        .iter()
        .cycle()
        .take(offer.primary().nonce_len)
        .copied()
        .collect();
    let want = 4 * usize::from(extra_words) + 8;
    let mut out = vec![0u8; 2048];
    let n = [want, want + 256, 1024]
        .iter()
        .find_map(|&size| offer.build(&nonce, srv, size, &mut out).ok())
        .expect("a 1024-byte request always builds");
    out.truncate(n);
    out
}

/// `PROFILES[i]`, wrapping.
pub fn profile_at(i: u8) -> &'static Profile {
    &PROFILES[usize::from(i) % PROFILES.len()]
}

/// An offer of `p`, and of `also` too where the two share a format.
pub fn offer_of(p: u8, also: Option<u8>) -> Offer {
    let p = profile_at(p);
    also.and_then(|q| Offer::new(&[p, profile_at(q)]).ok())
        .unwrap_or_else(|| Offer::single(p))
}
