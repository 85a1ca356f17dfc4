//! Monitor keys as OpenSSH writes them (`ssh-ed25519 AAAA… comment`), and
//! their names in messages (the fingerprint `ssh-keygen -l` prints).

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use base64::Engine;
use sha2::{Digest, Sha256};

use super::sshsig::Reader;

/// The only key type a monitor signs with.
pub(crate) const KEY_TYPE: &str = "ssh-ed25519";
/// [`parse_blob`]'s answer for a key of another type.
pub(crate) const NOT_ED25519: &str = "not an ssh-ed25519 key";

/// A pinned monitor key: an Ed25519 public key and the comment its
/// OpenSSH line carried (which names it in messages beside the fingerprint).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonitorKey {
    public: [u8; 32],
    comment: String,
}

/// Why a key line is not an OpenSSH Ed25519 public key.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// Nothing but white space.
    Empty,
    /// The first word names another key type (`ssh-rsa`, `ecdsa-sha2-nistp256`, …).
    KeyType(String),
    /// No base64 after the key type.
    MissingKey,
    /// The second word is not base64.
    Base64,
    /// The decoded key is not an `ssh-ed25519` key blob of 32 bytes.
    Blob(&'static str),
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Empty => f.write_str(
                "the key is empty: give the monitor's public key line, \"ssh-ed25519 AAAA… comment\" (its .pub file)",
            ),
            KeyError::KeyType(t) => write!(
                f,
                "the key is of type {t:?}, and monitors sign with ssh-ed25519 keys only: ask the monitor's operator for its ssh-ed25519 public key"
            ),
            KeyError::MissingKey => f.write_str(
                "the key line has a type but no key after it: give the whole line, \"ssh-ed25519 AAAA… comment\"",
            ),
            KeyError::Base64 => f.write_str(
                "the key's second word is not base64: copy the line again from the monitor's .pub file",
            ),
            KeyError::Blob(what) => write!(
                f,
                "the key's base64 does not hold an ssh-ed25519 key ({what}): copy the line again from the monitor's .pub file"
            ),
        }
    }
}

impl MonitorKey {
    /// Parse `ssh-ed25519 BASE64 [comment]`, as in an OpenSSH `.pub` file.
    pub fn parse(text: &str) -> Result<MonitorKey, KeyError> {
        let text = text.trim_ascii();
        if text.is_empty() {
            return Err(KeyError::Empty);
        }
        let (kind, rest) = split_word(text);
        if kind != KEY_TYPE {
            return Err(KeyError::KeyType(kind.to_string()));
        }
        let (b64, comment) = split_word(rest);
        if b64.is_empty() {
            return Err(KeyError::MissingKey);
        }
        let blob = STANDARD.decode(b64).map_err(|_| KeyError::Base64)?;
        let public = parse_blob(&blob).map_err(KeyError::Blob)?;
        Ok(MonitorKey {
            public,
            comment: comment.to_string(),
        })
    }

    /// A key from its 32 bytes.
    pub fn from_ed25519(public: [u8; 32], comment: &str) -> MonitorKey {
        MonitorKey {
            public,
            comment: comment.trim_ascii().to_string(),
        }
    }

    /// The Ed25519 public key.
    pub fn public(&self) -> &[u8; 32] {
        &self.public
    }

    /// The comment of its OpenSSH line (empty when it had none).
    pub fn comment(&self) -> &str {
        &self.comment
    }

    /// `SHA256:…` as `ssh-keygen -l` prints it: SHA-256 of the key blob,
    /// base64 without padding.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.public)
    }

    /// `ssh-ed25519 AAAA… comment`, the line of a `.pub` file.
    pub fn openssh(&self) -> String {
        let b64 = STANDARD.encode(blob(&self.public));
        if self.comment.is_empty() {
            format!("{KEY_TYPE} {b64}")
        } else {
            format!("{KEY_TYPE} {b64} {}", self.comment)
        }
    }

    /// The fingerprint, and the comment in parentheses when there is one:
    /// how messages name the key.
    pub(crate) fn named(&self) -> String {
        if self.comment.is_empty() {
            self.fingerprint()
        } else {
            format!("{} ({})", self.fingerprint(), self.comment)
        }
    }
}

/// The fingerprint of a bare Ed25519 key.
pub(crate) fn fingerprint(public: &[u8; 32]) -> String {
    let digest = Sha256::digest(blob_array(public));
    format!("SHA256:{}", STANDARD_NO_PAD.encode(digest))
}

/// Bytes of the key's wire form.
const BLOB_LEN: usize = 4 + KEY_TYPE.len() + 4 + 32;

/// The SSH wire form of the key: string "ssh-ed25519" ‖ string key.
pub(crate) fn blob(public: &[u8; 32]) -> Vec<u8> {
    blob_array(public).to_vec()
}

/// The same, on the stack.
pub(crate) fn blob_array(public: &[u8; 32]) -> [u8; BLOB_LEN] {
    let mut out = [0u8; BLOB_LEN];
    out[..4].copy_from_slice(&(KEY_TYPE.len() as u32).to_be_bytes());
    out[4..4 + KEY_TYPE.len()].copy_from_slice(KEY_TYPE.as_bytes());
    out[4 + KEY_TYPE.len()..8 + KEY_TYPE.len()].copy_from_slice(&32u32.to_be_bytes());
    out[8 + KEY_TYPE.len()..].copy_from_slice(public);
    out
}

/// The key out of its SSH wire form; nothing may follow it.
pub(crate) fn parse_blob(bytes: &[u8]) -> Result<[u8; 32], &'static str> {
    let mut r = Reader::new(bytes);
    let kind = r.string().ok_or("truncated key type")?;
    if kind != KEY_TYPE.as_bytes() {
        return Err(NOT_ED25519);
    }
    let key = r.string().ok_or("truncated key")?;
    let key: [u8; 32] = key.try_into().map_err(|_| "the key is not 32 bytes")?;
    if !r.is_empty() {
        return Err("bytes after the key");
    }
    Ok(key)
}

/// The first word and the rest, trimmed: ASCII white space separates, as
/// OpenSSH reads a key line (and [`super::in_place::parse_key`] too).
fn split_word(s: &str) -> (&str, &str) {
    match s.find(|c: char| c.is_ascii_whitespace()) {
        Some(i) => (&s[..i], s[i..].trim_ascii()),
        None => (s, ""),
    }
}
