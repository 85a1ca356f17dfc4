//! One real report, end to end: posted by `gnomon query --report`, stored,
//! served with its check, replayed, refused when forged, truncated,
//! oversized or mistyped, and kept over a restart; and `gnomon sync`
//! posting its own.

use crate::client_support;

use client_support::{gnomon, liar_lineup, temp, FAST};
use gnomon_protocol::report::MEDIA_TYPE;

use super::{canonical, cpu_ticks, field, rows, stored_size, Sink};

fn b64_decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

/// Three honest servers and a liar an hour ahead; `gnomon query --report`
/// posts the proof to `sink`. Returns the report as written to disk.
fn report_a_liar(sink: &Sink, seed: u8) -> (Vec<u8>, String) {
    let lineup = liar_lineup(seed, Some(&sink.url()));
    let list = &lineup.list;
    let out = temp("sink-report.json");
    let mut args = vec!["query", "--servers", list.to_str().unwrap(), "--all"];
    args.extend_from_slice(&FAST);
    args.extend_from_slice(&[
        "--report-out",
        out.to_str().unwrap(),
        "--report",
        "--allow-loopback-http-reports",
        "--report-backoff",
        "10ms",
    ]);
    let r = gnomon(&args);
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("(HTTP 201, attempt 1)"), "{}", r.stdout);
    (std::fs::read(&out).unwrap(), lineup.liar_key.clone())
}

/// The whole life of the sink against one database.
fn sink_lifecycle(database: &str) {
    let sink = Sink::start(database, &["--rate", "1000"]);
    let (report, liar_key) = report_a_liar(&sink, 31);
    // The liar contradicts each of the three honest servers: every key on
    // either side of a contradicting pair is listed.
    assert_eq!(rows(database), (1, 4), "one report, four keys in its pairs");
    assert_eq!(sink.metric("gnomon_reports_accepted_total"), 1);

    // The report is served as canonical JSON, and its check as made on
    // arrival.
    let listing = sink.get("/").1;
    // The page escapes HTML's specials, '/' among them.
    let liar_html = liar_key.replace('/', "&#x2f;");
    assert!(
        listing.contains(&format!("<code>{liar_html}</code>")),
        "{listing}"
    );
    let id = listing
        .split("/reports/")
        .nth(1)
        .and_then(|s| s.split(".json").next())
        .expect("a report link")
        .to_string();
    let (code, raw) = sink.get(&format!("/reports/{id}.json"));
    assert_eq!(code, 200);
    assert_eq!(raw.as_bytes(), canonical(&report).as_slice());
    assert_eq!(
        sink.metric("gnomon_report_verifications_total"),
        1,
        "verified once, on arrival"
    );
    let checks = sink.metric("gnomon_report_signature_checks_total");
    assert!(checks >= 4, "{checks}");
    let cpu = cpu_ticks(sink.child.id());
    let asks = 200;
    for _ in 0..asks {
        let (code, check) = sink.get(&format!("/reports/{id}/verify"));
        assert_eq!(code, 200, "{check}");
        let check: serde_json::Value = serde_json::from_str(&check).unwrap();
        assert_eq!(check["proof_of_malfeasance"], true, "{check}");
        assert_eq!(check["id"], id.as_str(), "{check}");
    }
    let cpu = cpu_ticks(sink.child.id()) - cpu;
    eprintln!(
        "{asks} /verify answers cost the sink {} ms of CPU ({:.3} ms each)",
        cpu * 10,
        cpu as f64 * 10.0 / f64::from(asks)
    );
    assert_eq!(
        sink.metric("gnomon_report_signature_checks_total"),
        checks,
        "/verify checked signatures again"
    );
    assert_eq!(
        sink.metric("gnomon_report_verdicts_served_total"),
        asks as u64
    );
    assert_eq!(
        sink.get(&format!("/reports/{}.json", "0".repeat(64))).0,
        404
    );
    assert_eq!(sink.get("/reports/..%2f..%2fetc%2fpasswd.json").0, 404);

    // Replays, byte for byte and re-encoded, add nothing.
    let (code, body) = sink.post(MEDIA_TYPE, &report);
    assert_eq!(
        (code, field(&body, "status").as_str()),
        (200, "already known"),
        "{body}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&report).unwrap();
    let pretty = serde_json::to_vec_pretty(&doc).unwrap();
    assert_ne!(pretty, report);
    assert_eq!(sink.post(MEDIA_TYPE, &pretty).0, 200);

    // Forged: one byte of one response's signature flipped.
    let mut forged = doc.clone();
    let entry = &mut forged["responses"][1]["response"];
    let mut bytes = b64_decode(entry.as_str().unwrap());
    let at = bytes.len() - 40;
    bytes[at] ^= 1;
    *entry = serde_json::Value::String(gnomon_testkit::base64(&bytes));
    let (code, body) = sink.post(MEDIA_TYPE, forged.to_string().as_bytes());
    assert_eq!(
        (code, field(&body, "reason").as_str()),
        (422, "invalid"),
        "{body}"
    );

    // Truncated, oversized, mistyped, legacy.
    let (code, body) = sink.post(MEDIA_TYPE, &report[..report.len() / 2]);
    assert_eq!(
        (code, field(&body, "reason").as_str()),
        (400, "malformed"),
        "{body}"
    );
    let mut big = report.clone();
    big.resize(70 * 1024, b' ');
    let (code, body) = sink.post(MEDIA_TYPE, &big);
    assert_eq!(
        (code, field(&body, "reason").as_str()),
        (413, "too_large"),
        "{body}"
    );
    let (code, body) = sink.post("application/json", &report);
    assert_eq!(
        (code, field(&body, "reason").as_str()),
        (415, "content_type"),
        "{body}"
    );
    let legacy = br#"{"nonces":["AAAA"],"responses":["AAAA"]}"#;
    let (code, body) = sink.post(MEDIA_TYPE, legacy);
    assert_eq!(
        (code, field(&body, "reason").as_str()),
        (422, "unverifiable"),
        "{body}"
    );
    // A chunked body past the cap, with no length to refuse it early.
    let mut chunked = String::new();
    for _ in 0..70 {
        chunked.push_str(&format!("400\r\n{}\r\n", " ".repeat(1024)));
    }
    chunked.push_str("0\r\n\r\n");
    let head = format!(
        "POST /reports HTTP/1.1\r\nHost: x\r\nContent-Type: {MEDIA_TYPE}\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    assert_eq!(sink.request(&head, chunked.as_bytes()).0, 413);

    assert_eq!(rows(database), (1, 4), "nothing refused was stored");
    assert_eq!(
        sink.metric("gnomon_reports_stored_bytes"),
        stored_size(&report)
    );
    assert_eq!(sink.metric("gnomon_reports_accepted_total"), 1);
    assert_eq!(sink.metric("gnomon_reports_duplicate_total"), 2);
    for (reason, n) in [
        ("invalid", 1),
        ("malformed", 1),
        ("too_large", 2),
        ("content_type", 1),
        ("unverifiable", 1),
        ("rate_limited", 0),
    ] {
        let name = format!("gnomon_reports_rejected_total{{reason=\"{reason}\"}}");
        assert_eq!(sink.metric(&name), n, "{reason}");
    }

    // A restart keeps the report.
    sink.stop();
    let sink = Sink::start(database, &[]);
    let (code, raw) = sink.get(&format!("/reports/{id}.json"));
    assert_eq!(code, 200);
    assert_eq!(raw.as_bytes(), canonical(&report).as_slice());
    assert_eq!(sink.metric("gnomon_reports_stored"), 1);
    // The stored check survives too: still nothing verified again.
    assert_eq!(sink.get(&format!("/reports/{id}/verify")).0, 200);
    assert_eq!(sink.metric("gnomon_report_signature_checks_total"), 0);
    sink.stop();
}

#[test]
fn sink_on_sqlite() {
    let path = temp("sink.db");
    sink_lifecycle(&format!("sqlite:{}", path.display()));
    assert!(path.exists(), "the database is one file");
    // SIGTERM closed it: SQLite folded its log back into the file.
    let wal = path.with_extension("db-wal");
    assert!(
        !wal.exists(),
        "{wal:?} remains: the database was not closed"
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn sink_on_postgres() {
    match gnomon_testkit::postgres::Postgres::start() {
        Ok(pg) => sink_lifecycle(&pg.url()),
        Err(why) => gnomon_testkit::skip("sink_on_postgres", &why),
    }
}

#[test]
fn sync_posts_its_report_to_the_sink() {
    let path = temp("sink-sync.db");
    let database = format!("sqlite:{}", path.display());
    let sink = Sink::start(&database, &[]);
    let lineup = liar_lineup(41, Some(&sink.url()));
    let state = temp("sink-sync-state");
    std::fs::create_dir_all(&state).unwrap();
    let r = gnomon(&[
        "sync",
        "--servers",
        lineup.list.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "--timeout",
        "500ms",
        "--retries",
        "3",
        "--once",
        "--json",
        "--allow-loopback-http-reports",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let written = r.json()["report_file"]
        .as_str()
        .expect("a report file")
        .to_string();
    assert_eq!(
        sink.metric("gnomon_reports_accepted_total"),
        1,
        "{}",
        r.stderr
    );
    assert_eq!(rows(&database).0, 1);
    let id = gnomon_watch_id(&std::fs::read(&written).unwrap());
    let (code, raw) = sink.get(&format!("/reports/{id}.json"));
    assert_eq!(code, 200);
    assert_eq!(raw.as_bytes(), canonical(&std::fs::read(&written).unwrap()));
    sink.stop();
    let _ = std::fs::remove_dir_all(&state);
    let _ = std::fs::remove_file(&path);
}

/// The id the sink gives a report.
fn gnomon_watch_id(report: &[u8]) -> String {
    match gnomon_protocol::parse_report(report) {
        Ok(gnomon_protocol::report::ParsedReport::Current(r)) => gnomon_watch::report_id(&r),
        other => panic!("not a current report: {other:?}"),
    }
}
