//! The demo liar of docs/SYNC.md ("Trying it with a liar on loopback"),
//! run exactly as the block there is written: its environment, its
//! command, only the port chosen free. A doc whose command hangs on
//! SIGTERM or is not ahead would fail here.

use crate::serve_support;

use std::io::BufReader;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;

use serve_support::{repo, Started};

const MARKER: &str = "<!-- the block below is run by crates/cli/tests/cli/doc_liar.rs -->";

/// The environment and the argument list of the block after [`MARKER`],
/// continuation lines joined.
fn documented_command() -> (Vec<(String, String)>, Vec<String>) {
    let doc = std::fs::read_to_string(repo().join("docs/SYNC.md")).unwrap();
    let after = doc
        .split_once(MARKER)
        .unwrap_or_else(|| panic!("docs/SYNC.md lost its marker {MARKER}"))
        .1;
    let body = after
        .trim_start()
        .strip_prefix("```sh\n")
        .expect("a ```sh block right after the marker");
    let block = body.split_once("```").expect("the block is closed").0;
    let line = block.replace("\\\n", " ");
    let mut env = Vec::new();
    let mut words = line.split_whitespace().peekable();
    while let Some(w) = words.peek() {
        match w.split_once('=') {
            Some((k, v)) if k.chars().all(|c| c.is_ascii_uppercase() || c == '_') => {
                env.push((k.to_string(), v.to_string()));
                words.next();
            }
            _ => break,
        }
    }
    assert_eq!(words.next(), Some("gnomon"), "{block}");
    (env, words.map(str::to_string).collect())
}

#[test]
fn the_documented_liar_is_an_hour_ahead_and_stops_on_sigterm() {
    let (env, mut args) = documented_command();
    let preload = env
        .iter()
        .find(|(k, _)| k == "LD_PRELOAD")
        .map(|(_, v)| v.clone())
        .expect("the block preloads libfaketime");
    assert!(
        env.iter()
            .any(|(k, v)| k == "FAKETIME_DONT_FAKE_MONOTONIC" && v == "1"),
        "the block must keep the monotonic clock honest: {env:?}"
    );
    if !Path::new(&preload).exists() {
        gnomon_testkit::skip(
            "the_documented_liar_is_an_hour_ahead_and_stops_on_sigterm",
            &format!("{preload} missing (package libfaketime)"),
        );
        return;
    }
    let listen = args
        .iter()
        .position(|a| a == "--listen")
        .expect("the block names its address");
    args[listen + 1] = "127.0.0.1:0".into();

    let mut child = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(&args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let started = Started::read(child, stderr);
    let mut child = started.child;
    let key = base64::engine::general_purpose::STANDARD.encode(started.public);

    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(["query", &started.addr.to_string(), "--key", &key, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let offset_s = json["offset_us"].as_i64().unwrap() as f64 / 1e6;
    // An hour ahead, give or take the radius and a slow machine.
    assert!(
        (offset_s - 3600.0).abs() < 120.0,
        "offset {offset_s} s, not about +3600: {json}"
    );

    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    // A bound on a hang, not a timing claim: the faketime wrapper's server
    // would never exit.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the documented liar did not stop within 60 s of SIGTERM"
        );
        std::thread::park_timeout(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
}
