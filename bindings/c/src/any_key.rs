//! The entry points that take a long-term public key of either scheme as
//! a pointer and a length: 32 bytes (Ed25519) or 1312 (ML-DSA-44, version
//! 0x90000001). Here one exchange: build a request, verify its answer, ask
//! a server, read a key from text; `chain.rs` checks a measurement
//! sequence and `consensus.rs` decides whom to believe, in that order in
//! the header.
//!
//! The first C API took `const uint8_t key[32]`; those functions stay, as
//! wrappers in `ffi.rs` that pass a length of 32, so programs built
//! against the older header keep working unchanged. `ffi.rs` imports from
//! here, never the reverse: what both use (argument checks, structs,
//! constants) is in `args.rs` and `types.rs`.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

use core::ffi::c_char;

use crate::args::{
    c_message, guard, input, key, message_or_text, optional_key, output, store_len, writable,
};
use crate::error::GnomonError;
use crate::logic;
use crate::message::MESSAGE_LEN;
use crate::types::{GnomonResult, GNOMON_MAX_KEY_LEN, GNOMON_REQUEST_SIZE};

mod chain;
mod consensus;

pub(crate) use chain::check_chain_with;
pub use chain::gnomon_check_chain_any_key;
pub use consensus::gnomon_consensus_any_key;
pub(crate) use consensus::{consensus_with, Rule};

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
