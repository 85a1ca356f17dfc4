//! # libgnomon
//!
//! gnomon's Roughtime client as a C library: `libgnomon.a`, `libgnomon.so`
//! and `include/gnomon.h` (generated from this crate by cbindgen). Build a
//! request for any version, verify a response against it and a server's
//! key, check a measurement chain, decide whom to believe (the quorum
//! rule of `gnomon sync`: at most f of the n listed servers lie, and
//! 2f + 1 must answer), and (with `std`) ask a server in one blocking
//! call. docs/C.md is the guide.
//!
//! ```text
//!  C caller ──▶ the entry points (with args.rs, and NoHeap below, the only unsafe):
//!    │            any_key.rs  keys of either scheme: build, verify, query,
//!    │                        parse a key; any_key/: chain, consensus
//!    │            ffi.rs      the first API (32-byte keys): wrappers over any_key
//!    │            now.rs      gnomon_now: gnomon sync's now socket (std)
//!    │            proof.rs    a relayed proof, as the device checks it (the
//!    │                        caller's workspace)
//!    │            signed_list.rs  a monitor's signed server list, one key
//!    │                        (the caller's now and last sequence)
//!    │              ├─▶ args.rs   pointers → slices, results out, catch_unwind
//!    │              └─▶ types.rs  the shared C structs and every constant
//!    ▼
//!  the slices (no_std, no allocation, no unsafe):
//!    logic.rs    build, verify, keys, chain      quorum.rs  the quorum rule
//!    message.rs  the sentence of every result    error.rs   the codes
//!    query.rs    blocking query, OS randomness (std) ─▶ gnomon-client
//!                                                  ─▶ gnomon-protocol
//! ```
//!
//! Without the default `std` feature the crate is `#![no_std]` for
//! firmware: build, verify, the chain check, the consensus and signed
//! server lists, no allocation (its global allocator refuses every
//! request, see [`NoHeap`]).
#![no_std]
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

// cbindgen writes gnomon.h module by module in the order of these
// declarations (a module's own items before its submodules'), constants
// in one run and functions in another: the order of the groups below is
// the header's, and the header test fails on any other. Blank lines keep
// rustfmt from sorting them. Modules with nothing in the header (error's
// enum is placed by name) may sit in any group.
//
// types: every constant up to GNOMON_NOW_CONTRADICTION.
pub mod args;
pub mod error;
pub mod message;
pub mod types;

// The functions: any_key's, then ffi's; logic's MAX_KEY_TEXT after the
// constants above.
pub mod any_key;
pub mod ffi;
pub mod logic;

// After logic's constants: quorum's MAX_LIARS_AUTO, which C cannot spell,
// leaves its two empty lines there.
pub mod quorum;

// gnomon_now after ffi's functions; proof's constants and functions last.
#[cfg(feature = "std")]
pub mod now;
pub mod proof;
#[cfg(feature = "std")]
pub mod query;
pub mod signed_list;

pub use any_key::*;
pub use args::guard;
pub use error::GnomonError;
pub use ffi::*;
#[cfg(feature = "std")]
pub use now::{gnomon_now, GnomonNowResult};
pub use proof::*;
pub use signed_list::*;
pub use types::*;

/// Without `std` a panic has nowhere to unwind to; the code paths are
/// written not to panic (lengths are checked before slicing). Should one
/// happen anyway, the call never returns, which a firmware watchdog sees.
#[cfg(all(not(feature = "std"), not(test)))]
#[panic_handler]
fn panic(_: &::core::panic::PanicInfo<'_>) -> ! {
    loop {
        ::core::hint::spin_loop();
    }
}

/// The allocator of the `no_std` build: the protocol crate links `alloc`
/// for its reports and lists, which libgnomon never uses, so a firmware
/// needs no heap. Every allocation fails (and would reach the panic
/// handler): nothing in build, verify, the chain check or the consensus
/// allocates.
#[cfg(not(feature = "std"))]
pub struct NoHeap;

#[cfg(not(feature = "std"))]
#[allow(unsafe_code)]
// SAFETY: returning NULL is a valid answer to every request (allocation
// failure), and dealloc is never called with memory this allocator gave.
unsafe impl ::core::alloc::GlobalAlloc for NoHeap {
    unsafe fn alloc(&self, _layout: ::core::alloc::Layout) -> *mut u8 {
        ::core::ptr::null_mut()
    }
    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: ::core::alloc::Layout) {}
}

#[cfg(all(not(feature = "std"), not(test)))]
#[global_allocator]
static ALLOCATOR: NoHeap = NoHeap;
