//! The chain check from C: `gnomon_check_chain_any_key`, and the body it
//! shares with the first API's `gnomon_check_chain` (which reads its
//! 32-byte exchanges into any-key ones). `logic::check_chain` does the
//! checking; this turns each exchange's pointers into slices as the check
//! asks for it, and fills `gnomon_chain_result`.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

use crate::args::{array, c_message, guard, input, key, message_or_text, writable};
use crate::error::GnomonError;
use crate::logic::{self, Link};
use crate::message::MESSAGE_LEN;
use crate::types::{GnomonChainResult, GnomonExchangeAnyKey};

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
