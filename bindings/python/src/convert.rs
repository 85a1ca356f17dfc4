//! Rust results as plain Python values, and the exceptions of
//! `gnomon._errors`.

use gnomon_client::{
    describe_assumption, Answer, Assumption, Flag, QueryError, Rejection, Sequence, Server,
};
use gnomon_protocol::report::{EntryError, LinkError};
use gnomon_protocol::serverlist::Transport;
use gnomon_protocol::{ReportCheck, Verified, VerifyError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

/// An instance of `gnomon._errors.<class>` built from `args`, as a `PyErr`;
/// should that module be missing, the error saying so.
pub(crate) fn raise<'py, A>(py: Python<'py>, class: &str, args: A) -> PyErr
where
    A: pyo3::call::PyCallArgs<'py>,
{
    match py
        .import("gnomon._errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.call1(args))
    {
        Ok(value) => PyErr::from_value(value),
        Err(e) => e,
    }
}

/// A stable name for each reason an answer is rejected (`InvalidAnswer.reason`).
pub(crate) fn invalid_reason(r: &Rejection) -> &'static str {
    use VerifyError as V;
    match r {
        Rejection::TcpClosed { .. } => "tcp_closed",
        Rejection::TcpTooLong(_) => "tcp_too_long",
        Rejection::Verify(e) => match e {
            V::Request(_) => "request",
            V::Framing(_) => "framing",
            V::Message(_) => "malformed",
            V::UnknownVersion(_) => "unknown_version",
            V::NotOffered(_) => "version_not_offered",
            V::LegacyVersionOne => "legacy_version_one",
            V::VersionPlacement => "version_placement",
            V::Type => "type",
            V::Vers => "vers",
            V::Downgrade { .. } => "downgrade",
            V::DelegationSignature => "delegation_signature",
            V::ResponseSignature => "response_signature",
            V::NonceMismatch => "nonce_mismatch",
            V::NonceMissing => "nonce_missing",
            V::Path(_) => "merkle_path",
            V::Root => "merkle_root",
            V::Time => "time",
            V::OutsideDelegation => "outside_delegation",
            V::ZeroRadius => "zero_radius",
            _ => "other",
        },
    }
}

/// What a verified response says.
pub(crate) fn verified_dict<'py>(py: Python<'py>, v: &Verified) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("midpoint_us", v.midpoint_us)?;
    d.set_item("radius_us", v.radius_us)?;
    d.set_item("version", v.profile.name)?;
    d.set_item("version_number", v.profile.version.0)?;
    d.set_item("online_key", PyBytes::new(py, &v.online_key))?;
    d.set_item("delegation_us", (v.mint_us, v.maxt_us))?;
    Ok(d)
}

/// A verified answer from the network, with how it came.
pub(crate) fn answer_dict<'py>(py: Python<'py>, a: &Answer) -> PyResult<Bound<'py, PyDict>> {
    let d = verified_dict(py, &a.verified)?;
    d.set_item("rtt_us", a.rtt.as_micros() as u64)?;
    d.set_item("server", a.peer.to_string())?;
    d.set_item(
        "transport",
        match a.transport {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
        },
    )?;
    d.set_item("offset_us", a.offset_us as i64)?;
    d.set_item("request", PyBytes::new(py, &a.request))?;
    d.set_item("response", PyBytes::new(py, &a.response))?;
    Ok(d)
}

/// The measurement sequence as `gnomon query --servers --json` gives it,
/// with whether `quorum` distinct servers agree.
pub(crate) fn sequence_dict<'py>(
    py: Python<'py>,
    servers: &[Server],
    seq: &Sequence,
    quorum: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let name = |i: usize| servers[i].name.as_str();
    let names = |ids: &[usize]| ids.iter().map(|&s| name(s)).collect::<Vec<_>>();
    let entries = PyList::empty(py);
    for e in &seq.entries {
        let d = match &e.result {
            Ok(a) => answer_dict(py, a)?,
            Err(err) => {
                let d = PyDict::new(py);
                let (kind, reason) = match err {
                    QueryError::Invalid { rejection, .. } => {
                        ("invalid", Some(invalid_reason(rejection)))
                    }
                    _ => ("no_answer", None),
                };
                d.set_item("error", (kind, err.to_string(), reason))?;
                d
            }
        };
        d.set_item("name", name(e.server))?;
        d.set_item("pass", e.pass + 1)?;
        entries.append(d)?;
    }
    let out = PyDict::new(py);
    out.set_item("entries", entries)?;
    out.set_item("order", names(&seq.order))?;
    let agreement = &seq.agreement;
    let consensus = match &agreement.consensus {
        Some(c) => {
            let d = PyDict::new(py);
            d.set_item("low_us", c.low_us as i64)?;
            d.set_item("high_us", c.high_us as i64)?;
            d.set_item("agreeing", names(&c.agreeing))?;
            d.set_item("answering", c.answering)?;
            d.set_item("agreeing_voters", c.agreeing_voters)?;
            d.into_any()
        }
        None => py.None().into_bound(py),
    };
    out.set_item("consensus", consensus)?;
    out.set_item("quorum", quorum)?;
    // As `gnomon sync` decides it (crates/sync, round.rs `meets`).
    let quorum_met = agreement
        .consensus
        .as_ref()
        .is_some_and(|c| c.agreeing_voters >= quorum);
    // The assumption, in numbers and in words, and why there is no
    // consensus (the CLI's flag named as this package's argument).
    let a = agreement.assumption;
    out.set_item("max_liars", a.liars)?;
    out.set_item("listed", a.voters)?;
    out.set_item("answered", agreement.answered)?;
    out.set_item("needed", a.needed())?;
    out.set_item("assumption", agreement.assumption_text())?;
    let why_none = agreement
        .why_none()
        .map(|w| w.replace("with --max-liars", "with max_liars="));
    out.set_item("no_consensus", why_none)?;
    out.set_item("quorum_met", quorum_met)?;
    out.set_item("disagreement", agreement.disagreement())?;
    let regions: Vec<(i64, i64)> = agreement
        .regions
        .iter()
        .map(|&(lo, hi)| (lo as i64, hi as i64))
        .collect();
    out.set_item("regions", regions)?;
    let grouped: Vec<Vec<&str>> = agreement.grouped.iter().map(|g| names(g)).collect();
    out.set_item("grouped", grouped)?;
    out.set_item("grouped_because", &agreement.grouped_because)?;
    let flagged: Vec<(&str, &str)> = agreement
        .flagged
        .iter()
        .map(|&(s, f)| {
            let why = match f {
                Flag::OutsideConsensus => "outside_consensus",
                Flag::SelfContradiction => "self_contradiction",
            };
            (name(s), why)
        })
        .collect();
    out.set_item("outside", flagged)?;
    let pairs: Vec<(&str, &str)> = seq
        .contradicting_servers()
        .into_iter()
        .map(|(a, b)| (name(a), name(b)))
        .collect();
    out.set_item("contradictions", pairs)?;
    out.set_item("contradicting_entries", seq.contradictions.clone())?;
    out.set_item("malfeasance", seq.malfeasance())?;
    out.set_item("suspects", names(&seq.suspects()))?;
    out.set_item("report", seq.report().map(|r| r.to_json()))?;
    let chain = PyList::empty(py);
    for x in seq.chain.exchanges() {
        let rand = x.rand.as_ref().map(|r| PyBytes::new(py, r));
        chain.append(PyTuple::new(
            py,
            [
                PyBytes::new(py, &x.request).into_any(),
                PyBytes::new(py, &x.response).into_any(),
                rand.map_or_else(|| py.None().into_bound(py), |r| r.into_any()),
                PyBytes::new(py, x.public_key.bytes()).into_any(),
            ],
        )?)?;
    }
    out.set_item("chain", chain)?;
    Ok(out)
}

/// A checked report: per entry the answer or why not, and the link.
pub(crate) fn report_dict<'py>(
    py: Python<'py>,
    check: &ReportCheck,
) -> PyResult<Bound<'py, PyDict>> {
    let entries = PyList::empty(py);
    for e in &check.entries {
        let d = PyDict::new(py);
        match &e.response {
            Ok(v) => d.set_item("answer", verified_dict(py, v)?)?,
            Err(EntryError::PublicKeyLength(n)) => d.set_item(
                "error",
                (
                    format!("publicKey has {n} bytes, not 32"),
                    "public_key_length",
                ),
            )?,
            Err(EntryError::Verify(v)) => d.set_item(
                "error",
                (
                    gnomon_client::describe_verify_error(v),
                    invalid_reason(&Rejection::Verify(*v)),
                ),
            )?,
            Err(other) => d.set_item("error", (format!("{other:?}"), "other"))?,
        }
        let link = match &e.link {
            Ok(_) => None,
            Err(LinkError::MissingRand) => Some("missing_rand"),
            Err(LinkError::Request(_)) => Some("request"),
            Err(LinkError::UnknownProfile) => Some("unknown_version"),
            Err(LinkError::Mismatch) => Some("mismatch"),
            Err(_) => Some("other"),
        };
        d.set_item("link_error", link)?;
        entries.append(d)?;
    }
    let out = PyDict::new(py);
    out.set_item("entries", entries)?;
    out.set_item("contradictions", check.contradictions.clone())?;
    out.set_item("all_valid", check.all_valid())?;
    out.set_item("proof_of_malfeasance", check.is_proof_of_malfeasance())?;
    Ok(out)
}

/// The interval a relayed proof gives, for `gnomon.Proven`.
pub(crate) fn proven_dict<'py>(
    py: Python<'py>,
    p: &gnomon_protocol::proof::Proven,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("earliest_us", p.earliest_us)?;
    d.set_item("latest_us", p.latest_us)?;
    d.set_item("agreeing_keys", p.agreeing_keys)?;
    d.set_item("answering_keys", p.answering_keys)?;
    let a = p.assumption;
    d.set_item("max_liars", a.liars)?;
    d.set_item("pinned", a.voters)?;
    d.set_item("needed", a.needed())?;
    d.set_item("assumption", pinned_assumption(a, Some(p.answering_keys)))?;
    Ok(d)
}

/// The assumption a relayed proof is judged under, in words: "assumes at
/// most 1 of the 3 pinned servers lies; 3 answered, 3 needed" (without
/// the count of those that answered when it is not known).
pub(crate) fn pinned_assumption(a: Assumption, answered: Option<usize>) -> String {
    match answered {
        Some(m) => describe_assumption(a, m).replace("listed", "pinned"),
        None => {
            let verb = if a.liars == 1 { "lies" } else { "lie" };
            format!(
                "assumes at most {} of the {} pinned servers {verb}; {} needed",
                a.liars,
                a.voters,
                a.needed()
            )
        }
    }
}

/// `ProofError.kind`: the names `gnomon verify-proof --json` gives.
pub(crate) fn proof_kind(e: &gnomon_protocol::proof::ProofError) -> &'static str {
    use gnomon_protocol::proof::ProofError as P;
    match e {
        P::Truncated => "truncated",
        P::Malformed(_) | P::UnknownFormat(_) => "malformed",
        P::DeviceValueLength(_) => "device_value_length",
        P::WrongNonce => "wrong_nonce",
        P::Binding => "binding",
        P::UnknownKey(_) => "unknown_key",
        P::Signature(_) => "signature",
        P::NotForRequest(_) => "not_for_request",
        P::Response(..) => "response",
        P::Link(_) => "link",
        P::Contradiction { .. } => "contradiction",
        P::Liar { .. } => "liar",
        P::TooFewKeys { .. } => "too_few_keys",
        P::NoQuorum { .. } => "no_quorum",
        P::TooWide { .. } => "too_wide",
        _ => "other",
    }
}

/// The exception for a failed query.
pub(crate) fn query_error(py: Python<'_>, e: &QueryError) -> PyErr {
    match e {
        QueryError::Invalid { rejection, .. } => raise(
            py,
            "InvalidAnswer",
            (e.to_string(), invalid_reason(rejection)),
        ),
        QueryError::Resolve { .. } => raise(py, "NoAnswer", (e.to_string(),)),
        QueryError::NoAnswer { .. } => raise(py, "NoAnswer", (e.to_string(),)),
        _ => PyErr::new::<pyo3::exceptions::PyOSError, _>(e.to_string()),
    }
}
