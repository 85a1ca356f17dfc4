//! OpenSSH signatures (SSHSIG), the format `ssh-keygen -Y sign` writes and
//! `ssh-keygen -Y verify` checks, for Ed25519 keys only.
//!
//! ```text
//! blob        = "SSHSIG" ‖ uint32 1 ‖ string publickey ‖ string namespace
//!               ‖ string reserved ‖ string hash_algorithm ‖ string signature
//! signed data = "SSHSIG" ‖ string namespace ‖ string reserved
//!               ‖ string hash_algorithm ‖ string H(message)
//! ```
//!
//! `string` is a big-endian uint32 length and that many bytes. The armored
//! form is the blob in base64 between `-----BEGIN SSH SIGNATURE-----` and
//! `-----END SSH SIGNATURE-----`. Every length is checked against what is
//! left before it is used, so no input makes the parser panic or read past
//! its slice; bytes after the signature are refused, as OpenSSH refuses them.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ed25519_dalek::{Signature, VerifyingKey};
use sha2::{Digest, Sha256};

use super::key::{self, KEY_TYPE};
use crate::hash::HashAlg;

const MAGIC: &[u8; 6] = b"SSHSIG";
const VERSION: u32 = 1;
const BEGIN: &str = "-----BEGIN SSH SIGNATURE-----";
const END: &str = "-----END SSH SIGNATURE-----";
/// `ssh-keygen` wraps the base64 at 70 columns.
const COLUMNS: usize = 70;
/// An Ed25519 SSHSIG is under 300 bytes armored; anything far longer is
/// not one, and is refused before it is decoded.
const MAX_ARMORED: usize = 16 * 1024;

/// Why an armored SSHSIG does not verify.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SigError {
    /// No `-----BEGIN SSH SIGNATURE-----` … `-----END SSH SIGNATURE-----`
    /// around base64, or the text is too long to be one.
    Armor,
    /// The blob does not start with `SSHSIG`.
    Magic,
    /// A version other than 1.
    Version(u32),
    /// A length runs past the end, or bytes follow the signature.
    Structure(&'static str),
    /// The signing key is not `ssh-ed25519`.
    KeyType,
    /// The signature is for another namespace (a git commit, a file, …).
    Namespace {
        /// The namespace the signature carries.
        found: String,
    },
    /// A hash algorithm other than `sha512` or `sha256`.
    HashAlgorithm(String),
    /// Made by a key other than the one asked about.
    OtherKey([u8; 32]),
    /// The Ed25519 signature does not verify over the message.
    Invalid,
}

impl fmt::Display for SigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SigError::Armor => f.write_str("it is not an armored SSH signature (-----BEGIN SSH SIGNATURE----- … base64 … -----END SSH SIGNATURE-----)"),
            SigError::Magic => f.write_str("its content does not start with SSHSIG"),
            SigError::Version(v) => write!(f, "it is SSHSIG version {v}, and only version 1 exists"),
            SigError::Structure(what) => write!(f, "it is not well formed ({what})"),
            SigError::KeyType => f.write_str("it was made by a key that is not ssh-ed25519"),
            SigError::Namespace { found } => {
                write!(f, "it was made for namespace {found:?}, not {:?}", super::NAMESPACE)
            }
            SigError::HashAlgorithm(h) => write!(f, "it hashes with {h:?}, neither sha512 nor sha256"),
            SigError::OtherKey(k) => write!(f, "it was made by key {}", key::fingerprint(k)),
            SigError::Invalid => f.write_str("it does not verify over the document"),
        }
    }
}

/// The bytes an Ed25519 key signs for `message` in `namespace` (hash
/// `sha512`): what a PKCS#11 token is given to sign with CKM_EDDSA.
pub fn signed_data(namespace: &str, message: &[u8]) -> Vec<u8> {
    let mut digest = [0u8; 64];
    HashAlg::Sha512.digest(&[message], &mut digest);
    signed_data_with(namespace, "sha512", &digest)
}

fn signed_data_with(namespace: &str, hash_algorithm: &str, digest: &[u8]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(6 + 16 + namespace.len() + hash_algorithm.len() + digest.len());
    out.extend_from_slice(MAGIC);
    put_string(&mut out, namespace.as_bytes());
    put_string(&mut out, &[]);
    put_string(&mut out, hash_algorithm.as_bytes());
    put_string(&mut out, digest);
    out
}

/// The armored SSHSIG (hash `sha512`) of a signature over
/// [`signed_data`]`(namespace, message)`, wrapped as `ssh-keygen` wraps it.
pub fn armor(public: &[u8; 32], namespace: &str, signature: &[u8; 64]) -> String {
    let mut blob = Vec::with_capacity(160 + namespace.len());
    blob.extend_from_slice(MAGIC);
    blob.extend_from_slice(&VERSION.to_be_bytes());
    put_string(&mut blob, &key::blob(public));
    put_string(&mut blob, namespace.as_bytes());
    put_string(&mut blob, &[]);
    put_string(&mut blob, b"sha512");
    let mut sig = Vec::with_capacity(4 + KEY_TYPE.len() + 4 + 64);
    put_string(&mut sig, KEY_TYPE.as_bytes());
    put_string(&mut sig, signature);
    put_string(&mut blob, &sig);

    let b64 = STANDARD.encode(&blob);
    let mut out = String::with_capacity(b64.len() + b64.len() / COLUMNS + 2 * BEGIN.len() + 4);
    out.push_str(BEGIN);
    out.push('\n');
    // base64 is ASCII, so every chunk boundary is a char boundary.
    for line in b64.as_bytes().chunks(COLUMNS) {
        out.extend(line.iter().map(|&b| char::from(b)));
        out.push('\n');
    }
    out.push_str(END);
    out.push('\n');
    out
}

/// Check that `armored` is an SSHSIG by `key` in `namespace` over `message`.
pub fn verify(
    armored: &[u8],
    message: &[u8],
    namespace: &str,
    key: &[u8; 32],
) -> Result<(), SigError> {
    let sig = parse(armored)?;
    if sig.namespace != namespace.as_bytes() {
        return Err(SigError::Namespace {
            found: String::from_utf8_lossy(&sig.namespace).into_owned(),
        });
    }
    if &sig.public != key {
        return Err(SigError::OtherKey(sig.public));
    }
    check(&sig, message)
}

/// The key the signature says made it (its structure checked, not the
/// signature itself).
pub fn signer_of(armored: &[u8]) -> Result<[u8; 32], SigError> {
    Ok(parse(armored)?.public)
}

/// Whether the signature verifies under the key it names, whatever its
/// namespace: tells "signed by another key" from "damaged".
pub(crate) fn verifies_under_own_key(armored: &[u8], message: &[u8]) -> bool {
    parse(armored).is_ok_and(|sig| check(&sig, message).is_ok())
}

/// A parsed blob.
struct Parsed {
    public: [u8; 32],
    namespace: Vec<u8>,
    hash: Hash,
    signature: [u8; 64],
}

#[derive(Clone, Copy)]
enum Hash {
    Sha512,
    Sha256,
}

impl Hash {
    fn name(self) -> &'static str {
        match self {
            Hash::Sha512 => "sha512",
            Hash::Sha256 => "sha256",
        }
    }
}

fn check(sig: &Parsed, message: &[u8]) -> Result<(), SigError> {
    let namespace = core::str::from_utf8(&sig.namespace)
        .map_err(|_| SigError::Structure("the namespace is not UTF-8"))?;
    let data = match sig.hash {
        Hash::Sha512 => {
            let mut digest = [0u8; 64];
            HashAlg::Sha512.digest(&[message], &mut digest);
            signed_data_with(namespace, sig.hash.name(), &digest)
        }
        Hash::Sha256 => signed_data_with(namespace, sig.hash.name(), &Sha256::digest(message)),
    };
    let key = VerifyingKey::from_bytes(&sig.public).map_err(|_| SigError::Invalid)?;
    key.verify_strict(&data, &Signature::from_bytes(&sig.signature))
        .map_err(|_| SigError::Invalid)
}

fn parse(armored: &[u8]) -> Result<Parsed, SigError> {
    parse_blob(&dearmor(armored)?)
}

/// The base64 between the armor lines, decoded. Line ends may be LF or
/// CRLF; white space around the whole is allowed, text inside is not.
fn dearmor(armored: &[u8]) -> Result<Vec<u8>, SigError> {
    if armored.len() > MAX_ARMORED {
        return Err(SigError::Armor);
    }
    let text = core::str::from_utf8(armored)
        .map_err(|_| SigError::Armor)?
        .trim();
    let body = text
        .strip_prefix(BEGIN)
        .and_then(|t| t.strip_suffix(END))
        .ok_or(SigError::Armor)?;
    if !body.starts_with(['\r', '\n']) || !body.ends_with('\n') {
        return Err(SigError::Armor);
    }
    let b64: Vec<u8> = body
        .bytes()
        .filter(|b| !matches!(b, b'\r' | b'\n'))
        .collect();
    if b64.is_empty() {
        return Err(SigError::Armor);
    }
    STANDARD.decode(&b64).map_err(|_| SigError::Armor)
}

fn parse_blob(blob: &[u8]) -> Result<Parsed, SigError> {
    let mut r = Reader::new(blob);
    if r.take(MAGIC.len()) != Some(&MAGIC[..]) {
        return Err(SigError::Magic);
    }
    let version = r.u32().ok_or(SigError::Structure("truncated version"))?;
    if version != VERSION {
        return Err(SigError::Version(version));
    }
    let public = r
        .string()
        .ok_or(SigError::Structure("truncated public key"))?;
    let public = key::parse_blob(public).map_err(|e| match e {
        e if e == key::NOT_ED25519 => SigError::KeyType,
        e => SigError::Structure(e),
    })?;
    let namespace = r
        .string()
        .ok_or(SigError::Structure("truncated namespace"))?;
    let reserved = r
        .string()
        .ok_or(SigError::Structure("truncated reserved field"))?;
    if !reserved.is_empty() {
        // OpenSSH writes it empty and signs it empty; a signer that fills
        // it is not one we know.
        return Err(SigError::Structure("the reserved field is not empty"));
    }
    let hash = match r
        .string()
        .ok_or(SigError::Structure("truncated hash algorithm"))?
    {
        b"sha512" => Hash::Sha512,
        b"sha256" => Hash::Sha256,
        other => {
            return Err(SigError::HashAlgorithm(
                String::from_utf8_lossy(other).into_owned(),
            ))
        }
    };
    let sig = r
        .string()
        .ok_or(SigError::Structure("truncated signature"))?;
    if !r.is_empty() {
        return Err(SigError::Structure("bytes after the signature"));
    }
    let mut s = Reader::new(sig);
    if s.string()
        .ok_or(SigError::Structure("truncated signature type"))?
        != KEY_TYPE.as_bytes()
    {
        return Err(SigError::KeyType);
    }
    let signature: [u8; 64] = s
        .string()
        .and_then(|b| b.try_into().ok())
        .ok_or(SigError::Structure("the Ed25519 signature is not 64 bytes"))?;
    if !s.is_empty() {
        return Err(SigError::Structure("bytes after the Ed25519 signature"));
    }
    Ok(Parsed {
        public,
        namespace: namespace.to_vec(),
        hash,
        signature,
    })
}

/// Append an SSH `string`: uint32 length ‖ bytes.
pub(crate) fn put_string(out: &mut Vec<u8>, bytes: &[u8]) {
    // Every string written here is a key, a digest, a signature or a short
    // name: far below 4 GiB.
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// A bounded reader of SSH wire data: every read checks what is left.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { rest: bytes }
    }

    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.rest.len() {
            return None;
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Some(head)
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        let b = self.take(4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn string(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()?;
        self.take(usize::try_from(n).ok()?)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }
}
