//! The "Done means", in one test so that the servers and the
//! monitors are started once and serve every check.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::signed_lists::{tampered, ListServer};
use crate::sync_support::{
    have_faketime, start_servers, start_servers_with, sync, tempdir, Run, FAST,
};
use crate::watch_support::Watch;

use super::{
    aged, each, have_ssh_keygen, names_in, set, wait_publication, write_list, Published, SshKey,
};

/// `gnomon sync --once --json` over the signed lists at `urls`, under
/// `keys` (.pub files), its state in `state`; `extra` after. Two honest
/// servers are what the monitors list, so two agreeing are enough.
fn sync_signed(urls: &[String], keys: &[&Path], state: &Path, extra: &[&str]) -> Run {
    let mut args: Vec<String> = Vec::new();
    for u in urls {
        args.extend(["--servers-url".into(), u.clone()]);
    }
    for k in keys {
        args.extend(["--servers-key".into(), k.display().to_string()]);
    }
    args.extend(["--state-dir".into(), state.display().to_string()]);
    let two_suffice = "--once --json --quorum 2 --min-servers 2 --max-liars 0 --max-radius 1m";
    args.extend(two_suffice.split(' ').map(str::to_owned));
    args.extend(extra.iter().chain(&FAST).map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    sync(&args, None)
}

/// [`sync_signed`] straight from running monitors. A monitor publishes
/// every round, and the list and its signature are two requests: a pair
/// that straddles a publication is refused (`signature`), rightly. Such a
/// run is tried again, at most twice; a signature that never verifies
/// still fails the test.
fn sync_from_monitors(urls: &[String], keys: &[&Path], state: &Path, extra: &[&str]) -> Run {
    let straddled = "refused: the list's signature does not verify";
    let mut run = sync_signed(urls, keys, state, extra);
    for _ in 0..2 {
        if !run.stderr.contains(straddled) {
            break;
        }
        run = sync_signed(urls, keys, state, extra);
    }
    run
}

/// The servers whose answers agreed in a `sync --json` consensus.
fn agreeing(v: &Value) -> BTreeSet<String> {
    names_in(&v["consensus"]["agreeing"])
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn a_monitor_publishes_what_it_measured_and_sync_believes_only_what_verifies() {
    let test = "observatory";
    if !have_faketime(test) || !have_ssh_keygen(test) {
        return;
    }
    let dir = tempdir(test);
    let spec = [
        ("honest-a", None, "3s"),
        ("honest-b", None, "3s"),
        ("liar", Some("+3600"), "3s"),
        // Listed by the second monitor only.
        ("honest-c", None, "3s"),
    ];
    let servers = start_servers_with(test, &spec, None);
    // Apart, so that it can be stopped halfway.
    let mut stopped = Some(start_servers(
        &format!("{test}-stopped"),
        &[("stopped", None)],
        None,
    ));
    let all = each(&servers);
    let (a, b, liar, c) = (all[0], all[1], all[2], all[3]);
    let one = dir.join("one.json");
    write_list(&one, &[a, b, liar, each(stopped.as_ref().unwrap())[0]]);
    let two = dir.join("two.json");
    write_list(&two, &[a, b, c]);
    let key_one = SshKey::make(&dir, "observatory-one");
    let key_two = SshKey::make(&dir, "observatory-two");
    let stranger = SshKey::make(&dir, "stranger");
    let publish = |key: &SshKey| {
        let file = key.file.to_str().unwrap().to_owned();
        [
            "--publish-key".to_owned(),
            file,
            "--publish-name".to_owned(),
            key.comment.clone(),
        ]
    };
    let (args_one, args_two) = (publish(&key_one), publish(&key_two));
    let a1: Vec<&str> = args_one.iter().map(String::as_str).collect();
    let a2: Vec<&str> = args_two.iter().map(String::as_str).collect();
    let watch_one = Watch::start_with(&one, &a1);
    // Started now, so its rounds run while the first monitor's are awaited.
    let watch_two = Watch::start_with(&two, &a2);
    let (pin_one, pin_two) = (key_one.key(), key_two.key());

    // Before the stop: every honest server listed, the liar left out. (A
    // round whose probe of an honest server a loaded machine made late
    // leaves it out; the next round lists it again.)
    let answering = set(&["honest-a", "honest-b", "stopped"]);
    let early = wait_publication(
        watch_one.addr,
        &pin_one,
        "listing every honest server",
        |p| p.listed().is_superset(&answering),
    );
    assert_eq!(early.listed(), answering, "{}", early.json);
    liar_left_out(&early);

    // Stopped halfway. A round that began before the kill may still
    // publish it; the round after that one began after the kill.
    drop(stopped.take());
    let killed_ms = now_ms();
    let after = wait_publication(watch_one.addr, &pin_one, "after the stop", |p| {
        p.sequence() > killed_ms
    });
    let still = set(&["honest-a", "honest-b"]);
    let list = wait_publication(watch_one.addr, &pin_one, "a round after the stop", |p| {
        p.sequence() > after.sequence() && p.listed().is_superset(&still)
    });
    assert_eq!(list.listed(), still, "{}", list.json);
    liar_left_out(&list);
    // A killed server's port refuses (ICMP) or says nothing.
    let gone = list.excluded("stopped");
    assert!(
        matches!(gone.as_deref(), Some("silent" | "refused")),
        "{gone:?}: {}",
        list.json
    );
    assert_eq!(list.json["observatory"]["monitor"], "observatory-one");

    // The packaged tool verifies it on its own, and refuses a changed byte.
    let (ok, said) = key_one.verify(&dir, "observatory-one", &list.document, &list.signature);
    assert!(ok, "ssh-keygen -Y verify: {said}");
    assert!(
        said.contains("Good \"roughtime-server-list\" signature"),
        "{said}"
    );
    let (ok, said) = key_one.verify(
        &dir,
        "observatory-one",
        &tampered(&list.document),
        &list.signature,
    );
    assert!(!ok, "ssh-keygen accepted a changed list: {said}");

    // sync uses it, straight from the monitor, and agrees on the true
    // time: sync's clock is the machine's, so its offset is within the
    // consensus radius of 0.
    let state = dir.join("state");
    let watched = format!("http://{}/servers.json", watch_one.addr);
    let run = sync_from_monitors(
        std::slice::from_ref(&watched),
        &[&key_one.public],
        &state,
        &[],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let v = run.json();
    assert_eq!(agreeing(&v), set(&["honest-a", "honest-b"]), "{v}");
    let c = &v["consensus"];
    let (lo, hi) = (
        c["offset_low_us"].as_i64().unwrap(),
        c["offset_high_us"].as_i64().unwrap(),
    );
    assert!(lo <= 0 && 0 <= hi, "{c}");
    assert!(
        c["offset_us"].as_i64().unwrap().abs() <= c["radius_us"].as_i64().unwrap(),
        "{c}"
    );

    // Each bad list, served in the monitor's place, is refused with its
    // reason, with the same state (which has seen `list` or later).
    let http = ListServer::start();
    let expired = aged(&list.json, 7200, 3600);
    let cases: [(&str, Vec<u8>, Vec<u8>, &str); 4] = [
        (
            "/changed.json",
            tampered(&list.document),
            list.signature.clone(),
            "signature",
        ),
        // An older publication, replayed after a later one was seen.
        (
            "/replayed.json",
            early.document.clone(),
            early.signature.clone(),
            "replayed",
        ),
        (
            "/expired.json",
            expired.clone(),
            key_one.sign(&dir, &expired),
            "expired",
        ),
        (
            "/foreign.json",
            list.document.clone(),
            stranger.sign(&dir, &list.document),
            "other_key",
        ),
    ];
    for (path, doc, sig, label) in &cases {
        http.publish(path, doc, sig);
        let url = http.url(path);
        let run = sync_signed(std::slice::from_ref(&url), &[&key_one.public], &state, &[]);
        // Refused, said with the URL, and the last good list kept: the
        // round still has its two servers.
        assert_eq!(run.code, 0, "{label}: {}{}", run.stdout, run.stderr);
        let refused = format!("{url}: refused: ");
        assert!(run.stderr.contains(&refused), "{label}: {}", run.stderr);
        assert!(
            run.stderr.contains("keeping the list of"),
            "{label}: {}",
            run.stderr
        );
        assert_eq!(
            agreeing(&run.json()),
            set(&["honest-a", "honest-b"]),
            "{label}"
        );
        // The status counts it (for this run) under its own label, and
        // only there.
        let after = signed_status(&state);
        for (l, n) in after["refusals"].as_object().unwrap() {
            let once = u64::from(l == label);
            assert_eq!(n.as_u64().unwrap(), once, "{label}: {l}: {after}");
        }
        let monitor = &after["monitors"][0];
        assert_eq!(monitor["state"], "kept", "{label}: {after}");
        assert!(
            monitor["failure"].as_str().unwrap().contains(&url),
            "{after}"
        );
    }
    // The replay is a replay only to a state that saw the later list: a
    // fresh state takes the old one (its signature and expiry hold).
    let fresh = dir.join("fresh-state");
    let replayed = [http.url("/replayed.json")];
    let run = sync_signed(&replayed, &[&key_one.public], &fresh, &[]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(signed_status(&fresh)["monitors"][0]["state"], "current");

    // Two monitors, k = 2: honest-c, listed by the second only, is not
    // used; with k = 1 it is, so the threshold is what left it out.
    let three = set(&["honest-a", "honest-b", "honest-c"]);
    let two_list = wait_publication(watch_two.addr, &pin_two, "listing all three", |p| {
        p.listed().is_superset(&three)
    });
    assert_eq!(two_list.listed(), three, "{}", two_list.json);
    let urls = [watched, format!("http://{}/servers.json", watch_two.addr)];
    let keys = [key_one.public.as_path(), key_two.public.as_path()];
    let both = dir.join("both-state");
    let run = sync_from_monitors(&urls, &keys, &both, &["--servers-threshold", "2"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let v = run.json();
    assert_eq!(agreeing(&v), set(&["honest-a", "honest-b"]), "{v}");
    assert_eq!(v["listed"], 2, "{v}");
    let status = signed_status(&both);
    assert_eq!(
        (&status["in_force"], &status["servers"]),
        (&2.into(), &2.into()),
        "{status}"
    );
    let either = dir.join("either-state");
    let run = sync_from_monitors(&urls, &keys, &either, &["--servers-threshold", "1"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let v = run.json();
    assert_eq!(agreeing(&v), three, "{v}");
    assert_eq!(v["listed"], 3, "{v}");
    drop((watch_one, watch_two, servers));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The liar is out of `p`, and the reason given is that it lied.
fn liar_left_out(p: &Published) {
    assert!(!p.listed().contains("liar"), "{}", p.json);
    assert_eq!(p.excluded("liar").as_deref(), Some("lied"), "{}", p.json);
}

/// `gnomon sync --status --json`'s `signed_lists` for the state in `dir`.
fn signed_status(dir: &Path) -> Value {
    let dir = dir.to_str().unwrap();
    let run = sync(&["--status", "--json", "--state-dir", dir], None);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    run.json()["signed_lists"].clone()
}
