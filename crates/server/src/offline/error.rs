//! Why delegations could not be written or loaded ([`OfflineError`]), and
//! how each reason reads: the file and line, and what to do about it.

use std::fmt;
use std::io;
use std::path::PathBuf;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_protocol::LongTermKey;

use super::EXTENSION;
use crate::keyfile::KeyFileError;

/// Why delegations could not be written or loaded.
#[derive(Debug)]
#[non_exhaustive]
pub enum OfflineError {
    /// A file could not be read or written, is not private, or is malformed.
    File(KeyFileError),
    /// The directory could not be listed.
    ReadDir {
        /// The directory.
        dir: PathBuf,
        /// The OS error.
        error: io::Error,
    },
    /// No `*.delegation` files.
    Empty {
        /// The directory.
        dir: PathBuf,
    },
    /// A certificate's signature does not verify under the file's long-term
    /// key for a profile it claims.
    BadSignature {
        /// The file.
        path: PathBuf,
        /// Its line.
        line: usize,
        /// The profile.
        profile: &'static str,
    },
    /// The file names another long-term key than the others (or than the
    /// configured one).
    WrongLongTermKey {
        /// The file.
        path: PathBuf,
        /// The key expected.
        expected: Vec<u8>,
        /// The key in the file.
        found: Vec<u8>,
    },
    /// The file names another host than the directory's other files.
    MixedHosts {
        /// The file.
        path: PathBuf,
        /// The host the other files name.
        expected: String,
        /// The host this file names.
        found: String,
    },
}

impl From<KeyFileError> for OfflineError {
    fn from(e: KeyFileError) -> Self {
        OfflineError::File(e)
    }
}

impl fmt::Display for OfflineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OfflineError::File(e) => e.fmt(f),
            OfflineError::ReadDir { dir, error } => {
                write!(
                    f,
                    "cannot list delegation directory {}: {error}",
                    dir.display()
                )
            }
            OfflineError::Empty { dir } => write!(
                f,
                "{} holds no *.{EXTENSION} files; make some with `gnomon delegate`",
                dir.display()
            ),
            OfflineError::BadSignature {
                path,
                line,
                profile,
            } => write!(
                f,
                "{}:{line}: the {profile} certificate is not signed by the file's long-term key",
                path.display()
            ),
            OfflineError::WrongLongTermKey {
                path,
                expected,
                found,
            } => write!(
                f,
                "{} is signed by long-term key {}, not the expected {} \
                 (offline-public-key, or the directory's other files)",
                path.display(),
                key_text(found),
                key_text(expected)
            ),
            OfflineError::MixedHosts {
                path,
                expected,
                found,
            } => write!(
                f,
                "{} was made for host {found}, but the directory's other files for host \
                 {expected}: copy each host only its own directory from `gnomon delegate --hosts`",
                path.display()
            ),
        }
    }
}

/// A key in a message: base64, shortened for an ML-DSA-44 key.
fn key_text(key: &[u8]) -> String {
    match LongTermKey::from_bytes(key) {
        Some(k) if k.ed25519().is_none() => crate::key::key_label(&k),
        _ => B64.encode(key),
    }
}

impl std::error::Error for OfflineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OfflineError::File(e) => Some(e),
            OfflineError::ReadDir { error, .. } => Some(error),
            _ => None,
        }
    }
}
