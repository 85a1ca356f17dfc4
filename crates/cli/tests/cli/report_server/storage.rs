//! What is kept of floods of valid reports anyone can mint: nothing about
//! servers the sink does not watch, no more than the quotas, a real report
//! still reachable page by page, and nothing past the retention; and the
//! figures behind docs.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::client_support;

use client_support::{gnomon, liar_lineup, temp, FAST};
use gnomon_protocol::report::MEDIA_TYPE;
use gnomon_watch::Store;

use super::{canonical, cpu_ticks, field, post_from, post_head, rows, stored_size, Sink};

/// A liar lineup's report, made by `gnomon query --report-out` (posted
/// nowhere), and the lineup (its list names the keys).
fn make_report(seed: u8) -> (Vec<u8>, client_support::LiarLineup) {
    let lineup = liar_lineup(seed, None);
    let out = temp("made-report.json");
    let mut args = vec!["query", "--servers", lineup.list.to_str().unwrap(), "--all"];
    args.extend_from_slice(&FAST);
    args.extend_from_slice(&["--report-out", out.to_str().unwrap()]);
    let r = gnomon(&args);
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    let report = std::fs::read(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    (report, lineup)
}

/// What anyone holding one valid report can mint without end: the same
/// report with its first entry's `rand` set to `n` (nothing checks the
/// first rand, so it stays valid, and it is another report, another id),
/// sent padded with spaces and an unknown member up to `pad_to` bytes.
fn minted(report: &[u8], n: u32, pad_to: usize) -> Vec<u8> {
    let mut doc: serde_json::Value = serde_json::from_slice(report).unwrap();
    let mut rand = [0u8; 32];
    rand[..4].copy_from_slice(&n.to_be_bytes());
    doc["responses"][0]["rand"] = gnomon_testkit::base64(&rand).into();
    doc["padding"] = "x".repeat(pad_to / 2).into();
    let mut text = serde_json::to_vec_pretty(&doc).unwrap();
    if text.len() < pad_to {
        text.resize(pad_to, b' ');
    }
    text
}

/// POSTs every body from `threads` threads at once; the statuses, in
/// order.
fn flood(addr: SocketAddr, bodies: &[Vec<u8>], threads: usize) -> Vec<u16> {
    let chunk = bodies.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = bodies
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|b| post_from(addr, None, MEDIA_TYPE, b).0)
                        .collect::<Vec<u16>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

/// A sink told which servers it keeps reports about (`--accept-keys`, a
/// server list here) stores nothing of a flood of valid reports that
/// accuse only other servers: each gets 422 `unwatched`, counted, without
/// a signature checked. A report about a listed server is kept.
#[test]
fn reports_about_unwatched_servers_are_refused() {
    let (ours, lineup) = make_report(61);
    let (theirs, _other) = make_report(71);
    let path = temp("sink-unwatched.db");
    let database = format!("sqlite:{}", path.display());
    let sink = Sink::start(
        &database,
        &[
            "--rate",
            "100000",
            "--accept-keys",
            lineup.list.to_str().unwrap(),
        ],
    );
    let bodies: Vec<Vec<u8>> = (0..200).map(|n| minted(&theirs, n, 60_000)).collect();
    let sent: usize = bodies.iter().map(Vec::len).sum();
    let statuses = flood(sink.addr, &bodies, 4);
    assert!(statuses.iter().all(|&s| s == 422), "{statuses:?}");
    let (code, body) = sink.post(MEDIA_TYPE, &bodies[0]);
    assert_eq!(
        (code, field(&body, "reason").as_str()),
        (422, "unwatched"),
        "{body}"
    );
    assert!(
        field(&body, "detail").contains("accuses no server"),
        "{body}"
    );
    assert_eq!(rows(&database), (0, 0), "nothing of the flood was stored");
    assert_eq!(
        sink.metric("gnomon_reports_rejected_total{reason=\"unwatched\"}"),
        201
    );
    assert_eq!(
        sink.metric("gnomon_report_signature_checks_total"),
        0,
        "refused before any signature was checked"
    );
    eprintln!("unwatched flood: {sent} bytes sent, 0 stored");
    // A report about a listed server is kept.
    let (code, body) = sink.post(MEDIA_TYPE, &ours);
    assert_eq!(code, 201, "{body}");
    assert_eq!(rows(&database), (1, 4));
    sink.stop();
    let _ = std::fs::remove_file(&path);

    // A key file (base64, one a line) works the same way; one that names
    // no key is refused at start.
    let keys = temp("keys.txt");
    std::fs::write(&keys, format!("# the liar\n{}\n", lineup.liar_key)).unwrap();
    let sink = Sink::start(
        &format!("sqlite:{}", path.display()),
        &["--accept-keys", keys.to_str().unwrap()],
    );
    assert_eq!(sink.post(MEDIA_TYPE, &theirs).0, 422);
    assert_eq!(sink.post(MEDIA_TYPE, &ours).0, 201);
    sink.stop();
    std::fs::write(&keys, "# nothing\n").unwrap();
    let r = gnomon(&[
        "report-server",
        "--listen",
        "127.0.0.1:0",
        "--database",
        &format!("sqlite:{}", path.display()),
        "--accept-keys",
        keys.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 64, "{}", r.stderr);
    assert!(r.stderr.contains("no public keys"), "{}", r.stderr);
    let _ = std::fs::remove_file(&keys);
    let _ = std::fs::remove_file(&path);
}

/// Padded valid reports about watched servers are stored as canonical
/// JSON (no padding, no unknown member) and stop at the quotas: one /24's at its
/// quota-per-source (429 `source_quota` with Retry-After), everyone's at
/// the total quota (507 `storage_full`). A replay of a stored report is
/// still "already known".
fn padded_flood_stops_at_the_quotas(database: &str) {
    let (report, lineup) = make_report(81);
    let size = stored_size(&minted(&report, 0, 0));
    let body_size = canonical(&minted(&report, 0, 0)).len();
    let per_source = 10 * size + size / 2;
    let total = 15 * size + size / 2;
    let sink = Sink::start(
        database,
        &[
            "--rate",
            "100000",
            "--quota-per-source",
            &per_source.to_string(),
            "--quota",
            &total.to_string(),
            // Reports about the servers it watches: these pass.
            "--accept-keys",
            lineup.list.to_str().unwrap(),
        ],
    );
    let bodies: Vec<Vec<u8>> = (0..30).map(|n| minted(&report, n, 60_000)).collect();
    let statuses = flood(sink.addr, &bodies[..20], 4);
    assert_eq!(statuses.iter().filter(|&&s| s == 201).count(), 10);
    assert_eq!(statuses.iter().filter(|&&s| s == 429).count(), 10);
    let (code, head, body) = post_head(sink.addr, None, MEDIA_TYPE, &bodies[20]);
    assert_eq!(
        (code, field(&body, "reason").as_str()),
        (429, "source_quota"),
        "{body}"
    );
    assert!(
        head.to_ascii_lowercase().contains("retry-after: 3600"),
        "{head}"
    );
    // Another /24 has room until the total is reached.
    let mut other = Vec::new();
    for b in &bodies[20..] {
        other.push(post_from(sink.addr, Some("127.0.1.1"), MEDIA_TYPE, b));
    }
    assert!(other[..5].iter().all(|(c, _)| *c == 201), "{other:?}");
    let (code, body) = &other[5];
    assert_eq!(
        (*code, field(body, "reason").as_str()),
        (507, "storage_full"),
        "{body}"
    );
    assert_eq!(rows(database).0, 15);
    assert_eq!(sink.metric("gnomon_reports_stored_bytes"), 15 * size);
    assert_eq!(
        sink.metric("gnomon_reports_rejected_total{reason=\"source_quota\"}"),
        11
    );
    assert_eq!(
        sink.metric("gnomon_reports_rejected_total{reason=\"storage_full\"}"),
        5
    );
    // Every stored body is the canonical form of what was sent.
    let listing = sink.get("/api/reports").1;
    let listing: serde_json::Value = serde_json::from_str(&listing).unwrap();
    let stored = listing["reports"].as_array().unwrap();
    assert_eq!(stored.len(), 15);
    for r in stored {
        let (code, raw) = sink.get(r["url"].as_str().unwrap());
        assert_eq!(code, 200);
        assert_eq!(raw.len(), body_size);
        assert_eq!(r["size"], size);
        assert!(!raw.contains("padding") && !raw.contains("  "), "{raw}");
    }
    // A replay is known, whatever the quota.
    let (code, body) = sink.post(MEDIA_TYPE, &bodies[0]);
    assert!(
        code == 200 || code == 429,
        "a stored report or a refused one: {code} {body}"
    );
    let sent: usize = bodies.iter().map(Vec::len).sum();
    eprintln!(
        "padded flood: {} reports, {sent} bytes sent; {} stored, {} bytes",
        bodies.len(),
        rows(database).0,
        15 * size
    );
    sink.stop();
}

#[test]
fn padded_flood_stops_at_the_quotas_on_sqlite() {
    let _heavy = crate::heavy();
    let path = temp("sink-quota.db");
    padded_flood_stops_at_the_quotas(&format!("sqlite:{}", path.display()));
    let _ = std::fs::remove_file(&path);
}

#[test]
fn padded_flood_stops_at_the_quotas_on_postgres() {
    let _heavy = crate::heavy();
    match gnomon_testkit::postgres::Postgres::start() {
        Ok(pg) => padded_flood_stops_at_the_quotas(&pg.url()),
        Err(why) => gnomon_testkit::skip("padded_flood_stops_at_the_quotas_on_postgres", &why),
    }
}

/// 1,100 valid reports arriving after a real one cannot push it out of
/// view: the audit list is newest first a page at a time, and following
/// its "older" links (HTML) or cursors (/api/reports) reaches it.
#[test]
fn a_real_report_stays_reachable_under_a_flood() {
    let _heavy = crate::heavy();
    let (real, _lineup) = make_report(91);
    let (theirs, _other) = make_report(101);
    let path = temp("sink-pages.db");
    let database = format!("sqlite:{}", path.display());
    // Room for them all: here the pages are under test, not the quotas.
    let sink = Sink::start(
        &database,
        &["--rate", "100000", "--quota-per-source", "1000000000"],
    );
    let (code, body) = sink.post(MEDIA_TYPE, &real);
    assert_eq!(code, 201, "{body}");
    let real_id = field(&body, "id");
    let bodies: Vec<Vec<u8>> = (0..1100).map(|n| minted(&theirs, n, 0)).collect();
    let statuses = flood(sink.addr, &bodies, 4);
    assert!(statuses.iter().all(|&s| s == 201), "{statuses:?}");
    assert_eq!(rows(&database).0, 1101);

    // The API: pages of 100 by cursor, newest first.
    let mut url = "/api/reports".to_string();
    let mut pages = 0;
    let mut seen = 0;
    let found = loop {
        let (code, text) = sink.get(&url);
        assert_eq!(code, 200, "{url}: {text}");
        let page: serde_json::Value = serde_json::from_str(&text).unwrap();
        let lines = page["reports"].as_array().unwrap();
        assert!(lines.len() <= 100);
        pages += 1;
        seen += lines.len();
        if lines.iter().any(|l| l["id"] == real_id.as_str()) {
            break true;
        }
        match page["older_url"].as_str() {
            Some(next) => url = next.to_string(),
            None => break false,
        }
    };
    assert!(found, "the real report was not reachable");
    assert_eq!((pages, seen), (12, 1101), "the oldest is on the last page");

    // The HTML page: 100 lines and an "older" link, followed to the end.
    let mut path_q = "/".to_string();
    let mut html_pages = 0;
    loop {
        let (code, page) = sink.get(&path_q);
        assert_eq!(code, 200);
        html_pages += 1;
        if page.contains(&real_id) {
            break;
        }
        assert_eq!(page.matches("<tr><td>").count(), 100);
        let next = page
            .split("rel=\"next\" href=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .expect("an older link");
        path_q = format!("/{next}");
        assert!(html_pages < 20);
    }
    assert_eq!(html_pages, 12);
    // Another page size is kept by the links.
    let page: serde_json::Value =
        serde_json::from_str(&sink.get("/api/reports?limit=500").1).unwrap();
    assert_eq!(page["reports"].as_array().unwrap().len(), 500);
    let next = page["older_url"].as_str().unwrap().to_string();
    assert!(next.ends_with("&limit=500"), "{next}");
    let page: serde_json::Value = serde_json::from_str(&sink.get(&next).1).unwrap();
    assert_eq!(page["reports"].as_array().unwrap().len(), 500);
    assert_eq!(sink.get("/api/reports?before=nonsense").0, 400);
    sink.stop();
    let _ = std::fs::remove_file(&path);
}

/// Reports older than `--retention` are deleted on schedule, with their
/// accusations, and counted.
fn reports_expire(database: &str) {
    let (report, _lineup) = make_report(111);
    let sink = Sink::start(database, &["--rate", "1000", "--retention", "2s"]);
    for n in 0..3 {
        assert_eq!(sink.post(MEDIA_TYPE, &minted(&report, n, 0)).0, 201);
    }
    // Wait for the sweep's count (it runs every second), bounded.
    let deadline = Instant::now() + Duration::from_secs(60);
    while sink.metric("gnomon_reports_expired_total") < 3 {
        assert!(Instant::now() < deadline, "the reports never expired");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(rows(database), (0, 0));
    assert_eq!(sink.metric("gnomon_reports_stored_bytes"), 0);
    sink.stop();
}

#[test]
fn reports_expire_on_sqlite() {
    let path = temp("sink-expire.db");
    reports_expire(&format!("sqlite:{}", path.display()));
    let _ = std::fs::remove_file(&path);
}

#[test]
fn reports_expire_on_postgres() {
    match gnomon_testkit::postgres::Postgres::start() {
        Ok(pg) => reports_expire(&pg.url()),
        Err(why) => gnomon_testkit::skip("reports_expire_on_postgres", &why),
    }
}

/// Figures, not a check (`cargo test -p gnomon --test cli -- report_server::
/// --ignored --nocapture`): the bytes 1,100 padded valid reports from one
/// /24 leave in the store, and the CPU of 200 `/verify` answers. With
/// GNOMON_SINK_BIN naming an older `gnomon`, the same against it (flags it
/// does not know are left out).
#[test]
#[ignore = "figures for docs; run by hand"]
fn figures_under_a_report_flood() {
    let _heavy = crate::heavy();
    let bin = std::env::var("GNOMON_SINK_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_gnomon").to_string());
    let (report, _lineup) = make_report(121);
    let path = temp("sink-figures.db");
    let database = format!("sqlite:{}", path.display());
    let sink = Sink::start_bin(&bin, &database, &["--rate", "100000"]);
    let bodies: Vec<Vec<u8>> = (0..1100).map(|n| minted(&report, n, 60_000)).collect();
    let sent: usize = bodies.iter().map(Vec::len).sum();
    let started = Instant::now();
    let statuses = flood(sink.addr, &bodies, 4);
    let took = started.elapsed();
    let stored = statuses.iter().filter(|&&s| s == 201).count();
    let (_, body) = sink.post(MEDIA_TYPE, &bodies[0]);
    let id = field(&body, "id");
    let cpu = cpu_ticks(sink.child.id());
    for _ in 0..200 {
        assert_eq!(sink.get(&format!("/reports/{id}/verify")).0, 200);
    }
    let cpu = cpu_ticks(sink.child.id()) - cpu;
    sink.stop();
    let file = std::fs::metadata(&path).map_or(0, |m| m.len());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Opening migrates an older database: its sizes are the bodies' lengths.
    let bytes = rt.block_on(async {
        let store = Store::open(&database).await.unwrap();
        let u = store.report_usage("").await.unwrap();
        store.close().await;
        u.total
    });
    eprintln!(
        "{bin}: 1,100 padded reports ({sent} bytes) in {took:?}: {stored} stored, \
         {bytes} bytes of reports, database file {file} bytes; \
         200 /verify: {} ms CPU ({:.2} ms each)",
        cpu * 10,
        cpu as f64 * 10.0 / 200.0
    );
    let _ = std::fs::remove_file(&path);
}
