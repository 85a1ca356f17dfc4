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
//!
//! Checking allocates nothing (the blob is decoded into a buffer on the
//! stack, the signed data built in another), so libgnomon's `no_std`
//! build, whose allocator refuses every request, checks lists too; only
//! [`SigError`]'s words and [`armor`] allocate.

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
/// Longest blob read: an Ed25519 SSHSIG is 166 bytes and its namespace
/// (187 for lists); one far longer is no signature of ours.
const MAX_BLOB: usize = 512;
/// Its base64, without line ends.
const MAX_BASE64: usize = MAX_BLOB.div_ceil(3) * 4;
/// Longest armored text read, with room for line ends and white space.
const MAX_ARMORED: usize = 4096;
/// Longest signed data: the blob bounds the namespace and hash name, the
/// digest is at most 64 bytes.
const MAX_SIGNED: usize = MAX_BLOB + 4 + 64;

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
            SigError::Armor => f.write_str(
                "it is not an armored SSH signature (-----BEGIN SSH SIGNATURE----- … base64 … -----END SSH SIGNATURE-----)",
            ),
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

/// [`SigError`] without the text it quotes: what the allocation-free
/// checks return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    Armor,
    Magic,
    Version(u32),
    Structure(&'static str),
    KeyType,
    Namespace,
    HashAlgorithm,
    OtherKey([u8; 32]),
    Invalid,
}

impl Fault {
    /// The words, quoting what the blob says (allocates).
    fn explain(self, armored: &[u8]) -> SigError {
        let mut buf = [0u8; MAX_BLOB];
        let blob = dearmor(armored, &mut buf).unwrap_or(&[]);
        match self {
            Fault::Armor => SigError::Armor,
            Fault::Magic => SigError::Magic,
            Fault::Version(v) => SigError::Version(v),
            Fault::Structure(s) => SigError::Structure(s),
            Fault::KeyType => SigError::KeyType,
            Fault::Namespace => SigError::Namespace {
                found: field(blob, 1),
            },
            Fault::HashAlgorithm => SigError::HashAlgorithm(field(blob, 3)),
            Fault::OtherKey(k) => SigError::OtherKey(k),
            Fault::Invalid => SigError::Invalid,
        }
    }
}

/// The `n`th string after the version (0: the key), as text.
fn field(blob: &[u8], n: usize) -> String {
    let mut r = Reader::new(blob.get(10..).unwrap_or(&[]));
    let mut found = &[][..];
    for _ in 0..=n {
        found = r.string().unwrap_or(&[]);
    }
    String::from_utf8_lossy(found).into_owned()
}

/// The bytes an Ed25519 key signs for `message` in `namespace` (hash
/// `sha512`): what a PKCS#11 token is given to sign with CKM_EDDSA.
pub fn signed_data(namespace: &str, message: &[u8]) -> Vec<u8> {
    let mut digest = [0u8; 64];
    HashAlg::Sha512.digest(&[message], &mut digest);
    let mut out = Vec::with_capacity(6 + 16 + namespace.len() + 6 + 64);
    out.extend_from_slice(MAGIC);
    put_string(&mut out, namespace.as_bytes());
    put_string(&mut out, &[]);
    put_string(&mut out, b"sha512");
    put_string(&mut out, &digest);
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
    verify_in_place(armored, message, namespace, key).map_err(|f| f.explain(armored))
}

/// The key the signature says made it (its structure checked, not the
/// signature itself).
pub fn signer_of(armored: &[u8]) -> Result<[u8; 32], SigError> {
    signer_in_place(armored).map_err(|f| f.explain(armored))
}

/// [`verify`] without allocating.
pub(crate) fn verify_in_place(
    armored: &[u8],
    message: &[u8],
    namespace: &str,
    key: &[u8; 32],
) -> Result<(), Fault> {
    let mut buf = [0u8; MAX_BLOB];
    let sig = parse_blob(dearmor(armored, &mut buf)?)?;
    if sig.namespace != namespace.as_bytes() {
        return Err(Fault::Namespace);
    }
    if &sig.public != key {
        return Err(Fault::OtherKey(sig.public));
    }
    check(&sig, message)
}

/// [`signer_of`] without allocating.
pub(crate) fn signer_in_place(armored: &[u8]) -> Result<[u8; 32], Fault> {
    let mut buf = [0u8; MAX_BLOB];
    Ok(parse_blob(dearmor(armored, &mut buf)?)?.public)
}

/// Whether the signature verifies under the key it names, whatever its
/// namespace: tells "signed by another key" from "damaged". No allocation.
pub(crate) fn verifies_under_own_key(armored: &[u8], message: &[u8]) -> bool {
    let mut buf = [0u8; MAX_BLOB];
    dearmor(armored, &mut buf)
        .and_then(parse_blob)
        .is_ok_and(|sig| check(&sig, message).is_ok())
}

/// A parsed blob, borrowing from the decoded bytes.
struct Parsed<'a> {
    public: [u8; 32],
    namespace: &'a [u8],
    hash: Hash,
    signature: [u8; 64],
}

#[derive(Clone, Copy)]
enum Hash {
    Sha512,
    Sha256,
}

fn check(sig: &Parsed<'_>, message: &[u8]) -> Result<(), Fault> {
    let mut digest = [0u8; 64];
    let (name, len): (&[u8], usize) = match sig.hash {
        Hash::Sha512 => {
            HashAlg::Sha512.digest(&[message], &mut digest);
            (b"sha512", 64)
        }
        Hash::Sha256 => {
            digest[..32].copy_from_slice(&Sha256::digest(message));
            (b"sha256", 32)
        }
    };
    let mut data = [0u8; MAX_SIGNED];
    let mut w = Writer {
        buf: &mut data,
        len: 0,
    };
    w.put(MAGIC);
    w.string(sig.namespace);
    w.string(&[]);
    w.string(name);
    w.string(&digest[..len]);
    // The namespace came out of a blob of at most MAX_BLOB bytes, which
    // leaves room for the rest: the writer never runs out.
    let Some(data) = w.done() else {
        return Err(Fault::Structure("the namespace is too long"));
    };
    let key = VerifyingKey::from_bytes(&sig.public).map_err(|_| Fault::Invalid)?;
    key.verify_strict(data, &Signature::from_bytes(&sig.signature))
        .map_err(|_| Fault::Invalid)
}

/// A bounded writer into a stack buffer; `done` is `None` had it overrun.
struct Writer<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl<'b> Writer<'b> {
    fn put(&mut self, bytes: &[u8]) {
        let end = self.len.saturating_add(bytes.len());
        match self.buf.get_mut(self.len..end) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.len = end;
            }
            None => self.len = usize::MAX,
        }
    }

    fn string(&mut self, bytes: &[u8]) {
        match u32::try_from(bytes.len()) {
            Ok(n) => {
                self.put(&n.to_be_bytes());
                self.put(bytes);
            }
            Err(_) => self.len = usize::MAX,
        }
    }

    fn done(self) -> Option<&'b [u8]> {
        let Writer { buf, len } = self;
        buf.get(..len)
    }
}

/// The base64 between the armor lines, decoded into `buf`. Line ends may
/// be LF or CRLF; white space around the whole is allowed, text inside is
/// not.
fn dearmor<'b>(armored: &[u8], buf: &'b mut [u8; MAX_BLOB]) -> Result<&'b [u8], Fault> {
    if armored.len() > MAX_ARMORED {
        return Err(Fault::Armor);
    }
    let text = core::str::from_utf8(armored)
        .map_err(|_| Fault::Armor)?
        .trim();
    let body = text
        .strip_prefix(BEGIN)
        .and_then(|t| t.strip_suffix(END))
        .ok_or(Fault::Armor)?;
    if !body.starts_with(['\r', '\n']) || !body.ends_with('\n') {
        return Err(Fault::Armor);
    }
    let mut b64 = [0u8; MAX_BASE64];
    let mut n = 0;
    for b in body.bytes().filter(|b| !matches!(b, b'\r' | b'\n')) {
        *b64.get_mut(n).ok_or(Fault::Armor)? = b;
        n += 1;
    }
    if n == 0 {
        return Err(Fault::Armor);
    }
    let len = STANDARD
        .decode_slice(&b64[..n], &mut buf[..])
        .map_err(|_| Fault::Armor)?;
    Ok(&buf[..len])
}

fn parse_blob(blob: &[u8]) -> Result<Parsed<'_>, Fault> {
    let mut r = Reader::new(blob);
    if r.take(MAGIC.len()) != Some(&MAGIC[..]) {
        return Err(Fault::Magic);
    }
    let version = r.u32().ok_or(Fault::Structure("truncated version"))?;
    if version != VERSION {
        return Err(Fault::Version(version));
    }
    let public = r.string().ok_or(Fault::Structure("truncated public key"))?;
    let public = key::parse_blob(public).map_err(|e| match e {
        e if e == key::NOT_ED25519 => Fault::KeyType,
        e => Fault::Structure(e),
    })?;
    let namespace = r.string().ok_or(Fault::Structure("truncated namespace"))?;
    let reserved = r
        .string()
        .ok_or(Fault::Structure("truncated reserved field"))?;
    if !reserved.is_empty() {
        // OpenSSH writes it empty and signs it empty; a signer that fills
        // it is not one we know.
        return Err(Fault::Structure("the reserved field is not empty"));
    }
    let hash = match r
        .string()
        .ok_or(Fault::Structure("truncated hash algorithm"))?
    {
        b"sha512" => Hash::Sha512,
        b"sha256" => Hash::Sha256,
        _ => return Err(Fault::HashAlgorithm),
    };
    let sig = r.string().ok_or(Fault::Structure("truncated signature"))?;
    if !r.is_empty() {
        return Err(Fault::Structure("bytes after the signature"));
    }
    let mut s = Reader::new(sig);
    if s.string()
        .ok_or(Fault::Structure("truncated signature type"))?
        != KEY_TYPE.as_bytes()
    {
        return Err(Fault::KeyType);
    }
    let signature: [u8; 64] = s
        .string()
        .and_then(|b| b.try_into().ok())
        .ok_or(Fault::Structure("the Ed25519 signature is not 64 bytes"))?;
    if !s.is_empty() {
        return Err(Fault::Structure("bytes after the Ed25519 signature"));
    }
    Ok(Parsed {
        public,
        namespace,
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
