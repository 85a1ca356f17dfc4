//! The published document: an RFC server list of the servers that
//! answered and agree with the consensus, each with what this monitor
//! measured of it, and an `observatory` header (sequence, expiry, who
//! published, over which window, and who was left out and why). RFC
//! clients read `servers` and ignore the rest.
//!
//! A pure function of what the round and the history say, so what is
//! listed and what is excluded is tested without a network.

use base64::Engine as _;
use gnomon_client::Server;
use gnomon_protocol::profile::Profile;
use gnomon_protocol::serverlist::{Host, Transport};
use gnomon_protocol::signed_list::format_utc;
use gnomon_protocol::Version;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::state::Status;

/// What the history says of one server over the window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measured {
    /// Rounds in the window.
    pub rounds: u64,
    /// Of those, rounds answered.
    pub answered: u64,
    /// Round trips of the answered rounds, µs (any order).
    pub rtts_us: Vec<i64>,
    /// Its first answer (as far as this monitor remembers), Unix µs.
    pub first_seen_us: Option<i64>,
    /// Its last answer, Unix µs.
    pub last_seen_us: Option<i64>,
    /// Proofs of malfeasance against it: (when, the report's address if
    /// it is served somewhere).
    pub malfeasance: Vec<(i64, Option<String>)>,
}

/// One server of the input list with its latest round and its history.
#[derive(Clone, Debug)]
pub struct Entry<'a> {
    /// As the input list gives it (key, addresses, operator).
    pub server: &'a Server,
    /// Its status after the latest round (None: not probed).
    pub status: Option<&'a Status>,
    /// Its history.
    pub measured: Measured,
}

/// The header's facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// `--publish-name`.
    pub monitor: String,
    /// The monitor key, `ssh-ed25519 AAAA… comment`.
    pub key: String,
    /// The sequence.
    pub sequence: u64,
    /// Unix s.
    pub published_unix: i64,
    /// Unix s.
    pub expires_unix: i64,
    /// The window's start, Unix s.
    pub window_from_unix: i64,
}

/// A server left out, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Excluded {
    /// Its name in the input list.
    pub name: String,
    /// Its key, base64.
    #[serde(rename = "publicKey")]
    pub public_key: String,
    /// `lied`, `silent`, `invalid`, `refused`, `unresolved` or
    /// `unprobed`.
    pub reason: &'static str,
    /// Why, in words.
    pub detail: String,
    /// Where the proof is, when it lied and the proof is served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
}

/// A built document.
#[derive(Clone, Debug)]
pub struct Built {
    /// The exact bytes to sign and serve.
    pub document: Vec<u8>,
    /// The names listed, in input order.
    pub listed: Vec<String>,
    /// The servers left out.
    pub excluded: Vec<Excluded>,
}

/// Why `status` keeps its server out of the list, if it does. A server is
/// listed when it answered verified in the latest round and is not
/// flagged outside the consensus (the caller publishes only after a round
/// that had one).
pub fn exclusion(status: Option<&Status>) -> Option<(&'static str, String)> {
    let Some(s) = status else {
        return Some(("unprobed", "not probed in the latest round".into()));
    };
    if let Some(why) = &s.flagged {
        let proof = if s.report.is_some() {
            "; a malfeasance report proves it"
        } else {
            ""
        };
        return Some(("lied", format!("{why}{proof}")));
    }
    if s.up {
        return None;
    }
    let reason = match s.failure.as_deref() {
        Some("silent") => "silent",
        Some("invalid") => "invalid",
        Some("refused") => "refused",
        Some("resolve") => "unresolved",
        _ => "unprobed",
    };
    let detail = s
        .error
        .clone()
        .unwrap_or_else(|| "no verified answer in the latest round".into());
    Some((reason, detail))
}

/// Every reason a server is left out for.
pub const REASONS: [&str; 6] = [
    "lied",
    "silent",
    "invalid",
    "refused",
    "unresolved",
    "unprobed",
];

/// `text` as one of [`REASONS`] (a stored document read back); an
/// unknown one is `unprobed`.
pub fn reason_label(text: &str) -> &'static str {
    REASONS
        .into_iter()
        .find(|r| *r == text)
        .unwrap_or("unprobed")
}

/// The VER values of the profiles named in `names`, sorted, each once.
pub fn version_numbers(names: &[String]) -> Vec<u32> {
    let mut v: Vec<u32> = names
        .iter()
        .filter_map(|n| Profile::by_name(n))
        .map(|p| p.version.0)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// How new a version is: RFC 10049 above every draft, drafts by number,
/// Google's below them all.
fn newness(v: u32) -> (u8, u32) {
    if v == Version::RFC.0 {
        (2, 0)
    } else if v == Version::GOOGLE.0 {
        (0, 0)
    } else {
        (1, v)
    }
}

/// The newest of `versions`: the entry's `version`, a fact measured.
pub fn newest(versions: &[u32]) -> Option<u32> {
    versions.iter().copied().max_by_key(|&v| newness(v))
}

/// The `q` quantile (0..=1) of `values`, nearest rank; None when empty.
pub fn quantile(values: &[i64], q: f64) -> Option<i64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

/// Milliseconds of µs: exact to the µs, as the list's JSON numbers.
fn ms(us: i64) -> f64 {
    us as f64 / 1000.0
}

/// `host:port` as lists write it (IPv6 in brackets).
fn address_text(host: &Host, port: u16) -> String {
    match host {
        Host::Ipv4(b) => format!("{}:{port}", std::net::Ipv4Addr::from(*b)),
        Host::Ipv6(b) => format!("[{}]:{port}", std::net::Ipv6Addr::from(*b)),
        Host::Name(n) => format!("{n}:{port}"),
    }
}

fn utc_us(us: i64) -> String {
    format_utc(us.div_euclid(1_000_000))
}

fn entry(e: &Entry<'_>, s: &Status) -> Value {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut versions = version_numbers(&s.versions_answered);
    if versions.is_empty() {
        versions = version_numbers(&s.version.iter().cloned().collect::<Vec<_>>());
    }
    let mut transports = Vec::new();
    if s.udp == Some(true) {
        transports.push("udp");
    }
    if s.tcp == Some(true) {
        transports.push("tcp");
    }
    // A transport measured not to answer is left out: a client would
    // only spend its timeout there.
    let addresses: Vec<Value> = [
        (Transport::Udp, "udp", s.udp),
        (Transport::Tcp, "tcp", s.tcp),
    ]
    .into_iter()
    .filter(|(_, _, answered)| *answered != Some(false))
    .flat_map(|(t, name, _)| {
        e.server
            .addresses
            .iter()
            .filter(move |a| a.transport == t)
            .map(move |a| {
                json!({
                    "protocol": name,
                    "address": address_text(&a.host, a.port),
                })
            })
    })
    .collect();
    let m = &e.measured;
    let mut measured = Map::new();
    measured.insert("versions".into(), json!(versions));
    measured.insert("transports".into(), json!(transports));
    measured.insert("rounds".into(), json!(m.rounds));
    measured.insert("answered".into(), json!(m.answered));
    if m.rounds > 0 {
        let a = m.answered as f64 / m.rounds as f64;
        measured.insert(
            "availability".into(),
            json!((a * 10_000.0).round() / 10_000.0),
        );
    }
    if let (Some(median), Some(p90)) = (quantile(&m.rtts_us, 0.5), quantile(&m.rtts_us, 0.9)) {
        measured.insert(
            "rttMs".into(),
            json!({ "median": ms(median), "p90": ms(p90) }),
        );
    }
    if let Some(r) = s.radius_us {
        measured.insert("radiusMs".into(), json!(ms(r as i64)));
    }
    if let Some(t) = m.first_seen_us {
        measured.insert("firstSeen".into(), json!(utc_us(t)));
    }
    if let Some(t) = m.last_seen_us {
        measured.insert("lastSeen".into(), json!(utc_us(t)));
    }
    if !m.malfeasance.is_empty() {
        let proofs: Vec<Value> = m
            .malfeasance
            .iter()
            .map(|(at, url)| {
                let mut p = Map::new();
                p.insert("at".into(), json!(utc_us(*at)));
                if let Some(u) = url {
                    p.insert("report".into(), json!(u));
                }
                Value::Object(p)
            })
            .collect();
        measured.insert("malfeasance".into(), Value::Array(proofs));
    }
    let mut out = Map::new();
    out.insert("name".into(), json!(e.server.name));
    if let Some(v) = newest(&versions) {
        out.insert("version".into(), json!(v));
    }
    out.insert(
        "publicKeyType".into(),
        json!(e.server.public_key.scheme().name()),
    );
    out.insert(
        "publicKey".into(),
        json!(b64.encode(e.server.public_key.bytes())),
    );
    out.insert("addresses".into(), Value::Array(addresses));
    if let Some(o) = &e.server.operator {
        out.insert("operator".into(), json!(o));
    }
    out.insert("measured".into(), Value::Object(measured));
    Value::Object(out)
}

/// The document over `entries` (in input order), with the input list's
/// `reports` URL and this monitor's `sources`.
pub fn build(
    entries: &[Entry<'_>],
    reports: Option<&str>,
    sources: &[String],
    header: &Header,
) -> Built {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut servers = Vec::new();
    let mut listed = Vec::new();
    let mut excluded = Vec::new();
    for e in entries {
        match (exclusion(e.status), e.status) {
            (None, Some(s)) => {
                servers.push(entry(e, s));
                listed.push(e.server.name.clone());
            }
            (why, _) => {
                let (reason, detail) = why.unwrap_or(("unprobed", String::new()));
                let report = if reason == "lied" {
                    e.measured.malfeasance.first().and_then(|(_, u)| u.clone())
                } else {
                    None
                };
                excluded.push(Excluded {
                    name: e.server.name.clone(),
                    public_key: b64.encode(e.server.public_key.bytes()),
                    reason,
                    detail,
                    report,
                });
            }
        }
    }
    let mut doc = Map::new();
    doc.insert("servers".into(), Value::Array(servers));
    if let Some(r) = reports {
        doc.insert("reports".into(), json!(r));
    }
    if !sources.is_empty() {
        doc.insert("sources".into(), json!(sources));
    }
    doc.insert(
        "observatory".into(),
        json!({
            "monitor": header.monitor,
            "key": header.key,
            "sequence": header.sequence,
            "published": format_utc(header.published_unix),
            "expires": format_utc(header.expires_unix),
            "window": {
                "from": format_utc(header.window_from_unix),
                "to": format_utc(header.published_unix),
            },
            "excluded": excluded,
        }),
    );
    let mut document =
        serde_json::to_vec_pretty(&Value::Object(doc)).unwrap_or_else(|_| b"{}".to_vec());
    document.push(b'\n');
    Built {
        document,
        listed,
        excluded,
    }
}

#[cfg(test)]
mod tests;
