//! The last list accepted from each key, kept across runs (the state
//! directory) so that an older list served again is refused.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};

use super::key::fingerprint;
use super::pins::{Accepted, Pins};

/// The last (sequence, SHA-256 of the document) accepted from each key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    last: BTreeMap<[u8; 32], (u64, [u8; 32])>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: u32,
    keys: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    /// For people reading the file; the key itself is `publicKey`.
    fingerprint: String,
    #[serde(rename = "publicKey")]
    public_key: String,
    sequence: u64,
    sha256: String,
}

impl Seen {
    /// The last sequence and document digest recorded for `key`.
    pub fn get(&self, key: &[u8; 32]) -> Option<(u64, [u8; 32])> {
        self.last.get(key).copied()
    }

    /// Record an accepted list. A sequence below the one recorded is
    /// ignored, so recording never moves a key backwards.
    pub fn record(&mut self, pins: &Pins, a: &Accepted) {
        let Some(key) = pins.keys().get(a.key) else {
            return;
        };
        let entry = self
            .last
            .entry(*key.public())
            .or_insert((a.header.sequence, a.sha256));
        if a.header.sequence > entry.0 {
            *entry = (a.header.sequence, a.sha256);
        }
    }

    /// The JSON kept in the state directory.
    pub fn to_json(&self) -> String {
        let file = File {
            version: 1,
            keys: self
                .last
                .iter()
                .map(|(k, (sequence, digest))| Entry {
                    fingerprint: fingerprint(k),
                    public_key: STANDARD.encode(k),
                    sequence: *sequence,
                    sha256: hex(digest),
                })
                .collect(),
        };
        // Plain strings and integers: serializing cannot fail.
        serde_json::to_string_pretty(&file).unwrap_or_default()
    }

    /// Read what [`Seen::to_json`] wrote.
    pub fn from_json(s: &str) -> Result<Seen, String> {
        let file: File = serde_json::from_str(s).map_err(|e| {
            format!(
                "the record of lists seen is not what gnomon writes (line {}, column {}): {e}",
                e.line(),
                e.column()
            )
        })?;
        if file.version != 1 {
            return Err(format!(
                "the record of lists seen is version {}, and this gnomon reads version 1",
                file.version
            ));
        }
        let mut last = BTreeMap::new();
        for e in file.keys {
            let key: [u8; 32] = STANDARD
                .decode(&e.public_key)
                .ok()
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| {
                    format!(
                        "the record of lists seen has a key that is not 32 bytes of base64: {:?}",
                        e.public_key
                    )
                })?;
            let digest = unhex(&e.sha256).ok_or_else(|| {
                format!(
                    "the record of lists seen has a digest that is not 64 hex digits: {:?}",
                    e.sha256
                )
            })?;
            let old = last.insert(key, (e.sequence, digest));
            if old.is_some() {
                return Err(format!(
                    "the record of lists seen names key {} twice",
                    fingerprint(&key)
                ));
            }
        }
        Ok(Seen { last })
    }
}

fn hex(bytes: &[u8; 32]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes
        .iter()
        .flat_map(|b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]])
        .map(char::from)
        .collect()
}

fn unhex(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let digit = |c: u8| {
        char::from(c)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    let mut out = [0u8; 32];
    for (o, pair) in out.iter_mut().zip(b.chunks(2)) {
        *o = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}
