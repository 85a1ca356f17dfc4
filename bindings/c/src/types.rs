//! The constants and the plain C structs of gnomon.h that more than one
//! area's entry points share: the sizes, versions and key lengths, the
//! results of a verify, a chain check and a consensus, and the chain's
//! and the consensus's inputs with their key's length. Each value is
//! checked at compile time against the number the code it describes
//! uses. Data only: nothing here reads a pointer.
#![forbid(unsafe_code)]

use core::ffi::c_char;

use gnomon_protocol::scheme::Scheme;

use crate::error::GnomonError;
use crate::logic::{self, MAX_INPUT};
use crate::message::MESSAGE_LEN;
use crate::quorum;

/// Bytes of an Ed25519 long-term public key.
pub const GNOMON_ED25519_KEY_LEN: usize = 32;
/// Bytes of an ML-DSA-44 long-term public key (version 0x90000001).
pub const GNOMON_ML_DSA_44_KEY_LEN: usize = 1312;
/// Longest long-term public key of any scheme: a buffer this long holds
/// whatever `gnomon_parse_public_key_any` decodes.
pub const GNOMON_MAX_KEY_LEN: usize = 1312;
/// The experimental post-quantum version, signed with ML-DSA-44: TCP only
/// (its answers are about 6.4 KB), 1312-byte keys.
pub const GNOMON_VERSION_ML_DSA_44: u32 = 0x9000_0001;

const _: () = {
    assert!(GNOMON_ED25519_KEY_LEN == Scheme::Ed25519.public_len());
    assert!(GNOMON_ML_DSA_44_KEY_LEN == Scheme::MlDsa44.public_len());
    assert!(GNOMON_MAX_KEY_LEN == gnomon_protocol::scheme::MAX_PUBLIC);
    assert!(GNOMON_VERSION_ML_DSA_44 == gnomon_protocol::Version::ML_DSA_44.0);
};
/// Bytes of every request libgnomon builds; the `out` buffer of the build
/// functions must hold at least this many.
pub const GNOMON_REQUEST_SIZE: usize = 1024;
/// Longest input (request, response, previous response) accepted.
pub const GNOMON_MAX_INPUT: usize = 65536;
/// Most exchanges `gnomon_check_chain` takes.
pub const GNOMON_MAX_CHAIN: usize = 1024;
/// Longest nonce of any version (drafts 01–04).
pub const GNOMON_MAX_NONCE: usize = 64;
/// Bytes of the `message` fields, NUL included. A message that would not
/// fit (only text you gave, such as a long host name, can make one that
/// long) is cut after a whole word and ends in "…" (U+2026).
pub const GNOMON_MESSAGE_LEN: usize = 256;
/// RFC 10049, Roughtime version 1.
pub const GNOMON_VERSION_RFC: u32 = 1;
/// The value IETF drafts 12 to 19 share (the draft-14+ format, with TYPE).
pub const GNOMON_VERSION_DRAFT_12_TO_19: u32 = 0x8000_000c;
/// Google's original protocol (its number in server lists).
pub const GNOMON_VERSION_GOOGLE: u32 = 0xb2d9_8825;
/// `gnomon_query`: the newest version the server speaks.
pub const GNOMON_VERSION_AUTO: u32 = 0;
/// Longest timeout `gnomon_query` takes, ms (one day).
pub const GNOMON_MAX_TIMEOUT_MS: u32 = 86_400_000;
/// Most answers `gnomon_consensus` takes (it keeps what it needs on the
/// stack: about 8 KB on a 64-bit machine, 6 KB on a 32-bit one).
pub const GNOMON_MAX_ANSWERS: usize = 256;
/// `max_liars` of `gnomon_consensus` and `gnomon_proof_policy`: the
/// default assumption. For a consensus, at most max(1, ⌊(listed − 1)/3⌋)
/// of the listed servers lie (what `gnomon sync` assumes); for a relayed
/// proof, fewer than half of the pinned servers, ⌊(pinned − 1)/2⌋. Any
/// other value is the number itself: 0 trusts every server.
// Written so that cbindgen emits `(size_t)~0` (SIZE_MAX); it cannot
// translate `usize::MAX`, and a bare `!0` would be C's int -1.
#[allow(clippy::unnecessary_cast)]
pub const GNOMON_MAX_LIARS_AUTO: usize = !0 as usize;

/// `known` of `gnomon_now_result`: nothing is proven.
pub const GNOMON_NOW_NONE: i32 = 0;
/// `known`: a lower bound only (`gnomon sync` restarted and has had no
/// good round since): `earliest_unix_us` is the floor.
pub const GNOMON_NOW_FLOOR: i32 = 1;
/// `known`: both ends are proven.
pub const GNOMON_NOW_INTERVAL: i32 = 2;
/// `known`: the last round's interval (`earliest_unix_us` ..
/// `latest_unix_us`) lies wholly below the proven floor, so one of the two
/// is wrong (a floor planted or proven by liars, or liars in the round):
/// nothing is proven, not even a lower bound. The operator decides
/// (`gnomon sync --clear-floor`; docs/NOW.md).
pub const GNOMON_NOW_CONTRADICTION: i32 = 3;

const _: () = {
    assert!(GNOMON_REQUEST_SIZE == logic::REQUEST_SIZE);
    assert!(GNOMON_MAX_INPUT == MAX_INPUT);
    assert!(GNOMON_MAX_CHAIN == logic::MAX_CHAIN);
    assert!(GNOMON_MAX_NONCE == gnomon_protocol::chain::MAX_NONCE_LEN);
    assert!(GNOMON_MESSAGE_LEN == MESSAGE_LEN);
    assert!(GNOMON_MAX_ANSWERS == quorum::MAX_ANSWERS);
    assert!(GNOMON_MAX_LIARS_AUTO == quorum::MAX_LIARS_AUTO);
    #[cfg(feature = "std")]
    assert!(GNOMON_MAX_TIMEOUT_MS == crate::query::MAX_TIMEOUT_MS);
};

/// The outcome of `gnomon_verify` and `gnomon_query`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GnomonResult {
    /// `GNOMON_OK`, or why not; the same value the call returned.
    pub code: GnomonError,
    /// The version the server answered in (wire value; Google's is
    /// `GNOMON_VERSION_GOOGLE`); 0 on failure.
    pub version: u32,
    /// The server's time, microseconds since the Unix epoch (UTC, leap
    /// seconds smeared or not as the server does); 0 on failure.
    pub midpoint_us: u64,
    /// The server vouches for midpoint ± radius, microseconds.
    pub radius_us: u64,
    /// A NUL-terminated English sentence: "success", or what was wrong.
    pub message: [c_char; GNOMON_MESSAGE_LEN],
}

/// The outcome of `gnomon_check_chain`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GnomonChainResult {
    /// `GNOMON_OK`, or why not; the same value the call returned.
    pub code: GnomonError,
    /// The exchange that failed (for `GNOMON_ERR_CAUSALITY`, the later of
    /// the two); 0 on success.
    pub index: usize,
    /// For `GNOMON_ERR_CAUSALITY`, the earlier exchange it contradicts;
    /// otherwise equal to `index`.
    pub other: usize,
    /// A NUL-terminated English sentence.
    pub message: [c_char; GNOMON_MESSAGE_LEN],
}

/// What the quorum rule says of one answer (`gnomon_consensus`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GnomonVerdict {
    /// Its key's interval meets the consensus.
    GnomonVerdictAgrees = 0,
    /// Its key's interval misses the consensus: if at most `max_liars` of
    /// the listed servers lie, this one does.
    GnomonVerdictOutside = 1,
    /// Its key's answers do not overlap each other: the key lied, proven by
    /// its own signatures. It does not vote, and is one of the liars the
    /// assumption allows.
    GnomonVerdictSelfContradiction = 2,
    /// There is no consensus to meet or miss.
    GnomonVerdictNoConsensus = 3,
}

impl From<quorum::Verdict> for GnomonVerdict {
    fn from(v: quorum::Verdict) -> Self {
        use quorum::Verdict as V;
        match v {
            V::Agrees => GnomonVerdict::GnomonVerdictAgrees,
            V::Outside => GnomonVerdict::GnomonVerdictOutside,
            V::SelfContradiction => GnomonVerdict::GnomonVerdictSelfContradiction,
            V::NoConsensus => GnomonVerdict::GnomonVerdictNoConsensus,
        }
    }
}

/// The outcome of `gnomon_consensus`. On a failure only `code` and
/// `message` are set (the rest is 0 and false).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GnomonConsensusResult {
    /// `GNOMON_OK`, or why not; the same value the call returned.
    pub code: GnomonError,
    /// Enough distinct keys answered (`needed`) and some offset is held by
    /// all of them but `max_liars`.
    pub has_consensus: bool,
    /// There is a consensus and at least `quorum` distinct keys meet it.
    pub quorum_met: bool,
    /// The consensus: the smallest offset (server − local, µs) held by
    /// `voting_keys − max_liars` keys ...
    pub low_us: i64,
    /// ... and the largest. Add an offset in it to local time.
    pub high_us: i64,
    /// The middle of the consensus.
    pub midpoint_us: i64,
    /// Half its width: compare it with the accuracy you need. Liars beside
    /// a wide honest interval can make it wide, never wrong.
    pub radius_us: i64,
    /// Distinct keys that vote (answered and did not contradict themselves).
    pub voting_keys: usize,
    /// Voting keys whose interval meets the consensus.
    pub agreeing_keys: usize,
    /// Voting keys whose interval misses it.
    pub outside_keys: usize,
    /// Keys whose own answers do not overlap (they do not vote, and count
    /// against `max_liars`).
    pub contradicting_keys: usize,
    /// Separate stretches of offsets held by `voting_keys − max_liars`
    /// keys. More than one: the servers disagree, and the consensus spans
    /// them all.
    pub regions: usize,
    /// The assumption: how many distinct servers the list has (as passed).
    pub listed: usize,
    /// ... and how many of them may lie (`GNOMON_MAX_LIARS_AUTO` resolved
    /// to its number).
    pub max_liars: usize,
    /// Distinct keys that must answer for a consensus: 2 × max_liars + 1.
    /// Fewer answering is no consensus, whatever they say: whoever is
    /// silent may have been silenced, and those left may be the liars.
    pub needed: usize,
    /// A NUL-terminated English sentence. With a consensus, the quorum met
    /// and the servers not disagreeing, the assumption: "assumes at most 1
    /// of the 5 listed servers lies; 3 answered, 3 needed"; otherwise which
    /// of those is not so, why there is no consensus, or why the call
    /// failed.
    pub message: [c_char; GNOMON_MESSAGE_LEN],
}

/// One request/response pair of a chain, as `gnomon_exchange` but with the
/// key's length, so that a chain may hold ML-DSA-44 exchanges.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GnomonExchangeAnyKey {
    /// The request as sent.
    pub request: *const u8,
    /// Its length.
    pub request_len: usize,
    /// The response as received.
    pub response: *const u8,
    /// Its length.
    pub response_len: usize,
    /// The rand the request's nonce was chained with
    /// (`gnomon_chain_nonce`); NULL and 0 for the first exchange.
    pub rand: *const u8,
    /// Its length: the nonce length of the request's version.
    pub rand_len: usize,
    /// The server's long-term public key.
    pub public_key: *const u8,
    /// Its length: `GNOMON_ED25519_KEY_LEN` or `GNOMON_ML_DSA_44_KEY_LEN`.
    pub public_key_len: usize,
}

/// One answer for `gnomon_consensus_any_key`: as `gnomon_vouch`, with the
/// key's length.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GnomonVouchAnyKey {
    /// The server's long-term public key. Votes count per distinct key
    /// (the same bytes under two names is one voter).
    pub public_key: *const u8,
    /// Its length: `GNOMON_ED25519_KEY_LEN` or `GNOMON_ML_DSA_44_KEY_LEN`.
    pub public_key_len: usize,
    /// Smallest offset, µs.
    pub low_us: i64,
    /// Largest offset, µs (not below `low_us`).
    pub high_us: i64,
}
