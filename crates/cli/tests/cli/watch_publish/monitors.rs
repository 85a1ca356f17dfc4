//! A monitor of monitors: `gnomon watch --servers-url URL --servers-key
//! KEY` watches the servers another watch published, and refuses at start
//! a list signed by a key it does not pin.

use std::time::Duration;

use super::{names, published_where, ssh_key_named, PATIENCE};
use crate::watch_support::{self, server, Watch, HONEST, SILENT};

#[test]
fn a_monitor_of_monitors_watches_what_the_pinned_monitor_lists() {
    let test = "watch_publish::monitors::a_monitor_of_monitors";
    let lineup = watch_support::start("watch-monitors", false);
    let (Some((key_a, _)), Some((key_b, _)), Some((other, _))) = (
        ssh_key_named(&lineup.dir, "a", test),
        ssh_key_named(&lineup.dir, "b", test),
        ssh_key_named(&lineup.dir, "other", test),
    ) else {
        return;
    };
    let a = Watch::start_with(
        &lineup.list,
        &[
            "--publish-key",
            key_a.to_str().unwrap(),
            "--publish-name",
            "a.test",
        ],
    );
    let (_, _, listed_by_a) = published_where(&a, |d| {
        HONEST.iter().all(|h| names(d).iter().any(|n| n == h))
    });
    let url = format!("http://{}/servers.json", a.addr);
    let pinned = key_a.with_extension("pub");

    // Pinned to another key: nothing to watch, said at start.
    let refused = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(["watch", "--listen", "127.0.0.1:0", "--servers-url", &url])
        .arg("--servers-key")
        .arg(other.with_extension("pub"))
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(69));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains(&url) && err.contains("servers-key"), "{err}");

    let mut b = Watch::start_args(&[
        "--servers-url",
        &url,
        "--servers-key",
        pinned.to_str().unwrap(),
        "--publish-key",
        key_b.to_str().unwrap(),
        "--publish-name",
        "b.test",
    ]);
    let api = b.round_where(PATIENCE, |v| {
        HONEST.iter().all(|h| {
            v["servers"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["name"] == *h && s["up"] == true)
        })
    });
    let watched: Vec<&str> = api["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    let mut from_a = names(&listed_by_a);
    from_a.sort();
    let mut watched_sorted: Vec<String> = watched.iter().map(|s| s.to_string()).collect();
    watched_sorted.sort();
    // What A listed when B started may have been a later publication of
    // the same servers: the lineup's states do not change.
    assert_eq!(watched_sorted, from_a, "{api}");
    assert!(!watched.contains(&SILENT), "{api}");
    let _ = server(&api, HONEST[0]);
    // B publishes in turn what it measured of them.
    let (_, _, listed_by_b) = published_where(&b, |d| {
        HONEST.iter().all(|h| names(d).iter().any(|n| n == h))
    });
    assert_eq!(listed_by_b["observatory"]["monitor"], "b.test");
    assert!(b.terminate(Duration::from_secs(30)).success());
}
