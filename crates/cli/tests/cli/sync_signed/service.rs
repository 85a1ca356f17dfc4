//! The service over a signed list: the last good list kept while its URL
//! fails, said in the log, the status and /metrics, until the list's own
//! expiry; then no servers, no consensus, and why.

use std::time::Duration;

use crate::signed_lists::{document, entries, ListServer, Monitor};
use crate::sync_support::{metrics_addr, scrape, start_servers, tempdir, value, Service};

use super::{once, pinned, signed_status, THREE};

const PATIENCE: Duration = Duration::from_secs(60);

#[test]
fn the_last_good_list_is_kept_when_the_url_fails_until_it_expires_then_sync_stops() {
    let test = "sync_signed_service";
    let servers = start_servers(test, &THREE, None);
    let http = ListServer::start();
    let a = Monitor::new(1, "a@observatory");
    // Valid for 20 s from now: long enough for the rounds before it ends,
    // and the test waits for its end rather than timing it.
    let doc = document(&a, &entries(&servers.list), 3, 1, 21);
    http.publish("/servers.json", &doc, &a.sign(&doc));
    let dir = tempdir(test);
    let state = dir.join("state");
    let url = http.url("/servers.json");
    let key = a.key_line();
    let every_second = [
        "--interval",
        "1s",
        "--list-refresh",
        "1s",
        "--metrics",
        "127.0.0.1:0",
        "--now-socket",
        "off",
    ];
    let mut s = Service::start(&pinned(&[&url], &[&key], &state, &every_second));
    let metrics = metrics_addr(&mut s);
    assert!(
        s.wait_for("3 of 3 answering servers agree", PATIENCE),
        "{}",
        s.log
    );

    // The monitor's server goes away: the list is kept, and said to be.
    drop(http);
    assert!(
        s.wait_for("keeping the list of SHA256:", PATIENCE),
        "{}",
        s.log
    );
    assert!(s.log.contains("until it expires at"), "{}", s.log);
    assert!(
        s.wait_for("3 of 3 answering servers agree", PATIENCE),
        "{}",
        s.log
    );
    let text = scrape(metrics, PATIENCE).expect("a scrape");
    let kept = format!(
        "gnomon_sync_signed_list_state{{key=\"{}\",comment=\"a@observatory\",state=\"kept\"}}",
        fingerprint(&text)
    );
    assert_eq!(value(&text, &kept), 1.0, "{text}");
    assert_eq!(
        value(&text, "gnomon_sync_signed_list_servers"),
        3.0,
        "{text}"
    );
    let sequence = kept
        .replace(
            "gnomon_sync_signed_list_state",
            "gnomon_sync_signed_list_sequence",
        )
        .replace(",state=\"kept\"", "");
    assert_eq!(value(&text, &sequence), 3.0, "{text}");
    let st = signed_status(&state);
    assert_eq!(st["monitors"][0]["state"], "kept", "{st}");

    // Its expiry passes: no servers, no consensus, and why.
    assert!(
        s.wait_for("WARN no servers from the signed lists", PATIENCE),
        "{}",
        s.log
    );
    assert!(s.log.contains("expired at"), "{}", s.log);
    // A round says it too, as the reason it has no consensus.
    assert!(
        s.wait_for("reaches them); out: none", PATIENCE),
        "{}",
        s.log
    );
    let text = scrape(metrics, PATIENCE).expect("a scrape");
    assert_eq!(
        value(&text, "gnomon_sync_signed_list_servers"),
        0.0,
        "{text}"
    );
    assert_eq!(
        value(&text, "gnomon_sync_signed_lists_in_force"),
        0.0,
        "{text}"
    );
    let expired = kept.replace("state=\"kept\"", "state=\"expired\"");
    assert_eq!(value(&text, &expired), 1.0, "{text}");
    assert!(
        value(
            &text,
            "gnomon_sync_signed_list_fetch_failures_total{class=\"network\"}"
        ) >= 1.0,
        "{text}"
    );
    let st = signed_status(&state);
    assert_eq!(st["monitors"][0]["state"], "expired", "{st}");
    assert_eq!(st["servers"], 0, "{st}");
    s.stop_cleanly(Duration::from_secs(10));

    // After a restart too (the URL still down, the kept list expired): a
    // step is refused for want of a consensus, and the output says why.
    let r = once(&[&url], &[&key], &state, &["--set-clock", "--dry-run"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let v = r.json();
    assert_eq!(v["step"]["action"], "refused", "{v}");
    assert_eq!(v["step"]["reason"], "no_consensus", "{v}");
    assert!(
        v["no_consensus"]
            .as_str()
            .unwrap()
            .contains("no servers from the signed lists"),
        "{v}"
    );
    assert_eq!(v["signed_lists"]["monitors"][0]["state"], "expired", "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The one pinned key's fingerprint, from its sequence gauge.
fn fingerprint(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.starts_with("gnomon_sync_signed_list_sequence{"))
        .unwrap_or_else(|| panic!("no sequence gauge in\n{text}"));
    line.split("key=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned()
}
