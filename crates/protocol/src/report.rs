//! Malfeasance reports (RFC 10049's malfeasance report): built from a chain, written and
//! read as JSON, and verified offline.
//!
//! ```text
//!  {"responses": [ {"rand"?, "publicKey", "request", "response"}, … ]}   12+ / RFC 10049
//!  {"nonces": [rand, …], "responses": [response, …]}                     drafts up to 11
//! ```
//!
//! Verifying a report checks three things per entry: the response against
//! its request and key, the link from the previous response to this
//! request's nonce, and the causal order against every other entry. It is
//! proof of malfeasance only when every signature and link holds and at
//! least one pair contradicts. The pre-12 form names no keys and carries no
//! requests, so it can be read but never verified.

use alloc::string::String;
use alloc::vec::Vec;

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::WireError;
use crate::link::{self, chain_nonce, Exchange, MAX_NONCE_LEN};
use crate::scheme::PublicKey;
use crate::verify::{verify_response, SentRequest, Verified, VerifyError};

/// Most entries a report may hold. A measurement sequence has a handful;
/// the bound keeps the quadratic pair check and its output small.
pub const MAX_REPORT_ENTRIES: usize = 256;

/// Media type of a 12+ report.
pub const MEDIA_TYPE: &str = "application/roughtime-malfeasance+json";

/// Standard alphabet; padding optional on input, written on output.
pub(crate) const B64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// One entry of a 12+ report, as listed (nothing checked yet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportEntry {
    /// The rand that chained this request to the previous response.
    pub rand: Option<Vec<u8>>,
    /// The long-term key the response should verify with (32 bytes when
    /// well formed; checked by [`Report::verify`]).
    pub public_key: Vec<u8>,
    /// The request as sent.
    pub request: Vec<u8>,
    /// The response as received.
    pub response: Vec<u8>,
}

/// A 12+ malfeasance report: entries in the order the responses arrived.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// The entries.
    pub entries: Vec<ReportEntry>,
}

/// A report in the pre-12 form. It has no keys and no requests, so no
/// signature in it can be checked against anything: it is information,
/// never proof.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LegacyReport {
    /// The rand values.
    pub nonces: Vec<Vec<u8>>,
    /// The responses.
    pub responses: Vec<Vec<u8>>,
}

/// A parsed report in either form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParsedReport {
    /// 12+ / RFC 10049: verifiable.
    Current(Report),
    /// Drafts up to 11: not verifiable.
    Legacy(LegacyReport),
}

/// Why a report's JSON was rejected. `entry` is the index in `responses`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReportParseError {
    /// Not JSON.
    Json {
        /// Line of the error.
        line: usize,
        /// Column of the error.
        column: usize,
    },
    /// The top level is not an object.
    NotAnObject,
    /// A required key is absent.
    Missing {
        /// Entry index, `None` at the top level.
        entry: Option<usize>,
        /// The key.
        field: &'static str,
    },
    /// A value has the wrong JSON type.
    WrongType {
        /// Entry index, `None` at the top level.
        entry: Option<usize>,
        /// The key.
        field: &'static str,
    },
    /// A value is not base64.
    Base64 {
        /// Entry index (into `nonces` for that key in the legacy form).
        entry: usize,
        /// The key.
        field: &'static str,
    },
    /// More than [`MAX_REPORT_ENTRIES`] entries.
    TooManyEntries,
    /// Legacy form with different numbers of nonces and responses.
    LegacyLengths,
}

/// Why a report cannot be verified at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unverifiable {
    /// The pre-12 form names no keys and holds no requests.
    LegacyForm,
}

/// Why one entry's response did not verify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EntryError {
    /// `publicKey` is not 32 bytes (its length).
    PublicKeyLength(usize),
    /// The response failed verification against its request and key.
    Verify(VerifyError),
}

/// A chain link that holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// The first entry: its nonce was random, there is nothing to check.
    First,
    /// NONC = chain(previous response, rand) under the request's profile.
    Chained,
}

/// Why a chain link does not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkError {
    /// A later entry without `rand`.
    MissingRand,
    /// The request does not parse, so it has no nonce to check.
    Request(WireError),
    /// The request offers no version we have a profile for.
    UnknownProfile,
    /// The request's nonce is not derived from the previous response.
    Mismatch,
}

/// What verification found for one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryOutcome {
    /// The response, verified against its request and key.
    pub response: Result<Verified, EntryError>,
    /// The link from the previous entry's response to this request.
    pub link: Result<Link, LinkError>,
}

/// The result of verifying a report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportCheck {
    /// One outcome per entry, in report order.
    pub entries: Vec<EntryOutcome>,
    /// Pairs (i, j), i before j, with MIDP_i − RADI_i > MIDP_j + RADI_j,
    /// among entries whose responses verified.
    pub contradictions: Vec<(usize, usize)>,
}

impl ReportCheck {
    /// Every response and every chain link verified.
    pub fn all_valid(&self) -> bool {
        self.entries
            .iter()
            .all(|e| e.response.is_ok() && e.link.is_ok())
    }

    /// Everything verified and at least one pair contradicts: the report
    /// proves that some server signed a wrong time.
    pub fn is_proof_of_malfeasance(&self) -> bool {
        self.all_valid() && !self.contradictions.is_empty()
    }
}

impl Report {
    /// The report of a recorded chain. The first entry has a rand only
    /// when the chain was bound to a device value ([`Exchange::rand`]):
    /// a random first nonce is its own rand and is left out.
    pub fn from_exchanges(exchanges: &[Exchange]) -> Report {
        let entries = exchanges
            .iter()
            .map(|e| ReportEntry {
                rand: e.rand.clone(),
                public_key: e.public_key.bytes().to_vec(),
                request: e.request.clone(),
                response: e.response.clone(),
            })
            .collect();
        Report { entries }
    }

    /// The JSON text, keys in the order of the draft-19 Appendix B example.
    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Entry {
            public_key: String,
            #[serde(skip_serializing_if = "Option::is_none")]
            rand: Option<String>,
            request: String,
            response: String,
        }
        #[derive(Serialize)]
        struct Doc {
            responses: Vec<Entry>,
        }
        let doc = Doc {
            responses: self
                .entries
                .iter()
                .map(|e| Entry {
                    public_key: B64.encode(&e.public_key),
                    rand: e.rand.as_ref().map(|r| B64.encode(r)),
                    request: B64.encode(&e.request),
                    response: B64.encode(&e.response),
                })
                .collect(),
        };
        // Strings and vectors of strings always serialize.
        serde_json::to_string(&doc).unwrap_or_default()
    }

    /// Verify every entry offline (see the module documentation).
    pub fn verify(&self) -> ReportCheck {
        let mut entries = Vec::with_capacity(self.entries.len());
        for (k, e) in self.entries.iter().enumerate() {
            let response = match PublicKey::from_bytes(&e.public_key) {
                Some(key) => {
                    verify_response(&e.request, &e.response, key).map_err(EntryError::Verify)
                }
                None => Err(EntryError::PublicKeyLength(e.public_key.len())),
            };
            let link = match k.checked_sub(1).and_then(|p| self.entries.get(p)) {
                None => Ok(Link::First),
                Some(prev) => check_link(&prev.response, e),
            };
            entries.push(EntryOutcome { response, link });
        }
        let intervals: Vec<_> = entries
            .iter()
            .map(|o| {
                o.response
                    .as_ref()
                    .ok()
                    .map(|v| (v.earliest_us(), v.latest_us()))
            })
            .collect();
        ReportCheck {
            contradictions: link::violations(&intervals),
            entries,
        }
    }
}

fn check_link(previous_response: &[u8], entry: &ReportEntry) -> Result<Link, LinkError> {
    let rand = entry.rand.as_deref().ok_or(LinkError::MissingRand)?;
    let sent = SentRequest::parse(&entry.request).map_err(LinkError::Request)?;
    let profile = sent.primary().ok_or(LinkError::UnknownProfile)?;
    let mut expect = [0u8; MAX_NONCE_LEN];
    let n = chain_nonce(profile, previous_response, rand, &mut expect)
        .map_err(|_| LinkError::Mismatch)?;
    if sent.nonce == &expect[..n] {
        Ok(Link::Chained)
    } else {
        Err(LinkError::Mismatch)
    }
}

impl ParsedReport {
    /// Verify a 12+ report; the pre-12 form cannot be verified.
    pub fn verify(&self) -> Result<ReportCheck, Unverifiable> {
        match self {
            ParsedReport::Current(r) => Ok(r.verify()),
            ParsedReport::Legacy(_) => Err(Unverifiable::LegacyForm),
        }
    }
}

/// Parse a report in either form. Unknown keys are ignored. A report whose
/// `responses` are strings, or that has `nonces`, is the pre-12 form. A bare
/// array of entries (what roughly 0.3.0 writes) is read as the RFC's
/// `{"responses": [...]}`: the entries are checked just the same.
pub fn parse_report(json: &[u8]) -> Result<ParsedReport, ReportParseError> {
    let doc: Value = serde_json::from_slice(json).map_err(|e| ReportParseError::Json {
        line: e.line(),
        column: e.column(),
    })?;
    let wrapped: Map<String, Value>;
    let top = match &doc {
        Value::Object(top) => top,
        Value::Array(entries) => {
            wrapped = [(String::from("responses"), Value::Array(entries.clone()))]
                .into_iter()
                .collect();
            &wrapped
        }
        _ => return Err(ReportParseError::NotAnObject),
    };
    let responses = top_array(top, "responses")?;
    if responses.len() > MAX_REPORT_ENTRIES {
        return Err(ReportParseError::TooManyEntries);
    }
    let legacy = top.contains_key("nonces") || responses.first().is_some_and(Value::is_string);
    if legacy {
        return parse_legacy(top, responses).map(ParsedReport::Legacy);
    }
    let mut entries = Vec::with_capacity(responses.len());
    for (i, v) in responses.iter().enumerate() {
        let obj = v.as_object().ok_or(ReportParseError::WrongType {
            entry: Some(i),
            field: "responses",
        })?;
        entries.push(ReportEntry {
            rand: match obj.get("rand") {
                None | Some(Value::Null) => None,
                Some(_) => Some(field(obj, i, "rand")?),
            },
            public_key: field(obj, i, "publicKey")?,
            request: field(obj, i, "request")?,
            response: field(obj, i, "response")?,
        });
    }
    Ok(ParsedReport::Current(Report { entries }))
}

fn field(
    obj: &Map<String, Value>,
    i: usize,
    name: &'static str,
) -> Result<Vec<u8>, ReportParseError> {
    let v = obj.get(name).ok_or(ReportParseError::Missing {
        entry: Some(i),
        field: name,
    })?;
    b64_value(v, i, name)
}

/// A base64 string value, or the error naming its entry and field.
fn b64_value(v: &Value, i: usize, name: &'static str) -> Result<Vec<u8>, ReportParseError> {
    let s = v.as_str().ok_or(ReportParseError::WrongType {
        entry: Some(i),
        field: name,
    })?;
    B64.decode(s).map_err(|_| ReportParseError::Base64 {
        entry: i,
        field: name,
    })
}

/// A top-level array field, or the error naming it.
fn top_array<'a>(
    top: &'a Map<String, Value>,
    field: &'static str,
) -> Result<&'a Vec<Value>, ReportParseError> {
    top.get(field)
        .ok_or(ReportParseError::Missing { entry: None, field })?
        .as_array()
        .ok_or(ReportParseError::WrongType { entry: None, field })
}

fn parse_legacy(
    top: &Map<String, Value>,
    responses: &[Value],
) -> Result<LegacyReport, ReportParseError> {
    let nonces = top_array(top, "nonces")?;
    if nonces.len() != responses.len() {
        return Err(ReportParseError::LegacyLengths);
    }
    let decode = |list: &[Value], name: &'static str| -> Result<Vec<Vec<u8>>, ReportParseError> {
        list.iter()
            .enumerate()
            .map(|(i, v)| b64_value(v, i, name))
            .collect()
    };
    Ok(LegacyReport {
        nonces: decode(nonces, "nonces")?,
        responses: decode(responses, "responses")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_form_parses_but_cannot_be_verified() {
        let json = br#"{"nonces":["AAEC","AwQF"],"responses":["BgcI","CQoL"]}"#;
        let parsed = parse_report(json).unwrap();
        let ParsedReport::Legacy(l) = &parsed else {
            panic!("not legacy: {parsed:?}")
        };
        assert_eq!(l.nonces, [[0u8, 1, 2], [3, 4, 5]]);
        assert_eq!(l.responses[1], [9, 10, 11]);
        assert_eq!(parsed.verify(), Err(Unverifiable::LegacyForm));
    }

    #[test]
    fn bad_documents_are_typed_errors() {
        let cases: [(&[u8], ReportParseError); 8] = [
            (b"{", ReportParseError::Json { line: 1, column: 1 }),
            (b"3", ReportParseError::NotAnObject),
            (
                b"{}",
                ReportParseError::Missing {
                    entry: None,
                    field: "responses",
                },
            ),
            (
                br#"{"responses":{}}"#,
                ReportParseError::WrongType {
                    entry: None,
                    field: "responses",
                },
            ),
            (
                br#"{"responses":[{"publicKey":"AA==","request":"AA=="}]}"#,
                ReportParseError::Missing {
                    entry: Some(0),
                    field: "response",
                },
            ),
            (
                br#"{"responses":[{"publicKey":"A!","request":"","response":""}]}"#,
                ReportParseError::Base64 {
                    entry: 0,
                    field: "publicKey",
                },
            ),
            (
                br#"{"responses":[{"rand":5,"publicKey":"","request":"","response":""}]}"#,
                ReportParseError::WrongType {
                    entry: Some(0),
                    field: "rand",
                },
            ),
            (
                br#"{"nonces":["AA=="],"responses":[]}"#,
                ReportParseError::LegacyLengths,
            ),
        ];
        for (json, want) in cases {
            assert_eq!(
                parse_report(json).unwrap_err(),
                want,
                "{}",
                core::str::from_utf8(json).unwrap()
            );
        }
    }

    #[test]
    fn a_bare_array_reads_as_the_responses() {
        let entries = r#"[{"publicKey":"AA==","request":"AA==","response":"AA=="}]"#;
        let wrapped = alloc::format!(r#"{{"responses":{entries}}}"#);
        let (a, b) = (
            parse_report(entries.as_bytes()),
            parse_report(wrapped.as_bytes()),
        );
        assert!(a.is_ok(), "{a:?}");
        assert_eq!(alloc::format!("{a:?}"), alloc::format!("{b:?}"));
        // Its entries are checked like any others.
        assert_eq!(
            parse_report(br#"[{"publicKey":"AA==","request":"AA=="}]"#).unwrap_err(),
            ReportParseError::Missing {
                entry: Some(0),
                field: "response",
            }
        );
    }

    #[test]
    fn entry_count_is_bounded() {
        let one = r#"{"publicKey":"","request":"","response":""}"#;
        let list: Vec<&str> = (0..=MAX_REPORT_ENTRIES).map(|_| one).collect();
        let json = alloc::format!(r#"{{"responses":[{}]}}"#, list.join(","));
        assert_eq!(
            parse_report(json.as_bytes()),
            Err(ReportParseError::TooManyEntries)
        );
    }

    #[test]
    fn short_key_is_an_entry_error_not_a_panic() {
        let r = Report {
            entries: alloc::vec![ReportEntry {
                rand: None,
                public_key: alloc::vec![1; 31],
                request: alloc::vec![],
                response: alloc::vec![],
            }],
        };
        let check = r.verify();
        assert_eq!(
            check.entries[0].response,
            Err(EntryError::PublicKeyLength(31))
        );
        assert_eq!(check.entries[0].link, Ok(Link::First));
        assert!(!check.is_proof_of_malfeasance());
    }
}
