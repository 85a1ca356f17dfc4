//! `gnomon report-server`: a real sink process on loopback, fed a real
//! malfeasance report by a real `gnomon query --report`, and fed forged,
//! truncated, oversized, mistyped and replayed ones by hand. The same test
//! body runs on SQLite and on PostgreSQL (gnomon_testkit::postgres).

mod client_support;

use gnomon_testkit::Reaped;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use client_support::{gnomon, liar_lineup, temp, FAST};
use gnomon_protocol::report::MEDIA_TYPE;
use gnomon_watch::store::Table;
use gnomon_watch::Store;

/// Generous: the sink is up in well under a second on an idle machine.
const START_DEADLINE: Duration = Duration::from_secs(60);

/// A running `gnomon report-server`, stopped (SIGTERM, then SIGKILL) on drop.
struct Sink {
    child: Reaped,
    addr: SocketAddr,
}

impl Sink {
    fn start(database: &str, extra: &[&str]) -> Sink {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gnomon"))
            .args([
                "report-server",
                "--listen",
                "127.0.0.1:0",
                "--database",
                database,
            ])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start report-server");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + START_DEADLINE;
        let mut seen = Vec::new();
        let addr = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix("gnomon report-server: listening on ") {
                        break rest.split(',').next().unwrap().parse().expect("address");
                    }
                    seen.push(line);
                }
                Err(_) => {
                    let _ = child.kill();
                    panic!("report-server did not start: {seen:?}");
                }
            }
        };
        Sink {
            child: child.into(),
            addr,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/reports", self.addr)
    }

    /// One request; the answer's status and body (the sink closes every
    /// connection after one answer).
    fn request(&self, head: &str, body: &[u8]) -> (u16, String) {
        let mut s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(head.as_bytes()).unwrap();
        let _ = s.write_all(body);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).into_owned();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status line: {text:?}"));
        let body = text
            .split_once("\r\n\r\n")
            .map_or("", |(_, b)| b)
            .to_string();
        (status, body)
    }

    fn post(&self, content_type: &str, body: &[u8]) -> (u16, String) {
        let head = format!(
            "POST /reports HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        self.request(&head, body)
    }

    fn get(&self, path: &str) -> (u16, String) {
        self.request(&format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"), b"")
    }

    fn metric(&self, name: &str) -> u64 {
        let (code, text) = self.get("/metrics");
        assert_eq!(code, 200);
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    }

    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                assert!(status.success(), "report-server exited with {status}");
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("report-server did not stop on SIGTERM");
    }
}

fn rows(url: &str) -> (i64, i64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = Store::open(url).await.expect("open store");
        let n = (
            store.count(Table::Reports).await.unwrap(),
            store.count(Table::ReportAccused).await.unwrap(),
        );
        store.close().await;
        n
    })
}

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

fn field(body: &str, key: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("{body}"));
    let s = v[key]
        .as_str()
        .unwrap_or_else(|| panic!("no {key} in {body}"));
    s.to_string()
}

/// The whole life of the sink against one database.
fn sink_lifecycle(database: &str) {
    let sink = Sink::start(database, &["--rate", "1000"]);
    let (report, liar_key) = report_a_liar(&sink, 31);
    // The liar contradicts each of the three honest servers: every key on
    // either side of a contradicting pair is listed.
    assert_eq!(rows(database), (1, 4), "one report, four keys in its pairs");
    assert_eq!(sink.metric("gnomon_reports_accepted_total"), 1);

    // The report is served exactly as received and verifies again.
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
    assert_eq!(raw.as_bytes(), report.as_slice());
    let (code, check) = sink.get(&format!("/reports/{id}/verify"));
    assert_eq!(code, 200, "{check}");
    let check: serde_json::Value = serde_json::from_str(&check).unwrap();
    assert_eq!(check["proof_of_malfeasance"], true, "{check}");
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
    assert_eq!(raw.as_bytes(), report.as_slice());
    assert_eq!(sink.metric("gnomon_reports_stored"), 1);
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
fn sink_limits_rate_per_prefix() {
    let path = temp("sink-rate.db");
    let sink = Sink::start(&format!("sqlite:{}", path.display()), &["--rate", "2"]);
    assert_eq!(sink.post("text/plain", b"x").0, 415);
    assert_eq!(sink.post("text/plain", b"x").0, 415);
    let (code, body) = sink.post(MEDIA_TYPE, b"{}");
    assert_eq!(
        (code, field(&body, "reason").as_str()),
        (429, "rate_limited"),
        "{body}"
    );
    // Another /24 has its own allowance.
    let other = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    other
        .bind(&"127.0.1.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    other.connect(&sink.addr.into()).unwrap();
    let mut s: TcpStream = other.into();
    s.write_all(b"POST /reports HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 1\r\n\r\nx")
        .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 415"), "{out}");
    assert_eq!(
        sink.metric("gnomon_reports_rejected_total{reason=\"rate_limited\"}"),
        1
    );
    sink.stop();
    let _ = std::fs::remove_file(&path);
}

#[test]
fn sink_evicts_idle_connections_for_a_request() {
    let path = temp("sink-conn.db");
    let sink = Sink::start(
        &format!("sqlite:{}", path.display()),
        &["--max-connections", "2"],
    );
    // Two connections that send nothing hold both slots...
    let idle: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(sink.addr).unwrap())
        .collect();
    // ...and a request is still answered: the oldest of them, which has
    // not sent a request, is closed to make room.
    assert_eq!(sink.get("/metrics").0, 200);
    let mut buf = [0u8; 64];
    let mut oldest = &idle[0];
    oldest
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    assert_eq!(
        oldest.read(&mut buf).unwrap_or(0),
        0,
        "closed without an answer"
    );
    assert!(
        sink.metric("gnomon_report_sink_connections_evicted_total{reason=\"per_source\"}") >= 1
    );
    assert_eq!(
        sink.metric("gnomon_report_sink_connections_refused_total"),
        0
    );

    sink.stop();
    let _ = std::fs::remove_file(&path);
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
    assert_eq!(raw.as_bytes(), std::fs::read(&written).unwrap().as_slice());
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

#[test]
fn a_trickled_body_is_cut_off_and_others_are_served_meanwhile() {
    let path = temp("sink-slow.db");
    let database = format!("sqlite:{}", path.display());
    let sink = Sink::start(&database, &[]);
    let mut slow = TcpStream::connect(sink.addr).unwrap();
    slow.write_all(
        format!(
            "POST /reports HTTP/1.1\r\nHost: x\r\nContent-Type: {MEDIA_TYPE}\r\nContent-Length: 1000\r\n\r\n{{"
        )
        .as_bytes(),
    )
    .unwrap();
    // The sink answers others while this body is pending.
    assert_eq!(sink.get("/metrics").0, 200);
    // One more byte now and then until the sink hangs up (bounded: the
    // sink's deadline is 10 s after accept).
    let started = Instant::now();
    slow.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 256];
    let cut = loop {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "a trickled body held its connection"
        );
        if slow.write_all(b" ").is_err() {
            break true;
        }
        match slow.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => break false,
            Err(_) => {}
        }
    };
    assert!(cut, "the sink answered a body it never got whole");
    assert_eq!(rows(&database), (0, 0));
    sink.stop();
    let _ = std::fs::remove_file(&path);
}
