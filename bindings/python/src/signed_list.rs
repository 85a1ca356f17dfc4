//! Signed server lists (docs/PYTHON.md, "Signed server lists"): each
//! monitor's list checked against the pinned keys, the accepted ones
//! merged k of n into the RFC list `measure` reads.

use gnomon_protocol::signed_list::{MonitorKey, Pins, Seen};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::convert::raise;

/// Check each (document, signature) pair at `now` (Unix seconds) against
/// the pinned `keys` (OpenSSH public key lines) and the record `seen`
/// (the JSON this returned last time, or `None`), then merge the accepted
/// lists: a server is used when `threshold` of the pinned keys' current
/// lists give it. A dict: the merged `document`, counts, each accepted
/// list's header, each refusal as (index, label, words), what was left
/// out, and the updated `seen`. Fewer than `threshold` keys with an
/// accepted list raises `gnomon._errors.ServerListRefused`.
#[pyfunction]
#[pyo3(signature = (lists, keys, threshold, now, seen=None))]
pub(crate) fn verify_server_list<'py>(
    py: Python<'py>,
    lists: Vec<(Vec<u8>, Vec<u8>)>,
    keys: Vec<String>,
    threshold: usize,
    now: i64,
    seen: Option<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let keys = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            MonitorKey::parse(k).map_err(|e| PyValueError::new_err(format!("keys[{i}]: {e}")))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let pins = Pins::new(keys, threshold).map_err(PyValueError::new_err)?;
    let mut record = match seen.as_deref() {
        None => Seen::default(),
        Some(text) => {
            Seen::from_json(text).map_err(|e| PyValueError::new_err(format!("seen: {e}")))?
        }
    };
    if lists.is_empty() {
        return Err(PyValueError::new_err(
            "lists: give at least one (document, signature) pair, one per monitor",
        ));
    }
    let mut accepted = Vec::new();
    let refused = PyList::empty(py);
    for (i, (document, signature)) in lists.iter().enumerate() {
        // Every list is judged against the record as it was: two lists of
        // one key in one call are both checked against what came before.
        match pins.check(document, signature, now, &record) {
            Ok(a) => accepted.push(a),
            Err(r) => refused.append((i, r.label(), r.to_string()))?,
        }
    }
    for a in &accepted {
        record.record(&pins, a);
    }
    let mut by_key: Vec<usize> = accepted.iter().map(|a| a.key).collect();
    by_key.sort_unstable();
    by_key.dedup();
    if by_key.len() < pins.threshold() {
        let words = if refused.is_empty() {
            format!(
                "{} of the pinned keys have an accepted list and {} are needed (threshold): give a list \
                 from each monitor",
                by_key.len(),
                pins.threshold()
            )
        } else {
            let reasons: Vec<String> = refused
                .iter()
                .map(|r| r.get_item(2).and_then(|w| w.extract::<String>()))
                .collect::<PyResult<_>>()?;
            format!(
                "{} of the pinned keys have an accepted list and {} are needed (threshold): {}",
                by_key.len(),
                pins.threshold(),
                reasons.join("; ")
            )
        };
        let label = match refused.len() {
            0 => "too_few".into_pyobject(py)?.into_any(),
            _ => refused.get_item(0)?.get_item(1)?,
        };
        return Err(raise(
            py,
            "ServerListRefused",
            (words, label, refused, record.to_json()),
        ));
    }
    let merged = pins.merge(&accepted, now);
    let d = PyDict::new(py);
    d.set_item("document", PyBytes::new(py, &merged.document))?;
    d.set_item("servers", merged.servers)?;
    d.set_item("monitors", merged.monitors)?;
    d.set_item("expires_unix", merged.expires_unix)?;
    let lists = PyList::empty(py);
    for a in &accepted {
        let key = &pins.keys()[a.key];
        let item = PyDict::new(py);
        item.set_item("key", a.key)?;
        item.set_item("fingerprint", key.fingerprint())?;
        item.set_item("comment", key.comment())?;
        item.set_item("monitor", &a.header.monitor)?;
        item.set_item("sequence", a.header.sequence)?;
        item.set_item("published_unix", a.header.published_unix)?;
        item.set_item("expires_unix", a.header.expires_unix)?;
        lists.append(item)?;
    }
    d.set_item("accepted", lists)?;
    d.set_item("refused", refused)?;
    let left = PyList::empty(py);
    for l in &merged.left_out {
        left.append((&l.name, l.listed_by, l.needed))?;
    }
    d.set_item("left_out", left)?;
    d.set_item("seen", record.to_json())?;
    Ok(d)
}
