//! Lists over HTTPS: a good one replaces the old and survives a restart;
//! every bad one, an untrusted certificate and a hung download keep the
//! old, said and counted, while the rounds go on; SIGHUP downloads again.

use crate::https_support;
use crate::sync_support;

use https_support::{Answer, HttpsServer};
use sync_support::{
    every_second, metrics_addr, scrape, start_servers, sync, tempdir, value, Service, FAST,
};

use super::{list_of, list_with, PATIENCE, STOP, THREE};

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
