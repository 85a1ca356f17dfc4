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

use crate::https_support;
use crate::sync_support;

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use https_support::{Answer, HttpsServer};
use serde_json::{json, Value};
use sync_support::{
    every_second, have_faketime, metrics_addr, real_now_us, scrape, start_servers, sync, tempdir,
    value, Run, Service, FAST,
};

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

fn args<'a>(list: &'a str, dir: &'a str, ca: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "--list-refresh",
        "1s",
        "--list-ca",
        ca,
        "--quorum",
        "2",
        "--min-servers",
        "2",
        // Lists of two and three servers: what these tests change is the
        // list, so every server is trusted (two outvote no liar).
        "--max-liars",
        "0",
        "--metrics",
        "127.0.0.1:0",
    ];
    a.extend_from_slice(extra);
    every_second(list, dir, &a)
}

fn last_line(s: &Service) -> &str {
    s.log.lines().last().unwrap_or("")
}

#[test]
fn a_good_list_from_sources_replaces_the_old_one_and_survives_a_restart() {
    let test = "sync_list_good";
    let servers = start_servers(test, &THREE, None);
    let dir = tempdir(test);
    let full = list_of(&servers.list);
    let https = HttpsServer::start(Answer::Status(503));
    let sources = vec![https.url("/servers.json")];
    let three = list_with(&full, 3, &sources);
    https.set(Answer::Body(three.clone()));
    // The operator's file names two servers and where the list lives.
    let seed = dir.join("seed.json");
    std::fs::write(&seed, list_with(&full, 2, &sources)).unwrap();
    let ca = dir.join("ca.pem");
    https.write_ca(&ca);
    let state = dir.join("state");
    let (seed_s, state_s, ca_s) = (
        seed.to_str().unwrap(),
        state.to_str().unwrap(),
        ca.to_str().unwrap(),
    );

    let mut s = Service::start(&args(seed_s, state_s, ca_s, &[]));
    let metrics = metrics_addr(&mut s);
    assert!(s.wait_for("started: 2 server(s)", PATIENCE), "{}", s.log);
    assert!(
        s.wait_for("list refresh: 3 usable server(s) from https://", PATIENCE),
        "{}",
        s.log
    );
    assert!(
        s.wait_for("3 of 3 answering servers agree", PATIENCE),
        "{}",
        s.log
    );
    let text = scrape(metrics, PATIENCE).expect("a scrape");
    let ok = "gnomon_sync_list_refreshes_total{result=\"ok\"}";
    assert!(value(&text, ok) >= 1.0, "{text}");
    assert_eq!(value(&text, "gnomon_sync_listed_servers"), 3.0);
    assert_eq!(
        std::fs::read(state.join("sync-servers.json")).unwrap(),
        three
    );
    s.stop_cleanly(STOP);

    // After a restart the refreshed list is used though the file names
    // two, and garbage from the source does not replace it.
    https.set(Answer::Body(b"<html>maintenance</html>".to_vec()));
    let mut s = Service::start(&args(seed_s, state_s, ca_s, &[]));
    assert!(s.wait_for("started: 3 server(s)", PATIENCE), "{}", s.log);
    assert!(
        s.log
            .contains("using the list last refreshed from its sources"),
        "{}",
        s.log
    );
    assert!(s.wait_for("keeping the old list", PATIENCE), "{}", s.log);
    assert!(s.log.contains("not a server list"), "{}", s.log);
    assert!(
        s.wait_for("3 of 3 answering servers agree", PATIENCE),
        "{}",
        s.log
    );
    s.stop_cleanly(STOP);

    // The operator edits the file: theirs wins again.
    std::fs::write(&seed, list_with(&full, 2, &[])).unwrap();
    let mut s = Service::start(&args(seed_s, state_s, ca_s, &[]));
    assert!(s.wait_for("started: 2 server(s)", PATIENCE), "{}", s.log);
    s.stop_cleanly(STOP);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lists_that_fail_keep_the_old_one_and_rounds_go_on_during_a_hung_download() {
    let test = "sync_list_bad";
    let servers = start_servers(test, &THREE, None);
    let dir = tempdir(test);
    let full = list_of(&servers.list);
    let https = HttpsServer::start(Answer::Status(404));
    let ca = dir.join("ca.pem");
    https.write_ca(&ca);
    let url = https.url("/list");
    let state = dir.join("state");
    let (list_s, state_s, ca_s) = (
        servers.list.to_str().unwrap(),
        state.to_str().unwrap(),
        ca.to_str().unwrap(),
    );
    let mut s = Service::start(&args(
        list_s,
        state_s,
        ca_s,
        &["--servers-url", &url, "--list-timeout", "5s"],
    ));
    let metrics = metrics_addr(&mut s);
    assert!(s.wait_for("started: 3 server(s)", PATIENCE), "{}", s.log);
    let one = list_with(&full, 1, &[]);
    for (answer, says) in [
        (Answer::Status(404), "HTTP 404".to_string()),
        (
            Answer::Body(b"{\"servers\": 7}".to_vec()),
            "not a server list".into(),
        ),
        (
            Answer::Body(one),
            "1 usable server(s), fewer than the quorum (2)".into(),
        ),
        (Answer::Huge(2 << 20), "larger than 1048576 bytes".into()),
        (
            Answer::Redirect("http://127.0.0.1:9/list".into()),
            "redirected (HTTP 302) to http://127.0.0.1:9/list".into(),
        ),
    ] {
        https.set(answer);
        assert!(s.wait_for(&says, PATIENCE), "{says}: {}", s.log);
        assert!(last_line(&s).contains("keeping the old list"), "{}", s.log);
    }
    // A download that never ends: rounds are logged while it hangs (the
    // server still sending), and it ends at --list-timeout.
    https.set(Answer::Trickle);
    assert!(https.wait_trickle("start", PATIENCE), "{}", s.log);
    let before = s.log.len();
    assert!(s.wait_for(": consensus", PATIENCE), "{}", s.log);
    assert!(s.wait_for(": consensus", PATIENCE), "{}", s.log);
    assert!(
        !s.log[before..].contains("timed out"),
        "the rounds waited for the download: {}",
        s.log
    );
    assert!(
        s.wait_for("timed out); keeping the old list", PATIENCE),
        "{}",
        s.log
    );
    https.set(Answer::Status(404));
    assert!(https.wait_trickle("end", PATIENCE));
    assert!(
        s.wait_for("3 of 3 answering servers agree", PATIENCE),
        "{}",
        s.log
    );
    // Every class counted, the list never replaced.
    let text = scrape(metrics, PATIENCE).expect("a scrape");
    for class in [
        "status", "parse", "too_few", "too_big", "redirect", "timeout",
    ] {
        let series = format!("gnomon_sync_list_refreshes_total{{result=\"{class}\"}}");
        assert!(value(&text, &series) >= 1.0, "{series}: {text}");
    }
    let ok = "gnomon_sync_list_refreshes_total{result=\"ok\"}";
    assert_eq!(value(&text, ok), 0.0, "{text}");
    assert_eq!(value(&text, "gnomon_sync_listed_servers"), 3.0);
    s.stop_cleanly(STOP);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_untrusted_certificate_keeps_the_old_list_and_http_urls_are_refused() {
    let test = "sync_list_tls";
    let servers = start_servers(test, &THREE, None);
    let dir = tempdir(test);
    let https = HttpsServer::start(Answer::Body(std::fs::read(&servers.list).unwrap()));
    let url = https.url("/list");
    let state = dir.join("state");
    // No --list-ca: Mozilla's roots, which do not know the test's CA.
    let mut s = Service::start(&[
        "--servers",
        servers.list.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "--interval",
        "1s",
        "--list-refresh",
        "1s",
        "--servers-url",
        &url,
        "--metrics",
        "127.0.0.1:0",
        FAST[0],
        FAST[1],
        FAST[2],
        FAST[3],
    ]);
    let metrics = metrics_addr(&mut s);
    assert!(s.wait_for("keeping the old list", PATIENCE), "{}", s.log);
    assert!(s.log.contains("TLS: "), "{}", s.log);
    let text = scrape(metrics, PATIENCE).expect("a scrape");
    let tls = "gnomon_sync_list_refreshes_total{result=\"tls\"}";
    assert!(value(&text, tls) >= 1.0, "{text}");
    s.stop_cleanly(STOP);

    // With only a URL: the first list is downloaded at start; one that
    // cannot be is a usage error naming why.
    let ca = dir.join("ca.pem");
    https.write_ca(&ca);
    let only_url = ["--servers-url", &url, "--once", "--quorum", "2"];
    let fresh = tempdir("sync_list_url_only");
    let mut a = vec!["--state-dir", fresh.to_str().unwrap()];
    a.extend(only_url);
    let r = sync(&a, None);
    assert_eq!(r.code, 64, "{}", r.stderr);
    assert!(
        r.stderr.contains("no server list") && r.stderr.contains("TLS: "),
        "{}",
        r.stderr
    );
    a.extend(["--list-ca", ca.to_str().unwrap()]);
    a.extend(FAST);
    let r = sync(&a, None);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("3 of 3 answering servers agree"),
        "{}",
        r.stdout
    );
    assert!(fresh.join("sync-servers.json").exists());
    let _ = std::fs::remove_dir_all(&fresh);

    for bad in [
        vec!["--servers-url", "http://127.0.0.1:9/list.json"],
        vec!["--servers-url", "HTTP://127.0.0.1:9/list.json"],
    ] {
        let mut a = vec!["--servers", servers.list.to_str().unwrap(), "--once"];
        a.extend(bad);
        let r = sync(&a, None);
        assert_eq!(r.code, 64, "{}", r.stderr);
        assert!(r.stderr.contains("plain HTTP"), "{}", r.stderr);
    }
    let conf = dir.join("sync.toml");
    std::fs::write(
        &conf,
        "[sync]\nservers-url = \"http://lists.example/servers.json\"\n",
    )
    .unwrap();
    let r = sync(
        &["--config", conf.to_str().unwrap(), "--print-config"],
        None,
    );
    assert_eq!(r.code, 64, "{}", r.stderr);
    assert!(r.stderr.contains("[sync] servers-url"), "{}", r.stderr);
    assert!(r.stderr.contains("plain HTTP"), "{}", r.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn with_only_a_url_sighup_downloads_the_list_again() {
    let test = "sync_list_hup";
    let servers = start_servers(test, &THREE, None);
    let dir = tempdir(test);
    let full = list_of(&servers.list);
    let https = HttpsServer::start(Answer::Body(list_with(&full, 3, &[])));
    let ca = dir.join("ca.pem");
    https.write_ca(&ca);
    let url = https.url("/list");
    let state = dir.join("state");
    let mut s = Service::start(&[
        "--servers-url",
        &url,
        "--list-ca",
        ca.to_str().unwrap(),
        "--list-refresh",
        "30d",
        "--state-dir",
        state.to_str().unwrap(),
        "--interval",
        "1s",
        "--quorum",
        "2",
        // The list shrinks to two, which outvote no liar unless told.
        "--max-liars",
        "0",
        "--min-servers",
        "2",
        FAST[0],
        FAST[1],
        FAST[2],
        FAST[3],
    ]);
    assert!(s.wait_for("started: 3 server(s)", PATIENCE), "{}", s.log);
    https.set(Answer::Body(list_with(&full, 2, &[])));
    // A month before the next refresh: only SIGHUP brings the new list.
    s.signal("-HUP");
    assert!(
        s.wait_for("list refresh: 2 usable server(s) from https://", PATIENCE),
        "{}",
        s.log
    );
    assert!(
        s.wait_for("2 of 2 answering servers agree", PATIENCE),
        "{}",
        s.log
    );
    s.stop_cleanly(STOP);
    let _ = std::fs::remove_dir_all(&dir);
}

// The state directory is no back door.

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
