//! The server list: read from `servers`, cached in the state directory
//! with a record of where the cached copy came from, and the cache used
//! only when that record ties it to the operator's own configuration.
//!
//! The cache `sync-servers.json` is either a copy of the operator's file
//! or a list refreshed from its `sources` (or `servers-url`). Beside it,
//! `sync-servers.meta.json` ([`Record`]) says which: the URL it was
//! downloaded from, the SHA-256 of the operator's file it descends from,
//! the SHA-256 of the cached bytes, when. At start:
//!
//! - an operator's file that loads is used, unless the record proves the
//!   cache was refreshed from one of that file's `sources` (or the
//!   configured `servers-url`) while the file was byte for byte what it
//!   is now; a cache that fails any of that is ignored with a note;
//! - an operator's file that cannot be read or parsed falls back to the
//!   cache only when the record says it belongs to that very file (a copy
//!   of it, or refreshed from its sources);
//! - with only `servers-url`, the cache is used only when its record
//!   names that URL.
//!
//! Nothing is read from a state directory that fails [`Store::trust`]:
//! whoever else can write it could forge the record as well.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use gnomon_client::{format_utc, Server};
use gnomon_protocol::ServerList;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::state::{Store, LIST_CACHE, LIST_META};

/// The copy of the operator's file that older versions kept beside a
/// refreshed cache, and believed; the provenance record
/// (`sync-servers.meta.json`) replaces it, and it is removed whenever the
/// cache is written.
pub const SEED_FILE: &str = "sync-servers.seed";

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
    let list = ServerList::parse(&raw).map_err(|e| format!("{what}: not a server list: {e}"))?;
    let mut servers = Server::from_list(&list);
    // Names go into every log line and the state: one line of printable
    // text each, whoever wrote the list.
    for s in &mut servers {
        s.name = printable(&s.name);
    }
    let mut notes = Vec::new();
    for (i, s) in list.servers.iter().enumerate() {
        if let Err(why) = &s.status {
            // Entries count from 1, as every command numbers them.
            let name = s.name.clone().unwrap_or_else(|| format!("entry {}", i + 1));
            notes.push(format!("{what}: skipped {name}: {why}"));
        }
    }
    if list.servers.is_empty() {
        return Err(format!("{what}: the list has no servers"));
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

/// Where the cached list came from: `sync-servers.meta.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Format version.
    pub format: u32,
    /// The URL the cache was downloaded from; `None` when it is a copy of
    /// the operator's file.
    pub url: Option<String>,
    /// The operator's list file (`servers`) it belongs to, as configured.
    pub file: Option<String>,
    /// SHA-256 (hex) of the operator's file it was checked against: the
    /// file it copies, or whose `sources` it was refreshed from.
    pub seed_sha256: Option<String>,
    /// The configured `servers-url` when it was downloaded.
    pub servers_url: Option<String>,
    /// SHA-256 (hex) of the cached bytes.
    pub sha256: String,
    /// When it was fetched (or copied), Unix µs.
    pub fetched_us: i64,
}

const RECORD_FORMAT: u32 = 1;

impl Record {
    /// The record of `raw`, fetched now from `url` (`None`: a copy of
    /// the operator's `file`, whose bytes are `seed`).
    pub fn new(
        raw: &[u8],
        url: Option<&str>,
        file: Option<&Path>,
        seed: Option<&[u8]>,
        servers_url: Option<&str>,
    ) -> Record {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        Record {
            format: RECORD_FORMAT,
            url: url.map(str::to_string),
            file: file.map(|p| p.display().to_string()),
            seed_sha256: seed.map(sha256_hex),
            servers_url: servers_url.map(str::to_string),
            sha256: sha256_hex(raw),
            fetched_us: now,
        }
    }

    /// "refreshed from URL at TIME" or "copied from FILE at TIME".
    fn origin(&self) -> String {
        let when = format_utc(self.fetched_us.max(0) as u64);
        match (&self.url, &self.file) {
            (Some(u), _) => format!("refreshed from {u} at {when}"),
            (None, Some(f)) => format!("copied from {f} at {when}"),
            (None, None) => format!("written at {when}"),
        }
    }
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Write `raw` as the list cache with its record (the cache first: a
/// crash between the two leaves a record that does not match, and the
/// cache is then ignored, never believed). The seed file older versions
/// wrote is removed.
pub fn write_cache(store: &Store, raw: &[u8], record: &Record) -> std::io::Result<()> {
    let mut meta = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
    meta.push(b'\n');
    store.write(LIST_CACHE, raw)?;
    store.write(LIST_META, &meta)?;
    let _ = std::fs::remove_file(store.path(SEED_FILE));
    Ok(())
}

/// Write a list refreshed from `url` to the cache, with its record: the
/// operator's `file` and its bytes `seed` it descends from (both `None`
/// with only `servers-url`), and the configured `servers_url`.
pub fn cache(
    store: &Store,
    raw: &[u8],
    url: &str,
    file: Option<&Path>,
    seed: Option<&[u8]>,
    servers_url: Option<&str>,
) -> std::io::Result<()> {
    write_cache(
        store,
        raw,
        &Record::new(raw, Some(url), file, seed, servers_url),
    )
}

/// Cache the operator's file `path` (bytes `raw`) as a copy, unless the
/// cache is that copy already (looked at only when `trusted`: an
/// untrusted directory is written, never read).
pub fn cache_file(store: &Store, path: &Path, raw: &[u8], trusted: bool) -> std::io::Result<()> {
    if trusted {
        if let Ok((cached, r)) = read_cache(store) {
            if cached == raw
                && r.url.is_none()
                && r.file.as_deref() == Some(&*path.display().to_string())
            {
                return Ok(());
            }
        }
    }
    write_cache(
        store,
        raw,
        &Record::new(raw, None, Some(path), Some(raw), None),
    )
}

/// Why the cache was not used.
#[derive(Debug)]
enum Skip {
    /// There is none: nothing to say.
    None,
    /// Ignored, for this reason.
    Because(String),
}

/// The cache and its record, both files private ([`Store::read_trusted`])
/// and the cache's hash the record's.
fn read_cache(store: &Store) -> Result<(Vec<u8>, Record), Skip> {
    let raw = match store.read_trusted(LIST_CACHE) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Skip::None),
        Err(e) => return Err(Skip::Because(e.to_string())),
    };
    let meta = match store.read_trusted(LIST_META) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Skip::Because(format!(
                "it has no provenance record ({LIST_META})"
            )))
        }
        Err(e) => return Err(Skip::Because(e.to_string())),
    };
    let record: Record = serde_json::from_slice(&meta).map_err(|e| {
        Skip::Because(format!(
            "its provenance record {LIST_META} is corrupt ({e})"
        ))
    })?;
    if record.format != RECORD_FORMAT {
        return Err(Skip::Because(format!(
            "its provenance record has format {}, not {RECORD_FORMAT}",
            record.format
        )));
    }
    if record.sha256 != sha256_hex(&raw) {
        return Err(Skip::Because(format!(
            "its SHA-256 is not the one its provenance record {LIST_META} names"
        )));
    }
    Ok((raw, record))
}

/// The cache, when it may be read at all: `Skip::Because` when the
/// directory is not trusted and a cache is there.
fn trusted_cache(store: &Store, trusted: bool) -> Result<(Vec<u8>, Record), Skip> {
    if !trusted {
        return match std::fs::symlink_metadata(store.path(LIST_CACHE)) {
            Ok(_) => Err(Skip::Because(
                "the state directory is not trusted (see the warning)".into(),
            )),
            Err(_) => Err(Skip::None),
        };
    }
    read_cache(store)
}

/// At start, with the operator's list file `path`: the list and the
/// file's bytes (what a later refresh descends from; `None` when the file
/// could not be read). See the module's rules; `trusted` is
/// [`Store::trust`]'s verdict. The file that loads is cached as a copy
/// (a cache that cannot be written is a note). `Err` when neither the
/// file nor a cache allowed to stand in for it loads.
pub fn load(
    path: &Path,
    servers_url: &[String],
    store: &Store,
    trusted: bool,
) -> Result<(Loaded, Option<Vec<u8>>), String> {
    let what = path.display().to_string();
    let cache = store.path(LIST_CACHE).display().to_string();
    match read_file(path) {
        Ok(mut file) => {
            let seed = file.raw.clone();
            match refreshed_from(store, trusted, &file, servers_url) {
                Ok((mut l, r)) => {
                    l.notes.push(format!(
                        "using the list last refreshed from its sources ({}), cached in {cache}; \
                         it descends from {what} as the file is now",
                        r.origin()
                    ));
                    return Ok((l, Some(seed)));
                }
                Err(Skip::None) => {}
                Err(Skip::Because(why)) => file.notes.push(format!(
                    "the cached list {cache} is ignored: {why}; using {what}"
                )),
            }
            if let Err(e) = cache_file(store, path, &file.raw, trusted) {
                file.notes.push(format!("cannot cache the list: {e}"));
            }
            Ok((file, Some(seed)))
        }
        Err(why) => {
            let (raw, r) = match trusted_cache(store, trusted) {
                Ok(c) => c,
                Err(Skip::None) => return Err(no_cache(&why, store)),
                Err(Skip::Because(no)) => {
                    return Err(format!(
                        "{why}; and the cached list {cache} is not used: {no}"
                    ))
                }
            };
            if r.file.as_deref() != Some(&*what) {
                return Err(format!(
                    "{why}; and the cached list {cache} is not used: it belongs to {}, not {what}",
                    r.file.as_deref().unwrap_or("no list file")
                ));
            }
            let mut l = parse(raw, &cache).map_err(|e| format!("{why}; and {e}"))?;
            l.notes.push(format!(
                "{why}; using the cached list {cache} ({})",
                r.origin()
            ));
            Ok((l, None))
        }
    }
}

/// The operator's file `path`, read and parsed.
fn read_file(path: &Path) -> Result<Loaded, String> {
    let what = path.display().to_string();
    crate::state::read_bounded(path)
        .map_err(|e| format!("{what}: {e}"))
        .and_then(|raw| parse(raw, &what))
}

/// The error of a list file that does not load, with no cache to stand in.
fn no_cache(why: &str, store: &Store) -> String {
    format!(
        "{why}; and no cached list ({}: not found)",
        store.path(LIST_CACHE).display()
    )
}

/// What [`load`] says of the operator's file `path` when the state
/// directory `store` does not exist yet, so no cache can stand in: read
/// before the directory is made, so that a list that does not load
/// leaves nothing behind.
pub fn check_without_cache(path: &Path, store: &Store) -> Result<(), String> {
    read_file(path)
        .map(drop)
        .map_err(|why| no_cache(&why, store))
}

/// The cache, when its record proves it was refreshed from `file`'s
/// `sources` or `servers_url` while the file was what it is now.
fn refreshed_from(
    store: &Store,
    trusted: bool,
    file: &Loaded,
    servers_url: &[String],
) -> Result<(Loaded, Record), Skip> {
    let (raw, r) = trusted_cache(store, trusted)?;
    let Some(url) = r.url.as_deref() else {
        // A copy of a file: the file itself is what is used.
        return Err(Skip::None);
    };
    if r.seed_sha256.as_deref() != Some(&*sha256_hex(&file.raw)) {
        return Err(Skip::Because(format!(
            "it was refreshed from {url} for a list file other than this one as it is now"
        )));
    }
    if !servers_url.iter().any(|u| u == url) && !file.list.sources.iter().any(|s| s == url) {
        return Err(Skip::Because(format!(
            "it was downloaded from {url}, which is neither one of the list's sources nor servers-url"
        )));
    }
    let l = parse(raw, &store.path(LIST_CACHE).display().to_string()).map_err(Skip::Because)?;
    Ok((l, r))
}

/// At start with only `servers_url`: the cache, when its record says it
/// was downloaded from one of those URLs. `Err(None)`: no cache; `Err(Some(why))`:
/// a cache, ignored.
pub fn cached_from_url(
    store: &Store,
    servers_url: &[String],
    trusted: bool,
) -> Result<Loaded, Option<String>> {
    let cache = store.path(LIST_CACHE).display().to_string();
    let (raw, r) = trusted_cache(store, trusted).map_err(|s| match s {
        Skip::None => None,
        Skip::Because(why) => Some(format!("the cached list {cache} is ignored: {why}")),
    })?;
    if !servers_url.iter().any(|u| Some(&**u) == r.url.as_deref()) {
        return Err(Some(format!(
            "the cached list {cache} is ignored: it was not downloaded from {} ({})",
            servers_url.join(" or "),
            r.origin()
        )));
    }
    let mut l =
        parse(raw, &cache).map_err(|e| Some(format!("the cached list {cache} is ignored: {e}")))?;
    l.notes
        .push(format!("using the list {}, cached in {cache}", r.origin()));
    Ok(l)
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
mod tests;
