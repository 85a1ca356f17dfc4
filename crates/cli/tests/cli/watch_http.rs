//! Hostile HTTP against a real `gnomon watch`: slow clients, one source
//! opening more connections than the cap, an oversized head, other methods and paths,
//! and a server list whose names are markup. The page keeps being served
//! and nothing from the list becomes markup or a forged metric line.

use crate::serve_support;
use crate::sync_support;
use crate::watch_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gnomon_testkit::Fixture;
use watch_support::Watch;

/// A name meant to break out of the HTML, the JSON and a metric label.
const EVIL: &str = r#"evil"} 1\n<script>alert(1)</script>"#;

fn watch_one(test: &str) -> (Fixture, Watch, std::path::PathBuf) {
    let fixture = Fixture::honest(gnomon_testkit::modern_profiles(), 3);
    let dir = sync_support::tempdir(test);
    let list = dir.join("servers.json");
    let name = serde_json::to_string(EVIL).unwrap();
    let body = gnomon_testkit::server_list(&[("PLACEHOLDER", &fixture, 1)], None)
        .replace("\"PLACEHOLDER\"", &name);
    std::fs::write(&list, body).unwrap();
    let watch = Watch::start(&list);
    (fixture, watch, dir)
}

/// Bytes until the peer closes (or `within` passes: None).
fn until_closed(mut c: TcpStream, within: Duration) -> Option<Vec<u8>> {
    c.set_read_timeout(Some(within)).unwrap();
    let mut out = Vec::new();
    c.read_to_end(&mut out).ok().map(|_| out)
}

#[test]
fn names_from_the_list_stay_text() {
    let (_f, watch, dir) = watch_one("watch-names");
    watch.first_round(Duration::from_secs(60));
    let (status, page) = watch.get("/");
    assert_eq!(status, 200);
    // One script, the page's own refresh; the name's is text.
    assert_eq!(page.matches("<script").count(), 1, "{page}");
    assert!(!page.contains("<script>alert"), "{page}");
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"),
        "{page}"
    );
    let (_, metrics) = watch.get("/metrics");
    // The quote and backslash are escaped: the name stays inside its label
    // and forges no sample.
    assert!(
        metrics.contains(r#"gnomon_watch_up{server="evil\"} 1\\n<script>alert(1)</script>"} 1"#),
        "{metrics}"
    );
    assert!(!metrics.lines().any(|l| l.starts_with("evil")));
    let (_, api) = watch.get("/api/servers");
    let v: serde_json::Value = serde_json::from_str(&api).unwrap();
    assert_eq!(v["servers"][0]["name"], EVIL);
    // Its page is found by the percent-encoded link.
    let link = v["servers"][0]["link"].as_str().unwrap();
    let (status, page) = watch.get(link);
    assert_eq!(status, 200, "{link}");
    assert_eq!(page.matches("<script").count(), 1, "{page}");
    assert!(page.contains("&lt;script&gt;alert(1)"), "{page}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn slow_crowded_and_oversized_requests_do_not_stop_the_page() {
    let (_f, watch, dir) = watch_one("watch-hostile-http");
    let addr: SocketAddr = watch.addr;

    // A head trickled a byte at a time is cut off by the header timeout.
    let stop = Arc::new(AtomicBool::new(false));
    let slow: Vec<_> = (0..4)
        .map(|_| gnomon_testkit::slowloris(addr, "/", stop.clone()))
        .collect();
    // Meanwhile the page is served.
    let (status, _) = watch.get("/");
    assert_eq!(status, 200);
    for h in slow {
        let lasted = h.join().unwrap().expect("a slow client was never cut off");
        // The 3 s header timeout, with room for a busy machine.
        assert!(lasted < Duration::from_secs(15), "{lasted:?}");
    }

    // An oversized head (past the 8 KiB buffer) is refused, not buffered.
    let mut c = TcpStream::connect(addr).unwrap();
    let big = format!("GET / HTTP/1.1\r\nx-big: {}\r\n\r\n", "a".repeat(64 * 1024));
    let _ = c.write_all(big.as_bytes());
    let answer = until_closed(c, Duration::from_secs(15)).unwrap_or_default();
    let text = String::from_utf8_lossy(&answer);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 431"),
        "{text}"
    );

    // Other methods and paths.
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(b"POST /api/servers HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
        .unwrap();
    let text = String::from_utf8(until_closed(c, Duration::from_secs(10)).unwrap()).unwrap();
    assert!(text.starts_with("HTTP/1.1 405"), "{text}");
    assert_eq!(watch.get("/servers/nobody").0, 404);
    assert_eq!(watch.get("/../../etc/passwd").0, 404);

    // A crowd from one source (127.0.0.2), more idle connections than the
    // whole cap of 64: it keeps only its share of 8, the newest, each
    // newcomer closing its oldest; and the page answers another source
    // (127.0.0.1) at once, while the crowd still holds its share.
    let crowd = std::net::IpAddr::from([127, 0, 0, 2]);
    let idle: Vec<TcpStream> = (0..100)
        .map(|_| serve_support::peer::connect_from(crowd, addr))
        .collect();
    for c in idle.iter().take(100 - 8) {
        let mut c = c.try_clone().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let r = c.read(&mut [0u8; 1]);
        assert!(
            matches!(r, Ok(0)) || r.is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
            "an old connection past the share was kept"
        );
    }
    let mut answered = 0;
    let mut metrics = String::new();
    for _ in 0..10 {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n")
            .unwrap();
        if let Some(b) = until_closed(c, Duration::from_secs(3)) {
            if b.starts_with(b"HTTP/1.1 200") {
                answered += 1;
                metrics = String::from_utf8(b).unwrap();
            }
        }
    }
    assert_eq!(
        answered, 10,
        "the page answered {answered} of 10 beside the crowd"
    );
    let series = |name: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no {name} in {metrics}"))
    };
    let evicted = series("gnomon_watch_http_connections_evicted_total{reason=\"per_source\"}");
    assert!(evicted >= 92, "{evicted} connections evicted");
    assert_eq!(series("gnomon_watch_http_connections_refused_total"), 0);
    drop(idle);
    let _ = std::fs::remove_dir_all(dir);
}

/// Rounds of a server's history its page counts ("Uptime: … of N rounds").
fn history_rounds(watch: &Watch, link: &str) -> u64 {
    let (status, page) = watch.get(link);
    assert_eq!(status, 200, "{page}");
    page.split(" % of ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no round count on {link}: {page}"))
}

/// Two runs of `gnomon watch` on database `url`: the second's history
/// holds the first's rounds and its own.
fn history_survives_a_restart(url: &str) {
    let fixture = Fixture::honest(gnomon_testkit::modern_profiles(), 4);
    let dir = sync_support::tempdir("watch-restart");
    let list = dir.join("servers.json");
    std::fs::write(
        &list,
        gnomon_testkit::server_list(&[("kept", &fixture, 1)], None),
    )
    .unwrap();
    let before = {
        let watch = Watch::start_with(&list, &["--database", url]);
        watch.first_round(Duration::from_secs(60));
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let n = history_rounds(&watch, "/servers/kept");
            if n >= 3 {
                break n;
            }
            assert!(Instant::now() < until, "three rounds never came");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let watch = Watch::start_with(&list, &["--database", url]);
    watch.first_round(Duration::from_secs(60));
    // The rounds of the first run are still there, and the new one added.
    let after = history_rounds(&watch, "/servers/kept");
    assert!(
        after > before,
        "{after} rounds after the restart, {before} before"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn restarting_keeps_the_history_in_sqlite_and_postgresql() {
    let dir = sync_support::tempdir("watch-sqlite");
    let db = dir.join("watch.db");
    history_survives_a_restart(&format!("sqlite:{}", db.display()));
    assert!(db.exists(), "the SQLite file was not created");
    match gnomon_testkit::postgres::Postgres::start() {
        Ok(pg) => history_survives_a_restart(&pg.url()),
        Err(why) => gnomon_testkit::skip(
            "restarting_keeps_the_history_in_sqlite_and_postgresql (postgres)",
            &why,
        ),
    }
    let _ = std::fs::remove_dir_all(dir);
}
