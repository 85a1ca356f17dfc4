//! k of n: the servers at least K pinned monitors list, as one RFC list.

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use base64::Engine;
use serde_json::{Map, Value};

use super::pins::{Accepted, Pins};
use crate::report::B64;

/// The merged list and what went into it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merged {
    /// An RFC server list (`servers`, and `reports` when the lists agree).
    pub document: Vec<u8>,
    /// Servers in `document`.
    pub servers: usize,
    /// Current lists used (at most one a key).
    pub monitors: usize,
    /// When the first of the lists used expires, after which the merge
    /// must be done again; `None` when no list was current.
    pub expires_unix: Option<i64>,
    /// Servers some monitor lists but fewer than K do (at one common address).
    pub left_out: Vec<LeftOut>,
}

/// A server not used, and by how many monitors it was listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftOut {
    /// Its `name`, or its `publicKey` when it has none.
    pub name: String,
    /// How many pinned keys list it (at its most-listed address).
    pub listed_by: usize,
    /// K.
    pub needed: usize,
}

/// What makes two entries one server: the same key of the same type run by
/// the same operator. A monitor cannot move a key to another operator's
/// vote by listing it under another name.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Identity {
    key_type: String,
    key: Vec<u8>,
    operator: Option<String>,
}

/// One server as the lists give it.
struct Candidate {
    identity: Identity,
    /// The entry of the first pinned key (in pin order) listing it.
    entry: Map<String, Value>,
    /// Which pinned keys list it.
    by: Vec<usize>,
    /// Each address (protocol, address) and the pinned keys listing it
    /// there, in the order first given.
    addresses: Vec<((String, String), Vec<usize>)>,
    /// Where each address is in `addresses`.
    address_index: BTreeMap<(String, String), usize>,
}

impl Pins {
    /// Merge accepted lists at `now_unix`: lists that have expired are
    /// ignored, and of several from one key only the highest sequence
    /// counts. A server is used when at least K keys list it with the same
    /// (publicKeyType, publicKey, operator), at the addresses at least K
    /// of them give; its other fields come from the first pinned key (in
    /// the order given) that lists it.
    pub fn merge(&self, lists: &[Accepted], now_unix: i64) -> Merged {
        let k = self.threshold();
        // The current list of each key, by pin order.
        let mut current: Vec<Option<&Accepted>> = alloc::vec![None; self.keys().len()];
        for a in lists {
            if a.header.expires_unix <= now_unix {
                continue;
            }
            if let Some(slot) = current.get_mut(a.key) {
                if slot.is_none_or(|c| c.header.sequence < a.header.sequence) {
                    *slot = Some(a);
                }
            }
        }

        let mut candidates: Vec<Candidate> = Vec::new();
        let mut index: BTreeMap<Identity, usize> = BTreeMap::new();
        let mut reports: Vec<(String, usize)> = Vec::new();
        let mut monitors = 0;
        let mut expires_unix: Option<i64> = None;
        for (key, list) in current.iter().enumerate() {
            let Some(list) = list else { continue };
            let Ok(Value::Object(doc)) = serde_json::from_slice::<Value>(&list.document) else {
                continue;
            };
            monitors += 1;
            expires_unix = Some(expires_unix.map_or(list.header.expires_unix, |e| {
                e.min(list.header.expires_unix)
            }));
            if let Some(Value::String(r)) = doc.get("reports") {
                match reports.iter_mut().find(|(u, _)| u == r) {
                    Some((_, n)) => *n += 1,
                    None => reports.push((r.clone(), 1)),
                }
            }
            let Some(Value::Array(servers)) = doc.get("servers") else {
                continue;
            };
            for server in servers {
                let Value::Object(entry) = server else {
                    continue;
                };
                let Some(identity) = identity(entry) else {
                    continue;
                };
                // Looked up by map, not by scanning: a list of many
                // servers, or of one with many addresses, costs n log n.
                let at = *index.entry(identity.clone()).or_insert_with(|| {
                    candidates.push(Candidate {
                        identity,
                        entry: entry.clone(),
                        by: Vec::new(),
                        addresses: Vec::new(),
                        address_index: BTreeMap::new(),
                    });
                    candidates.len() - 1
                });
                let c = &mut candidates[at];
                // At most one entry a key: `by` is as short as the pins.
                if !c.by.contains(&key) {
                    c.by.push(key);
                }
                for address in addresses(entry) {
                    let slot = *c.address_index.entry(address.clone()).or_insert_with(|| {
                        c.addresses.push((address, Vec::new()));
                        c.addresses.len() - 1
                    });
                    let by = &mut c.addresses[slot].1;
                    if !by.contains(&key) {
                        by.push(key);
                    }
                }
            }
        }

        let mut servers = Vec::new();
        let mut left_out = Vec::new();
        for c in candidates {
            let agreed: Vec<Value> = c
                .addresses
                .iter()
                .filter(|(_, by)| by.len() >= k)
                .map(|((protocol, address), _)| {
                    let mut a = Map::new();
                    a.insert("protocol".to_string(), Value::String(protocol.clone()));
                    a.insert("address".to_string(), Value::String(address.clone()));
                    Value::Object(a)
                })
                .collect();
            if c.by.len() >= k && !agreed.is_empty() {
                let mut entry = c.entry;
                entry.insert("addresses".to_string(), Value::Array(agreed));
                servers.push(Value::Object(entry));
            } else {
                let at_one_address = c
                    .addresses
                    .iter()
                    .map(|(_, by)| by.len())
                    .max()
                    .unwrap_or(0);
                left_out.push(LeftOut {
                    name: match c.entry.get("name") {
                        Some(Value::String(n)) => n.clone(),
                        _ => B64.encode(&c.identity.key),
                    },
                    listed_by: at_one_address.min(c.by.len()),
                    needed: k,
                });
            }
        }

        let mut doc = Map::new();
        let count = servers.len();
        doc.insert("servers".to_string(), Value::Array(servers));
        // Where malfeasance reports go is taken only when K lists name the
        // same place and none names another: a monitor outside the
        // threshold cannot redirect reports, only leave them unnamed.
        if let [(url, n)] = reports.as_slice() {
            if *n >= k {
                doc.insert("reports".to_string(), Value::String(url.clone()));
            }
        }
        Merged {
            // A map of strings, numbers and arrays: serializing cannot fail.
            document: serde_json::to_vec_pretty(&Value::Object(doc)).unwrap_or_default(),
            servers: count,
            monitors,
            expires_unix,
            left_out,
        }
    }
}

fn identity(entry: &Map<String, Value>) -> Option<Identity> {
    let key_type = entry.get("publicKeyType")?.as_str()?.to_string();
    let written = entry.get("publicKey")?.as_str()?;
    // The key's bytes, so that two spellings of one key (padding or not)
    // are one server; a key that is not base64 is compared as written.
    let key = B64
        .decode(written)
        .unwrap_or_else(|_| written.as_bytes().to_vec());
    let operator = match entry.get("operator") {
        None | Some(Value::Null) => None,
        Some(Value::String(o)) => Some(o.clone()),
        Some(_) => return None,
    };
    Some(Identity {
        key_type,
        key,
        operator,
    })
}

fn addresses(entry: &Map<String, Value>) -> Vec<(String, String)> {
    let Some(Value::Array(list)) = entry.get("addresses") else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|a| {
            let protocol = a.get("protocol")?.as_str()?;
            let address = a.get("address")?.as_str()?;
            Some((protocol.to_string(), address.to_string()))
        })
        .collect()
}
