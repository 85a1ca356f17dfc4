//! Every way a libgnomon call can fail, as one C enum with fixed values.
#![forbid(unsafe_code)]

use gnomon_protocol::VerifyError;

/// What a libgnomon call returns: `GNOMON_OK` (0) or why it failed. The
/// values are part of the ABI and never change; new failures get new
/// numbers.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GnomonError {
    /// Success.
    GnomonOk = 0,
    /// A required pointer was NULL.
    GnomonErrNull = 1,
    /// A required input was empty (length 0).
    GnomonErrEmpty = 2,
    /// An input is longer than any Roughtime message can be (65536 bytes),
    /// a chain has more than `GNOMON_MAX_CHAIN` exchanges, or a consensus
    /// more than `GNOMON_MAX_ANSWERS` answers.
    GnomonErrTooLong = 3,
    /// The output buffer is too small (a request needs `GNOMON_REQUEST_SIZE`).
    GnomonErrBufferTooSmall = 4,
    /// No protocol version with this number is known.
    GnomonErrUnknownVersion = 5,
    /// The nonce (or chain rand) is not as long as the version requires.
    GnomonErrNonceLength = 6,
    /// The public key is no scheme's: its length is neither 32 (Ed25519)
    /// nor 1312 (ML-DSA-44) bytes, or its text is not base64 or hex of
    /// one (or, for the 32-byte functions, not an Ed25519 key).
    GnomonErrKey = 7,
    /// The request given to verify does not parse.
    GnomonErrRequest = 8,
    /// The response is malformed: framing, tags, or a missing field.
    GnomonErrMalformed = 9,
    /// The response's version is unknown, was not offered, or is encoded
    /// where or how that version does not allow (TYPE, VERS).
    GnomonErrVersion = 10,
    /// The response names a better version both sides speak: a downgrade.
    GnomonErrDowngrade = 11,
    /// The delegation is not signed by this public key (wrong key, a key
    /// of the other scheme than the version answered, or a forged
    /// certificate).
    GnomonErrDelegationSignature = 12,
    /// The signed response is not signed by the delegated online key.
    GnomonErrResponseSignature = 13,
    /// The response does not carry the request's nonce.
    GnomonErrNonce = 14,
    /// The Merkle path does not lead from the request to the signed root.
    GnomonErrMerkle = 15,
    /// A time is undecodable, outside the delegation, or a zero radius
    /// where the version forbids it.
    GnomonErrTime = 16,
    /// A chained request's nonce is not derived from the previous response
    /// and its rand.
    GnomonErrChainNonce = 17,
    /// Two responses of a chain contradict each other: the earlier one's
    /// earliest time is after the later one's latest (malfeasance).
    GnomonErrCausality = 18,
    /// The address is not HOST:PORT, or the host does not resolve.
    GnomonErrAddress = 19,
    /// No answer came before the timeout. A server that drops requests
    /// looks like this, and servers drop requests that name another key
    /// than theirs: check the public key as well as the address.
    GnomonErrTimeout = 20,
    /// A local failure: no socket, or the operating system's random
    /// source failed.
    GnomonErrLocal = 21,
    /// An argument is out of range: a timeout of 0, text that is not
    /// UTF-8, a misaligned struct pointer, a quorum of 0, a consensus
    /// `listed` of 0 or below the distinct keys answering, an answer whose
    /// low offset is above its high one.
    GnomonErrArgument = 22,
    /// A bug in libgnomon was caught before it could reach the caller
    /// (a Rust panic, in a build that unwinds); a result struct carries
    /// only the code and message, other outputs are not to be used.
    GnomonErrInternal = 23,
    /// Nothing listens at the address: UDP met an ICMP "port unreachable"
    /// (and TCP, where tried, was refused). Check the port and that the
    /// server runs; a wrong key is silence (`GNOMON_ERR_TIMEOUT`), not this.
    GnomonErrRefused = 24,
    /// A relayed proof was made for another device value: another device's, or
    /// replayed from an earlier request.
    GnomonErrProofWrongNonce = 25,
    /// A relayed proof's first request is not bound to the device value (a
    /// chain that starts elsewhere).
    GnomonErrProofBinding = 26,
    /// An entry of a relayed proof is signed by a key the device does not pin
    /// (`entry`).
    GnomonErrProofUnknownKey = 27,
    /// An entry's delegation or response signature does not verify (`entry`):
    /// forged bytes.
    GnomonErrProofSignature = 28,
    /// An entry's response answers another request (`entry`): a swapped or
    /// transplanted answer.
    GnomonErrProofNotForRequest = 29,
    /// An entry's response fails verification otherwise (`entry`): malformed,
    /// another version, a time outside its delegation.
    GnomonErrProofResponse = 30,
    /// An entry's request is not chained from the response before it (`entry`):
    /// a changed rand, a dropped, repeated or reordered entry.
    GnomonErrProofLink = 31,
    /// Two answers of a relayed proof cannot both be true (`entry` and
    /// `other`): a server lied, and the bundle proves it. The proven
    /// interval is given when there is one and it meets the policy
    /// (`has_interval`).
    GnomonErrProofContradiction = 32,
    /// Keys of a relayed proof miss the proven interval or contradict
    /// themselves (`liars`): under the assumption they lie. The interval
    /// is given when it meets the policy (`has_interval`).
    GnomonErrProofLiar = 33,
    /// A relayed proof carries fewer distinct pinned servers than
    /// 2 × max_liars + 1 (`answering_keys`, `needed_keys`): the relay left
    /// the others out, or they did not answer it, and what is left may be
    /// the liars.
    GnomonErrProofTooFewKeys = 34,
    /// No time is held by all but `max_liars` of the servers a relayed
    /// proof carries (more of them lie than assumed), or fewer agree than
    /// the policy's quorum.
    GnomonErrProofNoQuorum = 35,
    /// The interval a relayed proof gives is wider than the policy's
    /// `max_radius_us` (`radius_us`).
    GnomonErrProofTooWide = 36,
    /// A length in a relayed proof runs past its end.
    GnomonErrProofTruncated = 37,
    /// A relayed proof's structure is wrong: magic, format version, a count or
    /// length out of range, an untrimmed request, trailing bytes.
    GnomonErrProofMalformed = 38,
    /// A signed server list's signature does not verify under the pinned
    /// monitor key: the list was changed after it was signed, the signature
    /// is another's, or it was made for another namespace than
    /// `roughtime-server-list`.
    GnomonErrListSignature = 39,
    /// A signed server list carries a valid signature by a key other than
    /// the pinned one.
    GnomonErrListOtherKey = 40,
    /// A signed server list has expired (`now_unix` is at or past its
    /// `observatory.expires`).
    GnomonErrListExpired = 41,
    /// A signed server list's sequence is below the last one accepted from
    /// its key: an old list served again.
    GnomonErrListReplayed = 42,
    /// A signed server list has the sequence last accepted from its key,
    /// over other bytes.
    GnomonErrListReused = 43,
    /// A signed server list is not JSON with `servers` and a valid
    /// `observatory` header.
    GnomonErrListMalformed = 44,
}

/// Every code, in order of value (tests walk it).
pub const ALL: [GnomonError; 45] = {
    use GnomonError::*;
    [
        GnomonOk,
        GnomonErrNull,
        GnomonErrEmpty,
        GnomonErrTooLong,
        GnomonErrBufferTooSmall,
        GnomonErrUnknownVersion,
        GnomonErrNonceLength,
        GnomonErrKey,
        GnomonErrRequest,
        GnomonErrMalformed,
        GnomonErrVersion,
        GnomonErrDowngrade,
        GnomonErrDelegationSignature,
        GnomonErrResponseSignature,
        GnomonErrNonce,
        GnomonErrMerkle,
        GnomonErrTime,
        GnomonErrChainNonce,
        GnomonErrCausality,
        GnomonErrAddress,
        GnomonErrTimeout,
        GnomonErrLocal,
        GnomonErrArgument,
        GnomonErrInternal,
        GnomonErrRefused,
        GnomonErrProofWrongNonce,
        GnomonErrProofBinding,
        GnomonErrProofUnknownKey,
        GnomonErrProofSignature,
        GnomonErrProofNotForRequest,
        GnomonErrProofResponse,
        GnomonErrProofLink,
        GnomonErrProofContradiction,
        GnomonErrProofLiar,
        GnomonErrProofTooFewKeys,
        GnomonErrProofNoQuorum,
        GnomonErrProofTooWide,
        GnomonErrProofTruncated,
        GnomonErrProofMalformed,
        GnomonErrListSignature,
        GnomonErrListOtherKey,
        GnomonErrListExpired,
        GnomonErrListReplayed,
        GnomonErrListReused,
        GnomonErrListMalformed,
    ]
};

impl GnomonError {
    /// A fixed English sentence for the code (NUL-terminated for C).
    pub fn text(self) -> &'static str {
        use GnomonError::*;
        match self {
            GnomonOk => "success\0",
            GnomonErrNull => "a required pointer is NULL\0",
            GnomonErrEmpty => "a required input is empty\0",
            GnomonErrTooLong => "an input is longer than allowed\0",
            GnomonErrBufferTooSmall => "the output buffer is too small\0",
            GnomonErrUnknownVersion => "unknown protocol version\0",
            GnomonErrNonceLength => "the nonce or rand has the wrong length for this version\0",
            GnomonErrKey => "the public key is not 32 or 1312 bytes (in base64 or hex)\0",
            GnomonErrRequest => "the request does not parse\0",
            GnomonErrMalformed => "the response is malformed\0",
            GnomonErrVersion => "the response's version is unknown, not offered or misplaced\0",
            GnomonErrDowngrade => "the response is a version downgrade\0",
            GnomonErrDelegationSignature => "the delegation is not signed by this public key\0",
            GnomonErrResponseSignature => {
                "the response is not signed by the delegated online key\0"
            }
            GnomonErrNonce => "the response does not carry the request's nonce\0",
            GnomonErrMerkle => "the Merkle path does not lead to the signed root\0",
            GnomonErrTime => "a time is undecodable, outside the delegation, or a zero radius\0",
            GnomonErrChainNonce => "a chained nonce is not derived from the previous response\0",
            GnomonErrCausality => "two responses of the chain contradict each other\0",
            GnomonErrAddress => "the address is not HOST:PORT or does not resolve\0",
            GnomonErrTimeout => "no answer before the timeout\0",
            GnomonErrLocal => "local failure (socket or random source)\0",
            GnomonErrArgument => "an argument is out of range\0",
            GnomonErrInternal => "internal error in libgnomon (caught panic)\0",
            GnomonErrRefused => "the port is closed: nothing listens at that address\0",
            GnomonErrProofWrongNonce => "the proof was made for another device value\0",
            GnomonErrProofBinding => "the proof's chain does not start at the device value\0",
            GnomonErrProofUnknownKey => "an entry of the proof is signed by a key not pinned\0",
            GnomonErrProofSignature => "a signature in the proof does not verify\0",
            GnomonErrProofNotForRequest => "an answer in the proof is for another request\0",
            GnomonErrProofResponse => "an answer in the proof fails verification\0",
            GnomonErrProofLink => "an entry of the proof is not chained from the one before\0",
            GnomonErrProofContradiction => {
                "two answers in the proof contradict each other: a server lied\0"
            }
            GnomonErrProofLiar => "answers in the proof miss the proven interval: a server lied\0",
            GnomonErrProofTooFewKeys => {
                "the proof carries too few distinct pinned servers to outvote the liars\0"
            }
            GnomonErrProofNoQuorum => "too few servers in the proof agree\0",
            GnomonErrProofTooWide => "the proven interval is wider than the policy allows\0",
            GnomonErrProofTruncated => "the proof is truncated\0",
            GnomonErrProofMalformed => "the proof is malformed\0",
            GnomonErrListSignature => {
                "the server list's signature does not verify under the pinned key\0"
            }
            GnomonErrListOtherKey => {
                "the server list is signed by another key than the pinned one\0"
            }
            GnomonErrListExpired => "the server list has expired\0",
            GnomonErrListReplayed => {
                "the server list is older than one already accepted (replayed)\0"
            }
            GnomonErrListReused => {
                "the server list reuses an accepted sequence with other contents\0"
            }
            GnomonErrListMalformed => "the signed server list is not a monitor's server list\0",
        }
    }

    /// The code for an integer value, if there is one.
    pub fn from_i32(code: i32) -> Option<GnomonError> {
        usize::try_from(code).ok().and_then(|i| ALL.get(i)).copied()
    }
}

/// The code for a verification failure.
pub fn of_verify(e: &VerifyError) -> GnomonError {
    use GnomonError::*;
    match e {
        VerifyError::Request(_) => GnomonErrRequest,
        VerifyError::Framing(_) | VerifyError::Message(_) => GnomonErrMalformed,
        VerifyError::Downgrade { .. } => GnomonErrDowngrade,
        // A key of the other scheme cannot have signed the delegation: to
        // the caller, a wrong key (the message names both schemes).
        VerifyError::DelegationSignature | VerifyError::KeyScheme { .. } => {
            GnomonErrDelegationSignature
        }
        VerifyError::ResponseSignature => GnomonErrResponseSignature,
        VerifyError::NonceMismatch | VerifyError::NonceMissing => GnomonErrNonce,
        VerifyError::Path(_) | VerifyError::Root => GnomonErrMerkle,
        VerifyError::Time | VerifyError::OutsideDelegation | VerifyError::ZeroRadius => {
            GnomonErrTime
        }
        // UnknownVersion, NotOffered, LegacyVersionOne, VersionPlacement,
        // Type, Vers, and whatever the protocol crate adds later.
        _ => GnomonErrVersion,
    }
}
