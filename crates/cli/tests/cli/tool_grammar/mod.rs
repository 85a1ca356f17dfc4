//! The tools' grammar (issue 36) held against real `gnomon` processes:
//! relay and verify-proof name the list the same way and count entries
//! from 1, a refusal for width names its limit and flag, an empty list
//! says so, `health` tells a bad URL (64) from an unreachable one (1),
//! `config check` reads every gnomon file and says where a misplaced key
//! belongs, `delegate` refuses windows already over, and keygen,
//! delegate, config check and health give one JSON object with
//! `exit_code`. No message carries an errno's number.

mod config_files;
mod health;
mod keys;
mod proof;

use std::path::{Path, PathBuf};

pub(crate) use crate::client_support::{gnomon, Run};

/// A scratch directory of the test's own, removed when dropped.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        Scratch(crate::sync_support::tempdir(name))
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    pub(crate) fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// What a user reads holds no errno and no library's wording.
pub(crate) fn plain(text: &str) {
    for leak in [
        "os error",
        "bad uri",
        "missing scheme",
        "io: ",
        "libloading",
        "Os {",
    ] {
        assert!(!text.contains(leak), "`{leak}` in: {text}");
    }
}

/// `text` holds `needle`; the whole text is shown when it does not.
pub(crate) fn says(text: &str, needle: &str) {
    assert!(text.contains(needle), "expected {needle:?} in:\n{text}");
}

/// A refusal's JSON: its error kind and exit code.
pub(crate) fn refusal(v: &serde_json::Value) -> (Option<&str>, Option<u64>) {
    (v["error"]["kind"].as_str(), v["exit_code"].as_u64())
}
