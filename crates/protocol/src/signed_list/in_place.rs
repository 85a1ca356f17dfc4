//! One list checked by one key without allocating: the decision
//! [`Pins::check`](super::Pins::check) makes, for libgnomon's `no_std`
//! build (firmware with no heap), which keeps the last sequence and
//! digest itself and passes `now`.

use base64::engine::general_purpose::STANDARD_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

pub use super::time::Utc;

use super::key::{self, KEY_TYPE};
use super::scan::{self, RawHeader};
use super::sshsig::{self, Fault};
use super::NAMESPACE;

/// Why a list is refused, without the words: one value per
/// [`Refusal`](super::Refusal) variant, with its label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalKind {
    /// The signature is damaged or does not verify under the key.
    Signature,
    /// A valid signature by another key.
    OtherKey,
    /// Now is at or past the list's expiry.
    Expired,
    /// A lower sequence than the last one accepted from the key.
    Replayed,
    /// The last sequence accepted, over other bytes.
    Reused,
    /// Not a server list with a valid `observatory` header.
    Malformed,
}

impl RefusalKind {
    /// The label: `"signature"`, `"other_key"`, `"expired"`, `"replayed"`,
    /// `"reused"` or `"malformed"`.
    pub fn label(self) -> &'static str {
        match self {
            RefusalKind::Signature => "signature",
            RefusalKind::OtherKey => "other_key",
            RefusalKind::Expired => "expired",
            RefusalKind::Replayed => "replayed",
            RefusalKind::Reused => "reused",
            RefusalKind::Malformed => "malformed",
        }
    }
}

/// A list's header, borrowed from the document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderView<'a> {
    raw: RawHeader<'a>,
}

impl HeaderView<'_> {
    /// `observatory.sequence`.
    pub fn sequence(&self) -> u64 {
        self.raw.sequence
    }

    /// `observatory.published`, Unix seconds.
    pub fn published_unix(&self) -> i64 {
        self.raw.published
    }

    /// `observatory.expires`, Unix seconds.
    pub fn expires_unix(&self) -> i64 {
        self.raw.expires
    }

    /// `observatory.monitor` as UTF-8 into `out`; the bytes written. A name
    /// longer than `out` is cut at a character boundary.
    pub fn monitor_into(&self, out: &mut [u8]) -> usize {
        let mut len = 0;
        let mut full = false;
        // Checked when the header was read: the decoding succeeds.
        let _ = scan::unescape(self.raw.monitor, |c| {
            let mut utf8 = [0u8; 4];
            let bytes = c.encode_utf8(&mut utf8).as_bytes();
            match out.get_mut(len..len + bytes.len()) {
                Some(dst) if !full => {
                    dst.copy_from_slice(bytes);
                    len += bytes.len();
                }
                _ => full = true,
            }
        });
        len
    }
}

/// The header of a document, its signature not checked (for the words
/// of a refusal); `None` when it has none we can read.
pub fn header(document: &[u8]) -> Option<HeaderView<'_>> {
    scan::scan(document).ok().map(|raw| HeaderView { raw })
}

/// An accepted list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checked<'a> {
    /// Its header.
    pub header: HeaderView<'a>,
    /// SHA-256 of the document: keep it with the sequence.
    pub sha256: [u8; 32],
}

/// Check `document` and its armored `signature` against the one pinned
/// `key` at `now_unix`, given the `last` (sequence, SHA-256) accepted from
/// that key. Allocates nothing; the same rules, in the same order, as
/// [`Pins::check`](super::Pins::check), which adds the words (and checks
/// each server entry's shape, which this leaves to the list's reader).
pub fn check<'a>(
    document: &'a [u8],
    signature: &[u8],
    key: &[u8; 32],
    now_unix: i64,
    last: Option<(u64, [u8; 32])>,
) -> Result<Checked<'a>, RefusalKind> {
    match sshsig::verify_in_place(signature, document, NAMESPACE, key) {
        Ok(()) => {}
        Err(Fault::OtherKey(_)) if sshsig::verifies_under_own_key(signature, document) => {
            return Err(RefusalKind::OtherKey)
        }
        Err(_) => return Err(RefusalKind::Signature),
    }
    let raw = scan::scan(document).map_err(|_| RefusalKind::Malformed)?;
    if now_unix >= raw.expires {
        return Err(RefusalKind::Expired);
    }
    let sha256: [u8; 32] = Sha256::digest(document).into();
    if let Some((sequence, digest)) = last {
        if raw.sequence < sequence {
            return Err(RefusalKind::Replayed);
        }
        if raw.sequence == sequence && digest != sha256 {
            return Err(RefusalKind::Reused);
        }
    }
    Ok(Checked {
        header: HeaderView { raw },
        sha256,
    })
}

/// The key an armored signature says made it, its structure checked (not
/// the signature); `None` when it is no SSHSIG of an Ed25519 key.
pub fn signer(signature: &[u8]) -> Option<[u8; 32]> {
    sshsig::signer_in_place(signature).ok()
}

/// Bytes of a fingerprint: `SHA256:` and 43 base64 characters.
pub const FINGERPRINT_LEN: usize = 50;

/// The fingerprint `ssh-keygen -l` prints, into `out`.
pub fn fingerprint<'b>(public: &[u8; 32], out: &'b mut [u8; FINGERPRINT_LEN]) -> &'b str {
    let digest = Sha256::digest(key::blob_array(public));
    out[..7].copy_from_slice(b"SHA256:");
    // 32 bytes are 43 base64 characters without padding: exactly the rest.
    let n = STANDARD_NO_PAD
        .encode_slice(digest, &mut out[7..])
        .unwrap_or(0);
    core::str::from_utf8(&out[..7 + n]).unwrap_or("")
}

/// The Ed25519 key of an OpenSSH public key line (`ssh-ed25519 AAAA…
/// [comment]`, a `.pub` file's text), without allocating; `None` for
/// anything else. [`MonitorKey::parse`](super::MonitorKey::parse) says why.
pub fn parse_key(text: &str) -> Option<[u8; 32]> {
    let mut words = text.split_ascii_whitespace();
    if words.next()? != KEY_TYPE {
        return None;
    }
    let b64 = words.next()?;
    // The blob is 51 bytes; base64 of more does not fit and is refused.
    let mut blob = [0u8; 51];
    let n = base64::engine::general_purpose::STANDARD
        .decode_slice(b64, &mut blob)
        .ok()?;
    key::parse_blob(&blob[..n]).ok()
}
