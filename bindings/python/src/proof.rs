//! Relayed proofs, verified as the device does (docs/PROOF.md): the
//! bundle in either form, the pinned keys grouped into servers, the
//! result or the `ProofError` with what the failure names.

use gnomon_protocol::LongTermKey;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::args::public_key;
use crate::convert::{self, raise};

/// Verify a relayed proof as the device does (docs/PROOF.md): the bundle
/// in either form, the device's value, its pinned keys and the µs its own
/// clock says have passed. The interval as a dict; a failure raises
/// `gnomon._errors.ProofError` with the CLI's kind. A device value of a
/// length no bundle may carry (the protocol's `check_device_value`: 16 to
/// 64 bytes) is a `ValueError`, before the bundle is read.
///
/// The assumption is about the pinned servers: at most `max_liars` of
/// them lie (`None`: fewer than half). `servers`, when given, is one
/// label per key: keys with one label are one server (one voter), and so
/// are equal keys; without it each distinct key is a server of its own.
#[pyfunction]
#[pyo3(signature = (bundle, device, keys, elapsed_us, quorum, max_liars, max_radius_us, servers=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn verify_proof<'py>(
    py: Python<'py>,
    bundle: &Bound<'py, PyBytes>,
    device: &Bound<'py, PyBytes>,
    keys: &Bound<'py, PyList>,
    elapsed_us: u64,
    quorum: usize,
    max_liars: Option<usize>,
    max_radius_us: Option<u64>,
    servers: Option<Vec<usize>>,
) -> PyResult<Bound<'py, PyDict>> {
    use gnomon_protocol::proof::{self, ProofError, ProofPolicy, ProofWorkspace};
    if let Err(e) = proof::check_device_value(device.as_bytes()) {
        return Err(PyValueError::new_err(format!("device: {e}")));
    }
    if quorum == 0 {
        return Err(PyValueError::new_err("quorum must be at least 1"));
    }
    let pinned = keys
        .iter()
        .map(|k| public_key(&k))
        .collect::<PyResult<Vec<LongTermKey>>>()?;
    if pinned.is_empty() {
        return Err(PyValueError::new_err("keys: at least one pinned key"));
    }
    if let Some(s) = servers.as_ref().filter(|s| s.len() != pinned.len()) {
        return Err(PyValueError::new_err(format!(
            "servers: {} label(s) for {} key(s); one per key",
            s.len(),
            pinned.len()
        )));
    }
    let voter_of = voters(&pinned, servers.as_deref());
    let n_voters = voter_of
        .iter()
        .enumerate()
        .filter(|&(i, &v)| v == i)
        .count();
    let bytes = bundle.as_bytes();
    // The binary form starts with its magic; anything else is read as the
    // JSON form and turned into the binary one, which the verifier reads.
    let converted;
    let binary = if bytes.starts_with(&proof::PROOF_MAGIC) {
        bytes
    } else {
        match proof::Proof::from_json(bytes) {
            Ok(p) => {
                converted = p.to_binary();
                &converted[..]
            }
            // The JSON form's D out of bounds: the binary form's refusal.
            Err(proof::ProofFormError::DeviceLength(n)) => {
                let e = ProofError::DeviceValueLength(n);
                let none = py.None();
                return Err(raise(
                    py,
                    "ProofError",
                    (
                        e.to_string(),
                        convert::proof_kind(&e),
                        none.clone_ref(py),
                        none,
                    ),
                ));
            }
            Err(e) => {
                let none = py.None();
                return Err(raise(
                    py,
                    "ProofError",
                    (
                        format!("neither a binary bundle nor its JSON form: {e:?}"),
                        "malformed",
                        none.clone_ref(py),
                        none,
                    ),
                ));
            }
        }
    };
    let keys: Vec<_> = pinned.iter().map(LongTermKey::as_public).collect();
    let policy = ProofPolicy {
        max_liars,
        quorum,
        max_radius_us,
    };
    let assumption = policy.assumption(n_voters);
    let mut ws = Box::new(ProofWorkspace::new());
    match proof::verify_proof_grouped(
        binary,
        device.as_bytes(),
        &keys,
        &voter_of,
        elapsed_us,
        &policy,
        &mut ws,
    ) {
        Ok(p) => convert::proven_dict(py, &p),
        Err(e) => {
            let entry = match e {
                ProofError::UnknownKey(i)
                | ProofError::Signature(i)
                | ProofError::NotForRequest(i)
                | ProofError::Response(i, _)
                | ProofError::Link(i) => Some(i),
                ProofError::Contradiction { earlier, .. } => Some(earlier),
                _ => None,
            };
            let majority = match e {
                ProofError::Contradiction { majority, .. } | ProofError::Liar { majority, .. } => {
                    majority
                }
                _ => None,
            };
            let majority = match majority {
                Some(m) => convert::proven_dict(py, &m)?.into_any(),
                None => py.None().into_bound(py),
            };
            let answered = match e {
                ProofError::TooFewKeys { present, .. } => Some(present),
                _ => None,
            };
            let assumption = convert::pinned_assumption(assumption, answered);
            Err(raise(
                py,
                "ProofError",
                (
                    format!("{e} ({assumption})"),
                    convert::proof_kind(&e),
                    entry,
                    majority,
                    assumption,
                ),
            ))
        }
    }
}

/// The voter of each pinned key: keys with one label in `servers` are
/// one, and so are equal keys (closed transitively); each voter is
/// numbered by its first key, so `voter_of[i] == i` for exactly one key
/// of each.
fn voters(keys: &[LongTermKey], servers: Option<&[usize]>) -> Vec<usize> {
    let n = keys.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &[usize], mut i: usize) -> usize {
        while parent[i] != i {
            i = parent[i];
        }
        i
    }
    for j in 0..n {
        for i in 0..j {
            let one_server = servers.is_some_and(|s| s[i] == s[j]);
            if one_server || keys[i].bytes() == keys[j].bytes() {
                let (a, b) = (root(&parent, i), root(&parent, j));
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    (0..n).map(|i| root(&parent, i)).collect()
}
