//! `gnomon watch` over a lineup of real loopback servers, each in a known
//! state: honest `gnomon serve` on three versions, one an hour ahead
//! (libfaketime), one whose only delegation ends in 20 minutes, one
//! silent, one answering garbage. `/api/servers` and `/metrics` must say
//! which is which after the first round.

use crate::serve_support;
use crate::sync_support;
use crate::watch_support;

use std::time::Duration;

use watch_support::{check, server, Lineup, Watch, EXPIRING, GARBAGE, HONEST, LIAR, SILENT};

/// Generous bound on the first round: the silent and garbage servers cost
/// a few seconds of waits each on a busy machine.
const FIRST_ROUND: Duration = Duration::from_secs(90);

fn metric(text: &str, name: &str, server: &str) -> Option<f64> {
    let prefix = format!("{name}{{server=\"{server}\"");
    text.lines()
        .filter(|l| l.starts_with(&prefix))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

/// `gnomon verify-report` on `report` (written to `path`): its exit code
/// (3: proof of malfeasance).
fn verify_report(path: &std::path::Path, report: &[u8]) -> Option<i32> {
    std::fs::write(path, report).unwrap();
    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .arg("verify-report")
        .arg(path)
        .output()
        .unwrap();
    println!("{}", String::from_utf8_lossy(&out.stdout));
    out.status.code()
}

#[test]
fn each_server_shows_its_state_in_the_api_and_the_metrics() {
    if !sync_support::have_faketime("each_server_shows_its_state_in_the_api_and_the_metrics") {
        return;
    }
    let sink = gnomon_testkit::ReportSink::start(0);
    let lineup: Lineup = watch_support::start_reporting("watch-states", true, Some(&sink.url()));
    let watch = Watch::start_with(&lineup.list, &["--report", "--allow-loopback-http-reports"]);
    // Every honest server ok in one round: on a busy machine one round's
    // TCP probe may miss its 500 ms (state "warning", "TCP NO"), which the
    // next round, a second later, takes again.
    let api = watch.round_where(FIRST_ROUND, |v| {
        HONEST.iter().all(|n| server(v, n)["state"] == "ok")
    });

    for name in HONEST {
        let s = server(&api, name);
        assert_eq!(s["state"], "ok", "{s}");
        assert_eq!(s["up"], true);
        assert_eq!(check(s, "agreement"), "ok", "{s}");
        // The burst came back whole and every PATH verified.
        assert_eq!(check(s, "batch"), "ok", "{s}");
        assert_eq!(s["batch"]["verified"], s["batch"]["sent"], "{s}");
    }
    assert!(server(&api, HONEST[0])["versions_answered"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v == "rfc-10049"));
    assert_eq!(server(&api, HONEST[1])["version"], "draft-08");
    assert_eq!(server(&api, HONEST[2])["version"], "draft-05");
    // The RFC server batches: some response proved a multi-leaf tree.
    assert!(
        server(&api, HONEST[0])["batch"]["max_depth"]
            .as_u64()
            .unwrap()
            >= 1
    );

    let liar = server(&api, LIAR);
    assert_eq!(liar["state"], "lying", "{liar}");
    assert_eq!(check(liar, "agreement"), "fail");
    let offset = liar["offset_consensus_us"].as_i64().unwrap();
    assert!((offset - 3_600_000_000).abs() < 60_000_000, "{offset}");
    // The chain proves it: the report verifies as proof of malfeasance.
    let report = liar["report"].as_str().expect("a report for the liar");
    let path = lineup.dir.join("report.json");
    assert_eq!(verify_report(&path, report.as_bytes()), Some(3));
    // --report posted one to the list's `reports` URL, and it verifies.
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let posted = loop {
        if let Some(p) = sink.received().into_iter().next() {
            break p;
        }
        assert!(std::time::Instant::now() < until, "no report was posted");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        verify_report(&path, &posted.body),
        Some(3),
        "the posted report does not prove the lie"
    );

    let silent = server(&api, SILENT);
    assert_eq!(silent["state"], "down", "{silent}");
    assert_eq!(silent["failure"], "silent");
    assert_eq!(check(silent, "reachable"), "fail");

    let garbage = server(&api, GARBAGE);
    assert_eq!(garbage["state"], "invalid", "{garbage}");
    assert_eq!(garbage["failure"], "invalid");
    assert_eq!(check(garbage, "signature"), "fail");

    let expiring = server(&api, EXPIRING);
    assert_eq!(expiring["state"], "warning", "{expiring}");
    assert_eq!(check(expiring, "certificate"), "warn");
    assert_eq!(check(expiring, "agreement"), "ok");
    let days = expiring["days_to_expiry"].as_f64().unwrap();
    assert!(days > 0.0 && days < 21.0 / 1440.0, "{days}");

    let (status, m) = watch.get("/metrics");
    assert_eq!(status, 200);
    for name in HONEST.iter().chain([&LIAR, &EXPIRING]) {
        assert_eq!(
            metric(&m, "gnomon_watch_up", name),
            Some(1.0),
            "{name}\n{m}"
        );
    }
    assert_eq!(metric(&m, "gnomon_watch_up", SILENT), Some(0.0));
    assert_eq!(metric(&m, "gnomon_watch_up", GARBAGE), Some(0.0));
    assert_eq!(
        metric(&m, "gnomon_watch_outside_consensus", LIAR),
        Some(1.0)
    );
    assert_eq!(
        metric(&m, "gnomon_watch_outside_consensus", HONEST[0]),
        Some(0.0)
    );
    let liar_offset = metric(&m, "gnomon_watch_offset_seconds", LIAR).unwrap();
    assert!((liar_offset - 3600.0).abs() < 60.0, "{liar_offset}");
    assert!(metric(&m, "gnomon_watch_certificate_expiry_days", EXPIRING).unwrap() < 0.015);
    assert!(metric(&m, "gnomon_watch_certificate_expiry_days", HONEST[0]).unwrap() > 0.5);
    assert!(metric(&m, "gnomon_watch_rtt_seconds", HONEST[0]).is_some());
    // At least the 3 s the unsynchronized server was told to add.
    assert!(metric(&m, "gnomon_watch_radius_seconds", HONEST[0]).unwrap() >= 3.0);
    assert!(m.contains(&format!(
        "gnomon_watch_version_answered{{server=\"{}\",version=\"draft-08\"}} 1",
        HONEST[1]
    )));
    // Reachability by transport, sizes and the tree orientation are
    // exported as well as shown.
    for (server, transport, v) in [
        (HONEST[0], "udp", 1),
        (HONEST[0], "tcp", 1),
        (SILENT, "udp", 0),
    ] {
        let line = format!(
            "gnomon_watch_reachable{{server=\"{server}\",transport=\"{transport}\"}} {v}\n"
        );
        assert!(m.contains(&line), "{line} missing\n{m}");
    }
    let sent = metric(&m, "gnomon_watch_request_bytes", HONEST[0]).unwrap();
    let got = metric(&m, "gnomon_watch_response_bytes", HONEST[0]).unwrap();
    assert!(got > 0.0 && got <= sent, "{got} B for {sent} B");
    let orientation = server(&api, HONEST[0])["batch"]["orientations"][0]
        .as_str()
        .unwrap()
        .to_string();
    assert!(m.contains(&format!(
        "gnomon_watch_batch_tree_orientation{{server=\"{}\",orientation=\"{orientation}\"}} 1",
        HONEST[0]
    )));
    for (name, reason) in [
        (SILENT, "silent"),
        (GARBAGE, "invalid"),
        (LIAR, "outside_consensus"),
    ] {
        let line = format!("gnomon_watch_failures_total{{server=\"{name}\",reason=\"{reason}\"}}");
        assert!(m.contains(&line), "{line} missing\n{m}");
    }
    assert!(!m.contains(&format!(
        "gnomon_watch_failures_total{{server=\"{}\"",
        HONEST[0]
    )));
}

/// The list's key for `name`, as the audit page writes it (HTML-escaped:
/// '/' becomes `&#x2f;`).
fn listed_key(list: &std::path::Path, name: &str) -> String {
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(list).unwrap()).unwrap();
    let s = doc["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap();
    s["publicKey"].as_str().unwrap().replace('/', "&#x2f;")
}

/// `--sink`: the report sink on watch's own listener. The liar's report,
/// made by watch itself, is in the store after the first round: listed
/// with every key of a contradicting pair (either signer may be the
/// liar), only the key watch flagged marked LYING, served as made, verifying on demand and with `verify-report`;
/// a POST of it through the endpoint is a replay. Then SIGTERM: watch
/// stops, closes the database (SQLite folds its log back into the file,
/// so no `-wal` is left) and exits 0.
#[test]
fn watch_runs_the_sink_keeps_its_own_report_and_stops_on_sigterm() {
    let name = "watch_runs_the_sink_keeps_its_own_report_and_stops_on_sigterm";
    if !sync_support::have_faketime(name) {
        return;
    }
    let lineup = watch_support::start("watch-sink", true);
    let db = lineup.dir.join("watch.db");
    let url = format!("sqlite:{}", db.display());
    let mut watch = Watch::start_with(&lineup.list, &["--database", &url, "--sink"]);
    let api = watch.first_round(FIRST_ROUND);
    assert_eq!(server(&api, LIAR)["state"], "lying");

    // Stored before the round was published: no waiting.
    let (status, listing) = watch.get("/reports");
    assert_eq!(status, 200, "{listing}");
    let id = listing
        .split("/reports/")
        .nth(1)
        .and_then(|s| s.split(".json").next())
        .unwrap_or_else(|| panic!("no report listed: {listing}"))
        .to_string();
    let (status, body) = watch.get(&format!("/reports/{id}.json"));
    assert_eq!(status, 200);
    assert_eq!(
        verify_report(&lineup.dir.join("stored.json"), body.as_bytes()),
        Some(3)
    );
    let (status, check) = watch.get(&format!("/reports/{id}/verify"));
    assert_eq!(status, 200, "{check}");
    let check: serde_json::Value = serde_json::from_str(&check).unwrap();
    assert_eq!(check["proof_of_malfeasance"], true, "{check}");

    // The report's line names every key on either side of a
    // contradiction: the liar's and the honest servers' it contradicts.
    let mut keys: Vec<String> = check["contradictions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| [&c["earlier_key"], &c["later_key"]])
        .map(|k| k.as_str().unwrap().replace('/', "&#x2f;"))
        .collect();
    keys.sort();
    keys.dedup();
    assert!(keys.contains(&listed_key(&lineup.list, LIAR)), "{keys:?}");
    assert!(
        keys.contains(&listed_key(&lineup.list, HONEST[0])),
        "{keys:?}"
    );
    let line = listing
        .split("<tr>")
        .find(|row| row.contains(&id))
        .unwrap_or_else(|| panic!("no line for {id}: {listing}"));
    for key in &keys {
        assert!(
            line.contains(&format!("<code>{key}</code>")),
            "{key} missing from the report's line: {line}"
        );
    }
    // Of those, only the key watch flagged is marked lying: the line's
    // entries are split by <br>, each ending in its key.
    let entry = |key: &str| {
        line.split("<br>")
            .find(|e| e.contains(&format!("<code>{key}</code>")))
            .unwrap_or_else(|| panic!("{key} not on the line: {line}"))
    };
    let liar = listed_key(&lineup.list, LIAR);
    assert!(entry(&liar).contains(">LYING<"), "{line}");
    for key in keys.iter().filter(|k| **k != liar) {
        assert!(!entry(key).contains("LYING"), "{key} marked: {line}");
    }
    // The list and the status page link each other.
    assert!(listing.contains(r#"<a href="/">"#), "{listing}");
    let (_, status_page) = watch.get("/");
    assert!(
        status_page.contains(r#"<a href="/reports">"#),
        "{status_page}"
    );

    let (_, metrics) = watch.get("/metrics");
    assert!(
        metrics.contains("gnomon_reports_accepted_total 1\n"),
        "{metrics}"
    );
    let (status, answer) = watch_support::post(watch.addr, "/reports", body.as_bytes());
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains("already known"), "{answer}");
    // A report naming only servers this watch does not list is refused
    // (422 unwatched) before any signature is checked.
    let mut foreign: serde_json::Value = serde_json::from_str(&body).unwrap();
    for (i, e) in foreign["responses"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
    {
        e["publicKey"] = gnomon_testkit::base64(&[0xc0 | i as u8; 32]).into();
    }
    let (status, answer) =
        watch_support::post(watch.addr, "/reports", foreign.to_string().as_bytes());
    assert_eq!(status, 422, "{answer}");
    assert!(answer.contains("\"unwatched\""), "{answer}");

    let status = watch.terminate(Duration::from_secs(60));
    assert!(status.success(), "{status}: {:?}", watch.log());
    assert!(
        watch.log().iter().any(|l| l.contains("stopped by SIGTERM")),
        "{:?}",
        watch.log()
    );
    let wal = lineup.dir.join("watch.db-wal");
    assert!(
        !wal.exists(),
        "the database was not closed: {wal:?} remains"
    );
}

/// deploy/gnomon-watch.toml loads for both commands and prints back;
/// variables win over the file and flags over both; a value out of range
/// exits 64 naming its table, key and range.
#[test]
fn deploy_watch_toml_loads_and_bad_values_are_named() {
    let file = serve_support::repo().join("deploy/gnomon-watch.toml");
    let gnomon = |args: &[&str], env: &[(&str, &str)]| {
        let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
            .args(args)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let f = file.to_str().unwrap();
    let (code, out, err) = gnomon(&["watch", "--config", f, "--print-config"], &[]);
    assert_eq!(code, Some(0), "{err}");
    for line in [
        "servers = \"/etc/gnomon/servers.json\"",
        "interval = \"5m\"",
        "burst = 12",
        "warn-radius = \"10s\"",
        "sink = false",
        "max-body = 65536",
    ] {
        assert!(out.contains(line), "{line} missing:\n{out}");
    }
    // What it printed loads back to the same.
    let printed = sync_support::tempdir("watch-toml").join("printed.toml");
    std::fs::write(&printed, &out).unwrap();
    let (code, again, err) = gnomon(
        &[
            "watch",
            "--config",
            printed.to_str().unwrap(),
            "--print-config",
        ],
        &[],
    );
    assert_eq!((code, again.as_str()), (Some(0), out.as_str()), "{err}");
    let (code, out, err) = gnomon(&["report-server", "--config", f, "--print-config"], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("database = \"sqlite:/var/lib/gnomon/reports.db\""),
        "{out}"
    );
    assert!(out.contains("rate = 10"), "{out}");

    let env = [
        ("GNOMON_WATCH_INTERVAL", "90s"),
        ("GNOMON_WATCH_BURST", "20"),
        ("GNOMON_REPORT_SERVER_RATE", "7"),
    ];
    let (_, out, _) = gnomon(&["watch", "--config", f, "--print-config"], &env);
    assert!(
        out.contains("interval = \"90s\"") && out.contains("burst = 20"),
        "{out}"
    );
    let (_, out, _) = gnomon(
        &["watch", "--config", f, "--print-config", "--burst", "30"],
        &env,
    );
    assert!(out.contains("burst = 30"), "{out}");
    let (_, out, _) = gnomon(&["report-server", "--config", f, "--print-config"], &env);
    assert!(out.contains("rate = 7"), "{out}");

    let dir = sync_support::tempdir("watch-toml-bad");
    for (text, command, needle) in [
        (
            "[watch]\nconcurrency = 300\n",
            "watch",
            "[watch] concurrency: `300` is not an integer in 1..=256",
        ),
        ("[watch]\ninterval = \"0s\"\n", "watch", "[watch] interval"),
        (
            "[watch]\nwarn-radius = \"0s\"\n",
            "watch",
            "[watch] warn-radius: `0s` is not a duration in 1ms..=1d",
        ),
        ("[watch]\nsink = \"yes\"\n", "watch", "sink"),
        (
            "[report-server]\nmax-body = 100\n",
            "report-server",
            "[report-server] max-body: `100` is not a byte count",
        ),
        (
            "[report-server]\nrates = 5\n",
            "report-server",
            "unknown field `rates`",
        ),
    ] {
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, text).unwrap();
        let (code, _, err) = gnomon(
            &[command, "--config", bad.to_str().unwrap(), "--print-config"],
            &[],
        );
        assert_eq!(code, Some(64), "{text}: {err}");
        assert!(err.contains(needle), "{text}: {err}");
    }
    let (code, _, err) = gnomon(
        &["watch", "--config", f, "--print-config"],
        &[("GNOMON_WATCH_TIMEOUT", "1m")],
    );
    assert_eq!(code, Some(64), "{err}");
    assert!(err.contains("100ms..=10s"), "{err}");
    let (code, _, err) = gnomon(
        &["watch", "--config", f, "--print-config"],
        &[("GNOMON_WATCH_WARN_RADIUS", "2d")],
    );
    assert_eq!(code, Some(64), "{err}");
    assert!(
        err.contains("warn-radius") && err.contains("1ms..=1d"),
        "{err}"
    );
    let (_, out, _) = gnomon(
        &[
            "watch",
            "--config",
            f,
            "--print-config",
            "--warn-radius",
            "90s",
        ],
        &[("GNOMON_WATCH_WARN_RADIUS", "5s")],
    );
    assert!(out.contains("warn-radius = \"90s\""), "{out}");
    let (code, _, err) = gnomon(
        &[
            "watch",
            "--servers",
            "l.json",
            "--listen",
            "127.0.0.1:0",
            "--sink",
        ],
        &[],
    );
    assert_eq!(code, Some(64), "{err}");
    assert!(err.contains("give `database`"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
