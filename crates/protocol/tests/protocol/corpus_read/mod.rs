//! Reading the conformance corpus back: JSON accessors, and the protocol
//! rules written out by hand from the drafts and RFC 10049 (time encodings, chaining
//! rules, the Merkle hash), so that `tests/corpus.rs` checks the files
//! against an independent reading rather than against the code that wrote
//! them.

use std::path::PathBuf;

use base64::Engine;
use gnomon_protocol::merkle::Orientation;
use gnomon_protocol::profile::{HashAlg, TimeEncoding};
use gnomon_protocol::wire::{self, Message};
use gnomon_protocol::{KeyPair, Profile, Tag, Verified};
use serde_json::Value;
use sha2::{Digest, Sha512, Sha512_256};

/// The signing time of every profile file (chain step k adds k seconds).
pub(crate) const NOW_US: u64 = 1_791_203_696_789_012;
pub(crate) const SECOND: u64 = 1_000_000;

pub(crate) fn corpus_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/vectors"));
    assert!(dir.is_dir(), "corpus directory missing: {}", dir.display());
    dir
}

pub(crate) fn load(name: &str) -> Value {
    let path = corpus_dir().join(name);
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub(crate) fn st<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key}: not a string in {v:.200}"))
}

pub(crate) fn hx(v: &Value, key: &str) -> Vec<u8> {
    hex::decode(st(v, key)).unwrap_or_else(|e| panic!("{key}: {e}"))
}

/// A u64 written as a decimal string.
pub(crate) fn dec(v: &Value, key: &str) -> u64 {
    st(v, key).parse().unwrap_or_else(|e| panic!("{key}: {e}"))
}

pub(crate) fn num(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key}: not a number"))
}

pub(crate) fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key}: not an array"))
}

pub(crate) fn key32(bytes: &[u8]) -> [u8; 32] {
    bytes.try_into().expect("32-byte key")
}

/// The message inside a packet, or the bare message.
pub(crate) fn body(packet: &[u8]) -> &[u8] {
    if wire::has_magic(packet) {
        wire::unframe(packet).expect("framed")
    } else {
        packet
    }
}

/// SHA-512("gnomon corpus v1: " ‖ label), as the README documents.
pub(crate) fn derive(label: &str) -> [u8; 64] {
    Sha512::new()
        .chain_update(b"gnomon corpus v1: ")
        .chain_update(label.as_bytes())
        .finalize()
        .into()
}

/// Check a key object (seed derived from its label, public key from the
/// seed, base64 forms) and return the public key.
pub(crate) fn check_key(k: &Value) -> [u8; 32] {
    let label = st(k, "label");
    let seed = key32(&hx(k, "seed_hex"));
    assert_eq!(seed[..], derive(label)[..32], "seed of {label}");
    let public = KeyPair::from_seed(&seed).public();
    assert_eq!(hx(k, "public_hex"), public, "public key of {label}");
    let b64 = base64::engine::general_purpose::STANDARD;
    assert_eq!(st(k, "seed_base64"), b64.encode(seed), "{label}");
    assert_eq!(st(k, "public_base64"), b64.encode(public), "{label}");
    public
}

/// MJD << 40 | µs since UTC midnight; 1970-01-01 is MJD 40587.
pub(crate) fn mjd(us: u64) -> u64 {
    let day = 86_400 * SECOND;
    ((us / day + 40_587) << 40) | (us % day)
}

/// A point in time in `p`'s wire encoding (whole seconds only).
pub(crate) fn reading_raw(p: &Profile, us: u64) -> u64 {
    match p.time {
        TimeEncoding::UnixMicros => us,
        TimeEncoding::MjdMicros => mjd(us),
        TimeEncoding::UnixSeconds => us / SECOND,
    }
}

/// The wire time values for a response signed at `now_us` with a 1.5 s
/// radius, from the time encodings of each version rather than time.rs: (midpoint µs, radius
/// µs, MIDP raw, RADI raw).
pub(crate) fn reading(p: &Profile, now_us: u64) -> (u64, u64, u64, u32) {
    match p.time {
        TimeEncoding::UnixMicros => (now_us, 1_500_000, now_us, 1_500_000),
        TimeEncoding::MjdMicros => (now_us, 1_500_000, mjd(now_us), 1_500_000),
        TimeEncoding::UnixSeconds => {
            // MIDP rounds down; RADI covers the lost fraction plus 1.5 s.
            let lost = now_us % SECOND;
            let radi = (1_500_000 + lost).div_ceil(SECOND).max(p.min_radius.into()) as u32;
            let midp = now_us / SECOND;
            (midp * SECOND, u64::from(radi) * SECOND, midp, radi)
        }
    }
}

/// Compare a verification result and the response's raw fields with an
/// `expect` object.
pub(crate) fn check_expect(v: &Verified, response: &[u8], e: &Value, what: &str) {
    let msg = Message::parse(body(response)).expect("verified response parses");
    let srep = msg.nested(Tag::SREP).expect("SREP");
    assert_eq!(v.profile.name, st(e, "profile"), "{what}");
    assert_eq!(v.profile.version.to_string(), st(e, "version"), "{what}");
    assert_eq!(v.midpoint_us, dec(e, "midpoint_unix_us"), "{what}");
    assert_eq!(v.radius_us, dec(e, "radius_us"), "{what}");
    assert_eq!(srep.u64(Tag::MIDP).unwrap(), dec(e, "midp_raw"), "{what}");
    assert_eq!(
        u64::from(srep.u32(Tag::RADI).unwrap()),
        num(e, "radi_raw"),
        "{what}"
    );
    assert_eq!(
        u64::from(msg.u32(Tag::INDX).unwrap()),
        num(e, "indx"),
        "{what}"
    );
    assert_eq!(u64::from(v.path_depth), num(e, "path_depth"), "{what}");
    assert_eq!(st(e, "orientation"), "hash-first", "{what}");
    assert_eq!(v.orientation, Orientation::HashFirst, "{what}");
    assert_eq!(
        Some(v.legacy_context),
        e["legacy_context"].as_bool(),
        "{what}"
    );
}

/// The corpus name of a verification failure: the generator's own naming.
pub(crate) use crate::corpus_gen::error_class as class;

fn sha512(parts: &[&[u8]]) -> Vec<u8> {
    let mut h = Sha512::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().to_vec()
}

/// The Merkle hash of `p`, by hand: SHA-512, SHA-512[:32] or SHA-512/256.
pub(crate) fn merkle_hash(p: &Profile, parts: &[&[u8]]) -> Vec<u8> {
    match p.hash {
        HashAlg::Sha512_256 => {
            let mut h = Sha512_256::new();
            parts.iter().for_each(|x| h.update(x));
            h.finalize().to_vec()
        }
        alg => sha512(parts)[..alg.len()].to_vec(),
    }
}

/// Each chaining rule of the chain file, written out from the chaining rules of each version
/// rather than taken from chain.rs.
pub(crate) fn chain_by_hand(profile: &str, previous: &[u8], rand: &[u8]) -> Vec<u8> {
    let unframed = if wire::has_magic(previous) {
        &previous[12..]
    } else {
        previous
    };
    match profile {
        "google" => sha512(&[&sha512(&[previous]), rand]),
        "draft-02" => sha512(&[unframed, rand]),
        "draft-07" => Sha512_256::new()
            .chain_update(unframed)
            .chain_update(rand)
            .finalize()
            .to_vec(),
        "draft-11" => sha512(&[unframed, rand])[..32].to_vec(),
        "draft-14" | "rfc-10049" => sha512(&[previous, rand])[..32].to_vec(),
        other => panic!("no hand-written rule for {other}"),
    }
}
