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
            let name = s.name.clone().unwrap_or_else(|| format!("server #{i}"));
            notes.push(format!("{what}: skipped {name}: {why}"));
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
    let _ = std::fs::remove_file(store.path(crate::refresh::SEED_FILE));
    Ok(())
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
    servers_url: Option<&str>,
    store: &Store,
    trusted: bool,
) -> Result<(Loaded, Option<Vec<u8>>), String> {
    let what = path.display().to_string();
    let cache = store.path(LIST_CACHE).display().to_string();
    let fresh = crate::state::read_bounded(path)
        .map_err(|e| format!("{what}: {e}"))
        .and_then(|raw| parse(raw, &what));
    match fresh {
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
                Err(Skip::None) => {
                    return Err(format!("{why}; and no cached list ({cache}: not found)"))
                }
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

/// The cache, when its record proves it was refreshed from `file`'s
/// `sources` or `servers_url` while the file was what it is now.
fn refreshed_from(
    store: &Store,
    trusted: bool,
    file: &Loaded,
    servers_url: Option<&str>,
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
    if servers_url != Some(url) && !file.list.sources.iter().any(|s| s == url) {
        return Err(Skip::Because(format!(
            "it was downloaded from {url}, which is neither one of the list's sources nor servers-url"
        )));
    }
    let l = parse(raw, &store.path(LIST_CACHE).display().to_string()).map_err(Skip::Because)?;
    Ok((l, r))
}

/// At start with only `servers_url`: the cache, when its record says it
/// was downloaded from that URL. `Err(None)`: no cache; `Err(Some(why))`:
/// a cache, ignored.
pub fn cached_from_url(
    store: &Store,
    servers_url: &str,
    trusted: bool,
) -> Result<Loaded, Option<String>> {
    let cache = store.path(LIST_CACHE).display().to_string();
    let (raw, r) = trusted_cache(store, trusted).map_err(|s| match s {
        Skip::None => None,
        Skip::Because(why) => Some(format!("the cached list {cache} is ignored: {why}")),
    })?;
    if r.url.as_deref() != Some(servers_url) {
        return Err(Some(format!(
            "the cached list {cache} is ignored: it was not downloaded from {servers_url} ({})",
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
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    const KEY: &str = "iBVjxg/1j7y1+kQUTBYdTabxCppesU/07D4PMDJk2WA=";
    const SOURCE: &str = "https://lists.example/servers.json";

    /// A list naming `names` (all one key: only the names are looked at),
    /// with `sources`.
    fn doc(names: &[&str], sources: &[&str]) -> Vec<u8> {
        let servers: Vec<String> = names
            .iter()
            .map(|n| {
                format!(
                    r#"{{"name":"{n}","version":1,"publicKeyType":"ed25519","publicKey":"{KEY}","addresses":[{{"protocol":"udp","address":"127.0.0.1:5319"}}]}}"#
                )
            })
            .collect();
        let sources: Vec<String> = sources.iter().map(|s| format!("\"{s}\"")).collect();
        format!(
            r#"{{"servers":[{}],"sources":[{}]}}"#,
            servers.join(","),
            sources.join(",")
        )
        .into_bytes()
    }

    fn names(l: &Loaded) -> Vec<String> {
        l.servers.iter().map(|s| s.name.clone()).collect()
    }

    /// A private state directory and the operator's file beside it.
    fn setup(name: &str, file: &[u8]) -> (PathBuf, Store, PathBuf) {
        let d =
            std::env::temp_dir().join(format!("gnomon-sync-list-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        let store = Store::open(&d.join("state")).unwrap();
        fs::set_permissions(store.dir(), fs::Permissions::from_mode(0o700)).unwrap();
        let path = d.join("servers.json");
        fs::write(&path, file).unwrap();
        (d, store, path)
    }

    fn plant(store: &Store, name: &str, bytes: &[u8]) {
        fs::write(store.path(name), bytes).unwrap();
        fs::set_permissions(store.path(name), fs::Permissions::from_mode(0o600)).unwrap();
    }

    fn note_has(l: &Loaded, what: &str) -> bool {
        l.notes.iter().any(|n| n.contains(what))
    }

    /// The old way in: a list planted as the cache with a copy of the
    /// operator's file as the seed. The operator's servers are used.
    #[test]
    fn a_planted_cache_with_a_copied_seed_changes_nothing() {
        let file = doc(&["op-a", "op-b"], &[SOURCE]);
        let (d, store, path) = setup("seed", &file);
        plant(&store, LIST_CACHE, &doc(&["planted"], &[]));
        plant(&store, crate::refresh::SEED_FILE, &file);
        let (l, seed) = load(&path, None, &store, true).unwrap();
        assert_eq!(names(&l), ["op-a", "op-b"], "{:?}", l.notes);
        assert_eq!(seed.as_deref(), Some(&file[..]));
        assert!(note_has(&l, "no provenance record"), "{:?}", l.notes);
        // The cache is now the operator's file, with its record; the seed
        // file is gone.
        assert_eq!(store.read(LIST_CACHE).unwrap(), file);
        assert!(!store.path(crate::refresh::SEED_FILE).exists());
        let r: Record = serde_json::from_slice(&store.read(LIST_META).unwrap()).unwrap();
        assert_eq!(r.url, None);
        assert_eq!(r.sha256, sha256_hex(&file));
        assert_eq!(r.file.as_deref(), Some(&*path.display().to_string()));
        let _ = fs::remove_dir_all(&d);
    }

    /// A refreshed cache wins over the file only with a record naming one
    /// of the file's sources (or servers-url), the file as it is now, and
    /// the cache's own hash, in a directory nobody else may write.
    #[test]
    fn a_refreshed_cache_wins_only_with_a_record_tying_it_to_the_file() {
        let file = doc(&["op-a", "op-b"], &[SOURCE]);
        let (d, store, path) = setup("record", &file);
        let refreshed = doc(&["fresh-a", "fresh-b", "fresh-c"], &[SOURCE]);
        let good = |url: &str| {
            crate::refresh::cache(&store, &refreshed, url, Some(&path), Some(&file), None).unwrap()
        };
        let used = |servers_url: Option<&str>| {
            let (l, _) = load(&path, servers_url, &store, true).unwrap();
            (names(&l), l.notes)
        };
        good(SOURCE);
        let (n, notes) = used(None);
        assert_eq!(n, ["fresh-a", "fresh-b", "fresh-c"], "{notes:?}");
        assert!(notes
            .iter()
            .any(|n| n.contains("last refreshed from its sources")));

        // Untrusted directory: the same cache is ignored.
        fs::set_permissions(store.dir(), fs::Permissions::from_mode(0o770)).unwrap();
        let (l, _) = load(&path, None, &store, store.trust().is_ok()).unwrap();
        assert_eq!(names(&l), ["op-a", "op-b"]);
        assert!(note_has(&l, "not trusted"), "{:?}", l.notes);
        fs::set_permissions(store.dir(), fs::Permissions::from_mode(0o700)).unwrap();

        // A URL that is not one of the file's sources.
        good("https://elsewhere.example/list.json");
        let (n, notes) = used(None);
        assert_eq!(n, ["op-a", "op-b"]);
        assert!(
            notes
                .iter()
                .any(|n| n.contains("neither one of the list's sources")),
            "{notes:?}"
        );
        // ... unless it is the configured servers-url.
        good("https://elsewhere.example/list.json");
        let (n, _) = used(Some("https://elsewhere.example/list.json"));
        assert_eq!(n, ["fresh-a", "fresh-b", "fresh-c"]);

        // The cache changed after its record was written.
        good(SOURCE);
        plant(&store, LIST_CACHE, &doc(&["planted"], &[SOURCE]));
        let (n, notes) = used(None);
        assert_eq!(n, ["op-a", "op-b"]);
        assert!(notes.iter().any(|n| n.contains("SHA-256")), "{notes:?}");

        // A record that is not one.
        good(SOURCE);
        plant(&store, LIST_META, b"{\"url\": ");
        let (n, notes) = used(None);
        assert_eq!(n, ["op-a", "op-b"]);
        assert!(notes.iter().any(|n| n.contains("corrupt")), "{notes:?}");

        // A cache or record anyone may write.
        good(SOURCE);
        fs::set_permissions(store.path(LIST_META), fs::Permissions::from_mode(0o666)).unwrap();
        let (n, notes) = used(None);
        assert_eq!(n, ["op-a", "op-b"]);
        assert!(
            notes.iter().any(|n| n.contains("writable by everyone")),
            "{notes:?}"
        );

        // A cache that is a symbolic link to a list elsewhere.
        good(SOURCE);
        let elsewhere = d.join("elsewhere.json");
        fs::write(&elsewhere, &refreshed).unwrap();
        fs::remove_file(store.path(LIST_CACHE)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, store.path(LIST_CACHE)).unwrap();
        let (n, notes) = used(None);
        assert_eq!(n, ["op-a", "op-b"]);
        assert!(
            notes.iter().any(|n| n.contains("symbolic link")),
            "{notes:?}"
        );
        assert_eq!(fs::read(&elsewhere).unwrap(), refreshed);

        // The operator edits the file: theirs wins.
        good(SOURCE);
        let edited = doc(&["op-a", "op-b", "op-c"], &[SOURCE]);
        fs::write(&path, &edited).unwrap();
        let (n, notes) = used(None);
        assert_eq!(n, ["op-a", "op-b", "op-c"]);
        assert!(
            notes.iter().any(|n| n.contains("other than this one")),
            "{notes:?}"
        );
        let _ = fs::remove_dir_all(&d);
    }

    /// A file that cannot be read or parsed falls back to the cache only
    /// when the record says it belongs to that very file, in a trusted
    /// directory.
    #[test]
    fn an_unreadable_file_falls_back_only_to_its_own_cache() {
        let file = doc(&["op-a", "op-b"], &[]);
        let (d, store, path) = setup("fallback", &file);
        let err = |p: &Path, trusted: bool| load(p, None, &store, trusted).unwrap_err();
        // No cache at all.
        fs::remove_file(&path).unwrap();
        assert!(err(&path, true).contains("no cached list"));
        // A planted cache without a record.
        plant(&store, LIST_CACHE, &doc(&["planted"], &[]));
        let e = err(&path, true);
        assert!(e.contains("no provenance record"), "{e}");

        // The file loads once: its copy and record are written.
        fs::write(&path, &file).unwrap();
        load(&path, None, &store, true).unwrap();
        for broken in [None, Some(&b"{\"servers\": 7}"[..])] {
            match broken {
                None => fs::remove_file(&path).unwrap(),
                Some(b) => fs::write(&path, b).unwrap(),
            }
            let (l, seed) = load(&path, None, &store, true).unwrap();
            assert_eq!(names(&l), ["op-a", "op-b"]);
            assert!(note_has(&l, "using the cached list"), "{:?}", l.notes);
            assert!(note_has(&l, "copied from"), "{:?}", l.notes);
            assert_eq!(seed, None);
        }
        // Another list file: the cache is not its.
        let other = d.join("other.json");
        let e = err(&other, true);
        assert!(e.contains("belongs to"), "{e}");
        // An untrusted directory: no fallback.
        let e = err(&path, false);
        assert!(e.contains("not trusted"), "{e}");
        let _ = fs::remove_dir_all(&d);
    }

    /// With only servers-url: the cache when its record names that URL.
    #[test]
    fn with_only_a_url_the_cache_must_name_it() {
        let (d, store, path) = setup("url", &doc(&["op-a"], &[]));
        let list = doc(&["u-a", "u-b"], &[]);
        let url = "https://lists.example/u.json";
        assert!(matches!(cached_from_url(&store, url, true), Err(None)));
        crate::refresh::cache(&store, &list, url, None, None, Some(url)).unwrap();
        let l = cached_from_url(&store, url, true).unwrap();
        assert_eq!(names(&l), ["u-a", "u-b"]);
        let why = cached_from_url(&store, "https://other.example/u.json", true).unwrap_err();
        assert!(why.unwrap().contains("not downloaded from"));
        let why = cached_from_url(&store, url, false).unwrap_err();
        assert!(why.unwrap().contains("not trusted"));
        // A copy of a file is not a download.
        cache_file(&store, &path, &doc(&["op-a"], &[]), true).unwrap();
        assert!(cached_from_url(&store, url, true).is_err());
        let _ = fs::remove_dir_all(&d);
    }

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
