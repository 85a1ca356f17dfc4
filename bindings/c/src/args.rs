//! Pointers and lengths in, slices and results out: the checks every
//! entry point makes of its arguments before it reads them, the writes
//! through the caller's pointers after, and `guard`, which keeps a panic
//! from unwinding into C. An entry point checks its pointers and lengths
//! here, turns them into slices, calls `logic` (or `quorum`, `query`)
//! inside `guard`, and writes its results through `ptr::write`, so no
//! Rust reference to caller memory outlives the call and none is made to
//! memory the caller did not initialise. With the entry points
//! (`any_key`, `ffi`, `now`, `proof`) the only modules with `unsafe`.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

use core::ffi::c_char;
use core::slice;

use gnomon_protocol::scheme::{PublicKey, Scheme};

use crate::error::GnomonError;
use crate::logic::{self, MAX_INPUT};
use crate::message::{text, write_message, MESSAGE_LEN};
use crate::types::GNOMON_MESSAGE_LEN;

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
        write_message(message, format_args!("{}", text(code)));
    }
}

/// A required input: not NULL, not empty, not longer than `MAX_INPUT`.
///
/// # Safety
/// If `ptr` is not NULL it must point to `len` readable bytes that stay
/// unchanged during the call.
pub(crate) unsafe fn input<'a>(ptr: *const u8, len: usize) -> Result<&'a [u8], GnomonError> {
    // SAFETY: the caller's promise, passed on.
    unsafe { input_at_most(ptr, len, MAX_INPUT) }
}

/// A required input: not NULL, not empty, not longer than `max` (which
/// callers keep far below `isize::MAX`: a few MB at most).
///
/// # Safety
/// If `ptr` is not NULL it must point to `len` readable bytes that stay
/// unchanged during the call.
pub(crate) unsafe fn input_at_most<'a>(
    ptr: *const u8,
    len: usize,
    max: usize,
) -> Result<&'a [u8], GnomonError> {
    if ptr.is_null() {
        Err(GnomonError::GnomonErrNull)
    } else if len == 0 {
        Err(GnomonError::GnomonErrEmpty)
    } else if len > max {
        Err(GnomonError::GnomonErrTooLong)
    } else {
        // SAFETY: non-NULL, and the caller promises `len` readable bytes;
        // len ≤ max keeps it far below isize::MAX.
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

/// Whether an array argument can be read: not NULL, aligned.
pub(crate) fn array<T>(ptr: *const T) -> Result<(), GnomonError> {
    if ptr.is_null() {
        Err(GnomonError::GnomonErrNull)
    } else if !ptr.is_aligned() {
        Err(GnomonError::GnomonErrArgument)
    } else {
        Ok(())
    }
}

/// A long-term public key: NULL is `GnomonErrNull`, a length of no
/// scheme's key `GnomonErrKey`, checked before the bytes are touched.
///
/// # Safety
/// If `ptr` is not NULL and `len` is 32 or 1312, `ptr` points to `len`
/// readable bytes that stay unchanged during the call.
pub(crate) unsafe fn key<'a>(ptr: *const u8, len: usize) -> Result<PublicKey<'a>, GnomonError> {
    if ptr.is_null() {
        return Err(GnomonError::GnomonErrNull);
    }
    if Scheme::by_public_len(len).is_none() {
        return Err(GnomonError::GnomonErrKey);
    }
    // SAFETY: non-NULL, and `len` (at most 1312) readable bytes by the
    // caller's promise; u8 has alignment 1.
    logic::public_key(unsafe { slice::from_raw_parts(ptr, len) })
}

/// An optional key: NULL is none, whatever the length.
///
/// # Safety
/// As `key`.
pub(crate) unsafe fn optional_key<'a>(
    ptr: *const u8,
    len: usize,
) -> Result<Option<PublicKey<'a>>, GnomonError> {
    if ptr.is_null() {
        Ok(None)
    } else {
        // SAFETY: the caller's promise, passed on.
        unsafe { key(ptr, len) }.map(Some)
    }
}
