//! The monitor keys as `servers-key` gives them (a key line, or a `.pub`
//! file) and their pins with `servers-threshold`: part of checking the
//! settings, so the signed lists' module and the
//! settings' check share one reading of them.

use std::path::Path;

use gnomon_protocol::signed_list::{MonitorKey, Pins};

/// A key as messages name it: its fingerprint as `ssh-keygen -l` prints
/// it, and its comment when it has one.
pub fn key_name(key: &MonitorKey) -> String {
    if key.comment().is_empty() {
        key.fingerprint()
    } else {
        format!("{} ({})", key.fingerprint(), printable(key.comment()))
    }
}

/// A `servers-key` as given: the OpenSSH line itself (`ssh-ed25519 AAAA…
/// comment`), or else the path of a file holding it (a `.pub`; its first
/// line that is neither empty nor a `#` comment).
pub fn load_key(given: &str) -> Result<MonitorKey, String> {
    let text = given.trim();
    if looks_like_key(text) {
        return MonitorKey::parse(text).map_err(|e| format!("servers-key {}: {e}", clip(text)));
    }
    let path = Path::new(given);
    let bytes = crate::state::read_bounded(path).map_err(|e| {
        format!(
            "servers-key {}: neither a key line (\"ssh-ed25519 AAAA… comment\") nor a file \
             that can be read ({}); give the monitor's public key line or the path of its \
             .pub file",
            path.display(),
            super::file::unreadable(&e)
        )
    })?;
    let content = String::from_utf8_lossy(&bytes);
    let line = content
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .unwrap_or("");
    MonitorKey::parse(line).map_err(|e| format!("servers-key {}: {e}", path.display()))
}

/// Whether `text` is meant as a key line rather than a path: it starts
/// with a key type word (`ssh-ed25519`, `ssh-rsa`, `ecdsa-sha2-…`, `sk-…`).
pub fn looks_like_key(text: &str) -> bool {
    let first = text.split_whitespace().next().unwrap_or("");
    text.contains(char::is_whitespace)
        && ["ssh-", "ecdsa-", "sk-"]
            .iter()
            .any(|p| first.starts_with(p))
}

/// The pins of `keys` (each as [`load_key`] takes it) with `threshold`:
/// `Ok(None)` when no key is given. Keys must be distinct and the
/// threshold in 1..=keys; the error says which and what to do.
pub fn pins(keys: &[String], threshold: usize) -> Result<Option<Pins>, String> {
    if keys.is_empty() {
        if threshold > 1 {
            return Err(format!(
                "servers-threshold {threshold} needs at least {threshold} servers-key: pin the \
                 monitors' keys, or drop servers-threshold"
            ));
        }
        return Ok(None);
    }
    let mut loaded: Vec<MonitorKey> = Vec::with_capacity(keys.len());
    for k in keys {
        let key = load_key(k)?;
        if let Some(same) = loaded.iter().find(|o| o.public() == key.public()) {
            return Err(format!(
                "servers-key {} is given twice (also as {}): a monitor counts once towards \
                 servers-threshold; drop one of them",
                key_name(&key),
                key_name(same)
            ));
        }
        loaded.push(key);
    }
    if threshold == 0 || threshold > loaded.len() {
        return Err(format!(
            "servers-threshold {threshold} is not in 1..={n}: it is how many of the {n} pinned \
             monitor key(s) must list a server; lower it or pin more keys",
            n = loaded.len()
        ));
    }
    Pins::new(loaded, threshold).map(Some)
}

/// The first 40 characters of `text`, for a message about it.
fn clip(text: &str) -> String {
    let mut out: String = text.chars().take(40).collect();
    if text.chars().count() > 40 {
        out.push('…');
    }
    format!("\"{}\"", printable(&out))
}

/// `s` with control characters shown as `?`: key comments reach logs.
fn printable(s: &str) -> String {
    s.chars()
        .take(64)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}
