//! `gnomon sync --servers-url URL --servers-key KEY`: real `gnomon serve`
//! processes, monitors' lists made and signed in the test (the list
//! server, the monitors and the documents of crate::signed_lists), served
//! over plain HTTP. A good list is used and agrees; a list with a byte
//! changed, an older sequence replayed across a restart (from the state
//! directory), an expired list and another key's list are each refused
//! with their reason, in the output and in the counts of `--status`; with
//! two monitors and a threshold of 2 only servers both list are used;
//! and the service keeps the last good list when its URL fails, until
//! that list expires, then stops stepping and says why (`service`).

use std::path::Path;

use serde_json::Value;

use crate::signed_lists::{document, entries, tampered, ListServer, Monitor};
use crate::sync_support::{self, start_servers, tempdir, Run, FAST};

mod clock;
mod service;

const THREE: [(&str, Option<&str>); 3] = [("alpha", None), ("bravo", None), ("charlie", None)];

/// The lists at `urls` under `keys`, the state in `state`, then `extra`,
/// then the short loopback waits: the arguments of every run here.
fn pinned<'a>(
    urls: &[&'a str],
    keys: &[&'a str],
    state: &'a Path,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut a = vec!["--state-dir", state.to_str().unwrap()];
    for u in urls {
        a.extend(["--servers-url", u]);
    }
    for k in keys {
        a.extend(["--servers-key", k]);
    }
    a.extend_from_slice(extra);
    a.extend_from_slice(&FAST);
    a
}

/// `gnomon sync --once --json` over the lists at `urls` under `keys`,
/// its state in `state`, then `extra`.
fn once(urls: &[&str], keys: &[&str], state: &Path, extra: &[&str]) -> Run {
    let mut e = vec!["--once", "--json"];
    e.extend_from_slice(extra);
    sync_support::sync(&pinned(urls, keys, state, &e), None)
}

/// The run logged that the list at `url` was refused, with `words`.
fn refused(r: &Run, url: &str, words: &str) {
    let line = format!("warning: signed list {url}: refused: {words}");
    assert!(r.stderr.contains(&line), "{line} in\n{}", r.stderr);
}

/// `--status --json`'s `signed_lists` for the state in `state`.
fn signed_status(state: &Path) -> Value {
    let r = sync_support::sync(
        &["--state-dir", state.to_str().unwrap(), "--status", "--json"],
        None,
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    r.json()["signed_lists"].clone()
}

/// The agreeing servers of a `--once --json` object, sorted.
fn agreeing(v: &Value) -> Vec<String> {
    let mut a: Vec<String> = v["consensus"]["agreeing"]
        .as_array()
        .unwrap_or_else(|| panic!("no consensus in {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect();
    a.sort();
    a
}

#[test]
fn a_signed_list_over_plain_http_is_used_and_agrees_and_status_says_whose() {
    let test = "sync_signed_good";
    let servers = start_servers(test, &THREE, None);
    let http = ListServer::start();
    let a = Monitor::new(1, "a@observatory");
    // alpha and bravo run by one operator, as the monitor's input list says.
    let mut listed = entries(&servers.list);
    listed[0]["operator"] = "op-1".into();
    listed[1]["operator"] = "op-1".into();
    let doc = document(&a, &listed, 5, 60, 3600);
    http.publish("/servers.json", &doc, &a.sign(&doc));
    let dir = tempdir(test);
    let state = dir.join("state");
    let url = http.url("/servers.json");
    // The key as a .pub file, as operators hand them out.
    let pub_file = dir.join("a.pub");
    std::fs::write(&pub_file, format!("{}\n", a.key_line())).unwrap();

    let r = once(
        &[&url],
        &[pub_file.to_str().unwrap()],
        &state,
        &["--max-liars", "0"],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(agreeing(&v), ["alpha", "bravo", "charlie"]);
    assert_eq!(v["signed_lists"]["monitors"][0]["state"], "current", "{v}");
    // The monitor's operators feed the grouping: one operator, one vote.
    assert_eq!(v["grouped"], serde_json::json!([["alpha", "bravo"]]), "{v}");
    assert_eq!(v["consensus"]["agreeing_voters"], 2, "{v}");
    assert!(
        r.stderr.contains(&format!(
            "signed list {url}: 3 server(s), sequence 5 signed by SHA256:"
        )) && r.stderr.contains("(a@observatory)"),
        "{}",
        r.stderr
    );

    let s = signed_status(&state);
    assert_eq!(s["threshold"], 1, "{s}");
    assert_eq!(s["in_force"], 1, "{s}");
    assert_eq!(s["servers"], 3, "{s}");
    let m = &s["monitors"][0];
    assert_eq!(m["state"], "current", "{s}");
    assert_eq!(m["sequence"], 5, "{s}");
    assert_eq!(m["comment"], "a@observatory", "{s}");
    assert_eq!(m["url"], url.as_str(), "{s}");
    assert!(m["fingerprint"].as_str().unwrap().starts_with("SHA256:"));
    // And in words.
    let r = sync_support::sync(&["--state-dir", state.to_str().unwrap(), "--status"], None);
    assert!(
        r.stdout
            .contains("signed lists 1 of 1 monitors' lists in force")
            && r.stdout.contains("(a@observatory): current: sequence 5"),
        "{}",
        r.stdout
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_tampered_an_expired_a_foreign_and_a_replayed_list_are_refused_and_counted() {
    let test = "sync_signed_refused";
    let servers = start_servers(test, &THREE, None);
    let http = ListServer::start();
    let a = Monitor::new(1, "a@observatory");
    let stranger = Monitor::new(7, "stranger");
    let key = a.key_line();
    let listed = entries(&servers.list);
    let dir = tempdir(test);
    let url = http.url("/servers.json");

    // Each with a state directory of its own: nothing kept to fall back on,
    // so no server, exit 1, and the reason in the round's words too.
    let good = document(&a, &listed, 5, 60, 3600);
    let expired = document(&a, &listed, 6, 7200, 3600);
    let foreign = document(&stranger, &listed, 9, 60, 3600);
    let cases = [
        (
            "signature",
            tampered(&good),
            a.sign(&good),
            "refused: the list's signature does not verify under key SHA256:",
            "",
        ),
        (
            "expired",
            expired.clone(),
            a.sign(&expired),
            "refused: the list expired at",
            "",
        ),
        (
            "other_key",
            foreign.clone(),
            stranger.sign(&foreign),
            "refused: the list is signed by SHA256:",
            "which is not one of the pinned keys",
        ),
    ];
    for (label, list, sig, says, also) in cases {
        http.publish("/servers.json", &list, &sig);
        let state = dir.join(label);
        let r = once(&[&url], &[&key], &state, &[]);
        assert_eq!(r.code, 1, "{label}: {}{}", r.stdout, r.stderr);
        refused(&r, &url, says.trim_start_matches("refused: "));
        assert!(r.stderr.contains(also), "{label}: {}", r.stderr);
        let why = r.json()["no_consensus"].as_str().unwrap_or("").to_owned();
        assert!(
            why.contains("no servers from the signed lists: 0 of the 1 pinned monitors' lists"),
            "{label}: {why}"
        );
        let s = signed_status(&state);
        assert_eq!(s["refusals"][label], 1, "{label}: {s}");
        assert_eq!(s["servers"], 0, "{label}: {s}");
        assert_eq!(s["monitors"][0]["state"], "none", "{label}: {s}");
        for other in [
            "signature",
            "expired",
            "other_key",
            "replayed",
            "reused",
            "malformed",
        ] {
            if other != label {
                assert_eq!(s["refusals"][other], 0, "{label}/{other}: {s}");
            }
        }
    }

    // Replayed across a restart: sequence 5 accepted and kept in the
    // state directory; the next run is served sequence 4 and refuses it,
    // and the kept list is used still.
    let state = dir.join("replayed");
    http.publish("/servers.json", &good, &a.sign(&good));
    let r = once(&[&url], &[&key], &state, &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let older = document(&a, &listed, 4, 60, 3600);
    http.publish("/servers.json", &older, &a.sign(&older));
    let r = once(&[&url], &[&key], &state, &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    refused(&r, &url, "sequence 4 is older than 5 already seen");
    assert!(
        r.stderr.contains("the list kept for SHA256:")
            && r.stderr.contains("keeping the list of SHA256:"),
        "{}",
        r.stderr
    );
    assert_eq!(agreeing(&r.json()), ["alpha", "bravo", "charlie"]);
    let s = signed_status(&state);
    assert_eq!(s["refusals"]["replayed"], 1, "{s}");
    assert_eq!(s["monitors"][0]["state"], "kept", "{s}");
    assert_eq!(s["monitors"][0]["sequence"], 5, "{s}");
    assert!(
        s["monitors"][0]["failure"]
            .as_str()
            .unwrap()
            .contains("sequence 4 is older than 5"),
        "{s}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn with_two_monitors_and_a_threshold_of_two_only_servers_both_list_are_used() {
    let test = "sync_signed_threshold";
    let servers = start_servers(test, &THREE, None);
    let http = ListServer::start();
    let (a, b) = (Monitor::new(1, "a@obs"), Monitor::new(2, "b@obs"));
    let all = entries(&servers.list);
    let da = document(&a, &all, 1, 60, 3600);
    // b does not list charlie.
    let db = document(&b, &all[..2], 1, 60, 3600);
    http.publish("/a.json", &da, &a.sign(&da));
    http.publish("/b.json", &db, &b.sign(&db));
    let dir = tempdir(test);
    let (ua, ub) = (http.url("/a.json"), http.url("/b.json"));
    let keys = [a.key_line(), b.key_line()];
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let two = [
        "--servers-threshold",
        "2",
        "--max-liars",
        "0",
        "--quorum",
        "2",
    ];
    let r = once(&[&ua, &ub], &keys, &dir.join("k2"), &two);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(agreeing(&v), ["alpha", "bravo"]);
    assert_eq!(v["listed"], 2, "{v}");
    assert!(
        r.stderr.contains(
            "charlie is not used: listed by 1 of the pinned monitors, fewer than servers-threshold 2"
        ),
        "{}",
        r.stderr
    );
    let s = signed_status(&dir.join("k2"));
    assert_eq!(
        (s["in_force"].as_u64(), s["servers"].as_u64()),
        (Some(2), Some(2)),
        "{s}"
    );

    // One of the two down: fewer than the threshold, no server at all.
    http.set("/b.json.sig", b"");
    let r = once(&[&ua, &ub], &keys, &dir.join("k2-down"), &two);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.json()["no_consensus"]
            .as_str()
            .unwrap()
            .contains("1 of the 2 pinned monitors' lists in force, fewer than servers-threshold 2"),
        "{}",
        r.stdout
    );
    // Threshold 1 of the same two: the union.
    let r = once(
        &[&ua, &ub],
        &keys,
        &dir.join("k1"),
        &["--max-liars", "0", "--quorum", "2"],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(agreeing(&r.json()), ["alpha", "bravo", "charlie"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn keys_urls_and_thresholds_that_cannot_work_are_usage_errors_that_say_what_to_do() {
    let a = Monitor::new(1, "a");
    let key = a.key_line();
    let dir = tempdir("sync_signed_usage");
    let state = dir.join("state");
    let url = "http://127.0.0.1:9/servers.json";
    for (args, says) in [
        (
            vec![
                "--servers-url",
                url,
                "--servers-key",
                &key,
                "--servers-threshold",
                "2",
            ],
            "servers-threshold 2 is not in 1..=1",
        ),
        (
            vec![
                "--servers-url",
                url,
                "--servers-key",
                &key,
                "--servers-key",
                &key,
            ],
            "is given twice",
        ),
        (
            vec![
                "--servers-url",
                url,
                "--servers-key",
                "ssh-ed25519 AAAAnope a",
            ],
            "for '--servers-key <KEY>': the key's base64 does not hold an ssh-ed25519 key",
        ),
        (
            vec!["--servers-key", &key],
            "servers-key is given without servers-url",
        ),
        (
            vec![
                "--servers-url",
                url,
                "--servers-key",
                "/nonexistent/monitor.pub",
            ],
            "give the monitor's public key line or the path of its .pub file",
        ),
        (
            vec![
                "--servers-url",
                url,
                "--servers",
                "/nonexistent/l.json",
                "--servers-key",
                &key,
            ],
            "are both given",
        ),
        (vec!["--servers-url", url], "plain HTTP"),
    ] {
        let mut a = vec!["--state-dir", state.to_str().unwrap(), "--once"];
        a.extend(args.iter().copied());
        let r = sync_support::sync(&a, None);
        assert_eq!(r.code, 64, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
        assert!(!state.exists(), "{args:?} made the state directory");
    }
    // The settings print back as a [sync] table.
    let r = sync_support::sync(
        &[
            "--servers-url",
            url,
            "--servers-url",
            "https://b.example/l.json",
            "--servers-key",
            &key,
            "--print-config",
        ],
        None,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(&format!(
            "servers-url = [\"{url}\", \"https://b.example/l.json\"]"
        )) && r.stdout.contains(&format!("servers-key = \"{key}\""))
            && r.stdout.contains("servers-threshold = 1"),
        "{}",
        r.stdout
    );
    let _ = std::fs::remove_dir_all(&dir);
}
