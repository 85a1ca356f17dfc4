//! The entry points of the first C API, whose keys are 32 bytes
//! (`const uint8_t key[32]`), and those no key concerns
//! (`gnomon_error_string`, `gnomon_nonce_length`, `gnomon_chain_nonce`).
//! The keyed ones are wrappers that pass a length of 32 to their
//! `_any_key` twins in `any_key.rs`, reading this API's own structs
//! (`gnomon_exchange`, `gnomon_vouch`) into the any-key ones, so programs
//! built against the older header keep working unchanged. Arguments are
//! checked by `args.rs`; the shared structs and every constant are in
//! `types.rs`.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

use core::ffi::c_char;

use crate::any_key::{
    check_chain_with, consensus_with, gnomon_build_request_any_key, gnomon_verify_any_key, Rule,
};
#[cfg(feature = "std")]
use crate::any_key::{gnomon_build_request_random_any_key, gnomon_query_any_key};
use crate::args::{array, guard, input, output, store_len, writable};
use crate::error::GnomonError;
use crate::logic;
use crate::types::{
    GnomonChainResult, GnomonConsensusResult, GnomonExchangeAnyKey, GnomonResult, GnomonVerdict,
    GnomonVouchAnyKey, GNOMON_ED25519_KEY_LEN,
};

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
