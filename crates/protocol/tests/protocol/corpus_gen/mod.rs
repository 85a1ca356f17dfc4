//! The conformance corpus generator (`tests/vectors/` at the repository
//! root). It is included by `examples/gen_corpus.rs`, which writes the files,
//! and by `tests/corpus.rs`, which checks that the committed files are exactly
//! what it writes today: any change to the wire format shows up as a corpus
//! diff that has to be committed on purpose.
//!
//! Everything is a function of the fixed parameters below. Ed25519 signatures
//! are deterministic, so the output is byte-for-byte stable.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use gnomon_protocol::verify::{verify_response, SentRequest};
use gnomon_protocol::wire::{self, Message};
use gnomon_protocol::{
    Acceptor, BatchContext, Certificate, KeyPair, Offer, Profile, Responder, ResponderOptions,
    ResponseSink, Tag, Version, PROFILES,
};
use serde::Serialize;
use sha2::{Digest, Sha512};

mod chain_file;
mod profile_file;

#[allow(unused_imports)] // the example that writes the corpus does not read it
pub(crate) use profile_file::error_class;

/// The instant every response is signed at (chains add whole seconds):
/// 2026-10-05T12:34:56.789012Z. The fraction is there so that the
/// seconds encodings visibly round MIDP down and RADI up.
pub(crate) const NOW_US: u64 = 1_791_203_696_789_012;
/// The radius the server believes in, µs.
pub(crate) const RADIUS_US: u32 = 1_500_000;
/// Delegation window: 2026-10-01T00:00:00Z to 2026-11-01T00:00:00Z, whole
/// seconds so that every encoding represents it exactly.
pub(crate) const MINT_US: u64 = 1_790_812_800_000_000;
/// End of the delegation window.
pub(crate) const MAXT_US: u64 = 1_793_491_200_000_000;
/// Requests answered together in the "batch" of each batchable profile: not
/// a power of two, so PATH has three levels and two levels are padded.
pub(crate) const BATCH: usize = 5;
/// The request size every client sends (a 1024-byte packet, or message for
/// Google).
pub(crate) const SIZE: usize = 1024;
/// The second size for 12+, used by pyroughtime and the draft-19 example.
pub(crate) const SIZE_LARGE: usize = 1036;
/// Prefix of every label hashed into a seed, nonce or rand.
pub(crate) const LABEL_PREFIX: &str = "gnomon corpus v1: ";

/// The rows the corpus covers: every Ed25519 one.
pub(crate) fn corpus_profiles() -> impl Iterator<Item = &'static Profile> {
    PROFILES
        .iter()
        .filter(|p| p.scheme == gnomon_protocol::Scheme::Ed25519)
}

/// Every corpus file: (file name, contents), in a fixed order.
pub(crate) fn generate() -> Vec<(String, String)> {
    let mut files = Vec::new();
    for p in corpus_profiles() {
        files.push((format!("{}.json", p.name), json(&profile_file::build(p))));
    }
    files.push(("chain.json".into(), json(&chain_file::chain())));
    let (report, expected) = chain_file::report();
    files.push(("malfeasance-report.json".into(), report));
    files.push(("malfeasance-report.expected.json".into(), json(&expected)));
    files
}

fn json(value: &impl Serialize) -> String {
    let mut s = serde_json::to_string_pretty(value).expect("plain data serializes");
    s.push('\n');
    s
}

/// SHA-512(LABEL_PREFIX ‖ label): the source of every seed, nonce and rand,
/// so anyone can rederive them from the README alone.
pub(crate) fn derive(label: &str) -> [u8; 64] {
    let d = Sha512::new()
        .chain_update(LABEL_PREFIX.as_bytes())
        .chain_update(label.as_bytes())
        .finalize();
    d.into()
}

/// The first `n` bytes of `derive(label)`.
pub(crate) fn derive_n(label: &str, n: usize) -> Vec<u8> {
    derive(label)[..n].to_vec()
}

/// The key pair whose seed is the first 32 bytes of `derive(label)`.
pub(crate) fn key(label: &str) -> KeyPair {
    let mut seed = [0u8; 32];
    seed.copy_from_slice(&derive(label)[..32]);
    KeyPair::from_seed(&seed)
}

/// A key pair as written to the corpus. The seeds are published: these
/// keys sign nothing but test data.
#[derive(Serialize)]
pub(crate) struct KeyJson {
    label: String,
    seed_hex: String,
    seed_base64: String,
    public_hex: String,
    public_base64: String,
}

pub(crate) fn key_json(label: &str) -> KeyJson {
    let k = key(label);
    KeyJson {
        label: label.into(),
        seed_hex: hex::encode(k.seed()),
        seed_base64: B64.encode(k.seed()),
        public_hex: hex::encode(k.public()),
        public_base64: B64.encode(k.public()),
    }
}

/// The parameters shared by every file.
#[derive(Serialize)]
pub(crate) struct Fixed {
    now_unix_us: String,
    now_utc: &'static str,
    radius_us: u32,
    mint_unix_us: String,
    mint_utc: &'static str,
    maxt_unix_us: String,
    maxt_utc: &'static str,
    server_vers: Vec<String>,
    derivation: String,
}

pub(crate) fn fixed() -> Fixed {
    Fixed {
        now_unix_us: NOW_US.to_string(),
        now_utc: "2026-10-05T12:34:56.789012Z",
        radius_us: RADIUS_US,
        mint_unix_us: MINT_US.to_string(),
        mint_utc: "2026-10-01T00:00:00Z",
        maxt_unix_us: MAXT_US.to_string(),
        maxt_utc: "2026-11-01T00:00:00Z",
        server_vers: SERVER_VERS.iter().map(|v| v.to_string()).collect(),
        derivation: format!(
            "seed, nonce and rand values are the leading bytes of \
             SHA-512(\"{LABEL_PREFIX}\" || label), label as given next to each value"
        ),
    }
}

/// What a server speaking every version signs in VERS (12+), ascending.
pub(crate) const SERVER_VERS: [Version; 2] = [Version::RFC, Version::DRAFT_12_TO_19];

/// A request of `size` bytes for `profile` alone, with SRV for `long_term`
/// where the profile defines SRV.
pub(crate) fn request(
    profile: &'static Profile,
    nonce: &[u8],
    long_term: &[u8; 32],
    size: usize,
) -> Vec<u8> {
    let srv = gnomon_protocol::request::srv_for(long_term);
    let mut out = vec![0u8; size];
    let n = Offer::single(profile)
        .build(nonce, Some(&srv), size, &mut out)
        .unwrap_or_else(|e| panic!("{}: build: {e:?}", profile.name));
    out.truncate(n);
    out
}

/// The SRV value of a request, if it carries one.
pub(crate) fn srv_of(request: &[u8]) -> Option<String> {
    let sent = SentRequest::parse(request).expect("own request parses");
    let body = if sent.framed {
        wire::unframe(request).expect("framed")
    } else {
        request
    };
    Message::parse(body)
        .expect("own request parses")
        .get(Tag::SRV)
        .map(hex::encode)
}

struct Sink {
    bufs: Vec<Vec<u8>>,
    lens: Vec<Option<usize>>,
}

impl ResponseSink for Sink {
    fn buffer(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i]
    }
    fn finish(
        &mut self,
        i: usize,
        result: Result<usize, gnomon_protocol::responder::RespondError>,
    ) {
        self.lens[i] = Some(result.unwrap_or_else(|e| panic!("request {i} dropped: {e:?}")));
    }
}

/// A server: its long-term key, online key and the delegation for one
/// profile.
pub(crate) struct Server {
    pub(crate) long_term: KeyPair,
    pub(crate) online: KeyPair,
    pub(crate) cert: Certificate,
}

impl Server {
    pub(crate) fn new(long_term: &str, online: &str, profile: &Profile) -> Server {
        let (long_term, online) = (key(long_term), key(online));
        let cert = Certificate::mint(&long_term, &online.public(), MINT_US, MAXT_US, profile);
        Server {
            long_term,
            online,
            cert,
        }
    }

    /// Answer `requests` as one call to the responder; returns the
    /// responses and the number of signatures made.
    pub(crate) fn answer(
        &self,
        profile: &'static Profile,
        requests: &[&[u8]],
        now_us: u64,
        batch_disputed: bool,
    ) -> (Vec<Vec<u8>>, usize) {
        let acceptor = Acceptor::default();
        let parsed: Vec<_> = requests
            .iter()
            .map(|d| {
                let r = acceptor.parse(d).expect("own request parses");
                assert_eq!(r.profile.id, profile.id, "server chose {}", r.profile.name);
                r
            })
            .collect();
        let ctx = BatchContext {
            profile,
            now_us,
            radius_us: RADIUS_US,
            online: &self.online,
            cert: &self.cert,
            vers: &SERVER_VERS,
        };
        let options = ResponderOptions {
            batch_disputed,
            google_nonce: false,
        };
        let mut responder = Responder::new(requests.len(), options);
        let mut sink = Sink {
            bufs: requests.iter().map(|r| vec![0u8; r.len()]).collect(),
            lens: vec![None; requests.len()],
        };
        let stats = responder.respond(&ctx, &parsed, &mut sink);
        let responses = sink
            .bufs
            .into_iter()
            .zip(sink.lens)
            .map(|(mut b, n)| {
                b.truncate(n.expect("every request answered"));
                b
            })
            .collect();
        (responses, stats.signatures)
    }
}

/// The decoded result a client must reach for one response.
#[derive(Serialize)]
pub(crate) struct Expect {
    profile: &'static str,
    version: String,
    midpoint_unix_us: String,
    radius_us: String,
    midp_raw: String,
    radi_raw: u32,
    indx: u32,
    path_depth: u8,
    orientation: &'static str,
    legacy_context: bool,
}

/// Verify `response` with gnomon and describe the result. Panics if it does
/// not verify hash-first with the current context strings: the corpus only
/// lists positives that gnomon's own client accepts without tolerance.
pub(crate) fn expect(request: &[u8], response: &[u8], long_term: &[u8; 32]) -> Expect {
    let v = verify_response(request, response, long_term)
        .unwrap_or_else(|e| panic!("generated response fails: {e:?}"));
    assert_eq!(
        v.orientation,
        gnomon_protocol::merkle::Orientation::HashFirst
    );
    assert!(!v.legacy_context);
    let msg = Message::parse(body(response)).expect("verified");
    let srep = msg.nested(Tag::SREP).expect("verified");
    Expect {
        profile: v.profile.name,
        version: v.profile.version.to_string(),
        midpoint_unix_us: v.midpoint_us.to_string(),
        radius_us: v.radius_us.to_string(),
        midp_raw: srep.u64(Tag::MIDP).expect("verified").to_string(),
        radi_raw: srep.u32(Tag::RADI).expect("verified"),
        indx: msg.u32(Tag::INDX).expect("verified"),
        path_depth: v.path_depth,
        orientation: "hash-first",
        legacy_context: false,
    }
}

/// The message inside a packet, or the bare message.
pub(crate) fn body(packet: &[u8]) -> &[u8] {
    if wire::has_magic(packet) {
        wire::unframe(packet).expect("well-formed packet")
    } else {
        packet
    }
}

/// Byte range of the value at `path` (outer tag first) inside `response`.
pub(crate) fn value_range(response: &[u8], path: &[Tag]) -> core::ops::Range<usize> {
    let (last, parents) = path.split_last().expect("non-empty path");
    let mut msg = Message::parse(body(response)).expect("well-formed response");
    for t in parents {
        msg = msg.nested(*t).expect("nested message");
    }
    let v = msg.require(*last).expect("tag present");
    let start = v.as_ptr() as usize - response.as_ptr() as usize;
    start..start + v.len()
}
