//! The relay's side: a [`Proof`] made from a bound measurement, written
//! and read in both forms.
//!
//! The JSON form is the RFC's malfeasance report (every entry with its
//! `rand`, the first one too) plus one top-level key, `"deviceNonce"`
//! (base64 of D). Report readers ignore unknown keys, so `verify-report`
//! tools read it as a chain whose first link is unchecked; this module
//! checks that link against D.

use alloc::string::String;
use alloc::vec::Vec;

use base64::Engine;
use serde_json::Value;

use super::binary::{self, EntryOut, ProofView};
use super::{check_device_value, ProofError, MAX_PROOF_ENTRIES, MAX_PROOF_REQUEST};
use crate::link::MAX_NONCE_LEN;
use crate::report::{parse_report, ParsedReport, Report, ReportEntry, ReportParseError, B64};
use crate::scheme::PublicKey;

/// The JSON key that carries D.
pub const DEVICE_NONCE_KEY: &str = "deviceNonce";

/// A proof bundle: the device value and the chain bound to it. Every field
/// fits the binary form (checked by [`Proof::new`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proof {
    device: Vec<u8>,
    report: Report,
}

/// Why a [`Proof`] cannot be made or read. Indices are entry indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProofFormError {
    /// The JSON is not a report.
    Json(ReportParseError),
    /// A report in the pre-12 form: it names no keys.
    Legacy,
    /// No `"deviceNonce"`.
    MissingDeviceNonce,
    /// `"deviceNonce"` is not a base64 string.
    DeviceNonce,
    /// D is shorter than [`super::MIN_DEVICE_NONCE`] or longer than
    /// [`super::MAX_DEVICE_VALUE`] (its length).
    DeviceLength(usize),
    /// No entries, or more than [`MAX_PROOF_ENTRIES`] (the count).
    EntryCount(usize),
    /// Entry i has no rand (every entry of a bound chain has one).
    MissingRand(usize),
    /// Entry i's rand is empty or longer than a nonce.
    RandLength(usize),
    /// Entry i's key is no scheme's length.
    KeyLength(usize),
    /// Entry i's request is longer than [`MAX_PROOF_REQUEST`].
    RequestLength(usize),
    /// Entry i's response does not fit a 16-bit length.
    ResponseLength(usize),
}

impl Proof {
    /// A proof of `report`'s chain for D = `device`, if it fits the binary
    /// form. Nothing cryptographic is checked: that is
    /// [`super::verify_proof`]'s job, on the device.
    pub fn new(device: Vec<u8>, report: Report) -> Result<Proof, ProofFormError> {
        if check_device_value(&device).is_err() {
            return Err(ProofFormError::DeviceLength(device.len()));
        }
        let n = report.entries.len();
        if n == 0 || n > MAX_PROOF_ENTRIES {
            return Err(ProofFormError::EntryCount(n));
        }
        for (i, e) in report.entries.iter().enumerate() {
            let rand = e.rand.as_ref().ok_or(ProofFormError::MissingRand(i))?;
            if rand.is_empty() || rand.len() > MAX_NONCE_LEN {
                return Err(ProofFormError::RandLength(i));
            }
            if PublicKey::from_bytes(&e.public_key).is_none() {
                return Err(ProofFormError::KeyLength(i));
            }
            if e.request.len() > MAX_PROOF_REQUEST {
                return Err(ProofFormError::RequestLength(i));
            }
            if e.response.len() > usize::from(u16::MAX) {
                return Err(ProofFormError::ResponseLength(i));
            }
        }
        Ok(Proof { device, report })
    }

    /// The device value D.
    pub fn device(&self) -> &[u8] {
        &self.device
    }

    /// The chain, as a malfeasance report.
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// The JSON form.
    pub fn to_json(&self) -> String {
        let mut doc: Value = serde_json::from_str(&self.report.to_json()).unwrap_or_default();
        if let Value::Object(top) = &mut doc {
            top.insert(
                String::from(DEVICE_NONCE_KEY),
                Value::String(B64.encode(&self.device)),
            );
        }
        serde_json::to_string(&doc).unwrap_or_default()
    }

    /// Read the JSON form.
    pub fn from_json(json: &[u8]) -> Result<Proof, ProofFormError> {
        let report = match parse_report(json).map_err(ProofFormError::Json)? {
            ParsedReport::Current(r) => r,
            ParsedReport::Legacy(_) => return Err(ProofFormError::Legacy),
        };
        // parse_report accepted it, so it is JSON.
        let doc: Value = serde_json::from_slice(json).unwrap_or_default();
        let device = doc
            .get(DEVICE_NONCE_KEY)
            .ok_or(ProofFormError::MissingDeviceNonce)?
            .as_str()
            .and_then(|s| B64.decode(s).ok())
            .ok_or(ProofFormError::DeviceNonce)?;
        Proof::new(device, report)
    }

    /// The binary form (version 1).
    pub fn to_binary(&self) -> Vec<u8> {
        binary::write(
            &self.device,
            self.report.entries.iter().map(|e| EntryOut {
                key: &e.public_key,
                rand: e.rand.as_deref().unwrap_or_default(),
                request: &e.request,
                response: &e.response,
            }),
        )
    }

    /// Read the binary form (structure only, as [`ProofView::parse`]).
    pub fn from_binary(bundle: &[u8]) -> Result<Proof, ProofError> {
        let view = ProofView::parse(bundle)?;
        let entries = view
            .entries()
            .iter()
            .map(|e| {
                let mut request = alloc::vec![0u8; e.request_len];
                e.request_into(&mut request);
                ReportEntry {
                    rand: Some(e.rand.to_vec()),
                    public_key: e.key.to_vec(),
                    request,
                    response: e.response.to_vec(),
                }
            })
            .collect();
        Ok(Proof {
            device: view.device().to_vec(),
            report: Report { entries },
        })
    }
}
