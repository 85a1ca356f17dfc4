//! Decoding any request or response into a tree for people: the detected
//! version, every tag with its meaning, times in UTC, and, given a key,
//! whether the signatures hold.

use base64::Engine;
use gnomon_protocol::profile::{homonym, wire_label, Contexts};
use gnomon_protocol::request::srv_for;
use gnomon_protocol::time::FOREVER;
use gnomon_protocol::verify::SentRequest;
use gnomon_protocol::wire::{self, Message, PACKET_HEADER};
use gnomon_protocol::{
    verify_response, Profile, PublicKey, Scheme, Tag, Verified, VerifyError, Version, WireError,
};

use crate::time::format_utc;

mod text;
pub use text::{hex, kind_name, to_text};

/// What the bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Has NONC and no SREP.
    Request,
    /// Has SIG, SREP and CERT.
    Response,
    /// A well-formed message that is neither.
    Other,
}

/// One tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The tag as text (`PAD\xff` for non-printing bytes).
    pub tag: String,
    /// The raw value.
    pub value: Vec<u8>,
    /// What the value means, when known.
    pub meaning: Option<String>,
    /// Tags of a nested message (SREP, CERT, DELE).
    pub children: Vec<Node>,
}

/// A decoded message.
#[derive(Clone, Debug)]
pub struct Decoded {
    /// Request or response.
    pub kind: Kind,
    /// Whether it has the ROUGHTIM header.
    pub framed: bool,
    /// Bytes in all.
    pub len: usize,
    /// The version's profile, when it can be told.
    pub profile: Option<&'static Profile>,
    /// How the version was told, or why it could not be.
    pub version_note: String,
    /// Versions a request offers, ascending as sent.
    pub offered: Vec<Version>,
    /// The top-level tags.
    pub nodes: Vec<Node>,
}

/// Signature checks of a response against a long-term key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signatures {
    /// DELE signed by the long-term key.
    pub delegation: bool,
    /// SREP signed by the delegated online key.
    pub response: bool,
    /// They held only with the version's legacy context strings.
    pub legacy_context: bool,
    /// Full verification against the request, when one was given.
    pub full: Option<Result<Verified, VerifyError>>,
}

/// Decode a request or response.
pub fn decode(bytes: &[u8]) -> Result<Decoded, WireError> {
    let framed = wire::has_magic(bytes);
    let body = if framed { wire::unframe(bytes)? } else { bytes };
    let msg = Message::parse(body)?;
    let kind = if msg.get(Tag::SREP).is_some() && msg.get(Tag::SIG).is_some() {
        Kind::Response
    } else if msg.get(Tag::NONC).is_some() {
        Kind::Request
    } else {
        Kind::Other
    };
    let (profile, version_note, offered) = match kind {
        Kind::Request => request_version(bytes),
        Kind::Response => response_version(framed, &msg),
        Kind::Other => (None, "neither a request nor a response".into(), Vec::new()),
    };
    Ok(Decoded {
        kind,
        framed,
        len: bytes.len(),
        profile,
        version_note,
        offered,
        nodes: nodes(&msg, profile, kind),
    })
}

fn request_version(bytes: &[u8]) -> (Option<&'static Profile>, String, Vec<Version>) {
    let Ok(sent) = SentRequest::parse(bytes) else {
        return (None, "a request without VER".into(), Vec::new());
    };
    let offered: Vec<Version> = sent.offered().collect();
    match sent.primary() {
        Some(p) if !sent.framed => (Some(p), "Google (bare message, no VER)".into(), offered),
        Some(p) => (
            Some(p),
            format!(
                "request in {} format{}",
                p.label(),
                if sent.has_type { ", with TYPE" } else { "" }
            ),
            offered,
        ),
        None => (None, "offers no version gnomon knows".into(), offered),
    }
}

fn response_version(
    framed: bool,
    msg: &Message<'_>,
) -> (Option<&'static Profile>, String, Vec<Version>) {
    if !framed {
        return (
            Some(Profile::google()),
            "Google (bare message)".into(),
            Vec::new(),
        );
    }
    let signed = msg
        .nested(Tag::SREP)
        .ok()
        .and_then(|s| s.u32(Tag::VER).ok());
    let top = msg.u32(Tag::VER).ok();
    let has_type = msg.get(Tag::TYPE).is_some();
    let Some(v) = signed.or(top).map(Version) else {
        return (None, "a packet without VER".into(), Vec::new());
    };
    if let Some(h) = homonym(v, top == Some(v.0), signed == Some(v.0), has_type) {
        let note = format!(
            "VER {v} in the layout of {}, not the version the number names now",
            h.name
        );
        return (None, note, Vec::new());
    }
    match Profile::for_wire(v, has_type) {
        Some(p) => (
            Some(p),
            format!(
                "{} ({}VER {v}{})",
                p.name,
                p.shared_drafts()
                    .map_or(String::new(), |d| format!("{d}; ")),
                if signed.is_some() { ", signed" } else { "" }
            ),
            Vec::new(),
        ),
        None => (None, format!("unknown version {v}"), Vec::new()),
    }
}

fn nodes(msg: &Message<'_>, p: Option<&'static Profile>, kind: Kind) -> Vec<Node> {
    msg.iter()
        .map(|(tag, value)| {
            let children = match tag {
                Tag::SREP | Tag::CERT | Tag::DELE => Message::parse(value)
                    .map(|m| nodes(&m, p, kind))
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            let meaning = meaning(tag, value, p, kind).or_else(|| {
                matches!(tag, Tag::SREP | Tag::CERT | Tag::DELE)
                    .then(|| {
                        Message::parse(value)
                            .err()
                            .map(|e| format!("malformed: {e}"))
                    })
                    .flatten()
            });
            Node {
                tag: tag.to_string(),
                value: value.to_vec(),
                meaning,
                children,
            }
        })
        .collect()
}

fn u32_of(v: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(v.try_into().ok()?))
}

fn u64_of(v: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(v.try_into().ok()?))
}

fn meaning(tag: Tag, v: &[u8], p: Option<&'static Profile>, kind: Kind) -> Option<String> {
    let list = |v: &[u8]| -> String {
        v.chunks_exact(4)
            .map(|c| wire_label(Version(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(match tag {
        Tag::VER if kind == Kind::Request => format!("offered: {}", list(v)),
        Tag::VER | Tag::VERS => list(v),
        Tag::TYPE => match u32_of(v)? {
            0 => "0 (request)".into(),
            1 => "1 (response)".into(),
            n => format!("{n} (invalid)"),
        },
        Tag::NONC => format!("{} bytes", v.len()),
        Tag::INDX => format!("{}", u32_of(v)?),
        Tag::SIG => {
            let scheme = p.map_or_else(
                || {
                    Scheme::ALL
                        .into_iter()
                        .find(|s| s.signature_len() == v.len())
                },
                |p| Some(p.scheme),
            );
            match scheme {
                Some(s) => format!("{s} signature, {} bytes", v.len()),
                None => format!("signature, {} bytes", v.len()),
            }
        }
        Tag::PUBK => match Scheme::by_public_len(v.len()) {
            Some(Scheme::MlDsa44) => format!(
                "online ML-DSA-44 key, {} bytes, {}",
                v.len(),
                online_key_label(Scheme::MlDsa44, &srv_for(v))
            ),
            _ => format!("online key {}", b64(v)),
        },
        Tag::SRV => "selects the server's long-term key".into(),
        Tag::ROOT => format!("Merkle root, {} bytes", v.len()),
        Tag::PATH => {
            let h = p.map_or(32, |p| p.hash_len());
            format!("{} sibling hash(es) of {h} bytes", v.len() / h)
        }
        Tag::MIDP | Tag::MINT | Tag::MAXT => {
            let raw = u64_of(v)?;
            match p.map(|p| p.time.decode(raw)) {
                _ if raw == FOREVER => "no limit (all ones)".into(),
                Some(Some(us)) => format!("{} (raw {raw})", format_utc(us)),
                Some(None) => format!("raw {raw}, not a valid time"),
                None => format!("raw {raw}"),
            }
        }
        Tag::RADI => {
            let raw = u32_of(v)?;
            match p {
                Some(p) => {
                    let us = p.time.decode_radius(raw);
                    format!("±{}.{:06} s (raw {raw})", us / 1_000_000, us % 1_000_000)
                }
                None => format!("raw {raw}"),
            }
        }
        Tag::PAD_DRAFT | Tag::ZZZZ | Tag::PAD_GOOGLE => format!(
            "padding, {} bytes, {}",
            v.len(),
            if v.iter().all(|b| *b == 0) {
                "all zero"
            } else {
                "NOT all zero"
            }
        ),
        Tag::DTAI | Tag::LEAP | Tag::DUT1 => "leap-second information (early drafts)".into(),
        Tag::SREP => "signed response".into(),
        Tag::CERT => "certificate".into(),
        Tag::DELE => "delegation".into(),
        _ => return None,
    })
}

fn b64(v: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(v)
}

/// How output names a verified answer's online key
/// ([`Verified::online_key`]): the Ed25519 key itself in base64; for
/// ML-DSA-44, whose 1312-byte key is reduced to the first 32 bytes of SHA-512(0xff ‖ key),
/// that digest in hex, labelled `sha512:` so it is never taken for a key.
pub fn online_key_label(scheme: Scheme, online_key: &[u8; 32]) -> String {
    match scheme {
        Scheme::Ed25519 => b64(online_key),
        Scheme::MlDsa44 => {
            let digits: String = online_key.iter().map(|b| format!("{b:02x}")).collect();
            format!("sha512:{digits}")
        }
    }
}

/// Check a response's signatures against `long_term` under its version's
/// context strings (and legacy ones), in its version's signature scheme;
/// with the request, verify it in full. A key of another scheme than the
/// version's holds no signature.
pub fn check_signatures<'k>(
    response: &[u8],
    decoded: &Decoded,
    long_term: impl Into<PublicKey<'k>>,
    request: Option<&[u8]>,
) -> Option<Signatures> {
    let long_term = long_term.into();
    let p = decoded.profile?;
    if decoded.kind != Kind::Response {
        return None;
    }
    let body = if decoded.framed {
        response.get(PACKET_HEADER..)?
    } else {
        response
    };
    let msg = Message::parse(body).ok()?;
    let cert = msg.nested(Tag::CERT).ok();
    let dele = cert.and_then(|c| c.get(Tag::DELE));
    let dele_sig = cert.and_then(|c| c.get(Tag::SIG));
    let online = dele
        .and_then(|d| Message::parse(d).ok())
        .and_then(|d| d.get(Tag::PUBK));
    let srep = msg.get(Tag::SREP);
    let srep_sig = msg.get(Tag::SIG);
    let scheme = p.scheme;
    let root_ok = long_term.scheme() == scheme;
    let check = |c: &Contexts| -> (bool, bool) {
        let d = match (dele, dele_sig) {
            (Some(m), Some(s)) if root_ok => scheme.verify(long_term.bytes(), c.dele, m, s),
            _ => false,
        };
        let r = match (online, srep, srep_sig) {
            (Some(k), Some(m), Some(s)) => scheme.verify(k, c.srep, m, s),
            _ => false,
        };
        (d, r)
    };
    let (mut delegation, mut response_ok) = check(&p.contexts);
    let mut legacy_context = false;
    if !(delegation && response_ok) {
        if let Some(l) = &p.legacy_contexts {
            let (d, r) = check(l);
            if d && r {
                (delegation, response_ok, legacy_context) = (true, true, true);
            }
        }
    }
    Some(Signatures {
        delegation,
        response: response_ok,
        legacy_context,
        full: request.map(|r| verify_response(r, response, long_term)),
    })
}

/// Bytes from what a user gave: raw (a packet starts with "ROUGHTIM"),
/// hex, or base64 text; whitespace in text is ignored.
pub fn read_input(data: &[u8]) -> Vec<u8> {
    if wire::has_magic(data) {
        return data.to_vec();
    }
    let text: Vec<u8> = data
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    if text.is_empty() || text.len() == data.len() && !data.is_ascii() {
        return data.to_vec();
    }
    if text.len().is_multiple_of(2) && text.iter().all(u8::is_ascii_hexdigit) {
        let hex = |b: u8| char::from(b).to_digit(16).unwrap_or(0) as u8;
        return text
            .chunks_exact(2)
            .map(|c| hex(c[0]) << 4 | hex(c[1]))
            .collect();
    }
    let engines = [
        base64::engine::general_purpose::STANDARD,
        base64::engine::general_purpose::STANDARD_NO_PAD,
        base64::engine::general_purpose::URL_SAFE,
        base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ];
    for e in engines {
        if let Ok(v) = e.decode(&text) {
            return v;
        }
    }
    data.to_vec()
}

/// The framing a profile uses, for printing.
pub fn framing_name(framed: bool) -> &'static str {
    if framed {
        "ROUGHTIM packet"
    } else {
        "bare message"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_forms() {
        let raw = b"ROUGHTIM\x04\0\0\0\0\0\0\0".to_vec();
        assert_eq!(read_input(&raw), raw);
        let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(read_input(hex.as_bytes()), raw);
        let spaced = format!("{}\n{}\n", &hex[..10], &hex[10..]);
        assert_eq!(read_input(spaced.as_bytes()), raw);
        assert_eq!(read_input(b64(&raw).as_bytes()), raw);
        let bare = vec![2u8, 0, 0, 0, 0xff, 0x10];
        assert_eq!(read_input(&bare), bare);
    }

    #[test]
    fn garbage_is_a_typed_error() {
        assert!(decode(&[1, 2, 3]).is_err());
        assert!(decode(b"ROUGHTIM\x08\0\0\0").is_err());
        assert_eq!(decode(&[0, 0, 0, 0]).unwrap().kind, Kind::Other);
    }
}
