//! The arguments every function takes in more than one form, checked
//! before anything is built or sent: a public key (text or bytes), a
//! version (name or number), a bounded integer, and the timeout and
//! transport of a network call.

use std::time::Duration;

use gnomon_client::{parse_public_key, Config, TcpMode};
use gnomon_protocol::{LongTermKey, Profile};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyString};

/// A public key given as base64 (or hex) text or as raw bytes: 32 for
/// Ed25519, 1312 for ML-DSA-44.
pub(crate) fn public_key(obj: &Bound<'_, PyAny>) -> PyResult<LongTermKey> {
    if let Ok(s) = obj.cast::<PyString>() {
        let text = s.to_cow()?;
        return parse_public_key(&text)
            .map_err(|e| PyValueError::new_err(format!("public key: {e}")));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        let raw = b.as_bytes();
        return LongTermKey::from_bytes(raw).ok_or_else(|| {
            PyValueError::new_err(format!(
                "public key: {} bytes; Ed25519 public keys have 32, ML-DSA-44 ones 1312",
                raw.len()
            ))
        });
    }
    Err(PyTypeError::new_err(
        "public key: expected base64 text (str) or 32 bytes",
    ))
}

/// A version by name (`"rfc-10049"`, `"draft-08"`, `"google"`), by number
/// (`1`, `0x8000000b`) or as a number in text.
pub(crate) fn profile(obj: &Bound<'_, PyAny>) -> PyResult<&'static Profile> {
    let name = if let Ok(s) = obj.cast::<PyString>() {
        s.to_cow()?.into_owned()
    } else if obj.is_instance_of::<PyInt>() {
        match obj.extract::<u32>() {
            Ok(n) => n.to_string(),
            Err(_) => {
                return Err(PyValueError::new_err(
                    "version: not a 32-bit version number",
                ))
            }
        }
    } else {
        return Err(PyTypeError::new_err(
            "version: expected a name such as \"rfc-10049\" or a wire number such as 0x8000000c",
        ));
    };
    Profile::by_name(&name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "version {name:?} is not one gnomon knows (gnomon.versions() lists them)"
        ))
    })
}

/// An integer argument in `lo..=hi`: another type is a TypeError, any
/// integer outside the range (however large) a ValueError.
pub(crate) fn int_in(obj: &Bound<'_, PyAny>, what: &str, lo: usize, hi: usize) -> PyResult<usize> {
    if !obj.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!("{what}: expected an int")));
    }
    obj.extract::<i64>()
        .ok()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| (lo..=hi).contains(n))
        .ok_or_else(|| PyValueError::new_err(format!("{what}: an integer in {lo}..={hi}")))
}

fn tcp_mode(tcp: Option<bool>) -> TcpMode {
    match tcp {
        None => TcpMode::Fallback,
        Some(true) => TcpMode::Only,
        Some(false) => TcpMode::Never,
    }
}

pub(crate) fn config(timeout: f64, tcp: Option<bool>) -> PyResult<Config> {
    let timeout = Duration::try_from_secs_f64(timeout)
        .ok()
        .filter(|t| !t.is_zero() && *t <= Duration::from_secs(86_400))
        .ok_or_else(|| PyValueError::new_err("timeout: seconds in (0, 86400]"))?;
    Ok(Config {
        tcp: tcp_mode(tcp),
        deadline: Some(timeout),
        ..Config::default()
    })
}
