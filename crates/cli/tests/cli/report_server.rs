//! `gnomon report-server`: a real sink process on loopback, fed a real
//! malfeasance report by a real `gnomon query --report`, and fed forged,
//! truncated, oversized, mistyped and replayed ones by hand. The same test
//! body runs on SQLite and on PostgreSQL (gnomon_testkit::postgres).

use crate::client_support;

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
        Sink::start_bin(env!("CARGO_BIN_EXE_gnomon"), database, extra)
    }

    /// [`Sink::start`] with another `gnomon` binary (an older build, to
    /// compare figures).
    fn start_bin(bin: &str, database: &str, extra: &[&str]) -> Sink {
        let mut child = gnomon_testkit::command(bin)
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
        let (status, _, body) =
            exchange(TcpStream::connect(self.addr).expect("connect"), head, body);
        (status, body)
    }

    fn post(&self, content_type: &str, body: &[u8]) -> (u16, String) {
        post_from(self.addr, None, content_type, body)
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

/// One request on `s`: the status, the head and the body of the answer.
fn exchange(mut s: TcpStream, head: &str, body: &[u8]) -> (u16, String, String) {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
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
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (status, head.to_string(), body.to_string())
}

/// A POST of `body` to `addr`'s /reports, from `from` (a loopback address
/// of another /24) or the default source.
fn post_from(
    addr: SocketAddr,
    from: Option<&str>,
    content_type: &str,
    body: &[u8],
) -> (u16, String) {
    let (status, _, answer) = post_head(addr, from, content_type, body);
    (status, answer)
}

/// As [`post_from`], with the answer's head.
fn post_head(
    addr: SocketAddr,
    from: Option<&str>,
    content_type: &str,
    body: &[u8],
) -> (u16, String, String) {
    let stream = match from {
        None => TcpStream::connect(addr).expect("connect"),
        Some(ip) => {
            let s =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            s.bind(&format!("{ip}:0").parse::<SocketAddr>().unwrap().into())
                .unwrap();
            s.connect(&addr.into()).unwrap();
            s.into()
        }
    };
    let head = format!(
        "POST /reports HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    exchange(stream, &head, body)
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

/// User and system CPU of process `pid` so far, in clock ticks (1/100 s).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command's closing parenthesis; utime and stime are
    // the 14th and 15th of the line.
    let rest = stat.rsplit_once(')').unwrap().1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// The report as the sink keeps it: parsed and written back.
fn canonical(report: &[u8]) -> Vec<u8> {
    match gnomon_protocol::parse_report(report) {
        Ok(gnomon_protocol::report::ParsedReport::Current(r)) => r.to_json().into_bytes(),
        other => panic!("not a current report: {other:?}"),
    }
}

/// The bytes the sink stores for `report`: its canonical JSON and the
/// check made on arrival (what the quotas count).
fn stored_size(report: &[u8]) -> u64 {
    let r = gnomon_client::report_check::parse_verifiable(report).unwrap();
    let check = gnomon_client::report_check::check_json(&r, &r.verify()).to_string();
    (canonical(report).len() + check.len()) as u64
}

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
    let path = temp("sink-quota.db");
    padded_flood_stops_at_the_quotas(&format!("sqlite:{}", path.display()));
    let _ = std::fs::remove_file(&path);
}

#[test]
fn padded_flood_stops_at_the_quotas_on_postgres() {
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

/// When the rate-limit table is full (`--rate-table`), a newcomer takes
/// the place of the prefix seen least recently (counted) instead of being
/// refused.
#[test]
fn a_full_rate_table_evicts_the_least_recently_seen() {
    let path = temp("sink-lru.db");
    let sink = Sink::start(
        &format!("sqlite:{}", path.display()),
        &["--rate", "1", "--rate-table", "2"],
    );
    let post = |from: &str| post_from(sink.addr, Some(from), "text/plain", b"x").0;
    let (a, b, c) = ("127.0.0.1", "127.0.1.1", "127.0.2.1");
    assert_eq!(post(a), 415, "a's one token");
    assert_eq!(post(b), 415, "b's one token");
    assert_eq!(post(a), 429, "a is out of tokens (and seen again)");
    assert_eq!(post(c), 415, "a newcomer to a full table is let in");
    assert_eq!(sink.metric("gnomon_report_rate_table_evictions_total"), 1);
    assert_eq!(post(a), 429, "a, seen recently, was kept");
    assert_eq!(post(b), 415, "b, seen least recently, was the one evicted");
    assert_eq!(sink.metric("gnomon_report_rate_table_evictions_total"), 2);
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
