//! keygen and delegate: one JSON object under --json, failures in words,
//! and windows that are over before they are written refused (all of
//! them) or warned of (some), naming when they ended.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_server::keyfile;
use gnomon_server::offline::format_utc;

use super::{gnomon, plain, refusal, s, says, Run, Scratch};

const DAY_US: u64 = 86_400_000_000;

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        * 1_000_000
}

#[test]
fn keygen_json_is_one_object_and_failures_are_in_words() {
    let dir = Scratch::new("grammar-keygen");
    let key = dir.path("k.key");
    let run = gnomon(&["keygen", "--out", s(&key), "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout.lines().count(), 1, "{}", run.stdout);
    let v = run.json();
    let public = keyfile::load(&key).unwrap().public().to_vec();
    assert_eq!(v["public_key"], B64.encode(&public), "{v}");
    assert_eq!(
        (v["scheme"].as_str(), v["exit_code"].as_u64()),
        (Some("ed25519"), Some(0)),
        "{v}"
    );
    assert_eq!(v["out"], s(&key));
    // The file exists: refused, with the way to replace it.
    let v = gnomon(&["keygen", "--out", s(&key), "--json"]).json();
    assert_eq!(refusal(&v), (Some("exists"), Some(73)), "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("--force"),
        "{v}"
    );
    // A directory that is not there.
    let deep = dir.path("no-such-dir").join("k.key");
    let run = gnomon(&["keygen", "--out", s(&deep)]);
    assert_eq!(run.code, 73, "{}", run.stderr);
    says(&run.stderr, &deep.display().to_string());
    says(&run.stderr, "does not exist");
    plain(&run.stderr);
    let v = gnomon(&["keygen", "--json"]).json();
    assert_eq!(refusal(&v), (Some("usage"), Some(64)), "{v}");
}

fn keygen(dir: &Scratch) -> std::path::PathBuf {
    let key = dir.path("root.key");
    assert_eq!(gnomon(&["keygen", "--out", s(&key)]).code, 0);
    key
}

/// `gnomon delegate` from `key` into `out`, then `extra`.
fn delegate(key: &Path, out: &Path, extra: &[&str]) -> Run {
    let mut a = vec!["delegate", "--key-file", s(key), "--out-dir", s(out)];
    a.extend_from_slice(extra);
    gnomon(&a)
}

#[test]
fn delegate_refuses_windows_all_over_and_warns_of_some() {
    let dir = Scratch::new("grammar-delegate-past");
    let key = keygen(&dir);
    let now = now_us();
    // Ten days ago, two windows of two days: both over.
    let start = format_utc(now - 10 * DAY_US);
    let out = dir.path("d");
    let past = ["--start", start.as_str(), "--count", "2"];
    let run = delegate(&key, &out, &past);
    assert_eq!(run.code, 64, "{}", run.stderr);
    let last_end = format_utc(now - 10 * DAY_US + DAY_US + 2 * DAY_US);
    says(
        &run.stderr,
        &format!("every new window would have ended already (the last at {last_end}"),
    );
    says(&run.stderr, "--force");
    assert!(!out.exists(), "nothing is created for a refused run");
    let v = delegate(&key, &out, &[&past[..], &["--json"]].concat()).json();
    assert_eq!(refusal(&v), (Some("usage"), Some(64)), "{v}");
    // --force writes them, and still says they are over.
    let run = delegate(&key, &out, &[&past[..], &["--force"]].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    says(
        &run.stderr,
        &format!(
            "warning: 2 of the 2 new windows ended before now (the last of them at {last_end})"
        ),
    );

    // Three and a half days ago, three windows: two are over, one is not.
    let start = now - 7 * DAY_US / 2;
    let run = delegate(
        &key,
        &dir.path("e"),
        &["--start", &format_utc(start), "--count", "3", "--json"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ended = format_utc(start + DAY_US + 2 * DAY_US);
    let warning = format!(
        "2 of the 3 new windows ended before now (the last of them at {ended}); a server skips them"
    );
    says(&run.stderr, &format!("warning: {warning}"));
    let v = run.json();
    assert_eq!(v["warnings"][0], warning.as_str(), "{v}");
    assert_eq!(v["written"].as_array().unwrap().len(), 3, "{v}");
    let dirs = &v["directories"][0];
    assert_eq!(dirs["new_windows"], 3, "{v}");
    assert_eq!(v["exit_code"], 0, "{v}");
}

#[test]
fn one_window_is_one_window_and_a_missing_key_is_named() {
    let dir = Scratch::new("grammar-delegate-one");
    let key = keygen(&dir);
    let out = dir.path("d");
    let run = delegate(&key, &out, &["--count", "1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    says(&run.stderr, "gnomon delegate: 1 new window;");
    assert!(
        !run.stderr.contains("windows;") && !run.stderr.contains("warning"),
        "{}",
        run.stderr
    );
    let missing = dir.path("none.key");
    let run = delegate(&missing, &out, &["--json"]);
    assert_eq!(run.code, 66, "{}", run.stderr);
    let v = run.json();
    let msg = v["error"]["message"].as_str().unwrap();
    says(msg, &missing.display().to_string());
    says(msg, "does not exist");
    plain(msg);
    assert_eq!(v["exit_code"], 66);
}
