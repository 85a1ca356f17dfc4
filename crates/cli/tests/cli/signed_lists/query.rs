//! `gnomon query` and `gnomon relay` over monitors' signed lists.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::client_support::{gnomon, Run};
use crate::sync_support::{start_servers, FAST};

use super::{document, entries, tampered, ListServer, Monitor};

const THREE: [(&str, Option<&str>); 3] = [("alpha", None), ("bravo", None), ("charlie", None)];

/// `gnomon query --all --json` over the lists at `urls` under `keys`:
/// every server asked, and two agreeing are enough (the lists here name
/// two or three honest servers).
fn query(urls: &[&str], keys: &[&str], extra: &[&str]) -> Run {
    let mut args = vec![
        "query",
        "--all",
        "--json",
        "--quorum",
        "2",
        "--max-liars",
        "0",
    ];
    for u in urls {
        args.extend(["--servers-url", u]);
    }
    for k in keys {
        args.extend(["--servers-key", k]);
    }
    args.extend_from_slice(extra);
    args.extend_from_slice(&FAST);
    gnomon(&args)
}

/// The servers a query asked, by name.
fn asked(v: &Value) -> BTreeSet<String> {
    v["servers"]
        .as_array()
        .unwrap_or_else(|| panic!("no servers in {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

fn names(n: &[&str]) -> BTreeSet<String> {
    n.iter().map(|s| s.to_string()).collect()
}

/// The one list's outcome in a command's JSON.
fn only_list(v: &Value) -> &Value {
    let lists = v["server_lists"]["lists"]
        .as_array()
        .unwrap_or_else(|| panic!("no server_lists in {v}"));
    assert_eq!(lists.len(), 1, "{v}");
    &lists[0]
}

/// A bad list: where it is served, the list and signature, and the
/// label and words of its refusal.
struct Bad {
    path: &'static str,
    list: Vec<u8>,
    sig: Vec<u8>,
    label: &'static str,
    words: &'static str,
}

#[test]
fn a_good_signed_list_is_used_and_a_tampered_expired_or_foreign_one_is_refused_with_its_reason() {
    // Also: a pair fetched across a publication is fetched again.
    let servers = start_servers("signed_query", &THREE, None);
    let http = ListServer::start();
    let monitor = Monitor::new(1, "observatory.test");
    let good = document(&monitor, &entries(&servers.list), 5, 60, 3600);
    http.publish("/servers.json", &good, &monitor.sign(&good));
    // The key as an OpenSSH .pub file, as most will pin it.
    let pub_file = servers.dir.join("monitor.pub");
    std::fs::write(&pub_file, format!("{}\n", monitor.key_line())).unwrap();
    let key = pub_file.to_str().unwrap().to_owned();
    let url = http.url("/servers.json");

    let run = query(&[&url], &[&key], &[]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let v = run.json();
    assert_eq!(asked(&v), names(&["alpha", "bravo", "charlie"]), "{v}");
    assert!(v["consensus"].is_object(), "{v}");
    let list = only_list(&v);
    assert_eq!(list["accepted"], true, "{v}");
    assert_eq!(list["sequence"], 5, "{v}");
    assert_eq!(list["monitor"], "observatory.test", "{v}");
    assert!(list["key"].as_str().unwrap().starts_with("SHA256:"), "{v}");

    // A list and its signature fetched across a publication (the old
    // signature beside the new list) fail; the pair is fetched again.
    let new = document(&monitor, &entries(&servers.list), 8, 0, 3600);
    let (old_sig, new_sig) = (monitor.sign(&good), monitor.sign(&new));
    http.set("/next.json", &new);
    http.set_then("/next.json.sig", &[&old_sig, &new_sig]);
    let next = http.url("/next.json");
    let run = query(&[&next], &[&key], &[]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(only_list(&run.json())["sequence"], 8, "{}", run.stdout);
    // A signature that never fits is still refused, after the one retry.
    http.set("/next.json.sig", &old_sig);
    let run = query(&[&next], &[&key], &[]);
    assert_eq!(run.code, 64, "{}{}", run.stdout, run.stderr);
    assert_eq!(only_list(&run.json())["reason"], "signature");

    // relay takes the same flags; the bundle it writes holds answers.
    let bundle = servers.dir.join("bundle.bin");
    let relay = |url: &str| {
        gnomon(&[
            "relay",
            "--servers-url",
            url,
            "--servers-key",
            &monitor.key_line(),
            "--device-nonce",
            &"ab".repeat(32),
            "--out",
            bundle.to_str().unwrap(),
            "--all",
            "--json",
            "--timeout",
            "500ms",
            "--max-radius",
            "5m",
        ])
    };
    let run = relay(&url);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let v = run.json();
    assert_eq!(v["written"], true, "{v}");
    assert_eq!(only_list(&v)["accepted"], true, "{v}");
    assert!(v["answers"].as_u64().unwrap() >= 3, "{v}");

    // Each bad list: nothing is asked, exit 64, the reason labelled.
    let other = Monitor::new(2, "elsewhere.test");
    let expired = document(&monitor, &entries(&servers.list), 6, 7200, 3600);
    let cases = [
        Bad {
            path: "/tampered.json",
            list: tampered(&good),
            sig: monitor.sign(&good),
            label: "signature",
            words: "does not verify",
        },
        Bad {
            path: "/expired.json",
            list: expired.clone(),
            sig: monitor.sign(&expired),
            label: "expired",
            words: "expired at",
        },
        Bad {
            path: "/foreign.json",
            list: good.clone(),
            sig: other.sign(&good),
            label: "other_key",
            words: "not one of the pinned keys",
        },
    ];
    for Bad {
        path,
        list,
        sig,
        label,
        words,
    } in &cases
    {
        http.publish(path, list, sig);
        let url = http.url(path);
        let run = query(&[&url], &[&key], &[]);
        assert_eq!(run.code, 64, "{label}: {}{}", run.stdout, run.stderr);
        let v = run.json();
        assert_eq!(v["error"]["kind"], "server_list", "{v}");
        assert!(v["entries"].is_null(), "{label}: servers were asked: {v}");
        let list = only_list(&v);
        assert_eq!(list["accepted"], false, "{v}");
        assert_eq!(list["reason"], *label, "{v}");
        assert!(list["message"].as_str().unwrap().contains(words), "{v}");
        // The sentence a person reads names the URL, the reason and why.
        assert!(run.stderr.contains(&url), "{}", run.stderr);
        assert!(run.stderr.contains(&format!("({label})")), "{}", run.stderr);
        assert!(run.stderr.contains(words), "{}", run.stderr);

        let run = relay(&url);
        assert_eq!(run.code, 64, "relay, {label}: {}{}", run.stdout, run.stderr);
        assert_eq!(only_list(&run.json())["reason"], *label, "{}", run.stdout);
    }
    // The foreign key is named by its fingerprint, as ssh-keygen -l does.
    let run = query(&[&http.url("/foreign.json")], &[&key], &[]);
    let fingerprint = gnomon_protocol::signed_list::MonitorKey::parse(&other.key_line())
        .unwrap()
        .fingerprint();
    assert!(run.stderr.contains(&fingerprint), "{}", run.stderr);
}

#[test]
fn with_two_monitors_and_a_threshold_of_two_only_the_servers_both_list_are_used() {
    let servers = start_servers("signed_threshold", &THREE, None);
    let http = ListServer::start();
    let all = entries(&servers.list);
    let (a, b) = (Monitor::new(3, "monitor-a"), Monitor::new(4, "monitor-b"));
    let list_a = document(&a, &all, 10, 60, 3600);
    // b does not list charlie.
    let list_b = document(&b, &all[..2], 20, 60, 3600);
    http.publish("/a.json", &list_a, &a.sign(&list_a));
    http.publish("/b.json", &list_b, &b.sign(&list_b));
    let (url_a, url_b, key_a, key_b) = (
        http.url("/a.json"),
        http.url("/b.json"),
        a.key_line(),
        b.key_line(),
    );
    let urls = [url_a.as_str(), url_b.as_str()];
    let keys = [key_a.as_str(), key_b.as_str()];

    let run = query(&urls, &keys, &["--servers-threshold", "2"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let v = run.json();
    assert_eq!(asked(&v), names(&["alpha", "bravo"]), "{v}");
    let left = &v["server_lists"]["left_out"];
    assert_eq!(left[0]["name"], "charlie", "{v}");
    assert_eq!(left[0]["listed_by"], 1, "{v}");
    assert_eq!(left[0]["needed"], 2, "{v}");
    assert_eq!(v["server_lists"]["threshold"], 2, "{v}");

    // The same lists with a threshold of 1: charlie is used, so it was
    // the threshold that left it out above.
    let run = query(&urls, &keys, &[]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(asked(&run.json()), names(&["alpha", "bravo", "charlie"]));

    // One of the two refused: one verified list cannot meet 2.
    http.publish("/b.json", &tampered(&list_b), &b.sign(&list_b));
    let run = query(&urls, &keys, &["--servers-threshold", "2"]);
    assert_eq!(run.code, 64, "{}{}", run.stdout, run.stderr);
    let v = run.json();
    let lists = v["server_lists"]["lists"].as_array().unwrap();
    assert_eq!(lists[0]["accepted"], true, "{v}");
    assert_eq!(lists[1]["reason"], "signature", "{v}");
    assert!(
        run.stderr.contains("--servers-threshold is 2"),
        "{}",
        run.stderr
    );
    // With a threshold of 1 the verified one is enough: used, and the
    // refused one said beside it.
    let run = query(&urls, &keys, &[]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let v = run.json();
    assert_eq!(asked(&v), names(&["alpha", "bravo", "charlie"]), "{v}");
    assert_eq!(v["server_lists"]["lists"][1]["reason"], "signature", "{v}");
    let text = gnomon(&[
        "query",
        "--all",
        "--quorum",
        "2",
        "--max-liars",
        "0",
        "--servers-url",
        urls[0],
        "--servers-url",
        urls[1],
        "--servers-key",
        keys[0],
        "--servers-key",
        keys[1],
        "--timeout",
        "500ms",
    ]);
    assert_eq!(text.code, 0, "{}{}", text.stdout, text.stderr);
    let said = format!("not used: {}: refused: ", urls[1]);
    assert!(text.stderr.contains(&said), "{}", text.stderr);
    assert!(
        text.stderr.contains("(signature); the other lists are"),
        "{}",
        text.stderr
    );

    // A threshold above the number of keys is a usage error, said so.
    let run = query(&urls[..1], &keys[..1], &["--servers-threshold", "2"]);
    assert_eq!(run.code, 64, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("servers-threshold 2"), "{}", run.stderr);
}
