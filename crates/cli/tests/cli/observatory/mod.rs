//! The observatory end to end (issue 37's "Done means"), every part a
//! real process: `gnomon serve` servers (one an hour ahead under
//! libfaketime, one stopped halfway), `gnomon watch --publish-key` with a
//! key made by ssh-keygen, `ssh-keygen -Y verify` checking what it
//! publishes, and `gnomon sync` using it, refusing every bad list with its
//! reason, and with two monitors and a threshold of 2 leaving out the
//! server only one lists.
//!
//! Here the pieces: servers, keys, publications; the test in `done`.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use gnomon_protocol::signed_list::{sshsig, MonitorKey, NAMESPACE};
use serde_json::Value;

use crate::sync_support::{list_entry, Servers};

mod done;

/// Long enough for a loaded machine to finish a few one-second rounds.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A server list at `path` of (name, key, address) of each server.
pub fn write_list(path: &Path, servers: &[(&str, &str, &str)]) {
    let entries: Vec<String> = servers
        .iter()
        .map(|&(name, key, addr)| list_entry(name, "ed25519", key, 1, Some(addr), Some(addr)))
        .collect();
    crate::sync_support::write_list(path, &entries);
}

/// The (name, key, address) of each of `servers`.
pub fn each(servers: &Servers) -> Vec<(&str, &str, &str)> {
    (0..servers.names.len())
        .map(|i| {
            (
                servers.names[i].as_str(),
                servers.keys[i].as_str(),
                servers.addrs[i].as_str(),
            )
        })
        .collect()
}

pub use crate::ssh_support::{have_ssh_keygen, SshKey};

/// One publication of a monitor, as served: the exact bytes and their
/// signature.
#[derive(Clone)]
pub struct Published {
    pub document: Vec<u8>,
    pub signature: Vec<u8>,
    pub json: Value,
}

impl Published {
    pub fn sequence(&self) -> u64 {
        self.json["observatory"]["sequence"].as_u64().unwrap()
    }

    /// The names it lists.
    pub fn listed(&self) -> BTreeSet<String> {
        names_in(&self.json["servers"])
    }

    /// The reason it gives for leaving `name` out, if it does.
    pub fn excluded(&self, name: &str) -> Option<String> {
        self.json["observatory"]["excluded"]
            .as_array()?
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["reason"].as_str().unwrap_or("").to_owned())
    }
}

pub fn names_in(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s["name"].as_str().or_else(|| s.as_str()))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

pub fn set(n: &[&str]) -> BTreeSet<String> {
    n.iter().map(|s| s.to_string()).collect()
}

/// A GET's body, or None on any failure (not yet listening, 404 before
/// the first publication).
fn get(url: &str) -> Option<Vec<u8>> {
    let mut resp = ureq::get(url).call().ok()?;
    if resp.status().as_u16() != 200 {
        return None;
    }
    resp.body_mut().read_to_vec().ok()
}

/// The publication served at `addr` now. The list and its signature are
/// two requests, and a monitor publishes every round: a pair that does
/// not verify under `key` straddled a publication and is fetched again.
pub fn fetch(addr: SocketAddr, key: &MonitorKey) -> Option<Published> {
    let document = get(&format!("http://{addr}/servers.json"))?;
    let signature = get(&format!("http://{addr}/servers.json.sig"))?;
    sshsig::verify(&signature, &document, NAMESPACE, key.public()).ok()?;
    let json = serde_json::from_slice(&document).ok()?;
    Some(Published {
        document,
        signature,
        json,
    })
}

/// The first publication at `addr` for which `ready` holds, polled for at
/// most [`PATIENCE`]; the last one seen in the panic otherwise.
pub fn wait_publication(
    addr: SocketAddr,
    key: &MonitorKey,
    what: &str,
    ready: impl Fn(&Published) -> bool,
) -> Published {
    let until = Instant::now() + PATIENCE;
    let mut last = None;
    loop {
        if let Some(p) = fetch(addr, key) {
            if ready(&p) {
                return p;
            }
            last = Some(p.json);
        }
        assert!(
            Instant::now() < until,
            "no publication {what} within {PATIENCE:?}; the last: {last:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `doc` (a monitor's list as JSON) published `age` seconds ago and
/// expired `age - valid` seconds ago, with a sequence above any the
/// monitor has published: the same servers, and nothing wrong with it but
/// its expiry.
pub fn aged(doc: &Value, age: i64, valid: i64) -> Vec<u8> {
    use gnomon_protocol::signed_list::format_utc;
    let now = crate::signed_lists::now_unix();
    let mut d = doc.clone();
    let sequence = d["observatory"]["sequence"].as_u64().unwrap();
    d["observatory"]["sequence"] = (sequence + 1_000_000_000).into();
    d["observatory"]["published"] = format_utc(now - age).into();
    d["observatory"]["expires"] = format_utc(now - age + valid).into();
    d["observatory"]["window"] = serde_json::json!({
        "from": format_utc(now - age - 60),
        "to": format_utc(now - age),
    });
    serde_json::to_vec(&d).unwrap()
}
