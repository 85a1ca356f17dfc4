//! One exchange with one server: the versions, a request, the check of
//! its answer, and a query that does both over the network.

use gnomon_client::{describe_verify_error, Client, Entropy, OsEntropy, Rejection, Server};
use gnomon_protocol::request::{srv_for, DEFAULT_REQUEST_SIZE};
use gnomon_protocol::{LongTermKey, Offer, Profile, ProfileSet, VerifyError, PROFILES};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::args::{config, int_in, profile, public_key};
use crate::blocking::interruptible;
use crate::convert::{answer_dict, invalid_reason, query_error, raise, verified_dict};

/// Longest nonce of any version (Google's 64 bytes).
const MAX_NONCE: usize = gnomon_protocol::chain::MAX_NONCE_LEN;

/// The known versions: (name, wire number), oldest first.
#[pyfunction]
pub(crate) fn versions() -> Vec<(&'static str, u32)> {
    PROFILES.iter().map(|p| (p.name, p.version.0)).collect()
}

/// A request for `version`, with `nonce` (random when `None`) and, when
/// `public_key` is given and the version defines it, SRV naming that key.
#[pyfunction]
#[pyo3(signature = (version, nonce=None, public_key=None, size=None))]
pub(crate) fn build_request<'py>(
    py: Python<'py>,
    version: &Bound<'py, PyAny>,
    nonce: Option<&Bound<'py, PyBytes>>,
    public_key: Option<&Bound<'py, PyAny>>,
    size: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    #[cfg(feature = "test-panic")]
    if std::env::var_os("GNOMON_TEST_PANIC").is_some() {
        panic!("GNOMON_TEST_PANIC is set: a stand-in for a bug");
    }
    let p = profile(version)?;
    let mut fresh = [0u8; MAX_NONCE];
    let nonce: &[u8] = match nonce {
        Some(n) => n.as_bytes(),
        None => {
            let out = &mut fresh[..p.nonce_len];
            OsEntropy
                .fill(out)
                .map_err(|e| PyErr::new::<pyo3::exceptions::PyOSError, _>(e.to_string()))?;
            out
        }
    };
    if nonce.len() != p.nonce_len {
        return Err(PyValueError::new_err(format!(
            "nonce: {} bytes; {} uses {}",
            nonce.len(),
            p.name,
            p.nonce_len
        )));
    }
    let srv = public_key.map(|k| public_key_srv(k)).transpose()?;
    let size = match size {
        Some(s) => int_in(s, "size", 0, 65_536)?,
        None => DEFAULT_REQUEST_SIZE,
    };
    let mut out = vec![0u8; size];
    let len = Offer::single(p)
        .build(nonce, srv.as_ref(), size, &mut out)
        .map_err(|e| {
            PyValueError::new_err(format!(
                "cannot build a {size}-byte {} request ({e:?}): the size must be a multiple of 4 and hold the message",
                p.name
            ))
        })?;
    Ok(PyBytes::new(py, &out[..len]))
}

fn public_key_srv(k: &Bound<'_, PyAny>) -> PyResult<[u8; 32]> {
    Ok(srv_for(public_key(k)?.bytes()))
}

/// Verify `response` to `request` against `public_key`.
#[pyfunction]
pub(crate) fn verify<'py>(
    py: Python<'py>,
    request: &Bound<'py, PyBytes>,
    response: &Bound<'py, PyBytes>,
    public_key: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let key = self::public_key(public_key)?;
    match gnomon_protocol::verify_response(request.as_bytes(), response.as_bytes(), &key) {
        Ok(v) => verified_dict(py, &v),
        Err(VerifyError::Request(w)) => Err(PyValueError::new_err(format!(
            "request: not a Roughtime request ({w:?})"
        ))),
        Err(e) => Err(raise(
            py,
            "InvalidAnswer",
            (
                describe_verify_error(&e),
                invalid_reason(&Rejection::Verify(e)),
            ),
        )),
    }
}

/// Ask one server.
#[pyfunction]
#[pyo3(signature = (address, public_key, *, version=None, timeout=2.0, tcp=None))]
pub(crate) fn query<'py>(
    py: Python<'py>,
    address: &str,
    public_key: &Bound<'py, PyAny>,
    version: Option<&Bound<'py, PyAny>>,
    timeout: f64,
    tcp: Option<bool>,
) -> PyResult<Bound<'py, PyDict>> {
    let key = self::public_key(public_key)?;
    let version = version.map(profile).transpose()?;
    check_scheme(&key, version, tcp)?;
    let mut server = Server::at(address, key)
        .map_err(|e| PyValueError::new_err(format!("address {address:?}: {e}")))?;
    if let Some(p) = version {
        server = server.with_version(p);
    }
    let mut client = Client::new(config(timeout, tcp)?);
    let result = interruptible(py, move || client.query(&server))?;
    match result {
        Ok(a) => answer_dict(py, &a),
        Err(e) => Err(query_error(py, &e)),
    }
}

/// A version and transport the key's scheme can be asked in, refused
/// before any packet is sent (as `gnomon query` refuses them): an ML-DSA-44
/// key never verifies an Ed25519 version's answer, and its versions are
/// served over TCP only.
fn check_scheme(key: &LongTermKey, version: Option<&Profile>, tcp: Option<bool>) -> PyResult<()> {
    let scheme = key.scheme();
    if let Some(p) = version {
        if p.scheme != scheme {
            return Err(PyValueError::new_err(format!(
                "version {:?} is signed with {}, but public_key is an {} key ({} bytes)",
                p.name,
                p.scheme,
                scheme,
                key.bytes().len()
            )));
        }
    }
    if tcp == Some(false)
        && ProfileSet::ALL
            .of_scheme(scheme)
            .over_udp()
            .iter()
            .next()
            .is_none()
    {
        return Err(PyValueError::new_err(format!(
            "tcp=False: {scheme} versions are served over TCP only"
        )));
    }
    Ok(())
}
