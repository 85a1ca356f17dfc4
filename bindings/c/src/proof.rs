//! Relayed proofs from C (docs/PROOF.md, docs/C.md "Relayed proofs"): the
//! device's offline verifier, `gnomon_protocol::proof::verify_proof`, in a
//! workspace the caller provides. No allocation and no clock: it builds
//! and runs in the `no_std` library.
//!
//! ```text
//!  bundle, D, pinned keys (server ids), elapsed ─▶ gnomon_verify_proof(_any_key)
//!      keys ─▶ one voter per server (a fixed array on the stack)
//!      ws (caller's bytes) ─▶ aligned ProofWorkspace inside them (ptr::write)
//!                            └─▶ verify_proof_grouped ─▶ gnomon_proven + one code per failure
//!                                                          (proof/proven.rs)
//! ```
//!
//! The assumption is about the pinned servers, never about the answers
//! in the bundle (the relay picks those): at most `max_liars` of the
//! pinned lie, fewer than half by default, and the bundle must carry
//! `2 × max_liars + 1` of them.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

use core::mem::{align_of, size_of};

use gnomon_protocol::proof::{
    check_device_value, verify_proof_grouped, ProofPolicy, ProofWorkspace,
};
use gnomon_protocol::scheme::PublicKey;

use crate::args::{array, guard, input, input_at_most, key, writable};
use crate::error::GnomonError;
use crate::types::{GNOMON_ED25519_KEY_LEN, GNOMON_MAX_LIARS_AUTO, GNOMON_ML_DSA_44_KEY_LEN};

mod proven;

pub use proven::{of_proof, proven, GnomonProven, GNOMON_NO_ENTRY};

/// Bytes of `gnomon_proof_workspace`. One figure for every target, so
/// that one header serves them all: the Rust workspace (about 2.5 KB on
/// a 64-bit target, less on a 32-bit one) plus room to align it, checked
/// at compile time for the target libgnomon is built for.
pub const GNOMON_PROOF_WORKSPACE_SIZE: usize = 3072;
/// Most pinned keys `gnomon_verify_proof` takes (it keeps them on the
/// stack).
pub const GNOMON_MAX_PROOF_KEYS: usize = 32;
/// Most entries a bundle carries (format version 1).
pub const GNOMON_MAX_PROOF_ENTRIES: usize = 16;
/// Longest device value D.
pub const GNOMON_MAX_DEVICE_VALUE: usize = 64;
/// Shortest device value D: 16 bytes, at least 128 bits of them the relay
/// cannot predict (fresh random bytes; a counter or a clock reading lets a
/// relay prepare bundles in advance).
pub const GNOMON_MIN_DEVICE_VALUE: usize = 16;

// The workspace is placed at the first suitably aligned byte of the
// caller's struct, a plain byte array (so its C declaration needs no
// alignment attribute, and any placement the caller picks is right): the
// worst case skips align − 1 bytes. Checked for the target each build is
// for, so the one figure in the header is sound for all of them.
const _: () = {
    assert!(
        size_of::<ProofWorkspace>() + align_of::<ProofWorkspace>() - 1
            <= GNOMON_PROOF_WORKSPACE_SIZE
    );
    assert!(GNOMON_MAX_PROOF_ENTRIES == gnomon_protocol::proof::MAX_PROOF_ENTRIES);
    assert!(GNOMON_MAX_DEVICE_VALUE == gnomon_protocol::proof::MAX_DEVICE_VALUE);
    assert!(GNOMON_MIN_DEVICE_VALUE == gnomon_protocol::proof::MIN_DEVICE_NONCE);
};

/// The memory `gnomon_verify_proof` works in: declare one (static, or on
/// the stack: `GNOMON_PROOF_WORKSPACE_SIZE` bytes) and pass it to every
/// call. Its contents need no initialising and mean nothing between
/// calls; one workspace serves one call at a time. Any alignment will
/// do: libgnomon places its state at the first suitably aligned byte.
#[repr(C)]
pub struct GnomonProofWorkspace {
    /// Opaque.
    pub opaque: [u8; GNOMON_PROOF_WORKSPACE_SIZE],
}

/// What the device accepts (`gnomon_verify_proof`'s `policy`; NULL takes
/// the defaults: quorum 1, max_liars `GNOMON_MAX_LIARS_AUTO`,
/// max_radius_us 10 000 000).
///
/// The assumption is about the pinned servers: at most `max_liars` of
/// them lie. The relay chooses which answers the bundle carries (and may
/// work with the liars), so a bundle proves an interval only when it
/// carries `2 × max_liars + 1` distinct pinned servers, and the interval
/// is the hull of the times held by all of them but `max_liars`. With the
/// default and n pinned servers that is every one (n odd) or all but one
/// (n even). A zeroed policy assumes no liar at all: set `max_liars`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GnomonProofPolicy {
    /// Distinct pinned servers whose intervals must meet the proven
    /// interval (at least 1; beyond what the rule already needs).
    pub quorum: usize,
    /// How many of the pinned servers may lie; `GNOMON_MAX_LIARS_AUTO`:
    /// fewer than half of them, ⌊(pinned − 1)/2⌋ (docs/PROOF.md, "The
    /// assumption"). 0 trusts every pinned server.
    pub max_liars: usize,
    /// Widest proven interval accepted, as half its width in µs; 0: no
    /// limit.
    pub max_radius_us: u64,
}

/// One pinned key of either scheme (`gnomon_verify_proof_any_key`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GnomonPinnedKey {
    /// The long-term public key: 32 (Ed25519) or 1312 (ML-DSA-44) bytes.
    pub public_key: *const u8,
    /// Its length.
    pub public_key_len: usize,
    /// Which server the key is: pinned keys with the same non-zero
    /// `server` are one voter (one machine's Ed25519 and ML-DSA-44
    /// identities, or one operator's servers), so one liar never counts
    /// twice. 0: a server of its own. The same key pinned twice is one
    /// voter whatever its `server`.
    pub server: u32,
}

/// Longest bundle of format version 1: D of 64 bytes and 16 entries, each
/// an ML-DSA-44 key, a 64-byte rand, a whole 1024-byte request and a
/// 65535-byte response. Longer ones are `GNOMON_ERR_TOO_LONG`.
pub const GNOMON_MAX_PROOF_BUNDLE: usize = 1_087_175;

const _: () = {
    use gnomon_protocol::proof::{MAX_DEVICE_VALUE, MAX_PROOF_ENTRIES, MAX_PROOF_REQUEST};
    let entry = 2 + GNOMON_ML_DSA_44_KEY_LEN + 1 + 64 + 2 + 2 + MAX_PROOF_REQUEST + 2 + 65535;
    assert!(GNOMON_MAX_PROOF_BUNDLE == 7 + MAX_DEVICE_VALUE + MAX_PROOF_ENTRIES * entry);
};

/// A bundle: not NULL, not empty, at most `GNOMON_MAX_PROOF_BUNDLE` bytes
/// (an ML-DSA-44 bundle passes `GNOMON_MAX_INPUT`).
///
/// # Safety
/// If `ptr` is not NULL it must point to `len` readable bytes that stay
/// unchanged during the call.
unsafe fn bundle_input<'a>(ptr: *const u8, len: usize) -> Result<&'a [u8], GnomonError> {
    // SAFETY: the caller's promise, passed on; about 1 MB at most.
    unsafe { input_at_most(ptr, len, GNOMON_MAX_PROOF_BUNDLE) }
}

/// The policy `policy` points to, or the default.
fn policy_of(p: Option<GnomonProofPolicy>) -> Result<ProofPolicy, GnomonError> {
    let Some(p) = p else {
        return Ok(ProofPolicy::default());
    };
    if p.quorum == 0 {
        return Err(GnomonError::GnomonErrArgument);
    }
    Ok(ProofPolicy {
        max_liars: (p.max_liars != GNOMON_MAX_LIARS_AUTO).then_some(p.max_liars),
        quorum: p.quorum,
        max_radius_us: (p.max_radius_us != 0).then_some(p.max_radius_us),
    })
}

/// The voter of each of the `n` pinned keys, and how many voters: keys
/// with one non-zero `server` are one, and so are equal keys (closed
/// transitively). Voters are numbered by their first key, so every number
/// is below `n`. No allocation: a union-find over the fixed array.
fn voters(
    keys: &[PublicKey<'_>],
    server: &[u32],
    voter_of: &mut [usize; GNOMON_MAX_PROOF_KEYS],
) -> usize {
    let n = keys.len().min(server.len()).min(GNOMON_MAX_PROOF_KEYS);
    for (i, v) in voter_of.iter_mut().enumerate() {
        *v = i;
    }
    fn root(parent: &mut [usize; GNOMON_MAX_PROOF_KEYS], mut i: usize) -> usize {
        while parent[i] != i {
            i = parent[i];
        }
        i
    }
    for j in 0..n {
        for i in 0..j {
            let one_server = server[i] != 0 && server[i] == server[j];
            if one_server || keys[i].bytes() == keys[j].bytes() {
                let (a, b) = (root(voter_of, i), root(voter_of, j));
                let (low, high) = (a.min(b), a.max(b));
                voter_of[high] = low;
            }
        }
    }
    let mut count = 0;
    for i in 0..n {
        let r = root(voter_of, i);
        voter_of[i] = r;
        count += usize::from(r == i);
    }
    count
}

/// Verify a relayed proof as the device: `bundle` (the binary form,
/// docs/PROOF.md) made for the device's value `device` (D, 16 to 64
/// bytes: `GNOMON_MIN_DEVICE_VALUE` to `GNOMON_MAX_DEVICE_VALUE`, at
/// least 128 bits of them unpredictable to the relay), against the
/// `n_keys` pinned Ed25519 keys at `keys` (32 bytes each, back to back;
/// each distinct key one server), `elapsed_us` after the device made D
/// (an upper bound from its own monotonic clock, its worst drift added).
/// Fills `*out`; returns `GNOMON_OK` with the proven interval, or the
/// failure's code (one per kind, `GNOMON_ERR_PROOF_*`; docs/C.md lists
/// them). `GNOMON_ERR_PROOF_TOO_FEW_KEYS`: the bundle carries fewer than
/// 2 × max_liars + 1 of the pinned servers, and what it carries may be
/// the liars. Allocates nothing, reads no clock (also in the `no_std`
/// build); works in `*ws`. Keys of either scheme, and keys grouped by
/// server: `gnomon_verify_proof_any_key`.
///
/// `elapsed_us` is required, and no value means "unknown": pass an upper
/// bound from the device's own monotonic clock since it made D, its worst
/// drift added. A bundle the relay held widens the interval only through
/// it, so a value too small (0 among them) gives an interval that may
/// end before the device's present.
///
/// `policy` NULL: quorum 1, max_liars `GNOMON_MAX_LIARS_AUTO` (fewer than
/// half of the pinned servers lie), max_radius_us 10 s.
/// `GNOMON_ERR_ARGUMENT` for a device value shorter than
/// `GNOMON_MIN_DEVICE_VALUE` or longer than `GNOMON_MAX_DEVICE_VALUE`
/// bytes (an empty one is `GNOMON_ERR_EMPTY`), checked before the bundle
/// is read, or a policy with a quorum of 0;
/// `GNOMON_ERR_TOO_LONG` for more than `GNOMON_MAX_PROOF_KEYS` keys or a
/// bundle over `GNOMON_MAX_PROOF_BUNDLE` bytes.
///
/// # Safety
/// `bundle` points to `bundle_len` readable bytes, `device` to
/// `device_len`, `keys` to `32 * n_keys`; `policy` is NULL or points to
/// a `gnomon_proof_policy`; `ws` to a writable, aligned
/// `gnomon_proof_workspace` nothing else uses during the call; `out` to a
/// writable, aligned `gnomon_proven`. None of them changes during the
/// call.
#[no_mangle]
pub unsafe extern "C" fn gnomon_verify_proof(
    bundle: *const u8,
    bundle_len: usize,
    device: *const u8,
    device_len: usize,
    keys: *const u8,
    n_keys: usize,
    elapsed_us: u64,
    policy: *const GnomonProofPolicy,
    ws: *mut GnomonProofWorkspace,
    out: *mut GnomonProven,
) -> GnomonError {
    let read = |i: usize| GnomonPinnedKey {
        // SAFETY: i < n_keys ≤ GNOMON_MAX_PROOF_KEYS (checked before any
        // key is read); `keys` is non-NULL (checked first) and holds
        // 32 * n_keys bytes by the caller's promise.
        public_key: unsafe { keys.add(i * GNOMON_ED25519_KEY_LEN) },
        public_key_len: GNOMON_ED25519_KEY_LEN,
        // One voter per distinct key.
        server: 0,
    };
    let keys_ok = if keys.is_null() {
        Err(GnomonError::GnomonErrNull)
    } else {
        Ok(())
    };
    // SAFETY: the caller's promises, passed on.
    unsafe {
        verify_with(
            bundle, bundle_len, device, device_len, keys_ok, n_keys, read, elapsed_us, policy, ws,
            out,
        )
    }
}

/// `gnomon_verify_proof` with pinned keys of either scheme: `keys` points
/// to `n_keys` `gnomon_pinned_key` values, each with its own length and
/// the server it belongs to: keys with one non-zero `server` are one
/// voter (a machine's two identities count once), 0 a voter of its own.
/// `max_liars` and the default are of these voters.
///
/// # Safety
/// As `gnomon_verify_proof`, with `keys` pointing to `n_keys` aligned
/// `gnomon_pinned_key` values whose `public_key` is NULL or points to
/// `public_key_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn gnomon_verify_proof_any_key(
    bundle: *const u8,
    bundle_len: usize,
    device: *const u8,
    device_len: usize,
    keys: *const GnomonPinnedKey,
    n_keys: usize,
    elapsed_us: u64,
    policy: *const GnomonProofPolicy,
    ws: *mut GnomonProofWorkspace,
    out: *mut GnomonProven,
) -> GnomonError {
    let read = |i: usize| {
        // SAFETY: i < n_keys ≤ GNOMON_MAX_PROOF_KEYS (checked before any
        // key is read); non-NULL and aligned (checked by `array` first),
        // `n_keys` readable values by the caller's promise.
        unsafe { keys.add(i).read() }
    };
    // SAFETY: the caller's promises, passed on.
    unsafe {
        verify_with(
            bundle,
            bundle_len,
            device,
            device_len,
            array(keys),
            n_keys,
            read,
            elapsed_us,
            policy,
            ws,
            out,
        )
    }
}

/// The shared body: check every argument, place the workspace, verify,
/// write `*out`.
///
/// # Safety
/// As `gnomon_verify_proof`; `read` is called only when `keys_ok` is Ok,
/// for i < n_keys ≤ `GNOMON_MAX_PROOF_KEYS`, and gives keys satisfying
/// `key`'s rules.
#[allow(clippy::too_many_arguments)]
unsafe fn verify_with(
    bundle: *const u8,
    bundle_len: usize,
    device: *const u8,
    device_len: usize,
    keys_ok: Result<(), GnomonError>,
    n_keys: usize,
    read: impl Fn(usize) -> GnomonPinnedKey,
    elapsed_us: u64,
    policy: *const GnomonProofPolicy,
    ws: *mut GnomonProofWorkspace,
    out: *mut GnomonProven,
) -> GnomonError {
    if let Err(e) = writable(out) {
        return e;
    }
    let mut result = GnomonProven::failed(GnomonError::GnomonErrInternal);
    let code = guard(|| {
        // SAFETY: the caller's promises; NULL, empty and over-long inputs
        // refused inside.
        let (bundle, device) =
            match unsafe { (bundle_input(bundle, bundle_len), input(device, device_len)) } {
                (Ok(b), Ok(d)) => (b, d),
                (Err(e), _) | (_, Err(e)) => return e,
            };
        if let Err(e) = keys_ok.and(writable(ws)) {
            return e;
        }
        if n_keys == 0 {
            return GnomonError::GnomonErrEmpty;
        }
        if n_keys > GNOMON_MAX_PROOF_KEYS {
            return GnomonError::GnomonErrTooLong;
        }
        // The protocol's own check of D: one that is too short could be
        // guessed by the relay, which could then prepare the bundle.
        if check_device_value(device).is_err() {
            return GnomonError::GnomonErrArgument;
        }
        let policy = if policy.is_null() {
            None
        } else if !policy.is_aligned() {
            return GnomonError::GnomonErrArgument;
        } else {
            // SAFETY: non-NULL, aligned, and a readable policy by the
            // caller's promise; every bit pattern is a valid one.
            Some(unsafe { policy.read() })
        };
        let policy = match policy_of(policy) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let pinned = |i: usize| {
            let k = read(i);
            // SAFETY: NULL or public_key_len readable bytes by the
            // caller's promise, checked for NULL and length inside.
            unsafe { key(k.public_key, k.public_key_len) }.map(|p| (p, k.server))
        };
        // The first key fills the unused slots (n_keys ≥ 1): no
        // allocation, no placeholder key.
        let (mut keys, mut server) = match pinned(0) {
            Ok((k, s)) => ([k; GNOMON_MAX_PROOF_KEYS], [s; GNOMON_MAX_PROOF_KEYS]),
            Err(e) => return e,
        };
        for i in 1..n_keys {
            match pinned(i) {
                Ok((k, s)) => (keys[i], server[i]) = (k, s),
                Err(e) => return e,
            }
        }
        let keys = &keys[..n_keys];
        let mut voter_of = [0; GNOMON_MAX_PROOF_KEYS];
        let n_voters = voters(keys, &server[..n_keys], &mut voter_of);
        let assumption = policy.assumption(n_voters);
        // SAFETY: `ws` is non-NULL and aligned (checked by `writable`) and
        // the caller's alone for the call: the call may write its
        // GNOMON_PROOF_WORKSPACE_SIZE bytes.
        let ws = unsafe { workspace(ws) };
        let voter_of = &voter_of[..n_keys];
        let r = verify_proof_grouped(bundle, device, keys, voter_of, elapsed_us, &policy, ws);
        // Every result says what it was judged under (the verifier's
        // own assumption, where it gives one, is this one).
        result = proven(&r).assumed(assumption);
        result.code
    });
    if result.code != code {
        // A panic (std builds), or an argument refused before verifying.
        result = GnomonProven::failed(code);
    }
    // SAFETY: `out` checked by `writable` above, the caller's for the call.
    unsafe { out.write(result) };
    code
}

/// A fresh `ProofWorkspace` at the first suitably aligned byte of `*ws`.
///
/// # Safety
/// `ws` is non-NULL, aligned for `GnomonProofWorkspace`, points to memory
/// the caller lets this call write and nobody else touches during the
/// returned borrow.
unsafe fn workspace<'a>(ws: *mut GnomonProofWorkspace) -> &'a mut ProofWorkspace {
    let base = ws.cast::<u8>();
    let skip = base.align_offset(align_of::<ProofWorkspace>());
    // align_offset may answer usize::MAX ("cannot align"); never for a u8
    // pointer in practice, but then the const assertion at the top would
    // not cover it, so it is checked. The bound holds by that assertion.
    assert!(skip < align_of::<ProofWorkspace>());
    // SAFETY: skip + size_of::<ProofWorkspace>() ≤ GNOMON_PROOF_WORKSPACE_SIZE
    // (the const assertion above, skip < align), so `at` and the
    // workspace written there lie inside the caller's struct; `at` is
    // aligned for ProofWorkspace by construction. ptr::write initialises
    // it without reading (or dropping) the caller's bytes, so the
    // reference made after it points to a valid, initialised value,
    // exclusive for the borrow by the caller's promise.
    unsafe {
        let at = base.add(skip).cast::<ProofWorkspace>();
        at.write(ProofWorkspace::new());
        &mut *at
    }
}

/// Checks that need no server (the rest: tests/libgnomon/proof_device/ and
/// tests/abi.rs).
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_is_placed_inside_the_callers_struct_at_any_alignment() {
        let mut ws = [0u8; GNOMON_PROOF_WORKSPACE_SIZE + 16];
        for shift in 0..16 {
            let p = ws[shift..].as_mut_ptr().cast::<GnomonProofWorkspace>();
            // SAFETY: GNOMON_PROOF_WORKSPACE_SIZE bytes from `shift` are
            // ours (alignment 1).
            let w = unsafe { workspace(p) } as *mut ProofWorkspace as usize;
            let start = p as usize;
            assert!(
                w >= start
                    && w + size_of::<ProofWorkspace>() <= start + GNOMON_PROOF_WORKSPACE_SIZE
            );
            assert_eq!(w % align_of::<ProofWorkspace>(), 0);
        }
    }
}
