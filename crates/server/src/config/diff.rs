//! What differs between two configurations, key by key: what a reload
//! changed, and which of those changes wait for a restart.

use super::Config;

/// Keys whose new value a running server cannot take: the sockets (and
/// with them `listen`, `workers`, `recv-buffer`, `tcp.enable`, `metrics`)
/// are bound at start, the batch buffers are sized by `batch-size`, and the
/// log's format is set up once. Every other key is applied by a reload
/// (`Engine::reload`; `log.level` by `serve` itself); a new key belongs
/// here unless it is.
pub const RESTART_ONLY: &[&str] = &[
    "listen",
    "workers",
    "batch-size",
    "recv-buffer",
    "tcp.enable",
    "metrics",
    "xdp",
    "log.format",
];

impl Config {
    /// The keys whose values differ between `self` and `other`, in the
    /// order `gnomon config check` prints them. Compared through the TOML
    /// each prints (`Display`), which is exact and loads back to the same
    /// value, so a key added there is compared without a second list here.
    pub fn differences(&self, other: &Config) -> Vec<String> {
        let (a, b) = (keyed(&self.to_string()), keyed(&other.to_string()));
        let mut out: Vec<String> = Vec::new();
        for (key, _) in a.iter().chain(&b) {
            let mine = a.iter().find(|(k, _)| k == key).map(|(_, v)| v);
            let theirs = b.iter().find(|(k, _)| k == key).map(|(_, v)| v);
            if mine != theirs && !out.contains(key) {
                out.push(key.clone());
            }
        }
        out
    }

    /// The keys in [`RESTART_ONLY`] whose values differ.
    pub fn restart_only_differences(&self, other: &Config) -> Vec<String> {
        self.differences(other)
            .into_iter()
            .filter(|k| RESTART_ONLY.contains(&k.as_str()))
            .collect()
    }
}

/// `(dotted key, value text)` for each `key = value` line, the table
/// headers giving the prefix.
fn keyed(toml: &str) -> Vec<(String, String)> {
    let mut table = String::new();
    let mut out = Vec::new();
    for line in toml.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            table = format!("{name}.");
        } else if let Some((k, v)) = line.split_once(" = ") {
            out.push((format!("{table}{k}"), v.to_owned()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{lookup, Overrides};
    use std::path::Path;

    fn load(text: &str) -> Config {
        Config::from_toml(text, Path::new("t.toml"), &Overrides::new()).unwrap()
    }

    #[test]
    fn names_each_changed_key_and_which_need_a_restart() {
        let a = load("workers = 2\n[limit]\nrate = 10\n");
        let b = load("workers = 3\nversions = [\"google\"]\n[limit]\nrate = 20\n[clock]\nunsynchronized = \"refuse\"\n");
        let changed = a.differences(&b);
        for key in ["workers", "versions", "limit.rate", "clock.unsynchronized"] {
            assert!(changed.iter().any(|k| k == key), "{key} in {changed:?}");
        }
        // The radius line is printed only under answer-with-radius.
        assert!(changed.iter().any(|k| k == "clock.unsynchronized-radius"));
        assert_eq!(changed.len(), 5, "{changed:?}");
        assert_eq!(a.restart_only_differences(&b), ["workers"]);
        assert!(a.differences(&a.clone()).is_empty());
    }

    #[test]
    fn every_restart_only_name_is_a_key() {
        for name in RESTART_ONLY {
            assert!(lookup(name).is_some_and(|s| s.key == *name), "{name}");
        }
    }

    #[test]
    fn the_shipped_file_marks_exactly_the_restart_only_keys() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/gnomon.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let (mut table, mut block, mut found) = (String::new(), String::new(), Vec::new());
        for line in text.lines() {
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                table = format!("{name}.");
                block.clear();
                continue;
            }
            // A key line, set or shown commented out.
            let bare = line.trim_start_matches(['#', ' ']);
            let key = bare
                .split_once(" = ")
                .map(|(k, _)| format!("{table}{k}"))
                .filter(|k| lookup(k).is_some_and(|s| s.key == k));
            match key {
                Some(key) => {
                    let marked = block.contains("Restart to change");
                    let restart = RESTART_ONLY.contains(&key.as_str());
                    assert_eq!(
                        marked, restart,
                        "{key}: marked {marked}, restart-only {restart}"
                    );
                    found.push(key);
                    block.clear();
                }
                None if line.starts_with('#') => {
                    block.push(' ');
                    block.push_str(bare);
                }
                None => block.clear(),
            }
        }
        for key in RESTART_ONLY {
            assert!(
                found.iter().any(|k| k == key),
                "{key} not in deploy/gnomon.toml"
            );
        }
    }
}
