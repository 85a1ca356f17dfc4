//! Fixed inputs shared by the gate's stages and the ledger: keys from
//! constant seeds, nonces derived from the request index, one fixed `now`.
//! Nothing read from the clock, the environment or a random source reaches
//! the measured code.

use gnomon_protocol::profile::LeafInput;
use gnomon_protocol::responder::RespondError;
use gnomon_protocol::{
    Acceptor, BatchContext, Certificate, KeyPair, Offer, Profile, ResponseSink, Version,
};
use gnomon_server::signer::Signer;

/// Every request is the 1024 bytes a client pads to (the amplification rule).
pub const REQUEST_SIZE: usize = 1024;
/// 2026-10-05T00:00:00.123456Z.
pub const NOW_US: u64 = 1_791_158_400_123_456;
/// The radius every fixture batch advertises.
pub const RADIUS_US: u32 = 3_000_000;
/// Seed of the long-term key.
pub const LONG_TERM_SEED: [u8; 32] = [1; 32];
/// Seed of the online key that signs every batch.
pub const ONLINE_SEED: [u8; 32] = [2; 32];

/// The profile called `name` in the version table.
pub fn profile(name: &str) -> &'static Profile {
    Profile::by_name(name).expect("fixture names a profile in the table")
}

/// `n` requests of 1024 bytes for `p`, nonce `i` derived from the index.
pub fn requests(p: &'static Profile, n: usize) -> Vec<Vec<u8>> {
    let offer = Offer::single(p);
    (0..n)
        .map(|i| {
            let nonce: Vec<u8> = (0..p.nonce_len)
                .map(|k| (i * 31 + k * 7 + i / 256) as u8)
                .collect();
            let mut out = vec![0u8; REQUEST_SIZE];
            let len = offer
                .build(&nonce, None, REQUEST_SIZE, &mut out)
                .expect("request builds");
            out.truncate(len);
            out
        })
        .collect()
}

/// What each request's leaf hashes: the whole request or its nonce.
pub fn leaf_inputs<'a>(p: &'static Profile, datagrams: &'a [Vec<u8>]) -> Vec<&'a [u8]> {
    let acceptor = Acceptor::default();
    datagrams
        .iter()
        .map(|d| {
            let r = acceptor.parse(d).expect("request parses");
            match p.leaf {
                LeafInput::Nonce => r.nonce,
                LeafInput::Packet => r.packet,
            }
        })
        .collect()
}

/// Response buffers for a batch, and what the responder said of each.
pub struct Sink {
    /// One buffer per request, as long as the request.
    pub bufs: Vec<Vec<u8>>,
    /// The responder's result per request, once it has finished it.
    pub lens: Vec<Option<Result<usize, RespondError>>>,
}

impl Sink {
    /// Buffers for `n` responses.
    pub fn new(n: usize) -> Sink {
        Sink {
            bufs: vec![vec![0u8; REQUEST_SIZE]; n],
            lens: vec![None; n],
        }
    }
}

impl ResponseSink for Sink {
    fn buffer(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i]
    }
    fn finish(&mut self, i: usize, result: Result<usize, RespondError>) {
        self.lens[i] = Some(result);
    }
}

/// A server's keys and certificate for one profile.
pub struct Server {
    /// The long-term key responses are verified against.
    pub long_term: KeyPair,
    /// The online key that signs.
    pub online: KeyPair,
    /// The online key as the server's workers sign with it: the fast
    /// signer where the CPU (as valgrind shows it, under the gate) has what
    /// it needs, ed25519-dalek otherwise.
    pub signer: Signer,
    vers: [Version; 2],
    cert: Certificate,
}

impl Server {
    /// Keys from the fixed seeds, delegated for two hours around `NOW_US`.
    pub fn new(p: &'static Profile) -> Server {
        let long_term = KeyPair::from_seed(&LONG_TERM_SEED);
        let online = KeyPair::from_seed(&ONLINE_SEED);
        let cert = Certificate::mint(
            &long_term,
            &online.public(),
            NOW_US - 3_600_000_000,
            NOW_US + 3_600_000_000,
            p,
        );
        Server {
            long_term,
            signer: Signer::new(&online),
            online,
            vers: [Version::RFC, Version::DRAFT_12_TO_19],
            cert,
        }
    }

    /// The responder's context for one batch at `NOW_US`.
    pub fn context(&self, p: &'static Profile) -> BatchContext<'_> {
        BatchContext {
            profile: p,
            now_us: NOW_US,
            radius_us: RADIUS_US,
            online: &self.signer,
            cert: &self.cert,
            vers: &self.vers,
        }
    }
}
