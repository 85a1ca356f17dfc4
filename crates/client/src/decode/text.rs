//! A decoded message as text, the way `gnomon inspect` prints it (and the
//! monitor's server page shows a server's latest response).

// Writing to a String cannot fail: the results of writeln! are dropped.
use core::fmt::Write as _;

use super::{framing_name, Decoded, Kind, Node, Signatures};
use crate::error::describe_verify_error;
use crate::time::format_utc;

/// The online key a response's delegation names (DELE's PUBK), if any.
pub(crate) fn online_key(nodes: &[Node]) -> Option<&[u8]> {
    nodes.iter().find_map(|n| {
        if n.tag == "PUBK" && gnomon_protocol::Scheme::by_public_len(n.value.len()).is_some() {
            Some(n.value.as_slice())
        } else {
            online_key(&n.children)
        }
    })
}

/// `request`, `response` or `message`.
pub fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Request => "request",
        Kind::Response => "response",
        Kind::Other => "message",
    }
}

/// The first `max` bytes of `v` in hex, with `…` when cut.
pub fn hex(v: &[u8], max: usize) -> String {
    let s: String = v.iter().take(max).map(|b| format!("{b:02x}")).collect();
    if v.len() > max {
        s + "…"
    } else {
        s
    }
}

fn write_nodes(out: &mut String, nodes: &[Node], depth: usize) {
    for n in nodes {
        let indent = "  ".repeat(depth + 1);
        let width = 6usize.saturating_sub(depth * 2).max(1);
        let meaning = n.meaning.as_deref().unwrap_or("unknown tag");
        let raw = if n.children.is_empty()
            && !n.value.is_empty()
            && n.tag != "ZZZZ"
            && !n.tag.starts_with("PAD")
        {
            format!("  {}", hex(&n.value, 32))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{indent}{:<w$} {:>4}  {meaning}{raw}",
            n.tag,
            n.value.len(),
            w = width + 4
        );
        write_nodes(out, &n.children, depth + 1);
    }
}

/// A decoded message as `gnomon inspect` prints it: kind and framing, the
/// version, every tag with its meaning, and the signature checks.
pub fn to_text(d: &Decoded, sigs: Option<&Signatures>, keyed: bool) -> String {
    let mut text = String::new();
    let out = &mut text;
    let _ = writeln!(
        out,
        "{} ({}, {} bytes)",
        kind_name(d.kind),
        framing_name(d.framed),
        d.len
    );
    let _ = writeln!(out, "version  {}", d.version_note);
    if !d.offered.is_empty() {
        let v: Vec<String> = d.offered.iter().map(|v| v.to_string()).collect();
        let _ = writeln!(out, "offers   {}", v.join(", "));
    }
    let _ = writeln!(out, "tags");
    write_nodes(out, &d.nodes, 0);
    if let Some(k) = online_key(&d.nodes) {
        use base64::Engine as _;
        // In base64 too: `gnomon delegate --hosts` lists online keys that
        // way, so this tells which host of a fleet answered. A 1312-byte
        // ML-DSA-44 key is named by its digest, labelled as one.
        let label = if k.len() == 32 {
            base64::engine::general_purpose::STANDARD.encode(k)
        } else {
            super::online_key_label(
                gnomon_protocol::Scheme::MlDsa44,
                &gnomon_protocol::request::srv_for(k),
            )
        };
        let _ = writeln!(out, "online key  {label}");
    }
    match (d.kind, sigs) {
        (Kind::Response, Some(s)) => {
            let ok = |b: bool| if b { "ok" } else { "FAILS" };
            let _ = writeln!(out, "signatures");
            let _ = writeln!(out, "  delegation (long-term key)  {}", ok(s.delegation));
            let _ = writeln!(out, "  response (online key)       {}", ok(s.response));
            if s.legacy_context {
                let _ = writeln!(
                    out,
                    "  note: verified with the draft-19 context strings, not RFC 10049's"
                );
            }
            match &s.full {
                Some(Ok(v)) => {
                    let _ = writeln!(
                        out,
                        "  full check with the request ok: {} ±{:.3} s",
                        format_utc(v.midpoint_us),
                        v.radius_us as f64 / 1e6
                    );
                }
                Some(Err(e)) => {
                    let _ = writeln!(
                        out,
                        "  full check with the request FAILS: {}",
                        describe_verify_error(e)
                    );
                }
                None => {}
            }
        }
        (Kind::Response, None) if keyed => {
            let _ = writeln!(out, "signatures  not checked: the version cannot be told");
        }
        (Kind::Response, None) => {
            let _ = writeln!(out, "signatures  not checked (give --key)");
        }
        _ => {}
    }
    text
}
