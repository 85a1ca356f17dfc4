//! The store's API, one test body per behaviour run against SQLite (a file
//! in a temp dir) and PostgreSQL (a real server from Debian's package,
//! started by gnomon_testkit::postgres, or a plain skip where it cannot).

use gnomon_watch::store::{Cursor, PageAt, Table};
use gnomon_watch::{Inserted, NewReport, Observation, ServerRow, Store, StoredPublication};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Runs `body` against a fresh SQLite file, then against a fresh
/// PostgreSQL database (or reports the skip).
fn on_both<F, Fut>(name: &str, body: F)
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite:{}", dir.path().join("watch.db").display());
    runtime().block_on(body(url));
    match gnomon_testkit::postgres::Postgres::start() {
        Ok(pg) => runtime().block_on(body(pg.url())),
        Err(why) => gnomon_testkit::skip(&format!("{name} (postgres)"), &why),
    }
}

fn server(name: &str, seen_us: i64) -> ServerRow {
    ServerRow {
        name: name.into(),
        public_key: format!("key-of-{name}"),
        addresses: r#"[{"protocol":"udp","address":"127.0.0.1:2002"}]"#.into(),
        seen_us,
    }
}

#[test]
fn servers_and_observations_round_trip() {
    on_both("servers_and_observations_round_trip", |url| async move {
        let store = Store::open(&url).await.expect("open");
        store.upsert_server(&server("b", 10)).await.unwrap();
        store.upsert_server(&server("a", 10)).await.unwrap();
        store.upsert_server(&server("a", 20)).await.unwrap();
        let servers = store.servers().await.unwrap();
        assert_eq!(
            servers
                .iter()
                .map(|s| (s.name.as_str(), s.seen_us))
                .collect::<Vec<_>>(),
            [("a", 20), ("b", 10)]
        );

        let mut full = Observation::new("a", "rfc", "udp", 1_000, "ok");
        full.detail = Some("détail".into());
        full.rtt_us = Some(1234);
        full.offset_us = Some(-5_000_000_000);
        full.radius_us = Some(1_000_000);
        full.cert_min_us = Some(0);
        full.cert_max_us = Some(i64::MAX);
        full.response = Some(vec![0, 1, 0xfe, 0xff]);
        assert!(store.insert_observation(&full).await.unwrap());
        // The same key again changes nothing.
        let mut again = full.clone();
        again.result = "timeout".into();
        assert!(!store.insert_observation(&again).await.unwrap());
        let bare = Observation::new("a", "rfc", "udp", 2_000, "timeout");
        assert!(store.insert_observation(&bare).await.unwrap());
        let other = Observation::new("a", "draft-12", "tcp", 1_500, "ok");
        assert!(store.insert_observation(&other).await.unwrap());

        let history = store.observations("a", 0, 100).await.unwrap();
        assert_eq!(history, [full.clone(), other.clone(), bare.clone()]);
        assert_eq!(
            store.observations("a", 1_600, 100).await.unwrap(),
            std::slice::from_ref(&bare)
        );
        assert_eq!(store.observations("a", 0, 1).await.unwrap(), [full.clone()]);
        assert_eq!(store.latest_observations().await.unwrap(), [other, bare]);
        assert_eq!(store.count(Table::Observations).await.unwrap(), 3);
        // An observation of a server never upserted is refused.
        assert!(store
            .insert_observation(&Observation::new("nobody", "rfc", "udp", 1, "ok"))
            .await
            .is_err());
        store.close().await;

        // Reopening migrates nothing twice and keeps everything.
        let store = Store::open(&url).await.expect("reopen");
        assert_eq!(store.count(Table::Observations).await.unwrap(), 3);
        assert_eq!(store.count(Table::Servers).await.unwrap(), 2);
        store.close().await;
    });
}

fn report(id: &str, accused: &[&str]) -> NewReport {
    NewReport {
        id: id.into(),
        received_us: 42,
        sender_prefix: "127.0.0.0/24".into(),
        body: "{\"responses\": []}\n".into(),
        verdict: "malfeasance".into(),
        entries: 2,
        contradictions: 1,
        accused: accused.iter().map(|s| s.to_string()).collect(),
        check_json: None,
    }
}

#[test]
fn reports_deduplicate_and_list_by_accused() {
    on_both(
        "reports_deduplicate_and_list_by_accused",
        |url| async move {
            let store = Store::open(&url).await.expect("open");
            let r1 = report("r1", &["k2", "k1"]);
            assert_eq!(store.insert_report(&r1).await.unwrap(), Inserted::New);
            let mut replay = report("r1", &["k3"]);
            replay.body = "different".into();
            assert_eq!(
                store.insert_report(&replay).await.unwrap(),
                Inserted::Duplicate
            );
            assert_eq!(store.count(Table::Reports).await.unwrap(), 1);
            assert_eq!(store.count(Table::ReportAccused).await.unwrap(), 2);
            let got = store.report("r1").await.unwrap().expect("stored");
            assert_eq!(got.body, r1.body, "the body exactly as received");
            assert_eq!(got.accused, ["k1", "k2"]);
            assert_eq!(store.report("r2").await.unwrap(), None);

            let mut r2 = report("r2", &["k1"]);
            r2.received_us = 50;
            store.insert_report(&r2).await.unwrap();
            let list: Vec<_> = store
                .reports_by_accused(100)
                .await
                .unwrap()
                .into_iter()
                .map(|s| (s.accused, s.id))
                .collect();
            let want = [("k1", "r2"), ("k1", "r1"), ("k2", "r1")];
            assert_eq!(list, want.map(|(a, b)| (a.to_string(), b.to_string())));
            store.close().await;
        },
    );
}

/// The key a monitor judged lying is marked on the report's line; the
/// other keys of the pair, and other reports, stay unmarked.
#[test]
fn the_judged_key_is_marked_and_only_it() {
    on_both("the_judged_key_is_marked_and_only_it", |url| async move {
        let store = Store::open(&url).await.expect("open");
        store
            .insert_report(&report("r1", &["k1", "k2"]))
            .await
            .unwrap();
        let mut r2 = report("r2", &["k1", "k3"]);
        r2.received_us = 50;
        store.insert_report(&r2).await.unwrap();
        assert!(store.mark_judged("r1", "k2").await.unwrap());
        assert!(!store.mark_judged("r1", "k3").await.unwrap(), "not accused");
        let page = store.reports_page(&PageAt::Newest, 10).await.unwrap();
        let line = |id: &str| page.lines.iter().find(|l| l.id == id).unwrap();
        assert_eq!(line("r1").accused, ["k1", "k2"]);
        assert_eq!(line("r1").judged, ["k2"]);
        assert!(line("r2").judged.is_empty());
        store.close().await;
    });
}

/// Pages of the newest-first list reach every report once, forwards and
/// back; sizes add up per sender; retention deletes by age, with the
/// accusations.
#[test]
fn reports_page_sum_and_expire() {
    on_both("reports_page_sum_and_expire", |url| async move {
        let store = Store::open(&url).await.expect("open");
        let id = |i: u32| format!("{i:064x}");
        for i in 0..25u32 {
            let mut r = report(&id(i), &["k1", "k2"]);
            // Pairs share a time: the id breaks the tie.
            r.received_us = 1_000 + i64::from(i / 2);
            r.body = "x".repeat(10 + i as usize);
            r.sender_prefix = if i % 5 == 0 { "a/24" } else { "b/24" }.into();
            // Stored with its check, but for one from before checks were.
            r.check_json = (i != 3).then(|| "{\"valid\":true}".into());
            assert_eq!(store.insert_report(&r).await.unwrap(), Inserted::New);
        }
        let mut at = PageAt::Newest;
        let mut seen = Vec::new();
        let mut pages = Vec::new();
        loop {
            let page = store.reports_page(&at, 10).await.unwrap();
            assert!(page.lines.len() <= 10);
            assert!(page.lines.iter().all(|l| l.accused == ["k1", "k2"]));
            seen.extend(page.lines.iter().map(|l| l.id.clone()));
            pages.push(page.clone());
            if !page.older {
                break;
            }
            at = PageAt::Before(Cursor::at(page.lines.last().unwrap()));
        }
        let want: Vec<String> = (0..25u32).rev().map(id).collect();
        assert_eq!(seen, want, "newest first, each once");
        assert_eq!(pages.len(), 3);
        assert!(!pages[0].newer && pages[2].newer);
        // Back from the last page to the middle one.
        let first_of_last = Cursor::at(&pages[2].lines[0]);
        let back = store
            .reports_page(&PageAt::After(first_of_last), 10)
            .await
            .unwrap();
        assert_eq!(back, pages[1]);
        let text = Cursor::at(&pages[1].lines[0]).to_string();
        assert_eq!(Cursor::parse(&text), Some(Cursor::at(&pages[1].lines[0])));
        assert_eq!(Cursor::parse("12-zz"), None);

        let usage = store.report_usage("a/24").await.unwrap();
        // The body and the check.
        let size = |i: u32| 10 + i64::from(i) + if i == 3 { 0 } else { 14 };
        assert_eq!(usage.total, (0..25).map(size).sum::<i64>());
        assert_eq!(
            usage.source,
            [0, 5, 10, 15, 20].map(size).iter().sum::<i64>()
        );
        let check_of = |id: String| {
            let store = store.clone();
            async move { store.report(&id).await.unwrap().unwrap().check_json }
        };
        assert_eq!(check_of(id(4)).await.as_deref(), Some("{\"valid\":true}"));
        assert_eq!(check_of(id(3)).await, None);
        let before = store.report_usage("").await.unwrap().total;
        store.set_report_check(&id(3), "{}").await.unwrap();
        assert_eq!(check_of(id(3)).await.as_deref(), Some("{}"));
        let after = store.report_usage("").await.unwrap().total;
        assert_eq!(after, before + 2, "the check's bytes are counted");
        // A stored check is never replaced.
        store.set_report_check(&id(3), "{\"x\":1}").await.unwrap();
        assert_eq!(check_of(id(3)).await.as_deref(), Some("{}"));
        assert!(store.has_report(&id(3)).await.unwrap());

        // Older than 1_005: ids 0..=9.
        assert_eq!(store.expire_reports(1_005).await.unwrap(), 10);
        assert_eq!(store.count(Table::Reports).await.unwrap(), 15);
        assert_eq!(store.count(Table::ReportAccused).await.unwrap(), 30);
        assert!(!store.has_report(&id(3)).await.unwrap());
        store.close().await;
    });
}

#[test]
fn an_unknown_url_is_refused() {
    let err = runtime().block_on(Store::open("mysql://x")).unwrap_err();
    assert!(err.to_string().contains("sqlite:PATH"), "{err}");
}

/// A server page reads a bounded summary of its window, not every row: a
/// store holding thousands of rounds (and rows older than the window,
/// and rows of other checks) yields at most `MAX_POINTS` points, the
/// newest rounds among them, and the uptime of exactly the window's
/// rounds.
#[test]
fn history_is_read_as_a_bounded_summary_of_its_window() {
    use gnomon_watch::history::{self, MAX_POINTS, PROBE, WINDOW};
    on_both(
        "history_is_read_as_a_bounded_summary_of_its_window",
        |url| async move {
            let store = Store::open(&url).await.expect("open");
            store.upsert_server(&server("busy", 1)).await.unwrap();
            let minute = 60_000_000i64;
            let now = 1_800_000_000_000_000i64;
            let window = WINDOW.as_micros() as i64;
            let mut rows = Vec::new();
            // Before the window: every round down; none may count.
            for i in 0..144 {
                let t = now - window - minute - i * 10 * minute;
                rows.push(Observation::new("busy", "rfc", PROBE, t, "silent"));
            }
            // Two days of 1-minute rounds, one in four down, each with a
            // family row that is not a round.
            let rounds = 2 * 1440;
            for i in 0..rounds {
                let t = now - i * minute;
                let mut o = Observation::new(
                    "busy",
                    "rfc",
                    PROBE,
                    t,
                    if i % 4 == 0 { "silent" } else { "ok" },
                );
                o.rtt_us = Some(1000);
                rows.push(o);
                rows.push(Observation::new(
                    "busy",
                    "google",
                    "answers",
                    t,
                    "no_answer",
                ));
            }
            assert_eq!(store.insert_observations(&rows).await.unwrap(), rows.len());

            let w = history::points(&store, "busy", now).await.unwrap();
            assert_eq!(w.rounds, rounds as u64);
            assert_eq!(w.up, (rounds - rounds / 4) as u64);
            assert!(
                !w.points.is_empty() && w.points.len() <= MAX_POINTS as usize,
                "{} points",
                w.points.len()
            );
            // Oldest first, reaching the newest rounds, RTT averaged.
            assert!(w.points.windows(2).all(|p| p[0].at_us < p[1].at_us));
            let last = w.points.last().unwrap();
            assert!(
                now - last.at_us <= 2 * rounds * minute / MAX_POINTS,
                "{last:?}"
            );
            assert_eq!(w.points[0].at_us, now - (rounds - 1) * minute);
            assert!(w.points.iter().all(|p| p.rtt_us == Some(1000)));
            // A short history is plotted round by round.
            store.upsert_server(&server("new", 1)).await.unwrap();
            let few: Vec<Observation> = (0..10)
                .map(|i| Observation::new("new", "rfc", PROBE, now - i * minute, "ok"))
                .collect();
            store.insert_observations(&few).await.unwrap();
            let w = history::points(&store, "new", now).await.unwrap();
            assert_eq!((w.points.len(), w.rounds, w.up), (10, 10, 10));
        },
    );
}

/// A database made by a build before migration 0002 (only 0001 applied,
/// a report stored with its body exactly as received, padding and all)
/// opens with this build: the report keeps its body, its size is the
/// body's length (so the quotas count it), and it has no stored check
/// until one is set.
#[test]
fn a_database_from_before_the_quotas_migrates() {
    on_both(
        "a_database_from_before_the_quotas_migrates",
        |url| async move {
            // Only 0001, applied by sqlx's migrator from a directory holding
            // just that file, as an older build would have.
            let dir = tempfile::tempdir().expect("tempdir");
            let first = "0001_initial.sql";
            let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
            std::fs::copy(src.join(first), dir.path().join(first)).unwrap();
            sqlx::any::install_default_drivers();
            let sql_url = if url.starts_with("sqlite:") {
                format!("{url}?mode=rwc")
            } else {
                url.clone()
            };
            let pool = sqlx::any::AnyPoolOptions::new()
                .max_connections(1)
                .connect(&sql_url)
                .await
                .unwrap();
            sqlx::migrate::Migrator::new(dir.path())
                .await
                .unwrap()
                .run(&pool)
                .await
                .unwrap();
            let padded = format!("{{\"responses\": []}}{}", " ".repeat(5000));
            sqlx::query(
                "INSERT INTO reports (id, received_us, sender_prefix, body, verdict, entries, \
             contradictions) VALUES ('old', 1, 'a/24', $1, 'malfeasance', 2, 1)",
            )
            .bind(&padded)
            .execute(&pool)
            .await
            .unwrap();
            pool.close().await;

            let store = Store::open(&url).await.expect("migrates");
            let old = store.report("old").await.unwrap().expect("kept");
            assert_eq!(old.body, padded);
            assert_eq!(old.check_json, None);
            let usage = store.report_usage("a/24").await.unwrap();
            assert_eq!((usage.total, usage.source), (5017, 5017));
            store.set_report_check("old", "{}").await.unwrap();
            assert_eq!(store.report_usage("").await.unwrap().total, 5019);
            store.close().await;
        },
    );
}

/// The last publication per monitor key only moves up: a process behind
/// another under the same key cannot put an older list back.
async fn publications_only_move_up(url: String) {
    let store = Store::open(&url).await.expect("open");
    assert_eq!(store.last_publication("K").await.unwrap(), None);
    let p = |sequence: u64, document: &str| StoredPublication {
        monitor_key: "K".into(),
        sequence,
        published_us: 1_000_000,
        expires_us: 2_000_000,
        document: document.into(),
        signature: "-----BEGIN SSH SIGNATURE-----".into(),
    };
    assert!(store.save_publication(&p(10, "ten")).await.unwrap());
    assert!(store.save_publication(&p(11, "eleven")).await.unwrap());
    // Another process under the same key, behind: kept out.
    assert!(!store.save_publication(&p(11, "again")).await.unwrap());
    assert!(!store.save_publication(&p(3, "old")).await.unwrap());
    let last = store.last_publication("K").await.unwrap().unwrap();
    assert_eq!((last.sequence, last.document.as_str()), (11, "eleven"));
    let mut other = p(1, "other key");
    other.monitor_key = "L".into();
    assert!(store.save_publication(&other).await.unwrap());
    assert_eq!(store.count(Table::Publications).await.unwrap(), 2);
    store.close().await;
}

/// The publisher's summary of a server's window, and only the reports in
/// which this monitor judged its key.
async fn the_window_is_summed(url: String) {
    let store = Store::open(&url).await.expect("open");
    store
        .upsert_server(&ServerRow {
            name: "a".into(),
            public_key: "KEY".into(),
            addresses: "[]".into(),
            seen_us: 0,
        })
        .await
        .unwrap();
    let mut rows = Vec::new();
    for (t, ok, rtt) in [(10, true, 5), (20, false, 0), (30, true, 7), (40, true, 9)] {
        let mut o = Observation::new(
            "a",
            "rfc-10049",
            "probe",
            t,
            if ok { "ok" } else { "silent" },
        );
        o.rtt_us = ok.then_some(rtt);
        rows.push(o);
    }
    store.insert_observations(&rows).await.unwrap();
    let w = store.probe_window("a", "probe", 20, 2).await.unwrap();
    assert_eq!((w.rounds, w.answered), (3, 2));
    assert_eq!(w.rtts_us, [9, 7], "newest first, at most the limit");
    assert_eq!((w.first_seen_us, w.last_seen_us), (Some(10), Some(40)));
    // Judged reports only: an accusation without the judgment is not a
    // proof against this key.
    let report = |id: &str| NewReport {
        id: id.into(),
        received_us: 100,
        sender_prefix: "local".into(),
        body: "{}".into(),
        verdict: "malfeasance".into(),
        entries: 2,
        contradictions: 1,
        accused: vec!["KEY".into(), "OTHER".into()],
        check_json: None,
    };
    store.insert_report(&report("r1")).await.unwrap();
    store.insert_report(&report("r2")).await.unwrap();
    assert!(store.mark_judged("r2", "KEY").await.unwrap());
    assert_eq!(
        store.judged_reports("KEY", 10).await.unwrap(),
        [("r2".to_string(), 100)]
    );
    assert!(store.judged_reports("OTHER", 10).await.unwrap().is_empty());
    store.close().await;
}

#[test]
fn publications_only_move_up_per_key() {
    on_both(
        "publications_only_move_up_per_key",
        publications_only_move_up,
    );
}

#[test]
fn the_publishers_window_is_summed() {
    on_both("the_publishers_window_is_summed", the_window_is_summed);
}
