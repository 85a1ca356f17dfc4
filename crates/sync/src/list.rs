//! The server list: read from `servers`, cached in the state directory,
//! and the cache used when the file cannot be read or parsed.

use std::path::Path;

use gnomon_client::Server;
use gnomon_protocol::ServerList;

use crate::state::{Store, LIST_CACHE};

/// A list that loaded.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The document as read (reports_url reads it again for test URLs).
    pub raw: Vec<u8>,
    /// Parsed.
    pub list: ServerList,
    /// Its usable servers.
    pub servers: Vec<Server>,
    /// Entries skipped and why, and whether the cache was used.
    pub notes: Vec<String>,
}

/// Parse `raw`; an error says why in words.
pub fn parse(raw: Vec<u8>, what: &str) -> Result<Loaded, String> {
    let list = ServerList::parse(&raw).map_err(|e| format!("{what}: not a server list ({e:?})"))?;
    let mut servers = Server::from_list(&list);
    // Names go into every log line and the state: one line of printable
    // text each, whoever wrote the list.
    for s in &mut servers {
        s.name = printable(&s.name);
    }
    let mut notes = Vec::new();
    for (i, s) in list.servers.iter().enumerate() {
        if let Err(why) = &s.status {
            let name = s.name.clone().unwrap_or_else(|| format!("server #{i}"));
            notes.push(format!("{what}: skipped {name}: {why:?}"));
        }
    }
    if servers.is_empty() {
        return Err(format!(
            "{what}: no usable server in the list ({})",
            notes.join("; ")
        ));
    }
    Ok(Loaded {
        raw,
        list,
        servers,
        notes,
    })
}

/// Read `path`; on success cache it in `store` (a cache that cannot be
/// written is a note). When `path` fails, the cache, with a note saying
/// why. `Err` when neither loads.
pub fn load(path: &Path, store: Option<&Store>) -> Result<Loaded, String> {
    let what = path.display().to_string();
    let fresh = crate::state::read_bounded(path)
        .map_err(|e| format!("{what}: {e}"))
        .and_then(|raw| parse(raw, &what));
    match fresh {
        Ok(mut l) => {
            if let Some(store) = store {
                let cached = store.read(LIST_CACHE).ok();
                if cached.as_deref() != Some(&l.raw[..]) {
                    if let Err(e) = store.write(LIST_CACHE, &l.raw) {
                        l.notes.push(format!("cannot cache the list: {e}"));
                    }
                }
            }
            Ok(l)
        }
        Err(why) => {
            let Some(store) = store else { return Err(why) };
            let cache = store.path(LIST_CACHE).display().to_string();
            let raw = store
                .read(LIST_CACHE)
                .map_err(|e| format!("{why}; and no cached list ({cache}: {e})"))?;
            let mut l = parse(raw, &cache).map_err(|e| format!("{why}; and {e}"))?;
            l.notes
                .push(format!("{why}; using the cached list {cache}"));
            Ok(l)
        }
    }
}

/// `name` with control characters (newlines, terminal escapes) shown as
/// `?`, cut to 64 characters.
fn printable(name: &str) -> String {
    name.chars()
        .take(64)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_one_printable_line() {
        let key = "iBVjxg/1j7y1+kQUTBYdTabxCppesU/07D4PMDJk2WA=";
        let doc = format!(
            r#"{{"servers":[{{"name":"a\nround 9: consensus\u001b[31m","version":1,"publicKeyType":"ed25519","publicKey":"{key}","addresses":[{{"protocol":"udp","address":"127.0.0.1:5319"}}]}}]}}"#
        );
        let l = parse(doc.into_bytes(), "test").unwrap();
        assert_eq!(l.servers[0].name, "a?round 9: consensus?[31m");
        assert_eq!(printable(&"x".repeat(100)).len(), 64);
    }
}
