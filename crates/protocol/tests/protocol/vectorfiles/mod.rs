//! Finding and decoding the external vectors in `tests/external-vectors/` (see its
//! README for provenance). Every loader panics with the file's path on any
//! problem: a vector that cannot be read is a failed test, never a skip.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;

use base64::Engine as _;
use ed25519_dalek::{Signature, VerifyingKey};
use gnomon_protocol::wire::{self, Message};
use gnomon_protocol::Tag;
use serde_json::Value;

/// The IETF interop harness key pair, which many captures were made with.
pub const INTEROP_SEED: &str = "06e5e2dc28697bb363de00976af2d422819bc67832ad655ade96081ecc1bcdb5";
pub const INTEROP_PUB: &str = "231bbb82a8c9f5353a231b0ef30c59c40153e6d7ba15c65942ae6f5c5977e491";
/// int08h's roughenough key (base64 `AW5uAoTSTDfG5NfY1bTh08GUnOqlRb+HVhbJ3ODJvsE=`).
pub const INT08H_PUB_B64: &str = "AW5uAoTSTDfG5NfY1bTh08GUnOqlRb+HVhbJ3ODJvsE=";
/// Netnod's sth2.roughtime.netnod.se, the draft-07 server in roughly's captures.
pub const NETNOD_PUB_B64: &str = "T/xxX4ERUBAOpt64Z8phWamKsASZxJ0VWuiPm3GS/8g=";

/// `tests/external-vectors`: the external vectors, copied into the repository.
pub fn dir() -> PathBuf {
    let d = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/external-vectors"
    ));
    assert!(
        d.join("README.md").is_file(),
        "external test vectors not found at {}: they belong in the repository",
        d.display()
    );
    d
}

pub fn read(rel: &str) -> Vec<u8> {
    let p = dir().join(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("cannot read vector {}: {e}", p.display()))
}

pub fn read_text(rel: &str) -> String {
    String::from_utf8(read(rel)).unwrap_or_else(|_| panic!("vector {rel} is not UTF-8"))
}

pub fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s).unwrap_or_else(|e| panic!("bad hex {:.40}…: {e}", s))
}

pub fn unhex32(s: &str) -> [u8; 32] {
    unhex(s).try_into().expect("32-byte hex value")
}

pub fn unb64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .unwrap_or_else(|e| panic!("bad base64 {:.40}…: {e}", s))
}

pub fn unb64_32(s: &str) -> [u8; 32] {
    unb64(s).try_into().expect("32-byte base64 value")
}

pub fn interop_seed() -> [u8; 32] {
    unhex32(INTEROP_SEED)
}

pub fn interop_pub() -> [u8; 32] {
    unhex32(INTEROP_PUB)
}

/// One signed batch: Cloudflare JSON or its Sturdy EDN repackaging. Keys are
/// present as the source gives them (Cloudflare: seeds; Sturdy: both, except
/// its draft-14 file, which has public keys only).
#[derive(Debug, Default)]
pub struct Batch {
    pub root_seed: Option<[u8; 32]>,
    pub online_seed: Option<[u8; 32]>,
    pub root_pub: Option<[u8; 32]>,
    pub online_pub: Option<[u8; 32]>,
    pub requests: Vec<Vec<u8>>,
    pub replies: Vec<Vec<u8>>,
}

fn json(rel: &str) -> Value {
    serde_json::from_str(&read_text(rel)).unwrap_or_else(|e| panic!("{rel}: bad JSON: {e}"))
}

fn json_str<'a>(v: &'a Value, key: &str, rel: &str) -> &'a str {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{rel}: no string {key:?}"))
}

fn json_hex_list(v: &Value, key: &str, rel: &str) -> Vec<Vec<u8>> {
    v.get(key)
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("{rel}: no array {key:?}"))
        .iter()
        .map(|s| unhex(s.as_str().expect("hex string")))
        .collect()
}

/// A Cloudflare `protocol/testdata` JSON file.
pub fn cloudflare(rel: &str) -> Batch {
    let v = json(rel);
    let b = Batch {
        root_seed: Some(unhex32(json_str(&v, "root_key", rel))),
        online_seed: Some(unhex32(json_str(&v, "online_key", rel))),
        requests: json_hex_list(&v, "request", rel),
        replies: json_hex_list(&v, "replies", rel),
        ..Batch::default()
    };
    assert_eq!(
        b.requests.len(),
        b.replies.len(),
        "{rel}: one reply per request"
    );
    b
}

/// Text with `;` comment lines removed, so commented-out data is never read.
fn edn_code(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with(';'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text after keyword `key` (`:request`, …), whitespace skipped, at its
/// first occurrence whose value starts with `open` (`"` or `[`).
fn edn_value<'a>(code: &'a str, key: &str, open: char) -> Option<&'a str> {
    let mut from = 0;
    while let Some(i) = code[from..].find(key) {
        let end = from + i + key.len();
        let rest = &code[end..];
        let value = rest.trim_start();
        if value.len() < rest.len() && value.starts_with(open) {
            return Some(value);
        }
        from = end;
    }
    None
}

/// Split off the next `"…"` string (EDN hex strings have no escapes).
fn next_string(s: &str) -> Option<(&str, &str)> {
    let a = s.find('"')?;
    let b = a + 1 + s[a + 1..].find('"')?;
    Some((&s[a + 1..b], &s[b + 1..]))
}

/// The string value of `key`, if any (comment lines are not read).
pub fn edn_str(text: &str, key: &str) -> Option<String> {
    let code = edn_code(text);
    let value = edn_value(&code, key, '"')?;
    next_string(value).map(|(s, _)| s.to_owned())
}

/// The strings of the vector value of `key` (`[ "…" "…" ]`), comment lines
/// not read.
pub fn edn_strs(text: &str, key: &str) -> Vec<String> {
    let code = edn_code(text);
    let Some(value) = edn_value(&code, key, '[') else {
        return Vec::new();
    };
    let body = &value[1..value.find(']').expect("closed EDN vector")];
    let mut out = Vec::new();
    let mut s = body;
    while let Some((v, r)) = next_string(s) {
        out.push(v.to_owned());
        s = r;
    }
    out
}

/// A Sturdy `.edn` file.
pub fn sturdy(rel: &str) -> Batch {
    let text = read_text(rel);
    let key = |k: &str| edn_str(&text, k).map(|h| unhex32(&h));
    let b = Batch {
        root_seed: key(":lt-prv"),
        online_seed: key(":online-prv"),
        root_pub: key(":lt-pub"),
        online_pub: key(":online-pub"),
        requests: edn_strs(&text, ":request")
            .iter()
            .map(|h| unhex(h))
            .collect(),
        replies: edn_strs(&text, ":replies")
            .iter()
            .map(|h| unhex(h))
            .collect(),
    };
    assert!(!b.requests.is_empty(), "{rel}: no :request");
    assert_eq!(
        b.requests.len(),
        b.replies.len(),
        "{rel}: one reply per request"
    );
    b
}

/// One exchange captured by roughly's interop tests.
#[derive(Debug)]
pub struct Capture {
    /// 1: roughly was the client; 0: roughly was the server.
    pub role: u64,
    pub other: String,
    pub request: Vec<u8>,
    pub response: Vec<u8>,
}

pub const ROUGHLY: &str = "roughly/packets.json";

pub fn roughly() -> Vec<Capture> {
    let v = json(ROUGHLY);
    v.as_array()
        .expect("array of captures")
        .iter()
        .map(|e| Capture {
            role: e["role"].as_u64().expect("role"),
            other: json_str(e, "other", ROUGHLY).to_owned(),
            request: unb64(json_str(e, "request", ROUGHLY)),
            response: unb64(json_str(e, "response", ROUGHLY)),
        })
        .collect()
}

/// One exchange of a malfeasance report.
#[derive(Debug)]
pub struct ReportEntry {
    pub public_key: [u8; 32],
    pub rand: Option<Vec<u8>>,
    pub request: Vec<u8>,
    pub response: Vec<u8>,
}

pub const DRAFT19_REPORT: &str =
    "ietf-draft-19/draft-ietf-ntp-roughtime-19-appendix-b-malfeasance-report.json";

pub fn draft19_report() -> Vec<ReportEntry> {
    let v = json(DRAFT19_REPORT);
    v["responses"]
        .as_array()
        .expect("responses array")
        .iter()
        .map(|e| ReportEntry {
            public_key: unb64_32(json_str(e, "publicKey", DRAFT19_REPORT)),
            rand: e.get("rand").and_then(Value::as_str).map(unb64),
            request: unb64(json_str(e, "request", DRAFT19_REPORT)),
            response: unb64(json_str(e, "response", DRAFT19_REPORT)),
        })
        .collect()
}

/// The message of a response: unframed if it carries ROUGHTIM.
pub fn body(packet: &[u8]) -> &[u8] {
    if wire::has_magic(packet) {
        wire::unframe(packet).expect("valid ROUGHTIM framing")
    } else {
        packet
    }
}

/// Plain Ed25519 over `context ‖ message`, independent of the crate's own
/// verifier, so context strings can be swapped at will.
pub fn ed25519_ok(public: &[u8; 32], context: &[u8], message: &[u8], sig: &[u8]) -> bool {
    let Ok(key) = VerifyingKey::from_bytes(public) else {
        return false;
    };
    let Ok(sig) = Signature::from_slice(sig) else {
        return false;
    };
    let mut signed = context.to_vec();
    signed.extend_from_slice(message);
    key.verify_strict(&signed, &sig).is_ok()
}

/// The signed parts of a response: (SREP bytes, SREP SIG, DELE bytes,
/// CERT SIG, DELE PUBK).
pub struct Signed<'a> {
    pub srep: &'a [u8],
    pub srep_sig: &'a [u8],
    pub dele: &'a [u8],
    pub cert_sig: &'a [u8],
    pub online: [u8; 32],
}

pub fn signed_parts<'a>(msg: &Message<'a>) -> Signed<'a> {
    let cert = msg.nested(Tag::CERT).expect("CERT");
    let dele = cert.require(Tag::DELE).expect("DELE");
    let online = *Message::parse(dele)
        .expect("DELE parses")
        .fixed::<32>(Tag::PUBK)
        .expect("PUBK");
    Signed {
        srep: msg.require(Tag::SREP).expect("SREP"),
        srep_sig: msg.require(Tag::SIG).expect("SIG"),
        dele,
        cert_sig: cert.require(Tag::SIG).expect("CERT SIG"),
        online,
    }
}

/// Byte-for-byte equality with a readable failure: lengths and the first
/// differing offset instead of two kilobytes of hex.
pub fn assert_same_bytes(ours: &[u8], theirs: &[u8], what: &str) {
    if ours == theirs {
        return;
    }
    let at = ours
        .iter()
        .zip(theirs)
        .position(|(a, b)| a != b)
        .unwrap_or(ours.len().min(theirs.len()));
    let window = |b: &[u8]| hex::encode(&b[at.min(b.len())..(at + 16).min(b.len())]);
    panic!(
        "{what}: ours {} bytes, vector {} bytes, first difference at offset {at}: \
         ours {}… vector {}…",
        ours.len(),
        theirs.len(),
        window(ours),
        window(theirs)
    );
}
