//! A bundle's refusal in the words `relay` and `verify-proof` print: the
//! entries numbered from 1, as `verify-report` and `query` number theirs,
//! and a width refusal that names the limit and the flag that sets it.
//!
//! The protocol crate's own text numbers entries from 0 (its indices, for
//! callers that index the bundle) and gives the radius in µs; neither is
//! what an operator reading a command's output acts on.

use gnomon_client::describe_verify_error;
use gnomon_protocol::proof::{ProofError, ProofFormError, ProofPolicy, MAX_PROOF_ENTRIES};
use serde_json::{json, Value};

/// Seconds as a person writes them: `10`, `1.5`, `300`.
fn secs(us: u64) -> String {
    let s = us as f64 / 1e6;
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s}")
    }
}

/// `e` in words, entries numbered from 1; `policy` is the one the bundle
/// was checked against (its limits are named).
pub(crate) fn describe(e: &ProofError, policy: &ProofPolicy) -> String {
    let n = |i: &usize| i + 1;
    match e {
        ProofError::UnknownKey(i) => format!(
            "entry {}: its key is not one of the pinned servers' (the list given to --servers)",
            n(i)
        ),
        ProofError::Signature(i) => format!("entry {}: a signature does not verify", n(i)),
        ProofError::NotForRequest(i) => {
            format!("entry {}: the response answers another request", n(i))
        }
        ProofError::Response(i, v) => format!("entry {}: {}", n(i), describe_verify_error(v)),
        ProofError::Link(i) => format!(
            "entry {}: its request is not chained from entry {}'s response",
            n(i),
            *i
        ),
        ProofError::Contradiction { earlier, later, .. } => format!(
            "entries {} and {} contradict each other: a server lied",
            n(earlier),
            n(later)
        ),
        ProofError::Liar { liars, .. } => {
            let list: Vec<String> = liars.iter().map(|i| n(&i).to_string()).collect();
            format!(
                "entries outside the majority (a server lied): {}",
                list.join(", ")
            )
        }
        ProofError::TooWide { radius_us } => {
            let limit = policy
                .max_radius_us
                .map_or_else(|| "none".to_owned(), |l| format!("±{} s", secs(l)));
            format!(
                "the interval is ±{:.1} s wide; the limit is {limit} (--max-radius; \
                 raise it to accept a wider interval)",
                *radius_us as f64 / 1e6
            )
        }
        ProofError::NoQuorum { agreeing, needed } => {
            format!("{agreeing} of the servers agree, {needed} needed (--quorum, --max-liars)")
        }
        other => other.to_string(),
    }
}

/// Why a JSON bundle does not read as one, entries numbered from 1.
pub(crate) fn describe_form(e: &ProofFormError) -> String {
    match e {
        ProofFormError::Json(r) => format!("not a chained report: {r}"),
        ProofFormError::Legacy => {
            "a pre-draft-12 report: it names no keys, so it cannot be a bundle".into()
        }
        ProofFormError::MissingDeviceNonce => "it has no `deviceNonce`".into(),
        ProofFormError::DeviceNonce => "its `deviceNonce` is not a base64 string".into(),
        ProofFormError::DeviceLength(n) => format!("its device value is {n} bytes"),
        ProofFormError::EntryCount(0) => "it holds no entries".into(),
        ProofFormError::EntryCount(n) => {
            format!("it holds {n} entries; a bundle holds at most {MAX_PROOF_ENTRIES}")
        }
        ProofFormError::MissingRand(i) => format!("entry {} has no `rand`", i + 1),
        ProofFormError::RandLength(i) => {
            format!("entry {}'s `rand` is empty or longer than a nonce", i + 1)
        }
        ProofFormError::KeyLength(i) => {
            format!("entry {}'s key is not the length of any scheme's", i + 1)
        }
        ProofFormError::RequestLength(i) => {
            format!("entry {}'s request is longer than a bundle holds", i + 1)
        }
        ProofFormError::ResponseLength(i) => {
            format!("entry {}'s response is longer than a bundle holds", i + 1)
        }
        _ => "it is not in a form this gnomon reads".into(),
    }
}

/// The entries `e` names, numbered from 1, for the JSON object; `None`
/// when it names none.
pub(crate) fn entries(e: &ProofError) -> Option<Vec<usize>> {
    let one = |i: &usize| Some(vec![i + 1]);
    match e {
        ProofError::UnknownKey(i)
        | ProofError::Signature(i)
        | ProofError::NotForRequest(i)
        | ProofError::Response(i, _)
        | ProofError::Link(i) => one(i),
        ProofError::Contradiction { earlier, later, .. } => Some(vec![earlier + 1, later + 1]),
        ProofError::Liar { liars, .. } => Some(liars.iter().map(|i| i + 1).collect()),
        _ => None,
    }
}

/// The `error` object of a refusal: its kind, its sentence and, when it
/// names entries, which (and that they count from 1).
pub(crate) fn error_json(kind: &str, e: &ProofError, policy: &ProofPolicy) -> Value {
    let mut v = json!({ "kind": kind, "message": describe(e, policy) });
    if let Some(list) = entries(e) {
        v["entries"] = json!(list);
        v["entries_numbered_from"] = json!(1);
    }
    if let ProofError::TooWide { radius_us } = e {
        v["radius_us"] = json!(radius_us);
        v["max_radius_us"] = json!(policy.max_radius_us);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(max_radius_us: Option<u64>) -> ProofPolicy {
        ProofPolicy {
            max_liars: None,
            quorum: 1,
            max_radius_us,
        }
    }

    #[test]
    fn entries_count_from_one_and_the_width_names_its_limit() {
        let p = policy(Some(10_000_000));
        assert!(describe(&ProofError::Signature(0), &p).starts_with("entry 1:"));
        assert_eq!(
            describe(&ProofError::Link(2), &p),
            "entry 3: its request is not chained from entry 2's response"
        );
        let wide = describe(
            &ProofError::TooWide {
                radius_us: 61_003_939,
            },
            &p,
        );
        assert!(
            wide.starts_with("the interval is ±61.0 s wide; the limit is ±10 s (--max-radius"),
            "{wide}"
        );
        assert!(!wide.contains("µs"), "{wide}");
        let v = error_json("link", &ProofError::Link(0), &p);
        assert_eq!(
            (
                v["entries"][0].as_u64(),
                v["entries_numbered_from"].as_u64()
            ),
            (Some(1), Some(1))
        );
        assert_eq!(secs(1_500_000), "1.5");
        assert_eq!(secs(300_000_000), "300");
    }
}
