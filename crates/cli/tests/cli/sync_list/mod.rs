//! `gnomon sync` refreshes its server list over HTTPS (the list's own
//! `sources`, or --servers-url) from a real TLS server on loopback whose
//! CA the test made: a good list replaces the old one and survives a
//! restart; garbage, too few servers, a huge body, a redirect, an error
//! status, an untrusted certificate and a download that never ends keep
//! the old list, each said in the log, and the rounds go on meanwhile.
//!
//! The state directory is no back door: a list planted there (with a
//! copied seed, or a forged provenance record) does not replace the
//! operator's; a state directory others may write is not believed at all;
//! symbolic links planted in it are never followed.
//!
//! Here the servers and the lists made of them, shared; the tests by what
//! they try: `refresh` (lists over HTTPS, good and bad) and `state_dir`
//! (what is planted in the state directory).

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

mod refresh;
mod state_dir;

const THREE: [(&str, Option<&str>); 3] = [("alpha", None), ("bravo", None), ("charlie", None)];
const PATIENCE: Duration = Duration::from_secs(30);
const STOP: Duration = Duration::from_secs(10);

fn list_of(full: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(full).unwrap()).unwrap()
}

/// The list with only the first `n` servers and `sources`.
fn list_with(full: &Value, n: usize, sources: &[String]) -> Vec<u8> {
    let servers: Vec<Value> = full["servers"].as_array().unwrap()[..n].to_vec();
    serde_json::to_vec(&json!({ "servers": servers, "sources": sources })).unwrap()
}
