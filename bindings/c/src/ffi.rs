//! The C ABI (with `any_key.rs`, the only modules with `unsafe`): the
//! types, the argument checks, and the entry points of the first API,
//! whose keys are 32 bytes. Each entry point checks its
//! pointers and lengths, turns them into slices, calls `core` (or `query`)
//! inside `guard`, and writes its results through `ptr::write`, so no
//! Rust reference to caller memory outlives the call and none is made to
//! memory the caller did not initialise.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

use core::ffi::c_char;
use core::slice;

use crate::any_key::{
    array, check_chain_with, consensus_with, gnomon_build_request_any_key, gnomon_verify_any_key,
    GnomonExchangeAnyKey, GnomonVouchAnyKey, Rule, GNOMON_ED25519_KEY_LEN,
};
#[cfg(feature = "std")]
use crate::any_key::{gnomon_build_request_random_any_key, gnomon_query_any_key};
use crate::error::GnomonError;
use crate::logic::{self, MAX_INPUT};
use crate::message::{self, MESSAGE_LEN};
use crate::quorum;

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

/// One request/response pair of a chain, as the caller recorded it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GnomonExchange {
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
    /// The server's long-term public key, 32 bytes.
    pub public_key: *const u8,
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

/// One answer for `gnomon_consensus`: the server's long-term key and the
/// interval of offsets (server time − local time, µs) the answer vouches
/// for, typically midpoint − local ± (radius + round trip / 2).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GnomonVouch {
    /// The server's long-term public key, 32 bytes. Votes count per
    /// distinct key: the same key under two names or addresses is one
    /// server.
    pub public_key: *const u8,
    /// Smallest offset, µs.
    pub low_us: i64,
    /// Largest offset, µs (not below `low_us`).
    pub high_us: i64,
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

/// Run `f`; a panic becomes `GNOMON_ERR_INTERNAL` instead of unwinding
/// into C (undefined behaviour). That needs a build that unwinds: in one
/// with `panic = "abort"` (the workspace's release profile) the process
/// aborts at the panic instead, which never unwinds into C either
/// (docs/C.md, "Panics"). Without `std` there is no unwinding: the panic
/// handler in lib.rs stops.
#[cfg(feature = "std")]
pub fn guard(f: impl FnOnce() -> GnomonError) -> GnomonError {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let code = f();
        #[cfg(debug_assertions)]
        panic_if_asked();
        code
    }))
    .unwrap_or(GnomonError::GnomonErrInternal)
}

/// Debug builds only: with `GNOMON_TEST_PANIC` in the environment, every
/// guarded entry point panics after doing its work, standing in for a bug,
/// so that a C program can check what a panic comes back as
/// (tests/c_programs.rs::a_panic_comes_back_to_c_as_the_internal_error).
#[cfg(all(feature = "std", debug_assertions))]
fn panic_if_asked() {
    if std::env::var_os("GNOMON_TEST_PANIC").is_some() {
        panic!("GNOMON_TEST_PANIC is set: a stand-in for a bug");
    }
}

/// Run `f` (no unwinding without `std`).
#[cfg(not(feature = "std"))]
pub fn guard(f: impl FnOnce() -> GnomonError) -> GnomonError {
    f()
}

pub(crate) fn c_message(text: &[u8; MESSAGE_LEN]) -> [c_char; GNOMON_MESSAGE_LEN] {
    // Byte for byte; c_char's sign does not matter to C string functions.
    text.map(|b| b as c_char)
}

pub(crate) fn message_or_text(message: &mut [u8; MESSAGE_LEN], code: GnomonError) {
    if message[0] == 0 {
        message::write_message(message, format_args!("{}", message::text(code)));
    }
}

/// A required input: not NULL, not empty, not longer than `MAX_INPUT`.
///
/// # Safety
/// If `ptr` is not NULL it must point to `len` readable bytes that stay
/// unchanged during the call.
pub(crate) unsafe fn input<'a>(ptr: *const u8, len: usize) -> Result<&'a [u8], GnomonError> {
    if ptr.is_null() {
        Err(GnomonError::GnomonErrNull)
    } else if len == 0 {
        Err(GnomonError::GnomonErrEmpty)
    } else if len > MAX_INPUT {
        Err(GnomonError::GnomonErrTooLong)
    } else {
        // SAFETY: non-NULL, and the caller promises `len` readable bytes;
        // len ≤ 65536 keeps it far below isize::MAX.
        Ok(unsafe { slice::from_raw_parts(ptr, len) })
    }
}

/// An output buffer of which the first `need` bytes are used.
///
/// # Safety
/// If `ptr` is not NULL it must point to `len` writable bytes not read or
/// written by anyone else during the call.
pub(crate) unsafe fn output<'a>(
    ptr: *mut u8,
    len: usize,
    need: usize,
) -> Result<&'a mut [u8], GnomonError> {
    if ptr.is_null() {
        Err(GnomonError::GnomonErrNull)
    } else if len < need {
        Err(GnomonError::GnomonErrBufferTooSmall)
    } else {
        // SAFETY: non-NULL; need ≤ len writable bytes by the caller's
        // promise; u8 has no alignment or validity requirement.
        Ok(unsafe { slice::from_raw_parts_mut(ptr, need) })
    }
}

/// Check a pointer the call writes one `T` through.
pub(crate) fn writable<T>(ptr: *mut T) -> Result<(), GnomonError> {
    if ptr.is_null() {
        Err(GnomonError::GnomonErrNull)
    } else if !ptr.is_aligned() {
        Err(GnomonError::GnomonErrArgument)
    } else {
        Ok(())
    }
}

/// Store the length of a success in `*written`; the call's code.
///
/// # Safety
/// `written` was accepted by `writable` and points to a `size_t` the
/// caller owns.
pub(crate) unsafe fn store_len(r: Result<usize, GnomonError>, written: *mut usize) -> GnomonError {
    match r {
        Ok(n) => {
            // SAFETY: non-NULL and aligned (checked by `writable`), owned
            // by the caller for the call.
            unsafe { written.write(n) };
            GnomonError::GnomonOk
        }
        Err(e) => e,
    }
}

/// A fixed sentence for `code`, NUL-terminated, never NULL. Values that
/// are no code give "unknown error code". The string is static: do not
/// free it.
#[no_mangle]
pub extern "C" fn gnomon_error_string(code: i32) -> *const c_char {
    match GnomonError::from_i32(code) {
        Some(e) => e.text().as_ptr().cast(),
        None => c"unknown error code".as_ptr(),
    }
}

/// Store in `*nonce_len` the nonce length of `version`'s requests (32 or
/// 64 bytes).
///
/// # Safety
/// `nonce_len` is NULL or points to a writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn gnomon_nonce_length(version: u32, nonce_len: *mut usize) -> GnomonError {
    if let Err(e) = writable(nonce_len) {
        return e;
    }
    guard(|| // SAFETY: `nonce_len` checked by `writable` above.
        unsafe { store_len(logic::nonce_len(version), nonce_len) })
}

/// Build a `GNOMON_REQUEST_SIZE`-byte request for `version` with the
/// caller's `nonce` (`gnomon_nonce_length` bytes, unpredictable: from a
/// hardware random source, or `gnomon_chain_nonce`) into `out`, and store
/// its length in `*written`. With `public_key` (32 bytes, may be NULL) the
/// request names the server's key in SRV where the version defines it.
/// Ed25519 keys only: `gnomon_build_request_any_key` takes ML-DSA-44's.
///
/// # Safety
/// Every non-NULL pointer points to as many bytes as its length says
/// (`public_key`: 32); `written` to a writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn gnomon_build_request(
    version: u32,
    nonce: *const u8,
    nonce_len: usize,
    public_key: *const u8,
    out: *mut u8,
    out_len: usize,
    written: *mut usize,
) -> GnomonError {
    // SAFETY: the caller's promises, with `public_key` 32 bytes long.
    unsafe {
        gnomon_build_request_any_key(
            version,
            nonce,
            nonce_len,
            public_key,
            GNOMON_ED25519_KEY_LEN,
            out,
            out_len,
            written,
        )
    }
}

/// `gnomon_build_request` with a nonce from the operating system's
/// random source (`std` builds only).
/// Ed25519 keys only: `gnomon_build_request_random_any_key` takes
/// ML-DSA-44's.
///
/// # Safety
/// As `gnomon_build_request`.
#[cfg(feature = "std")]
#[no_mangle]
pub unsafe extern "C" fn gnomon_build_request_random(
    version: u32,
    public_key: *const u8,
    out: *mut u8,
    out_len: usize,
    written: *mut usize,
) -> GnomonError {
    // SAFETY: the caller's promises, with `public_key` 32 bytes long.
    unsafe {
        gnomon_build_request_random_any_key(
            version,
            public_key,
            GNOMON_ED25519_KEY_LEN,
            out,
            out_len,
            written,
        )
    }
}

/// The nonce of the next request of a measurement sequence (RFC 10049
///), in `version`'s format: derived from the previous response as
/// received and a fresh random `rand` of `gnomon_nonce_length` bytes.
/// Writes the nonce to `out` (at least that long) and its length to
/// `*written`; pass it to `gnomon_build_request`, and keep `rand` for
/// `gnomon_check_chain`.
///
/// # Safety
/// Every non-NULL pointer points to as many bytes as its length says;
/// `written` to a writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn gnomon_chain_nonce(
    version: u32,
    previous_response: *const u8,
    previous_len: usize,
    rand: *const u8,
    rand_len: usize,
    out: *mut u8,
    out_len: usize,
    written: *mut usize,
) -> GnomonError {
    if let Err(e) = writable(written) {
        return e;
    }
    guard(|| {
        let need = match logic::nonce_len(version) {
            Ok(n) => n,
            Err(e) => return e,
        };
        // SAFETY: the caller's promises, checked for NULL inside.
        let args = unsafe {
            (|| {
                Ok::<_, GnomonError>((
                    input(previous_response, previous_len)?,
                    input(rand, rand_len)?,
                    output(out, out_len, need)?,
                ))
            })()
        };
        let (previous, rand, out) = match args {
            Ok(a) => a,
            Err(e) => return e,
        };
        // SAFETY: `written` checked by `writable` above.
        unsafe { store_len(logic::next_nonce(version, previous, rand, out), written) }
    })
}

/// Verify `response` (as received) to `request` (as sent) against the
/// server's 32-byte long-term `public_key`: the delegation's and the
/// response's signatures, the Merkle proof of the request's nonce, the
/// version negotiation (no downgrade), the midpoint inside the delegation.
/// Fills `*result` on every path where `result` is usable and returns the
/// same code. What the caller must still do: see docs/C.md.
/// Ed25519 keys only: `gnomon_verify_any_key` verifies ML-DSA-44 answers.
///
/// # Safety
/// Every non-NULL pointer points to as many bytes as its length says
/// (`public_key`: 32); `result` to a writable, aligned `gnomon_result`.
#[no_mangle]
pub unsafe extern "C" fn gnomon_verify(
    request: *const u8,
    request_len: usize,
    response: *const u8,
    response_len: usize,
    public_key: *const u8,
    result: *mut GnomonResult,
) -> GnomonError {
    // SAFETY: the caller's promises, with `public_key` 32 bytes long.
    unsafe {
        gnomon_verify_any_key(
            request,
            request_len,
            response,
            response_len,
            public_key,
            GNOMON_ED25519_KEY_LEN,
            result,
        )
    }
}

/// Ask `address` ("host:port", NUL-terminated; IPv6 as "[::1]:port")
/// once over UDP (and TCP for versions that define it), in `version`
/// (`GNOMON_VERSION_AUTO`: the newest the server speaks), verify the answer
/// against the 32-byte `public_key`, and fill `*result`. Blocks at most
/// `timeout_ms` (1 ms to one day), name resolution included. `std` builds
/// only.
/// Ed25519 keys only: `gnomon_query_any_key` takes ML-DSA-44's.
///
/// # Safety
/// `address` is NULL or a NUL-terminated string; `public_key` NULL or 32
/// readable bytes; `result` to a writable, aligned `gnomon_result`.
#[cfg(feature = "std")]
#[no_mangle]
pub unsafe extern "C" fn gnomon_query(
    address: *const c_char,
    public_key: *const u8,
    version: u32,
    timeout_ms: u32,
    result: *mut GnomonResult,
) -> GnomonError {
    // SAFETY: the caller's promises, with `public_key` 32 bytes long.
    unsafe {
        gnomon_query_any_key(
            address,
            public_key,
            GNOMON_ED25519_KEY_LEN,
            version,
            timeout_ms,
            result,
        )
    }
}

/// Decode a long-term public key written in base64 (as server lists and
/// `gnomon keygen` print it) or as 64 hex digits, from the NUL-terminated
/// `text` into the 32 bytes at `out`.
/// Ed25519 keys only (other text is `GNOMON_ERR_KEY`, or
/// `GNOMON_ERR_TOO_LONG` past 1024 characters):
/// `gnomon_parse_public_key_any` decodes ML-DSA-44's too.
///
/// # Safety
/// `text` is NULL or NUL-terminated; `out` NULL or 32 writable bytes.
#[no_mangle]
pub unsafe extern "C" fn gnomon_parse_public_key(text: *const c_char, out: *mut u8) -> GnomonError {
    if text.is_null() || out.is_null() {
        return GnomonError::GnomonErrNull;
    }
    guard(|| {
        // SAFETY: non-NULL and NUL-terminated by the caller's promise.
        let text = unsafe { core::ffi::CStr::from_ptr(text) }.to_bytes();
        if text.is_empty() {
            return GnomonError::GnomonErrEmpty;
        }
        if text.len() > 1024 {
            return GnomonError::GnomonErrTooLong;
        }
        match logic::parse_key(text) {
            Ok(k) => {
                // SAFETY: non-NULL, 32 writable bytes by the caller's
                // promise, alignment 1.
                unsafe { out.cast::<[u8; 32]>().write(k) };
                GnomonError::GnomonOk
            }
            Err(e) => e,
        }
    })
}

/// Check a measurement sequence: `exchanges[0..count]` in the order the
/// responses were received. Every response must verify against its
/// request and key, every request after the first must carry the nonce
/// `gnomon_chain_nonce` gives for the previous response and its `rand`,
/// and no two responses may contradict each other (the earlier one's
/// midpoint − radius after the later one's midpoint + radius). Stops at
/// the first failure and says which exchange in `*result`.
/// Ed25519 keys only: `gnomon_check_chain_any_key` takes
/// `gnomon_exchange_any_key`, which carries each key's length.
///
/// # Safety
/// `exchanges` is NULL or points to `count` aligned `gnomon_exchange`
/// values whose pointers each satisfy `gnomon_verify`'s rules; `result`
/// to a writable, aligned `gnomon_chain_result`.
#[no_mangle]
pub unsafe extern "C" fn gnomon_check_chain(
    exchanges: *const GnomonExchange,
    count: usize,
    result: *mut GnomonChainResult,
) -> GnomonError {
    let read = |i: usize| {
        // SAFETY: i < count (check_chain never asks past it, and refuses
        // count > GNOMON_MAX_CHAIN first); non-NULL and aligned (checked
        // by `array` before any read), and `count` readable values by the
        // caller's promise.
        let e = unsafe { exchanges.add(i).read() };
        GnomonExchangeAnyKey {
            request: e.request,
            request_len: e.request_len,
            response: e.response,
            response_len: e.response_len,
            rand: e.rand,
            rand_len: e.rand_len,
            public_key: e.public_key,
            public_key_len: GNOMON_ED25519_KEY_LEN,
        }
    };
    // SAFETY: the caller's promises for each exchange's pointers, keys
    // 32 bytes long.
    unsafe { check_chain_with(count, array(exchanges), result, read) }
}

/// The quorum rule over `answers[0..count]` (at most
/// `GNOMON_MAX_ANSWERS`), the same rule as `gnomon sync`, `gnomon query
/// --servers` and the Python package, under the assumption that at most
/// `max_liars` of the `listed` distinct servers of your list lie
/// (`GNOMON_MAX_LIARS_AUTO`: max(1, ⌊(listed − 1)/3⌋)). `listed` counts
/// every server of the list, answered or not: an attacker on the path
/// chooses who answers, so the rule never takes the answers as the
/// electorate. The answers of each distinct key are intersected (an empty
/// intersection: the key contradicted itself, does not vote, and is one
/// of the liars); with `m` keys voting there is a consensus only when
/// `m ≥ 2 × max_liars + 1`, and it is the hull of every offset held by
/// `m − max_liars` of them; a key whose interval misses it lies, under
/// the assumption. Fills `*result`, and, when `verdicts` is not NULL,
/// `verdicts[i]` for each answer. Returns `GNOMON_OK` whenever the
/// answers could be judged, consensus or not; `GNOMON_ERR_ARGUMENT` for
/// a `listed` of 0 or below the distinct keys answering, or a `quorum`
/// of 0. Allocates nothing (also in the `no_std` build).
/// Ed25519 keys only: `gnomon_consensus_any_key` takes
/// `gnomon_vouch_any_key`, which carries each key's length.
///
/// # Safety
/// `answers` is NULL or points to `count` aligned `gnomon_vouch` values,
/// each with a `public_key` that is NULL or points to 32 readable bytes;
/// `verdicts` is NULL or points to `count` writable, aligned
/// `gnomon_verdict` values; `result` to a writable, aligned
/// `gnomon_consensus_result`. None of them changes during the call.
#[no_mangle]
pub unsafe extern "C" fn gnomon_consensus(
    answers: *const GnomonVouch,
    count: usize,
    listed: usize,
    max_liars: usize,
    quorum: usize,
    verdicts: *mut GnomonVerdict,
    result: *mut GnomonConsensusResult,
) -> GnomonError {
    let read = |i: usize| {
        // SAFETY: i < count ≤ GNOMON_MAX_ANSWERS (consensus checks the
        // bound before asking for any answer, and never asks past it);
        // non-NULL and aligned (checked by `array` first), and `count`
        // readable values by the caller's promise.
        let v = unsafe { answers.add(i).read() };
        GnomonVouchAnyKey {
            public_key: v.public_key,
            public_key_len: GNOMON_ED25519_KEY_LEN,
            low_us: v.low_us,
            high_us: v.high_us,
        }
    };
    let rule = Rule {
        listed,
        max_liars,
        quorum,
    };
    // SAFETY: the caller's promises, keys 32 bytes long.
    unsafe { consensus_with(count, array(answers), rule, verdicts, result, read) }
}

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

/// What `gnomon_now` learnt from `gnomon sync` (docs/NOW.md describes each
/// member of the answer these come from).
#[cfg(feature = "std")]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GnomonNowResult {
    /// `GNOMON_OK`, or why not; the same value the call returned.
    pub code: GnomonError,
    /// `GNOMON_NOW_NONE`, `GNOMON_NOW_FLOOR`, `GNOMON_NOW_INTERVAL` or
    /// `GNOMON_NOW_CONTRADICTION`.
    pub known: i32,
    /// The earliest the time can be now, µs since the Unix epoch (the
    /// floor for `GNOMON_NOW_FLOOR`; 0 for `GNOMON_NOW_NONE`).
    pub earliest_unix_us: i64,
    /// The latest it can be (`GNOMON_NOW_INTERVAL` only; else 0).
    pub latest_unix_us: i64,
    /// The round of `gnomon sync` that proved it, counted from 1 since sync
    /// started (`GNOMON_NOW_INTERVAL` only; else 0).
    pub round: u64,
    /// Seconds (boot clock) since that round ended.
    pub age_s: f64,
    /// How many servers agreed in that round.
    pub servers: u32,
    /// The wall clock as sync read it for this answer, Unix µs.
    pub wall_clock_unix_us: i64,
    /// 1 when that wall clock lies inside what is known, 0 when not, -1
    /// when nothing is known.
    pub wall_clock_inside: i32,
    /// The drift bound the interval is widened by, ppm.
    pub drift_ppm: u32,
    /// NUL-terminated: why the call failed, or "ok".
    pub message: [c_char; GNOMON_MESSAGE_LEN],
}

/// Ask the `gnomon sync` answering on the Unix socket `socket_path` (NULL:
/// `/run/gnomon/now.sock`) what time it is proven to be now, and fill
/// `*out`. Blocks at most 2 s. `GNOMON_OK` means sync answered: check
/// `known` for what it could prove. `GNOMON_ERR_REFUSED`: no socket or
/// nobody listening (or no permission: see `message`);
/// `GNOMON_ERR_TIMEOUT`: no answer in time; `GNOMON_ERR_MALFORMED`: an
/// answer not in the protocol, or an error answer ("busy"). `std` builds
/// only.
///
/// # Safety
/// `socket_path` is NULL or a NUL-terminated string; `out` points to a
/// writable, aligned `gnomon_now_result`.
#[cfg(feature = "std")]
#[no_mangle]
pub unsafe extern "C" fn gnomon_now(
    socket_path: *const c_char,
    out: *mut GnomonNowResult,
) -> GnomonError {
    if let Err(e) = writable(out) {
        return e;
    }
    let mut message = [0u8; MESSAGE_LEN];
    let mut answer = None;
    let code = guard(|| {
        let path = if socket_path.is_null() {
            crate::now::DEFAULT_SOCKET
        } else {
            // SAFETY: non-NULL and NUL-terminated by the caller's promise.
            let c = unsafe { core::ffi::CStr::from_ptr(socket_path) };
            match c.to_str() {
                Ok("") => return GnomonError::GnomonErrEmpty,
                Ok(p) if p.len() > 107 => return GnomonError::GnomonErrTooLong,
                Ok(p) => p,
                Err(_) => return GnomonError::GnomonErrArgument,
            }
        };
        match crate::now::ask(path, &mut message) {
            Ok(a) => {
                answer = Some(a);
                GnomonError::GnomonOk
            }
            Err(e) => e,
        }
    });
    message_or_text(&mut message, code);
    let a = answer.filter(|_| code == GnomonError::GnomonOk);
    let result = GnomonNowResult {
        code,
        known: a.map_or(GNOMON_NOW_NONE, |a| a.known),
        earliest_unix_us: a.map_or(0, |a| a.earliest_unix_us),
        latest_unix_us: a.map_or(0, |a| a.latest_unix_us),
        round: a.map_or(0, |a| a.round),
        age_s: a.map_or(0.0, |a| a.age_s),
        servers: a.map_or(0, |a| a.servers),
        wall_clock_unix_us: a.map_or(0, |a| a.wall_clock_unix_us),
        wall_clock_inside: a.map_or(-1, |a| a.wall_clock_inside),
        drift_ppm: a.map_or(0, |a| a.drift_ppm),
        message: c_message(&message),
    };
    // SAFETY: `out` checked by `writable` above.
    unsafe { out.write(result) };
    code
}
