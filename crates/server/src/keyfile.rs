//! Long-term key files.
//!
//! A key file is a short UTF-8 text file whose first line names the format,
//! so that a wrong file (a certificate, a config, someone else's key format)
//! is recognised rather than misread:
//!
//! ```text
//! gnomon-ed25519-key v1
//! # Roughtime long-term key. Secret: keep it mode 0600.
//! seed: <32-byte Ed25519 seed, standard base64>
//! public: <32-byte public key, standard base64>
//! ```
//!
//! An ML-DSA-44 key (version 0x90000001, docs/PQ.md) is the same file
//! under another first line, its seed FIPS 204's 32-byte ξ (as
//! tannerryan/roughtime's key files hold it) and its public key 1312 bytes:
//!
//! ```text
//! gnomon-ml-dsa-44-key v1
//! # Roughtime long-term key (ML-DSA-44). Secret: keep it mode 0600.
//! seed: <32-byte seed, standard base64>
//! public: <1312-byte public key, standard base64>
//! ```
//!
//! Lines starting with `#` and blank lines are ignored. `public` is
//! optional; when present it must be the seed's public key, which catches
//! a damaged or hand-edited file before it signs anything.
//!
//! Files are created with mode 0600 and never overwritten unless asked.
//! [`load`] refuses a symlink and any file that group or others can access,
//! and says how to fix it. The seed itself comes from the caller (the OS
//! RNG at the call site: [`crate::key::random_seed`]). Reading and
//! writing secret files, which delegation files share, is in
//! `keyfile/private.rs`.

mod private;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_protocol::Scheme;
use zeroize::Zeroizing;

use crate::key::SecretKey;

use private::sync_parent;
pub(crate) use private::{read_private, write_private, MAX_LEN};

/// First line of every Ed25519 key file.
pub const HEADER: &str = "gnomon-ed25519-key v1";

/// First line of every ML-DSA-44 key file.
pub const ML_DSA_44_HEADER: &str = "gnomon-ml-dsa-44-key v1";

/// The first line of a key file of `scheme`.
pub fn header(scheme: Scheme) -> &'static str {
    match scheme {
        Scheme::Ed25519 => HEADER,
        Scheme::MlDsa44 => ML_DSA_44_HEADER,
    }
}

/// Why a key file could not be written or used.
#[derive(Debug)]
#[non_exhaustive]
pub enum KeyFileError {
    /// An OS error while `action`.
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done: "creating", "reading", …
        action: &'static str,
        /// The error.
        error: io::Error,
    },
    /// The file exists and overwriting was not asked for.
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// The path is a symbolic link.
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// The path is a directory, device or other non-file.
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// Group or others have some access to the file.
    Permissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The contents are not in the expected format.
    Format {
        /// The file.
        path: PathBuf,
        /// 1-based line (0: the file as a whole).
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

impl fmt::Display for KeyFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyFileError::Io {
                path,
                action,
                error,
            } => write!(f, "{action} {}: {error}", path.display()),
            KeyFileError::Exists { path } => write!(
                f,
                "{} already exists; refusing to overwrite a key (choose another path, \
                 or ask explicitly to replace it)",
                path.display()
            ),
            KeyFileError::Symlink { path } => write!(
                f,
                "{} is a symbolic link; secret key files must be regular files \
                 (point the configuration at the file itself)",
                path.display()
            ),
            KeyFileError::NotAFile { path } => {
                write!(f, "{} is not a regular file", path.display())
            }
            KeyFileError::Permissions { path, mode } => write!(
                f,
                "{p} has mode {mode:04o}, which gives group or others access to a secret key; \
                 run `chmod 600 {p}` (and check who else may have read it)",
                p = path.display(),
                mode = mode & 0o7777,
            ),
            KeyFileError::Format {
                path,
                line: 0,
                reason,
            } => {
                write!(f, "{}: {reason}", path.display())
            }
            KeyFileError::Format { path, line, reason } => {
                write!(f, "{}:{line}: {reason}", path.display())
            }
        }
    }
}

impl std::error::Error for KeyFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KeyFileError::Io { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// The file's text for the Ed25519 key with `seed`. Every buffer that
/// holds the seed, in bytes or in base64, is wiped when dropped, and sized
/// up front so that no growth leaves a copy behind in freed memory.
pub fn encode(seed: &[u8; 32]) -> Zeroizing<String> {
    encode_key(Scheme::Ed25519, seed)
}

/// The file's text for the key of `scheme` with `seed` (as [`encode`]).
pub fn encode_key(scheme: Scheme, seed: &[u8; 32]) -> Zeroizing<String> {
    use std::fmt::Write as _;
    let key = SecretKey::from_seed(scheme, seed);
    let mut seed_b64 = Zeroizing::new(String::with_capacity(64));
    B64.encode_string(seed, &mut seed_b64);
    let mut out = Zeroizing::new(String::with_capacity(4096));
    let what = match scheme {
        Scheme::Ed25519 => "",
        Scheme::MlDsa44 => " (ML-DSA-44)",
    };
    let _ = write!(
        out,
        "{}\n# Roughtime long-term key{what}. Secret: keep it mode 0600.\nseed: {}\npublic: {}\n",
        header(scheme),
        *seed_b64,
        B64.encode(key.public())
    );
    out
}

/// The key in a key file's text, of the scheme its first line names.
/// `path` names the file in errors.
pub fn decode(text: &str, path: &Path) -> Result<SecretKey, KeyFileError> {
    let scheme = match text.lines().next().map(str::trim_end) {
        Some(ML_DSA_44_HEADER) => Scheme::MlDsa44,
        _ => Scheme::Ed25519,
    };
    let fields = parse_fields(text, header(scheme), path)?;
    let mut seed = None;
    let mut public = None;
    for field in &fields {
        let slot = match field.name {
            "seed" => &mut seed,
            "public" => &mut public,
            _ => return Err(field.error(path, "unknown field (expected seed or public)")),
        };
        if slot.is_some() {
            return Err(field.error(path, "field given twice"));
        }
        *slot = Some(field);
    }
    let seed = seed.ok_or_else(|| format_error(path, 0, "no `seed:` line"))?;
    let key = SecretKey::from_seed(scheme, &*seed.bytes32(path)?);
    if let Some(public) = public {
        let line = public.line;
        let public = Zeroizing::new(
            B64.decode(public.value)
                .map_err(|_| public.error(path, "not valid base64"))?,
        );
        if public.len() != scheme.public_len() {
            let why = format!("expected {} bytes", scheme.public_len());
            return Err(format_error(path, line, &format!("`public`: {why}")));
        }
        if public.as_slice() != &*key.public() {
            return Err(format_error(
                path,
                line,
                "public key does not match the seed; the file is damaged",
            ));
        }
    }
    Ok(key)
}

/// Create `path` holding the Ed25519 key with `seed`, mode 0600. Fails if
/// anything exists at `path`, a symlink included.
pub fn write_new(path: &Path, seed: &[u8; 32]) -> Result<(), KeyFileError> {
    write_new_key(path, Scheme::Ed25519, seed)
}

/// Create `path` holding the key of `scheme` with `seed` (as [`write_new`]).
pub fn write_new_key(path: &Path, scheme: Scheme, seed: &[u8; 32]) -> Result<(), KeyFileError> {
    write_private(path, encode_key(scheme, seed).as_bytes())
}

/// Replace whatever key is at `path` with `seed`, atomically (a new 0600
/// file renamed over the old one). Only for an explicit request such as
/// `gnomon keygen --force`.
pub fn write_replacing(path: &Path, seed: &[u8; 32]) -> Result<(), KeyFileError> {
    write_replacing_key(path, Scheme::Ed25519, seed)
}

/// Replace whatever key is at `path` with the key of `scheme` with `seed`
/// (as [`write_replacing`]).
pub fn write_replacing_key(
    path: &Path,
    scheme: Scheme,
    seed: &[u8; 32],
) -> Result<(), KeyFileError> {
    let name = path
        .file_name()
        .ok_or_else(|| KeyFileError::NotAFile {
            path: path.to_owned(),
        })?
        .to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.gnomon-tmp"));
    write_private(&tmp, encode_key(scheme, seed).as_bytes())?;
    std::fs::rename(&tmp, path).map_err(|error| {
        let _ = std::fs::remove_file(&tmp);
        KeyFileError::Io {
            path: path.to_owned(),
            action: "replacing",
            error,
        }
    })?;
    sync_parent(path);
    Ok(())
}

/// Read the key at `path`, refusing symlinks, non-files, files that group or
/// others can access, and anything not in the key file format.
pub fn load(path: &Path) -> Result<SecretKey, KeyFileError> {
    let text = read_private(path)?;
    decode(&text, path)
}

pub(crate) fn format_error(path: &Path, line: usize, reason: &str) -> KeyFileError {
    KeyFileError::Format {
        path: path.to_owned(),
        line,
        reason: reason.to_owned(),
    }
}

/// One `name: value` line.
pub(crate) struct Field<'a> {
    pub(crate) line: usize,
    pub(crate) name: &'a str,
    pub(crate) value: &'a str,
}

impl Field<'_> {
    pub(crate) fn error(&self, path: &Path, reason: &str) -> KeyFileError {
        format_error(path, self.line, &format!("`{}`: {reason}", self.name))
    }

    /// The value as 32 base64-encoded bytes (a seed, for some fields: every
    /// copy is wiped when dropped).
    pub(crate) fn bytes32(&self, path: &Path) -> Result<Zeroizing<[u8; 32]>, KeyFileError> {
        let bytes = Zeroizing::new(
            B64.decode(self.value)
                .map_err(|_| self.error(path, "not valid base64"))?,
        );
        let mut out = Zeroizing::new([0u8; 32]);
        if bytes.len() != out.len() {
            return Err(self.error(path, "expected 32 bytes"));
        }
        out.copy_from_slice(&bytes);
        Ok(out)
    }
}

/// Split a text file into `name: value` fields after checking that its first
/// line is `header`. Blank lines and `#` comments are skipped.
pub(crate) fn parse_fields<'a>(
    text: &'a str,
    header: &str,
    path: &Path,
) -> Result<Vec<Field<'a>>, KeyFileError> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, first)) if first.trim_end() == header => {}
        _ => {
            return Err(format_error(
                path,
                1,
                &format!("not a {header:?} file (its first line must be exactly that)"),
            ))
        }
    }
    let mut fields = Vec::new();
    for (i, line) in lines {
        let line_no = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format_error(path, line_no, "expected `name: value`"))?;
        fields.push(Field {
            line: line_no,
            name: name.trim(),
            value: value.trim(),
        });
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use gnomon_protocol::{KeyPair, MlDsa44KeyPair};

    use super::*;

    /// An ML-DSA-44 key file: written 0600 under its own first line, read
    /// back as the same ML-DSA-44 key (seed and 1312-byte public key);
    /// its public line is checked against the seed as an Ed25519 one is.
    #[test]
    fn ml_dsa_key_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pq");
        write_new_key(&path, Scheme::MlDsa44, &[6; 32]).unwrap();
        assert_eq!(mode(&path), 0o600);
        let key = load(&path).unwrap();
        assert_eq!(key.scheme(), Scheme::MlDsa44);
        assert_eq!(*key.seed(), [6; 32]);
        let expected = MlDsa44KeyPair::from_seed(&[6; 32]);
        assert_eq!(key.public(), expected.public());
        assert_eq!(key.public().len(), 1312);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("gnomon-ml-dsa-44-key v1\n"), "{text}");
        assert!(text.contains(&B64.encode(expected.public())), "{text}");
        // Replacing keeps the scheme asked for.
        write_replacing_key(&path, Scheme::MlDsa44, &[7; 32]).unwrap();
        assert_eq!(*load(&path).unwrap().seed(), [7; 32]);
        // Another seed's public key, or an Ed25519 one, is refused.
        let other = B64.encode(MlDsa44KeyPair::from_seed(&[8; 32]).public());
        let mine = B64.encode(MlDsa44KeyPair::from_seed(&[6; 32]).public());
        let good = encode_key(Scheme::MlDsa44, &[6; 32]);
        let msg = decode(&good.replace(&mine, &other), Path::new("k"))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("does not match"), "{msg}");
        let ed = B64.encode(KeyPair::from_seed(&[6; 32]).public());
        let msg = decode(&good.replace(&mine, &ed), Path::new("k"))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("1312 bytes"), "{msg}");
        // The same seed under the Ed25519 first line is an Ed25519 key.
        let as_ed = good.replace(ML_DSA_44_HEADER, HEADER).replace(&mine, &ed);
        let k = decode(&as_ed, Path::new("k")).unwrap();
        assert_eq!(k.scheme(), Scheme::Ed25519);
        assert_eq!(k.public(), KeyPair::from_seed(&[6; 32]).public());
    }

    /// Every value that carries a seed is a wiping buffer: the types are the
    /// check (this does not compile if one becomes a plain copy again).
    #[test]
    fn seeds_live_only_in_wiping_buffers() {
        let seed: Zeroizing<[u8; 32]> = crate::key::random_seed().unwrap();
        let again: Zeroizing<[u8; 32]> = KeyPair::from_seed(&seed).seed();
        let again_pq: Zeroizing<[u8; 32]> = MlDsa44KeyPair::from_seed(&seed).seed();
        assert_eq!(*again_pq, *seed);
        assert_eq!(*seed, *again);
        let text: Zeroizing<String> = encode(&seed);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        write_new(&path, &seed).unwrap();
        let read: Zeroizing<String> = read_private(&path).unwrap();
        assert_eq!(*read, *text);
        let field = Field {
            line: 3,
            name: "seed",
            value: read.lines().nth(2).unwrap().trim_start_matches("seed: "),
        };
        let decoded: Zeroizing<[u8; 32]> = field.bytes32(&path).unwrap();
        assert_eq!(*decoded, *seed);
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn written_key_loads_back_and_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        write_new(&path, &[7; 32]).unwrap();
        assert_eq!(mode(&path), 0o600);
        let key = load(&path).unwrap();
        assert_eq!(*key.seed(), [7; 32]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("gnomon-ed25519-key v1\n"), "{text}");
        assert!(text.contains(&B64.encode(KeyPair::from_seed(&[7; 32]).public())));
    }

    #[test]
    fn existing_file_is_not_overwritten_unless_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        write_new(&path, &[1; 32]).unwrap();
        let e = write_new(&path, &[2; 32]).unwrap_err();
        assert!(matches!(e, KeyFileError::Exists { .. }), "{e}");
        assert_eq!(*load(&path).unwrap().seed(), [1; 32]);
        write_replacing(&path, &[2; 32]).unwrap();
        assert_eq!(*load(&path).unwrap().seed(), [2; 32]);
        assert_eq!(mode(&path), 0o600);
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn group_or_world_access_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        write_new(&path, &[3; 32]).unwrap();
        for bad in [0o644, 0o640, 0o604, 0o620, 0o601] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(bad)).unwrap();
            let e = load(&path).unwrap_err();
            assert!(matches!(e, KeyFileError::Permissions { mode, .. } if mode & 0o777 == bad));
            let msg = e.to_string();
            assert!(msg.contains(&format!("{bad:04o}")), "{msg}");
            assert!(
                msg.contains(&format!("chmod 600 {}", path.display())),
                "{msg}"
            );
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert_eq!(*load(&path).unwrap().seed(), [3; 32]);
    }

    #[test]
    fn symlink_is_refused_even_to_a_good_key() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        write_new(&real, &[4; 32]).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = load(&link).unwrap_err();
        assert!(matches!(e, KeyFileError::Symlink { .. }), "{e}");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(e.to_string().contains(&link.display().to_string()), "{e}");
        // Nor is a new key written through a dangling link.
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        assert!(write_new(&dangling, &[5; 32]).is_err());
        assert!(!dir.path().join("nowhere").exists());
    }

    #[test]
    fn directories_and_missing_files_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let e = load(dir.path()).unwrap_err();
        assert!(matches!(
            e,
            KeyFileError::NotAFile { .. } | KeyFileError::Permissions { .. }
        ));
        let e = load(&dir.path().join("missing")).unwrap_err();
        assert!(matches!(e, KeyFileError::Io { .. }), "{e}");
        assert!(e.to_string().contains("missing"), "{e}");
    }

    #[test]
    fn malformed_contents_are_refused_with_the_line() {
        let p = Path::new("k");
        let good = encode(&[9; 32]);
        assert_eq!(*decode(&good, p).unwrap().seed(), [9; 32]);
        let cases = [
            ("gnomon-delegation v1\nseed: x\n", "first line"),
            ("", "first line"),
            ("gnomon-ed25519-key v1\n", "no `seed:`"),
            ("gnomon-ed25519-key v1\nseed AAAA\n", ":2:"),
            ("gnomon-ed25519-key v1\nseed: !!!\n", "base64"),
            ("gnomon-ed25519-key v1\nseed: AAAA\n", "32 bytes"),
            ("gnomon-ed25519-key v1\ncolour: blue\n", "unknown field"),
        ];
        for (text, want) in cases {
            let msg = decode(text, p).unwrap_err().to_string();
            assert!(msg.contains(want), "{text:?}: {msg}");
        }
        let twice = good.replace("public:", "seed:");
        assert!(decode(&twice, p).unwrap_err().to_string().contains("twice"));
        let other = B64.encode(KeyPair::from_seed(&[8; 32]).public());
        let mine = B64.encode(KeyPair::from_seed(&[9; 32]).public());
        let wrong = good.replace(&mine, &other);
        let msg = decode(&wrong, p).unwrap_err().to_string();
        assert!(
            msg.contains("does not match") && msg.contains("k:4:"),
            "{msg}"
        );
    }
}
