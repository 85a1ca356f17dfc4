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
    let d = std::env::temp_dir().join(format!("gnomon-sync-list-{name}-{}", std::process::id()));
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
    plant(&store, SEED_FILE, &file);
    let (l, seed) = load(&path, &[], &store, true).unwrap();
    assert_eq!(names(&l), ["op-a", "op-b"], "{:?}", l.notes);
    assert_eq!(seed.as_deref(), Some(&file[..]));
    assert!(note_has(&l, "no provenance record"), "{:?}", l.notes);
    // The cache is now the operator's file, with its record; the seed
    // file is gone.
    assert_eq!(store.read(LIST_CACHE).unwrap(), file);
    assert!(!store.path(SEED_FILE).exists());
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
    let good = |url: &str| cache(&store, &refreshed, url, Some(&path), Some(&file), None).unwrap();
    let used = |servers_url: Option<&str>| {
        let urls: Vec<String> = servers_url.into_iter().map(str::to_string).collect();
        let (l, _) = load(&path, &urls, &store, true).unwrap();
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
    let (l, _) = load(&path, &[], &store, store.trust().is_ok()).unwrap();
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
    let err = |p: &Path, trusted: bool| load(p, &[], &store, trusted).unwrap_err();
    // No cache at all.
    fs::remove_file(&path).unwrap();
    assert!(err(&path, true).contains("no cached list"));
    // A planted cache without a record.
    plant(&store, LIST_CACHE, &doc(&["planted"], &[]));
    let e = err(&path, true);
    assert!(e.contains("no provenance record"), "{e}");

    // The file loads once: its copy and record are written.
    fs::write(&path, &file).unwrap();
    load(&path, &[], &store, true).unwrap();
    for broken in [None, Some(&b"{\"servers\": 7}"[..])] {
        match broken {
            None => fs::remove_file(&path).unwrap(),
            Some(b) => fs::write(&path, b).unwrap(),
        }
        let (l, seed) = load(&path, &[], &store, true).unwrap();
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
    assert!(matches!(
        cached_from_url(&store, &[url.to_string()], true),
        Err(None)
    ));
    cache(&store, &list, url, None, None, Some(url)).unwrap();
    let l = cached_from_url(&store, &[url.to_string()], true).unwrap();
    assert_eq!(names(&l), ["u-a", "u-b"]);
    let why =
        cached_from_url(&store, &["https://other.example/u.json".to_string()], true).unwrap_err();
    assert!(why.unwrap().contains("not downloaded from"));
    let why = cached_from_url(&store, &[url.to_string()], false).unwrap_err();
    assert!(why.unwrap().contains("not trusted"));
    // A copy of a file is not a download.
    cache_file(&store, &path, &doc(&["op-a"], &[]), true).unwrap();
    assert!(cached_from_url(&store, &[url.to_string()], true).is_err());
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

/// An empty list says so, and an unnamed entry that cannot be used is
/// numbered from 1, as every command numbers entries.
#[test]
fn an_empty_list_says_it_has_no_servers() {
    let e = parse(doc(&[], &[]), "servers.json").err().unwrap();
    assert_eq!(e, "servers.json: the list has no servers");
    let unusable = br#"{"servers":[{"version":1,"publicKeyType":"ed25519","publicKey":"AAAA","addresses":[]}]}"#;
    let e = parse(unusable.to_vec(), "servers.json").err().unwrap();
    assert!(e.contains("skipped entry 1:"), "{e}");
    assert!(!e.contains("()"), "{e}");
}
