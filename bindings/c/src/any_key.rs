//! The entry points that take a long-term public key of either scheme as
//! a pointer and a length: 32 bytes (Ed25519) or 1312 (ML-DSA-44, version
//! 0x90000001). The first C API took `const uint8_t key[32]`; those
//! functions stay, as wrappers in `ffi.rs` that pass a length of 32, so
//! programs built against the older header keep working unchanged, and
//! `ffi.rs` imports from here, never the reverse: what both use (argument
//! checks, structs, constants) is in `args.rs` and `types.rs`.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

use core::ffi::c_char;

use crate::args::{
    array, c_message, guard, input, key, message_or_text, optional_key, output, store_len, writable,
};
use crate::error::GnomonError;
use crate::logic::{self, Link};
use crate::message::MESSAGE_LEN;
use crate::quorum;
use crate::types::{
    GnomonChainResult, GnomonConsensusResult, GnomonExchangeAnyKey, GnomonResult, GnomonVerdict,
    GnomonVouchAnyKey, GNOMON_MAX_KEY_LEN, GNOMON_REQUEST_SIZE,
};

/// `gnomon_build_request` with a key of either length: with `public_key`
/// (may be NULL) of `public_key_len` bytes (32 or 1312), the request names
/// it in SRV (a hash of the whole key) where the version defines SRV, as
/// 0x90000001 does. A length of no scheme's key is `GNOMON_ERR_KEY`.
///
/// # Safety
/// Every non-NULL pointer points to as many bytes as its length says;
/// `written` to a writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn gnomon_build_request_any_key(
    version: u32,
    nonce: *const u8,
    nonce_len: usize,
    public_key: *const u8,
    public_key_len: usize,
    out: *mut u8,
    out_len: usize,
    written: *mut usize,
) -> GnomonError {
    if let Err(e) = writable(written) {
        return e;
    }
    guard(|| {
        // SAFETY: the caller's promises above, checked for NULL inside.
        let args = unsafe {
            (|| {
                let nonce = input(nonce, nonce_len)?;
                let key = optional_key(public_key, public_key_len)?;
                let out = output(out, out_len, GNOMON_REQUEST_SIZE)?;
                Ok((nonce, key, out))
            })()
        };
        let (nonce, key, out) = match args {
            Ok(a) => a,
            Err(e) => return e,
        };
        // SAFETY: `written` checked by `writable` above.
        unsafe { store_len(logic::build(version, nonce, key, out), written) }
    })
}

/// `gnomon_build_request_any_key` with a nonce from the operating system's
/// random source (`std` builds only).
///
/// # Safety
/// As `gnomon_build_request_any_key`.
#[cfg(feature = "std")]
#[no_mangle]
pub unsafe extern "C" fn gnomon_build_request_random_any_key(
    version: u32,
    public_key: *const u8,
    public_key_len: usize,
    out: *mut u8,
    out_len: usize,
    written: *mut usize,
) -> GnomonError {
    if let Err(e) = writable(written) {
        return e;
    }
    guard(|| {
        // SAFETY: the caller's promises, checked for NULL inside.
        let args = unsafe {
            (|| {
                let key = optional_key(public_key, public_key_len)?;
                Ok::<_, GnomonError>((key, output(out, out_len, GNOMON_REQUEST_SIZE)?))
            })()
        };
        let (key, out) = match args {
            Ok(a) => a,
            Err(e) => return e,
        };
        // SAFETY: `written` checked by `writable` above.
        unsafe { store_len(crate::query::build_os_random(version, key, out), written) }
    })
}

/// `gnomon_verify` against a long-term `public_key` of either scheme:
/// `public_key_len` 32 (Ed25519) or 1312 (ML-DSA-44); the key's length
/// decides the scheme, and an answer signed with the other scheme fails
/// (`GNOMON_ERR_DELEGATION_SIGNATURE`). Another length is
/// `GNOMON_ERR_KEY`. An ML-DSA-44 response is about 6.4 KB.
///
/// # Safety
/// Every non-NULL pointer points to as many bytes as its length says;
/// `result` to a writable, aligned `gnomon_result`.
#[no_mangle]
pub unsafe extern "C" fn gnomon_verify_any_key(
    request: *const u8,
    request_len: usize,
    response: *const u8,
    response_len: usize,
    public_key: *const u8,
    public_key_len: usize,
    result: *mut GnomonResult,
) -> GnomonError {
    if let Err(e) = writable(result) {
        return e;
    }
    let mut out = Outcome::default();
    let code = guard(|| {
        // SAFETY: the caller's promises, checked for NULL inside.
        let args = unsafe {
            (|| {
                Ok::<_, GnomonError>((
                    input(request, request_len)?,
                    input(response, response_len)?,
                    key(public_key, public_key_len)?,
                ))
            })()
        };
        let (request, response, key) = match args {
            Ok(a) => a,
            Err(e) => return e,
        };
        match logic::verify(request, response, key, &mut out.message) {
            Ok(v) => {
                out.verified(&v);
                GnomonError::GnomonOk
            }
            Err(e) => e,
        }
    });
    // SAFETY: `result` checked by `writable` above.
    unsafe { result.write(out.finish(code)) };
    code
}

/// `gnomon_query` with a key of either scheme (`public_key_len` 32 or
/// 1312). An ML-DSA-44 key is asked in 0x90000001, over TCP (the
/// version's only transport); `GNOMON_VERSION_AUTO` offers the versions
/// of the key's scheme. `std` builds only.
///
/// # Safety
/// `address` is NULL or a NUL-terminated string; `public_key` NULL or
/// `public_key_len` readable bytes; `result` to a writable, aligned
/// `gnomon_result`.
#[cfg(feature = "std")]
#[no_mangle]
pub unsafe extern "C" fn gnomon_query_any_key(
    address: *const c_char,
    public_key: *const u8,
    public_key_len: usize,
    version: u32,
    timeout_ms: u32,
    result: *mut GnomonResult,
) -> GnomonError {
    if let Err(e) = writable(result) {
        return e;
    }
    let mut out = Outcome::default();
    let code = guard(|| {
        if address.is_null() {
            return GnomonError::GnomonErrNull;
        }
        // SAFETY: non-NULL and NUL-terminated by the caller's promise.
        let address = unsafe { core::ffi::CStr::from_ptr(address) };
        // SAFETY: the caller's promise, checked for NULL inside.
        let key = match unsafe { key(public_key, public_key_len) } {
            Ok(k) => k,
            Err(e) => return e,
        };
        let Ok(address) = address.to_str() else {
            return GnomonError::GnomonErrArgument;
        };
        if address.is_empty() {
            return GnomonError::GnomonErrEmpty;
        }
        if address.len() > 1024 {
            return GnomonError::GnomonErrTooLong;
        }
        let entropy = crate::query::os_entropy();
        match crate::query::query(address, key, version, timeout_ms, entropy, &mut out.message) {
            Ok(v) => {
                out.verified(&v);
                GnomonError::GnomonOk
            }
            Err(e) => e,
        }
    });
    // SAFETY: `result` checked by `writable` above.
    unsafe { result.write(out.finish(code)) };
    code
}

/// `gnomon_parse_public_key` for keys of either scheme: decode the base64
/// or hex in the NUL-terminated `text` (an ML-DSA-44 key is 1752
/// characters of base64, 2624 hex digits; at most 4096 characters are
/// taken) into `out`, which holds `out_len` bytes (`GNOMON_MAX_KEY_LEN`
/// is always enough), and store the key's length (32 or 1312) in
/// `*written`: pass both on as `public_key` and `public_key_len`.
///
/// # Safety
/// `text` is NULL or NUL-terminated; `out` NULL or `out_len` writable
/// bytes; `written` NULL or a writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn gnomon_parse_public_key_any(
    text: *const c_char,
    out: *mut u8,
    out_len: usize,
    written: *mut usize,
) -> GnomonError {
    if text.is_null() {
        return GnomonError::GnomonErrNull;
    }
    if let Err(e) = writable(written) {
        return e;
    }
    guard(|| {
        // SAFETY: non-NULL and NUL-terminated by the caller's promise.
        let text = unsafe { core::ffi::CStr::from_ptr(text) }.to_bytes();
        if text.is_empty() {
            return GnomonError::GnomonErrEmpty;
        }
        if text.len() > logic::MAX_KEY_TEXT {
            return GnomonError::GnomonErrTooLong;
        }
        let mut key = [0u8; GNOMON_MAX_KEY_LEN];
        let n = match logic::parse_key_any(text, &mut key) {
            Ok(n) => n,
            Err(e) => return e,
        };
        // SAFETY: the caller's promise of `out_len` writable bytes,
        // checked for NULL inside.
        let out = match unsafe { output(out, out_len, n) } {
            Ok(o) => o,
            Err(e) => return e,
        };
        out.copy_from_slice(&key[..n]);
        // SAFETY: `written` checked by `writable` above.
        unsafe { store_len(Ok(n), written) }
    })
}

/// `gnomon_check_chain` over exchanges whose keys may be of either scheme
/// (each with its own `public_key_len`): a chain may mix Ed25519 and
/// ML-DSA-44 servers.
///
/// # Safety
/// `exchanges` is NULL or points to `count` aligned
/// `gnomon_exchange_any_key` values whose pointers each satisfy
/// `gnomon_verify_any_key`'s rules; `result` to a writable, aligned
/// `gnomon_chain_result`.
#[no_mangle]
pub unsafe extern "C" fn gnomon_check_chain_any_key(
    exchanges: *const GnomonExchangeAnyKey,
    count: usize,
    result: *mut GnomonChainResult,
) -> GnomonError {
    let read = |i: usize| {
        // SAFETY: i < count (check_chain never asks past it, and refuses
        // count > GNOMON_MAX_CHAIN first); non-NULL and aligned (checked
        // by `array` before any read), and `count` readable values by the
        // caller's promise.
        unsafe { exchanges.add(i).read() }
    };
    // SAFETY: the caller's promises for each exchange's pointers.
    unsafe { check_chain_with(count, array(exchanges), result, read) }
}

/// The chain check over the exchanges `read(i)` gives, unless `array`
/// says the array is unusable; fills `*result`.
///
/// # Safety
/// `read` is called only after `array` was Ok, for i < count; the pointers
/// in every exchange it gives satisfy `gnomon_verify_any_key`'s rules.
pub(crate) unsafe fn check_chain_with(
    count: usize,
    array: Result<(), GnomonError>,
    result: *mut GnomonChainResult,
    read: impl Fn(usize) -> GnomonExchangeAnyKey,
) -> GnomonError {
    if let Err(e) = writable(result) {
        return e;
    }
    let mut message = [0u8; MESSAGE_LEN];
    let mut at = (0, 0);
    let code = guard(|| {
        if let Err(e) = array {
            return e;
        }
        let link = |i: usize| {
            let e = read(i);
            // SAFETY: the caller's promises for each exchange's pointers,
            // checked for NULL inside.
            unsafe {
                Ok(Link {
                    request: input(e.request, e.request_len)?,
                    response: input(e.response, e.response_len)?,
                    rand: if i == 0 {
                        &[]
                    } else {
                        input(e.rand, e.rand_len)?
                    },
                    key: key(e.public_key, e.public_key_len)?,
                })
            }
        };
        match logic::check_chain(count, link, &mut message) {
            Ok(()) => GnomonError::GnomonOk,
            Err(f) => {
                at = (f.index, f.other);
                f.code
            }
        }
    });
    if code == GnomonError::GnomonErrInternal {
        message = [0; MESSAGE_LEN];
        at = (0, 0);
    }
    message_or_text(&mut message, code);
    let r = GnomonChainResult {
        code,
        index: at.0,
        other: at.1,
        message: c_message(&message),
    };
    // SAFETY: `result` checked by `writable` above.
    unsafe { result.write(r) };
    code
}

/// `gnomon_consensus` over answers whose keys may be of either scheme
/// (each with its own `public_key_len`). Keys of different lengths are
/// always different keys: a machine with an Ed25519 and an ML-DSA-44
/// identity is two voters unless you merge them (docs/C.md, "Whom to
/// believe").
///
/// # Safety
/// `answers` is NULL or points to `count` aligned `gnomon_vouch_any_key`
/// values, each with a `public_key` that is NULL or points to
/// `public_key_len` readable bytes; `verdicts` is NULL or points to
/// `count` writable, aligned `gnomon_verdict` values; `result` to a
/// writable, aligned `gnomon_consensus_result`. None of them changes
/// during the call.
#[no_mangle]
pub unsafe extern "C" fn gnomon_consensus_any_key(
    answers: *const GnomonVouchAnyKey,
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
        unsafe { answers.add(i).read() }
    };
    let rule = Rule {
        listed,
        max_liars,
        quorum,
    };
    // SAFETY: the caller's promises, passed on.
    unsafe { consensus_with(count, array(answers), rule, verdicts, result, read) }
}

/// The numbers a consensus is asked for: the assumption and the quorum.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rule {
    /// Distinct servers of the caller's list.
    pub listed: usize,
    /// How many may lie (`GNOMON_MAX_LIARS_AUTO`: the default).
    pub max_liars: usize,
    /// Distinct keys that must agree.
    pub quorum: usize,
}

/// The quorum rule over the answers `read(i)` gives, unless `array`
/// says the array is unusable; fills `*result` and the verdicts.
///
/// # Safety
/// `read` is called only after `array` was Ok, for i < count, and gives
/// answers whose keys satisfy `key`'s rules; `verdicts` and `result` as
/// `gnomon_consensus_any_key` says.
pub(crate) unsafe fn consensus_with(
    count: usize,
    array: Result<(), GnomonError>,
    rule: Rule,
    verdicts: *mut GnomonVerdict,
    result: *mut GnomonConsensusResult,
    read: impl Fn(usize) -> GnomonVouchAnyKey,
) -> GnomonError {
    if let Err(e) = writable(result) {
        return e;
    }
    let mut message = [0u8; MESSAGE_LEN];
    let mut tally = None;
    let code = guard(|| {
        if let Err(e) = array {
            return e;
        }
        if !verdicts.is_null() && !verdicts.is_aligned() {
            return GnomonError::GnomonErrArgument;
        }
        let answer = |i: usize| {
            let v = read(i);
            Ok(quorum::Answer {
                // SAFETY: NULL or public_key_len readable bytes by the
                // caller's promise, checked for NULL and length inside.
                key: unsafe { key(v.public_key, v.public_key_len) }?.bytes(),
                low_us: v.low_us,
                high_us: v.high_us,
            })
        };
        let verdict = |i: usize, v: quorum::Verdict| {
            if !verdicts.is_null() {
                // SAFETY: i < count; non-NULL, aligned (checked above) and
                // `count` writable values by the caller's promise.
                unsafe { verdicts.add(i).write(v.into()) };
            }
        };
        match quorum::consensus(
            count,
            answer,
            rule.listed,
            rule.max_liars,
            rule.quorum,
            verdict,
            &mut message,
        ) {
            Ok(t) => {
                tally = Some(t);
                GnomonError::GnomonOk
            }
            Err(e) => e,
        }
    });
    if code != GnomonError::GnomonOk {
        tally = None;
    }
    if code == GnomonError::GnomonErrInternal {
        message = [0; MESSAGE_LEN];
    }
    message_or_text(&mut message, code);
    let hull = tally.and_then(|t| t.hull);
    // A hull lies between two of the given int64 offsets, and so do its
    // middle and half its width.
    let narrow = |x: i128| x as i64;
    let assumption = tally.map(|t| t.assumption);
    let t = tally.unwrap_or(quorum::Tally {
        assumption: gnomon_protocol::quorum::Assumption::new(0, 0),
        hull: None,
        none: None,
        voting_keys: 0,
        agreeing_keys: 0,
        outside_keys: 0,
        contradicting_keys: 0,
        regions: 0,
        quorum_met: false,
    });
    let r = GnomonConsensusResult {
        code,
        has_consensus: hull.is_some(),
        quorum_met: t.quorum_met,
        low_us: hull.map_or(0, |h| narrow(h.low)),
        high_us: hull.map_or(0, |h| narrow(h.high)),
        midpoint_us: hull.map_or(0, |h| narrow(h.midpoint())),
        radius_us: hull.map_or(0, |h| narrow(h.radius())),
        voting_keys: t.voting_keys,
        agreeing_keys: t.agreeing_keys,
        outside_keys: t.outside_keys,
        contradicting_keys: t.contradicting_keys,
        regions: t.regions,
        listed: assumption.map_or(0, |a| a.voters),
        max_liars: assumption.map_or(0, |a| a.liars),
        needed: assumption.map_or(0, |a| a.needed()),
        message: c_message(&message),
    };
    // SAFETY: `result` checked by `writable` above.
    unsafe { result.write(r) };
    code
}

/// A result being filled.
pub(crate) struct Outcome {
    version: u32,
    midpoint_us: u64,
    radius_us: u64,
    message: [u8; MESSAGE_LEN],
}

impl Default for Outcome {
    fn default() -> Self {
        Outcome {
            version: 0,
            midpoint_us: 0,
            radius_us: 0,
            message: [0; MESSAGE_LEN],
        }
    }
}

impl Outcome {
    fn verified(&mut self, v: &gnomon_protocol::Verified) {
        self.version = v.profile.version.0;
        self.midpoint_us = v.midpoint_us;
        self.radius_us = v.radius_us;
    }

    fn finish(mut self, code: GnomonError) -> GnomonResult {
        if code != GnomonError::GnomonOk {
            // Nothing half-filled: a failure carries no time.
            let message = if code == GnomonError::GnomonErrInternal {
                [0; MESSAGE_LEN]
            } else {
                self.message
            };
            self = Outcome {
                message,
                ..Outcome::default()
            };
        } else {
            self.message = [0; MESSAGE_LEN];
        }
        message_or_text(&mut self.message, code);
        GnomonResult {
            code,
            version: self.version,
            midpoint_us: self.midpoint_us,
            radius_us: self.radius_us,
            message: c_message(&self.message),
        }
    }
}
