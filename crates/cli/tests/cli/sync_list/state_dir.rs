//! The state directory is no back door: a list planted there (with a
//! copied seed, or a forged provenance record) does not replace the
//! operator's; a state directory others may write is not believed at all;
//! symbolic links planted in it are never followed.

use crate::sync_support;

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use sync_support::{
    every_second, have_faketime, real_now_us, start_servers, sync, tempdir, Run, Service, FAST,
};

use super::{list_of, list_with, PATIENCE, STOP, THREE};

/// The first `n` servers of `full` renamed `PREFIX-NAME` (same keys and
/// addresses: a round with them works, and its names say which list it
/// used), with `sources`.
fn renamed(full: &Value, prefix: &str, n: usize, sources: &[String]) -> Vec<u8> {
    let servers: Vec<Value> = full["servers"].as_array().unwrap()[..n]
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s["name"] = format!("{prefix}-{}", s["name"].as_str().unwrap()).into();
            s
        })
        .collect();
    serde_json::to_vec(&json!({ "servers": servers, "sources": sources })).unwrap()
}

/// A state directory only its owner may write.
fn private_dir(path: &Path) -> PathBuf {
    std::fs::create_dir_all(path).unwrap();
    chmod(path, 0o700);
    path.to_owned()
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `gnomon sync --once --json` with `list` and `state`, quorum 2.
fn once(list: &Path, state: &Path, extra: &[&str]) -> Run {
    let mut a = vec![
        "--servers",
        list.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "--once",
        "--json",
        "--quorum",
        "2",
        "--min-servers",
        "2",
    ];
    a.extend_from_slice(extra);
    a.extend_from_slice(&FAST);
    sync(&a, None)
}

/// The agreeing servers' names, sorted.
fn agreeing(r: &Run) -> Vec<String> {
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let j = r.json();
    let mut v: Vec<String> = j["consensus"]["agreeing"]
        .as_array()
        .unwrap_or_else(|| panic!("no consensus: {j}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn a_planted_cache_and_a_copied_seed_change_nothing() {
    let test = "sync_list_planted";
    let servers = start_servers(test, &THREE, None);
    let dir = tempdir(test);
    let full = list_of(&servers.list);
    let state = private_dir(&dir.join("state"));
    let (cache, meta) = (
        state.join("sync-servers.json"),
        state.join("sync-servers.meta.json"),
    );
    // What an outsider plants: the same servers under other names as the
    // cache, and the operator's file copied as the seed it descends from.
    let planted = renamed(&full, "planted", 3, &[]);
    std::fs::write(&cache, &planted).unwrap();
    std::fs::copy(&servers.list, state.join("sync-servers.seed")).unwrap();
    let r = once(&servers.list, &state, &[]);
    assert_eq!(agreeing(&r), ["alpha", "bravo", "charlie"], "{}", r.stderr);
    assert!(
        r.stderr.contains("is ignored: it has no provenance record"),
        "{}",
        r.stderr
    );
    // The cache is now the operator's file, and the seed is gone.
    assert_eq!(
        std::fs::read(&cache).unwrap(),
        std::fs::read(&servers.list).unwrap()
    );
    assert!(!state.join("sync-servers.seed").exists());

    // A record forged beside it, right in every hash, naming a URL the
    // operator's list does not name (it names no sources): ignored, and
    // with --servers-url naming another one too.
    let file = std::fs::read(&servers.list).unwrap();
    let forged = gnomon_sync::list::Record::new(
        &planted,
        Some("https://lists.example/servers.json"),
        Some(&servers.list),
        Some(&file),
        None,
    );
    for extra in [
        &[][..],
        &["--servers-url", "https://other.example/servers.json"][..],
    ] {
        std::fs::write(&cache, &planted).unwrap();
        std::fs::write(&meta, serde_json::to_vec(&forged).unwrap()).unwrap();
        chmod(&cache, 0o600);
        chmod(&meta, 0o600);
        let r = once(&servers.list, &state, extra);
        assert_eq!(agreeing(&r), ["alpha", "bravo", "charlie"], "{}", r.stderr);
        assert!(
            r.stderr
                .contains("which is neither one of the list's sources nor servers-url"),
            "{}",
            r.stderr
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_state_dir_others_can_write_is_not_believed() {
    let test = "sync_list_perms";
    let servers = start_servers(test, &THREE, None);
    let dir = tempdir(test);
    let full = list_of(&servers.list);
    // The operator's file names two servers and a source (never
    // downloaded from here: the first refresh is a day away).
    let sources = vec!["https://lists.example/servers.json".to_string()];
    let file = list_with(&full, 2, &sources);
    let path = dir.join("servers.json");
    std::fs::write(&path, &file).unwrap();
    let state = private_dir(&dir.join("state"));
    let store = gnomon_sync::Store::open(&state).unwrap();
    // A cache with a record as sync writes after a refresh from that
    // source: believed in a private directory.
    let refreshed = renamed(&full, "refreshed", 3, &sources);
    let cache = || {
        gnomon_sync::refresh::cache(
            &store,
            &refreshed,
            &sources[0],
            Some(&path),
            Some(&file),
            None,
        )
        .unwrap()
    };
    cache();
    let r = once(&path, &state, &["--max-liars", "0"]);
    assert_eq!(
        agreeing(&r),
        ["refreshed-alpha", "refreshed-bravo", "refreshed-charlie"],
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("last refreshed from its sources"),
        "{}",
        r.stderr
    );

    // The same files in a directory its group or everyone may write, or
    // that someone else owns: ignored with a warning; the state is still
    // written.
    let mut cases = vec![
        (
            0o770,
            None,
            "is writable by its group (mode 0770)".to_string(),
        ),
        (0o703, None, "is writable by everyone (mode 0703)".into()),
    ];
    let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&state).unwrap());
    if uid == 0 {
        // Only root can give it away.
        cases.push((0o700, Some(65534), "is owned by uid 65534".into()));
    }
    for (mode, owner, says) in cases {
        chmod(&state, 0o700);
        std::os::unix::fs::chown(&state, Some(0), None).ok();
        cache();
        // A floor planted in the future would refuse every step; it must
        // not be believed either.
        let planted = r#"{"format":1,"floor_us":4102444800000000,"last":null,"excluded":[]}"#;
        std::fs::write(state.join("sync-state.json"), planted).unwrap();
        chmod(&state, mode);
        if let Some(uid) = owner {
            std::os::unix::fs::chown(&state, Some(uid), None).unwrap();
        }
        let r = once(&path, &state, &["--max-liars", "0"]);
        assert_eq!(agreeing(&r), ["alpha", "bravo"], "{says}: {}", r.stderr);
        let warning = format!("warning: the state directory {} {says}", state.display());
        assert!(r.stderr.contains(&warning), "{warning}: {}", r.stderr);
        assert!(
            r.stderr.contains("nothing saved in it is believed"),
            "{}",
            r.stderr
        );
        let saved: Value =
            serde_json::from_slice(&std::fs::read(state.join("sync-state.json")).unwrap()).unwrap();
        let floor = saved["floor_us"].as_i64().unwrap();
        assert!(
            floor < 4_102_444_800_000_000,
            "{says}: the planted floor was kept: {saved}"
        );
    }
    std::os::unix::fs::chown(&state, Some(0), None).ok();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn planted_symlinks_in_the_state_dir_are_never_followed() {
    let test = "sync_list_links";
    // A liar makes a report to write (into the planted reports link).
    let liar = have_faketime(test);
    let mut spec = THREE.to_vec();
    if liar {
        spec.push(("liar", Some("+3600")));
    }
    let servers = start_servers(test, &spec, None);
    let dir = tempdir(test);
    let outside = private_dir(&dir.join("outside"));
    let state = private_dir(&dir.join("state"));
    let shadow = outside.join("shadow");
    let shadow_text = "root:$6$salt$hash:20000:0:99999:7:::\n";
    std::fs::write(&shadow, shadow_text).unwrap();
    let chain_target = outside.join("chain");
    std::fs::write(&chain_target, b"keep me\n").unwrap();
    let reports = private_dir(&outside.join("reports"));
    symlink(&shadow, state.join("sync-state.json")).unwrap();
    symlink(&chain_target, state.join("sync-chain.json")).unwrap();
    symlink(&reports, state.join("sync-reports")).unwrap();

    let r = once(&servers.list, &state, &[]);
    assert_eq!(agreeing(&r), ["alpha", "bravo", "charlie"], "{}", r.stderr);
    assert!(
        r.stderr
            .contains("sync-state.json is a symbolic link; not followed"),
        "{}",
        r.stderr
    );
    if liar {
        assert_eq!(r.json()["outside"], json!(["liar"]), "{}", r.stdout);
        assert!(
            r.stderr.contains("cannot write the report")
                && r.stderr
                    .contains("sync-reports is a symbolic link; not followed"),
            "{}",
            r.stderr
        );
    }
    let text = |p: &Path| std::fs::read_to_string(p).unwrap();
    assert_eq!(text(&shadow), shadow_text);
    assert_eq!(text(&chain_target), "keep me\n");
    assert_eq!(std::fs::read_dir(&reports).unwrap().count(), 0);
    for f in ["sync-state.json", "sync-chain.json"] {
        let m = std::fs::symlink_metadata(state.join(f)).unwrap();
        assert!(m.file_type().is_file(), "{f} is not a file of its own");
    }
    assert!(sync_support::state(&state)["floor_us"].is_i64());

    // The temporary name the old code used (.NAME.tmp-PID): planted once
    // the service's PID is known, then rounds run until one has saved
    // its state after the planting.
    let mut s = Service::start(&every_second(
        servers.list.to_str().unwrap(),
        state.to_str().unwrap(),
        &["--quorum", "2", "--min-servers", "2"],
    ));
    assert!(s.wait_for("started: ", PATIENCE), "{}", s.log);
    let pid = s.child.id();
    let tmp_target = outside.join("passwd");
    std::fs::write(&tmp_target, b"root:x:0:0::/root:/bin/sh\n").unwrap();
    let planted: Vec<PathBuf> = ["sync-state.json", "sync-chain.json"]
        .iter()
        .map(|f| state.join(format!(".{f}.tmp-{pid}")))
        .collect();
    for p in &planted {
        symlink(&tmp_target, p).unwrap();
    }
    let planted_at = real_now_us();
    let mut saved_after = false;
    for _ in 0..10 {
        assert!(s.wait_for("round ", PATIENCE), "{}", s.log);
        let last = sync_support::state(&state)["last"]["at_us"].as_i64();
        if last.is_some_and(|at| at > planted_at) {
            saved_after = true;
            break;
        }
    }
    assert!(saved_after, "no round saved after the planting: {}", s.log);
    s.stop_cleanly(STOP);
    assert_eq!(text(&tmp_target), "root:x:0:0::/root:/bin/sh\n");
    for p in &planted {
        let m = std::fs::symlink_metadata(p).unwrap();
        assert!(m.file_type().is_symlink(), "{}", p.display());
    }
    for f in ["sync-state.json", "sync-chain.json"] {
        let m = std::fs::symlink_metadata(state.join(f)).unwrap();
        assert!(m.file_type().is_file(), "{f} is not a file of its own");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
