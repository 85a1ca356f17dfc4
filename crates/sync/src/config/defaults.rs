//! What each key is unless given, from the one place the code takes it:
//! `Settings::default()` as `--print-config` prints it, or, for a key
//! that is unset by default, the words of [`KEYS`]. `gnomon sync --help`,
//! gnomon.toml(5) and the tests of the docs and of deploy/gnomon-sync.toml
//! read it here, so none of them can say 3 s where the code uses 5 s.

use super::{Settings, KEYS};

/// A key's default.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyDefault {
    /// A value, as `--print-config` writes it.
    Value(toml::Value),
    /// Unset unless given; what that means, in words.
    Words(&'static str),
}

impl KeyDefault {
    /// As a TOML file writes it (`"10m"`, `3`, `true`), or the words.
    pub fn toml(&self) -> String {
        match self {
            KeyDefault::Value(v) => v.to_string(),
            KeyDefault::Words(w) => (*w).to_owned(),
        }
    }

    /// As a flag takes it (`10m`, `3`, `true`), or the words.
    pub fn plain(&self) -> String {
        match self {
            KeyDefault::Value(toml::Value::String(s)) => s.clone(),
            other => other.toml(),
        }
    }
}

/// The default of `key`; `None` for a key without one (`servers`, which
/// is required) and for a name that is not a key.
pub fn default_of(key: &str) -> Option<KeyDefault> {
    let printed = Settings::default().to_string();
    let table: toml::Table = printed.parse().ok()?;
    if let Some(v) = table
        .get("sync")
        .and_then(toml::Value::as_table)
        .and_then(|t| t.get(key))
    {
        return Some(KeyDefault::Value(v.clone()));
    }
    KEYS.iter()
        .find(|(name, ..)| *name == key)
        .map(|(_, _, words, _)| *words)
        .filter(|w| !w.is_empty())
        .map(KeyDefault::Words)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DurationText, DEFAULT_CHRONY_MAX_RADIUS};

    /// Each key has its default in exactly one place: printed by
    /// `Settings::default()`, or in words in KEYS when it is unset, and
    /// only `servers` has neither.
    #[test]
    fn every_default_is_printed_or_in_words_never_both() {
        let printed: toml::Table = Settings::default().to_string().parse().unwrap();
        let printed = printed["sync"].as_table().unwrap();
        for (key, _, words, _) in KEYS {
            let is_printed = printed.contains_key(*key);
            assert!(
                is_printed == words.is_empty() || *key == "servers",
                "{key}: printed {is_printed}, in words {words:?}"
            );
            assert!(default_of(key).is_some() || *key == "servers", "{key}");
        }
        assert_eq!(
            default_of("chrony-max-radius").map(|d| d.plain()),
            Some(DurationText(DEFAULT_CHRONY_MAX_RADIUS).to_string())
        );
        assert_eq!(default_of("interval").unwrap().toml(), "\"10m\"");
        assert_eq!(default_of("quorum").unwrap().plain(), "2");
        assert_eq!(default_of("metrics").unwrap().toml(), "\"off\"");
        assert_eq!(default_of("servers"), None);
        assert_eq!(default_of("no-such-key"), None);
    }
}
