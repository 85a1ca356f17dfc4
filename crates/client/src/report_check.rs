//! Checking a received malfeasance report: the one code path behind
//! `gnomon verify-report` and the report sink (gnomon-watch), so both
//! accept, refuse and describe a report the same way.

use base64::Engine;
use gnomon_protocol::report::{EntryError, Link, LinkError, ParsedReport, ReportCheck};
use gnomon_protocol::{parse_report, Report, Verified};
use serde_json::json;

use crate::{describe_verify_error, format_utc};

/// What a verified report shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every signature and chain link holds and at least one pair of
    /// answers contradicts: proof that a server lied.
    Malfeasance,
    /// Everything holds and nothing contradicts: it proves nothing.
    NoContradiction,
    /// A signature or a chain link fails: it proves nothing.
    Invalid,
}

impl Verdict {
    /// Of a check.
    pub fn of(check: &ReportCheck) -> Verdict {
        if check.is_proof_of_malfeasance() {
            Verdict::Malfeasance
        } else if check.all_valid() {
            Verdict::NoContradiction
        } else {
            Verdict::Invalid
        }
    }

    /// A short label ("malfeasance", "no-contradiction", "invalid").
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Malfeasance => "malfeasance",
            Verdict::NoContradiction => "no-contradiction",
            Verdict::Invalid => "invalid",
        }
    }
}

/// Parses a report that can be verified (drafts 12+ / RFC 10049), or says
/// in a sentence why it cannot be.
pub fn parse_verifiable(raw: &[u8]) -> Result<Report, String> {
    match parse_report(raw) {
        Ok(ParsedReport::Current(r)) => Ok(r),
        Ok(ParsedReport::Legacy(l)) => Err(format!(
            "a pre-draft-12 report ({} responses): it names no keys and holds no requests, \
             so nothing in it can be verified",
            l.responses.len()
        )),
        Err(e) => Err(format!("not a malfeasance report: {e}")),
    }
}

/// One response's check, in words ("ok" or why not).
pub fn response_status(e: &Result<Verified, EntryError>) -> String {
    match e {
        Ok(_) => "ok".into(),
        Err(EntryError::PublicKeyLength(n)) => {
            format!("publicKey is {n} bytes, not 32 (Ed25519) or 1312 (ML-DSA-44)")
        }
        Err(EntryError::Verify(v)) => describe_verify_error(v),
        Err(other) => other.to_string(),
    }
}

/// One chain link's check, in words.
pub fn link_status(l: &Result<Link, LinkError>) -> String {
    match l {
        Ok(Link::First) => "first".into(),
        Ok(Link::Chained) => "chained".into(),
        Err(LinkError::MissingRand) => "BROKEN: no rand".into(),
        Err(LinkError::Mismatch) => "BROKEN: nonce not derived from the previous response".into(),
        Err(LinkError::UnknownProfile) => "BROKEN: request offers no known version".into(),
        Err(LinkError::Request(w)) => format!("BROKEN: request does not parse ({w})"),
        Err(other) => format!("BROKEN: {other:?}"),
    }
}

/// The long-term keys (base64) on either side of a contradicting pair,
/// each once, sorted: the servers a report accuses (it cannot tell which
/// side lied).
pub fn accused_keys(report: &Report, check: &ReportCheck) -> Vec<String> {
    let b64 = |v: &[u8]| base64::engine::general_purpose::STANDARD.encode(v);
    let mut keys: Vec<String> = check
        .contradictions
        .iter()
        .flat_map(|&(i, j)| [i, j])
        .map(|i| b64(&report.entries[i].public_key))
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// The check as one JSON object: `valid`, `proof_of_malfeasance`,
/// `verdict`, per-entry results and the contradicting pairs (1-based).
pub fn check_json(report: &Report, check: &ReportCheck) -> serde_json::Value {
    let b64 = |v: &[u8]| base64::engine::general_purpose::STANDARD.encode(v);
    let entries: Vec<serde_json::Value> = report
        .entries
        .iter()
        .zip(&check.entries)
        .enumerate()
        .map(|(i, (e, o))| {
            let mut v = json!({
                "index": i + 1,
                "public_key": b64(&e.public_key),
                "signature_ok": o.response.is_ok(),
                "response": response_status(&o.response),
                "chain_ok": o.link.is_ok(),
                "chain": link_status(&o.link),
            });
            if let Ok(r) = &o.response {
                v["version"] = json!(r.profile.name);
                v["midpoint_us"] = json!(r.midpoint_us);
                v["midpoint_utc"] = json!(format_utc(r.midpoint_us));
                v["radius_us"] = json!(r.radius_us);
            }
            v
        })
        .collect();
    json!({
        "valid": check.all_valid(),
        "proof_of_malfeasance": check.is_proof_of_malfeasance(),
        "verdict": Verdict::of(check).label(),
        "entries": entries,
        "contradictions": check.contradictions.iter().map(|&(i, j)| json!({
            "earlier": i + 1,
            "later": j + 1,
            "earlier_key": b64(&report.entries[i].public_key),
            "later_key": b64(&report.entries[j].public_key),
        })).collect::<Vec<_>>(),
    })
}
