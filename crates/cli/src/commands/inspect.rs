//! `gnomon inspect`: decode a request or response into a readable tree,
//! or describe a delegation file from `gnomon delegate` (its host, window
//! and keys; never its secret seed).

use std::io::Read;
use std::process::ExitCode;

use gnomon_client::decode::{self, hex, kind_name, Decoded, Node, Signatures};
use gnomon_client::{describe_verify_error, format_utc, parse_public_key};
use serde_json::json;

use super::client_out::{print_json, usage, Exit};
use crate::words;

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A file (raw, hex or base64, or a `*.delegation` file), `-` for
    /// standard input, or the hex or base64 text itself.
    #[arg(required_unless_present_any = ["hex", "base64"])]
    pub(crate) input: Option<String>,
    /// The message as hex.
    #[arg(long, conflicts_with_all = ["input", "base64"])]
    pub(crate) hex: Option<String>,
    /// The message as base64.
    #[arg(long, conflicts_with = "input")]
    pub(crate) base64: Option<String>,
    /// Check a response's signatures with this long-term public key.
    #[arg(long)]
    pub(crate) key: Option<String>,
    /// The request a response answers (file or text), for a full
    /// verification (nonce, Merkle proof, version) besides the signatures.
    #[arg(long, requires = "key", value_name = "REQUEST")]
    pub(crate) request: Option<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Bytes of a file, stdin or inline text.
fn load(spec: &str) -> Result<Vec<u8>, String> {
    let data = if spec == "-" {
        let mut v = Vec::new();
        std::io::stdin()
            .read_to_end(&mut v)
            .map_err(|e| format!("cannot read standard input: {}", words::io(&e)))?;
        v
    } else if std::path::Path::new(spec).is_file() {
        std::fs::read(spec).map_err(|e| format!("cannot read {spec}: {}", words::io(&e)))?
    } else {
        // Not a file: inline hex or base64, if it decodes as either.
        let decoded = decode::read_input(spec.as_bytes());
        if decoded == spec.as_bytes() {
            return Err(format!("{spec}: no such file, and not hex or base64"));
        }
        return Ok(decoded);
    };
    Ok(decode::read_input(&data))
}

pub(crate) fn run(args: Args) -> ExitCode {
    if let Some(code) = args
        .input
        .as_deref()
        .and_then(|i| inspect_delegation(i, args.json))
    {
        return code;
    }
    let bytes = match (&args.hex, &args.base64, &args.input) {
        (Some(h), _, _) | (_, Some(h), _) => decode::read_input(h.as_bytes()),
        (_, _, Some(spec)) => match load(spec) {
            Ok(b) => b,
            Err(e) => return usage("inspect", e),
        },
        _ => return usage("inspect", "give a file, --hex or --base64"),
    };
    let key = match args.key.as_deref().map(parse_public_key).transpose() {
        Ok(k) => k,
        Err(e) => return usage("inspect", format!("--key: {e}")),
    };
    let request = match args.request.as_deref().map(load).transpose() {
        Ok(r) => r,
        Err(e) => return usage("inspect", format!("--request: {e}")),
    };
    let decoded = match decode::decode(&bytes) {
        Ok(d) => d,
        Err(e) => {
            let msg = format!("not a Roughtime message ({} bytes): {e}", bytes.len());
            if args.json {
                words::print_error("invalid", &msg, Exit::Invalid.code());
            } else {
                eprintln!("gnomon inspect: {msg}");
            }
            return Exit::Invalid.into();
        }
    };
    let sigs = key
        .as_ref()
        .and_then(|k| decode::check_signatures(&bytes, &decoded, k, request.as_deref()));
    let sigs_ok = sigs
        .as_ref()
        .is_none_or(|s| s.delegation && s.response && s.full.as_ref().is_none_or(|f| f.is_ok()));
    let code = if sigs_ok { Exit::Ok } else { Exit::Invalid };
    if args.json {
        print_json(&decoded_json(&decoded, sigs.as_ref(), key.is_some(), code));
    } else {
        print!(
            "{}",
            decode::to_text(&decoded, sigs.as_ref(), key.is_some())
        );
    }
    code.into()
}

/// A delegation file, described if `spec` names one; `None` otherwise.
fn inspect_delegation(spec: &str, json_out: bool) -> Option<ExitCode> {
    use base64::engine::general_purpose::STANDARD as B64;
    use base64::Engine as _;
    use gnomon_server::offline::{Delegation, HEADER};

    let path = std::path::Path::new(spec);
    // Bounded read: a delegation file is a few kilobytes.
    let mut text = zeroize::Zeroizing::new(String::new());
    std::fs::File::open(path)
        .ok()?
        .take(64 * 1024)
        .read_to_string(&mut text)
        .ok()?;
    if !text.starts_with(HEADER) {
        return None;
    }
    let d = match Delegation::decode(&text, path) {
        Ok(d) => d,
        Err(e) => {
            if json_out {
                words::print_error("invalid", &e.to_string(), Exit::Invalid.code());
            } else {
                eprintln!("gnomon inspect: {e}");
            }
            return Some(Exit::Invalid.into());
        }
    };
    let online = d.online.public();
    if json_out {
        print_json(&json!({
            "kind": "delegation",
            "host": d.host,
            "long_term_public_key": B64.encode(d.long_term_public),
            "online_public_key": B64.encode(online),
            "online_public_key_hex": hex(&online, 32),
            "start_utc": format_utc(d.mint_us),
            "end_utc": format_utc(d.maxt_us),
            "distinct_certificates": d.certs.distinct(),
            "exit_code": Exit::Ok.code(),
        }));
    } else {
        println!("delegation file (signatures checked; the online seed is not shown)");
        println!(
            "host              {}",
            d.host.as_deref().unwrap_or("(none)")
        );
        println!("long-term key     {}", B64.encode(d.long_term_public));
        println!("online key        {}", B64.encode(online));
        println!("online key (hex)  {}", hex(&online, 32));
        println!(
            "window            {} to {}",
            format_utc(d.mint_us),
            format_utc(d.maxt_us)
        );
    }
    Some(Exit::Ok.into())
}

fn node_json(n: &Node) -> serde_json::Value {
    json!({
        "tag": n.tag,
        "length": n.value.len(),
        "hex": hex(&n.value, usize::MAX),
        "meaning": n.meaning,
        "children": n.children.iter().map(node_json).collect::<Vec<_>>(),
    })
}

fn decoded_json(
    d: &Decoded,
    sigs: Option<&Signatures>,
    keyed: bool,
    code: Exit,
) -> serde_json::Value {
    json!({
        "kind": kind_name(d.kind),
        "framed": d.framed,
        "length": d.len,
        "version": {
            "profile": d.profile.map(|p| p.name),
            "number": d.profile.map(|p| p.version.0),
            "note": d.version_note,
        },
        "offered": d.offered.iter().map(|v| v.0).collect::<Vec<_>>(),
        "tags": d.nodes.iter().map(node_json).collect::<Vec<_>>(),
        "signatures": sigs.map(|s| json!({
            "delegation_ok": s.delegation,
            "response_ok": s.response,
            "legacy_context": s.legacy_context,
            "full_check": s.full.as_ref().map(|f| match f {
                Ok(v) => json!({ "ok": true, "midpoint_utc": format_utc(v.midpoint_us), "radius_us": v.radius_us }),
                Err(e) => json!({ "ok": false, "error": describe_verify_error(e) }),
            }),
        })),
        "key_given": keyed,
        "exit_code": code.code(),
    })
}
