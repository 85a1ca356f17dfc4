//! A machine whose clock is a day behind (libfaketime) does not keep an
//! expired list: the first run accepts it by its own clock and its
//! consensus proves the true time (the floor); from then on expiry is
//! judged by that proven time too, and the list no longer counts.

use crate::signed_lists::{document, entries, ListServer, Monitor};
use crate::sync_support::{self, have_faketime, start_servers, tempdir};

use super::{pinned, refused, signed_status, THREE};

#[test]
fn a_clock_far_behind_keeps_an_expired_list_only_until_a_consensus_proves_the_time() {
    let test = "sync_signed_clock_behind";
    if !have_faketime(test) {
        return;
    }
    let servers = start_servers(test, &THREE, None);
    let http = ListServer::start();
    let a = Monitor::new(1, "a@observatory");
    // Published two hours ago, expired ten minutes ago, by the true time.
    let doc = document(&a, &entries(&servers.list), 8, 7200, 7200 - 600);
    http.publish("/servers.json", &doc, &a.sign(&doc));
    let dir = tempdir(test);
    let state = dir.join("state");
    let url = http.url("/servers.json");
    let key = a.key_line();
    let args = pinned(&[&url], &[&key], &state, &["--once", "--json"]);
    let behind = Some("-86400");

    // By its own clock the list has a day to go: used, and the consensus
    // puts the true time a day ahead (the floor).
    let r = sync_support::sync(&args, behind);
    assert!(
        r.stderr
            .contains(&format!("signed list {url}: 3 server(s), sequence 8")),
        "{}{}",
        r.stdout,
        r.stderr
    );
    let v = r.json();
    assert!(
        v["consensus"]["agreeing"]
            .as_array()
            .is_some_and(|a| a.len() == 3),
        "{v}"
    );
    assert!(
        v["consensus"]["offset_us"].as_i64().unwrap() > 86_000 * 1_000_000,
        "{v}"
    );

    // Run again, the clock still behind: the proven time judges, the list
    // kept and the one served are expired, no server is used.
    let r = sync_support::sync(&args, behind);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    refused(&r, &url, "the list expired at");
    let why = r.json()["no_consensus"].as_str().unwrap_or("").to_owned();
    assert!(
        why.contains("no servers from the signed lists") && why.contains("expired at"),
        "{why}"
    );
    let s = signed_status(&state);
    assert_eq!(s["monitors"][0]["state"], "expired", "{s}");
    assert_eq!(s["refusals"]["expired"], 1, "{s}");
    assert!(
        s["judged_by"]
            .as_str()
            .unwrap()
            .contains("the last consensus"),
        "{s}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
