//! Signed server lists from C (docs/C.md, "Signed server lists"): one
//! monitor's list checked against one pinned key, as every gnomon client
//! checks it (`gnomon_protocol::signed_list::in_place`, the decision
//! `Pins::check` makes). No allocation and no clock: the caller passes
//! `now` and keeps the last sequence accepted from the key, so it builds
//! and runs in the `no_std` library. Merging several monitors' lists k of
//! n is left to the caller (or to Python and the CLI), which reads the
//! servers out of the documents it accepted.
//!
//! ```text
//!  document, signature, key, now, seen ─▶ gnomon_verify_server_list
//!      ─▶ in_place::check (SSHSIG, header, expiry, sequence)
//!      ─▶ gnomon_list_result (header, monitor, the code's sentence) + seen updated
//!  "ssh-ed25519 AAAA…" ─▶ gnomon_parse_monitor_key ─▶ 32 bytes
//! ```
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

use core::ffi::c_char;

use gnomon_protocol::signed_list::in_place::{self, RefusalKind, Utc, FINGERPRINT_LEN};

use crate::args::{c_message, guard, input_at_most, message_or_text, writable};
use crate::error::GnomonError;
use crate::message::{write_message, MESSAGE_LEN};
use crate::types::{GNOMON_ED25519_KEY_LEN, GNOMON_MESSAGE_LEN};

/// Longest list document `gnomon_verify_server_list` reads (4 MiB: a few
/// thousand servers with what a monitor measured of each).
pub const GNOMON_MAX_SERVER_LIST: usize = 4 * 1024 * 1024;
/// Longest armored signature it reads (an Ed25519 one is under 300 bytes).
pub const GNOMON_MAX_LIST_SIGNATURE: usize = 4096;
/// Bytes of `gnomon_list_result`'s `monitor`, NUL included.
pub const GNOMON_MONITOR_NAME_LEN: usize = 128;

/// The last list accepted from one monitor key: what
/// `gnomon_verify_server_list` reads and, on success, updates. Keep one per
/// pinned key across restarts (in flash, a file): without it an older list
/// served again cannot be told from the current one.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GnomonListSeen {
    /// Whether a list from this key was accepted before (a zeroed struct:
    /// none). Any non-zero byte reads as true.
    pub present: bool,
    /// Its `observatory.sequence`.
    pub sequence: u64,
    /// SHA-256 of its document: the same sequence over other bytes is
    /// refused as reused.
    pub sha256: [u8; 32],
}

/// The outcome of `gnomon_verify_server_list`. On a failure only `code`
/// and `message` are set (the rest is zero).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GnomonListResult {
    /// `GNOMON_OK`, or why not; the same value the call returned.
    pub code: GnomonError,
    /// `observatory.sequence`.
    pub sequence: u64,
    /// `observatory.published`, Unix seconds.
    pub published_unix: i64,
    /// `observatory.expires`, Unix seconds: check again before then.
    pub expires_unix: i64,
    /// SHA-256 of the document.
    pub sha256: [u8; 32],
    /// `observatory.monitor`, UTF-8, NUL-terminated (cut at a character
    /// boundary if longer than the field).
    pub monitor: [c_char; GNOMON_MONITOR_NAME_LEN],
    /// A NUL-terminated English sentence: "success", or what was refused
    /// (naming the key by its `SHA256:` fingerprint) and what to do.
    pub message: [c_char; GNOMON_MESSAGE_LEN],
}

/// The code of a refusal.
pub fn of_refusal(kind: RefusalKind) -> GnomonError {
    use GnomonError::*;
    match kind {
        RefusalKind::Signature => GnomonErrListSignature,
        RefusalKind::OtherKey => GnomonErrListOtherKey,
        RefusalKind::Expired => GnomonErrListExpired,
        RefusalKind::Replayed => GnomonErrListReplayed,
        RefusalKind::Reused => GnomonErrListReused,
        RefusalKind::Malformed => GnomonErrListMalformed,
    }
}

/// What an accepted list says, for the result.
pub struct Accepted {
    /// `observatory.sequence`.
    pub sequence: u64,
    /// `observatory.published`.
    pub published_unix: i64,
    /// `observatory.expires`.
    pub expires_unix: i64,
    /// SHA-256 of the document.
    pub sha256: [u8; 32],
    /// `observatory.monitor`, NUL-terminated.
    pub monitor: [u8; GNOMON_MONITOR_NAME_LEN],
}

/// The check, on slices: no pointers, no allocation. For a refusal the
/// sentence is written to `message`. `last` is the seen record as read.
pub fn check(
    document: &[u8],
    signature: &[u8],
    key: &[u8; 32],
    now_unix: i64,
    last: Option<(u64, [u8; 32])>,
    message: &mut [u8; MESSAGE_LEN],
) -> Result<Accepted, GnomonError> {
    let kind = match in_place::check(document, signature, key, now_unix, last) {
        Ok(c) => {
            let mut a = Accepted {
                sequence: c.header.sequence(),
                published_unix: c.header.published_unix(),
                expires_unix: c.header.expires_unix(),
                sha256: c.sha256,
                monitor: [0; GNOMON_MONITOR_NAME_LEN],
            };
            // One byte kept for the NUL.
            c.header
                .monitor_into(&mut a.monitor[..GNOMON_MONITOR_NAME_LEN - 1]);
            return Ok(a);
        }
        Err(kind) => kind,
    };
    let mut fp = [0u8; FINGERPRINT_LEN];
    let pinned = in_place::fingerprint(key, &mut fp);
    // Refused for its freshness, the header read: its numbers.
    let header = in_place::header(document);
    let (sequence, expires) = header.map_or((0, 0), |h| (h.sequence(), h.expires_unix()));
    let seen = last.map_or(0, |l| l.0);
    match kind {
        RefusalKind::Signature => write_message(
            message,
            format_args!(
                "the list's signature does not verify under key {pinned}: the list was changed after it was \
                 signed, or the signature is not its own or not for a server list; fetch both again"
            ),
        ),
        RefusalKind::OtherKey => {
            let mut buf = [0u8; FINGERPRINT_LEN];
            let other = in_place::fingerprint(&in_place::signer(signature).unwrap_or([0; 32]), &mut buf);
            write_message(
                message,
                format_args!(
                    "the list is signed by {other}, not by the pinned key {pinned}: if the monitor has a new \
                     key, check it with its operator and pin it"
                ),
            )
        }
        RefusalKind::Expired => write_message(
            message,
            format_args!(
                "the list expired at {} (now {}): the monitor has not published since; check that it runs, or \
                 that this clock is right",
                Utc(expires),
                Utc(now_unix)
            ),
        ),
        RefusalKind::Replayed => write_message(
            message,
            format_args!(
                "sequence {sequence} is older than {seen} already accepted from key {pinned} (a replayed list): \
                 something on the way serves an old list; fetch again"
            ),
        ),
        RefusalKind::Reused => write_message(
            message,
            format_args!(
                "sequence {sequence} was already accepted from key {pinned} with other contents: the monitor \
                 signed two lists with one sequence; tell its operator"
            ),
        ),
        RefusalKind::Malformed => write_message(
            message,
            format_args!(
                "the list signed by key {pinned} is not a monitor's server list (JSON with \"servers\" and a \
                 valid \"observatory\" header); tell the monitor's operator"
            ),
        ),
    }
    Err(of_refusal(kind))
}

/// Check one monitor's signed server list: `document` (the bytes of its
/// `/servers.json`, at most `GNOMON_MAX_SERVER_LIST`) and `signature` (of
/// `/servers.json.sig`, an armored OpenSSH signature, at most
/// `GNOMON_MAX_LIST_SIGNATURE`) against the pinned monitor key
/// `public_key` (32 bytes; from its `ssh-ed25519` line with
/// `gnomon_parse_monitor_key`) at `now_unix` (Unix seconds, the caller's
/// clock), given `*seen`, the last list accepted from that key.
///
/// Accepted (`GNOMON_OK`) when the signature verifies under the key in
/// namespace `roughtime-server-list`, the document is JSON with `servers`
/// and a valid `observatory` header, `now_unix` is before its expiry, and
/// its sequence is not below `seen->sequence` (the same sequence is
/// accepted only over the same bytes: the same list fetched again). Then
/// `*result` holds the header and `*seen` is updated; keep it. Otherwise
/// one code says why: `GNOMON_ERR_LIST_SIGNATURE`,
/// `GNOMON_ERR_LIST_OTHER_KEY` (a valid signature by another key),
/// `GNOMON_ERR_LIST_EXPIRED`, `GNOMON_ERR_LIST_REPLAYED`,
/// `GNOMON_ERR_LIST_REUSED`, `GNOMON_ERR_LIST_MALFORMED`; `*seen` is left
/// as it was. The servers are in the document, for the caller's JSON
/// reader: with several monitors, use a server only when K of their
/// accepted lists give it (docs/C.md). Allocates nothing, reads no clock
/// (also in the `no_std` build).
///
/// # Safety
/// `document` points to `document_len` readable bytes, `signature` to
/// `signature_len`, `public_key` to 32; `seen` to a readable and writable,
/// aligned `gnomon_list_seen`; `result` to a writable, aligned
/// `gnomon_list_result`. None of them changes during the call.
#[no_mangle]
pub unsafe extern "C" fn gnomon_verify_server_list(
    document: *const u8,
    document_len: usize,
    signature: *const u8,
    signature_len: usize,
    public_key: *const u8,
    now_unix: i64,
    seen: *mut GnomonListSeen,
    result: *mut GnomonListResult,
) -> GnomonError {
    if let Err(e) = writable(result) {
        return e;
    }
    let mut message = [0u8; MESSAGE_LEN];
    let mut accepted = None;
    let code = guard(|| {
        // SAFETY: the caller's promises, NULL and lengths checked inside.
        let document =
            match unsafe { input_at_most(document, document_len, GNOMON_MAX_SERVER_LIST) } {
                Ok(d) => d,
                Err(e) => return e,
            };
        // SAFETY: as above.
        let signature =
            match unsafe { input_at_most(signature, signature_len, GNOMON_MAX_LIST_SIGNATURE) } {
                Ok(s) => s,
                Err(e) => return e,
            };
        if public_key.is_null() {
            return GnomonError::GnomonErrNull;
        }
        // SAFETY: non-NULL, 32 readable bytes by the caller's promise; u8
        // has alignment 1.
        let key: [u8; GNOMON_ED25519_KEY_LEN] = unsafe { public_key.cast::<[u8; 32]>().read() };
        if let Err(e) = writable(seen) {
            return e;
        }
        // SAFETY: non-NULL and aligned (checked), the caller's struct.
        // `present` is read as a byte, so a C value other than 0 or 1
        // cannot make an invalid Rust bool.
        let (present, sequence, sha256) = unsafe {
            (
                core::ptr::addr_of!((*seen).present).cast::<u8>().read() != 0,
                core::ptr::addr_of!((*seen).sequence).read(),
                core::ptr::addr_of!((*seen).sha256).read(),
            )
        };
        let last = present.then_some((sequence, sha256));
        match check(document, signature, &key, now_unix, last, &mut message) {
            Ok(a) => {
                if last.is_none_or(|(s, _)| a.sequence > s) {
                    let now_seen = GnomonListSeen {
                        present: true,
                        sequence: a.sequence,
                        sha256: a.sha256,
                    };
                    // SAFETY: checked by `writable` above; the caller's.
                    unsafe { seen.write(now_seen) };
                }
                accepted = Some(a);
                GnomonError::GnomonOk
            }
            Err(e) => e,
        }
    });
    if code != GnomonError::GnomonOk {
        accepted = None;
    }
    if code == GnomonError::GnomonErrInternal {
        message = [0; MESSAGE_LEN];
    }
    message_or_text(&mut message, code);
    let a = accepted.unwrap_or(Accepted {
        sequence: 0,
        published_unix: 0,
        expires_unix: 0,
        sha256: [0; 32],
        monitor: [0; GNOMON_MONITOR_NAME_LEN],
    });
    let out = GnomonListResult {
        code,
        sequence: a.sequence,
        published_unix: a.published_unix,
        expires_unix: a.expires_unix,
        sha256: a.sha256,
        // Byte for byte; c_char's sign does not matter to C string functions.
        monitor: a.monitor.map(|b| b as c_char),
        message: c_message(&message),
    };
    // SAFETY: checked by `writable` first; the caller's struct.
    unsafe { result.write(out) };
    code
}

/// The 32-byte Ed25519 key of a monitor's OpenSSH public key line
/// (`ssh-ed25519 AAAA… comment`, the text of its `.pub` file), `len` bytes
/// at `text` (no NUL needed; at most 4096), into `out`. `GNOMON_ERR_KEY` for anything
/// else (another key type, base64 that is not an ssh-ed25519 key);
/// `GNOMON_ERR_ARGUMENT` for text that is not UTF-8.
///
/// # Safety
/// `text` points to `len` readable bytes; `out` to 32 writable bytes.
#[no_mangle]
pub unsafe extern "C" fn gnomon_parse_monitor_key(
    text: *const c_char,
    len: usize,
    out: *mut u8,
) -> GnomonError {
    if out.is_null() {
        return GnomonError::GnomonErrNull;
    }
    guard(|| {
        // SAFETY: the caller's promise, NULL and length checked inside.
        let bytes =
            match unsafe { input_at_most(text.cast::<u8>(), len, GNOMON_MAX_LIST_SIGNATURE) } {
                Ok(b) => b,
                Err(e) => return e,
            };
        let Ok(text) = core::str::from_utf8(bytes) else {
            return GnomonError::GnomonErrArgument;
        };
        match in_place::parse_key(text) {
            Some(key) => {
                // SAFETY: non-NULL, 32 writable bytes by the caller's
                // promise; u8 has alignment 1.
                unsafe { out.cast::<[u8; 32]>().write(key) };
                GnomonError::GnomonOk
            }
            None => GnomonError::GnomonErrKey,
        }
    })
}
