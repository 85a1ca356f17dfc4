//! `gnomon report-server`: a real sink process on loopback, fed a real
//! malfeasance report by a real `gnomon query --report`, and fed forged,
//! truncated, oversized, mistyped and replayed ones by hand. The same test
//! body runs on SQLite and on PostgreSQL (gnomon_testkit::postgres).
//!
//! Here the sink, the requests made to it and what it stores, shared; the
//! tests by what they try: `lifecycle` (one real report, end to end, and
//! `gnomon sync` posting one), `limits` (what one source may hold: the
//! rate, its table, connections, a body's time) and `storage` (floods of
//! valid reports: unwatched servers, the quotas, the pages, retention).

use gnomon_testkit::Reaped;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gnomon_watch::store::Table;
use gnomon_watch::Store;

mod lifecycle;
mod limits;
mod storage;

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
            .map(Reaped)
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
                    if let Some((_, rest)) = line.split_once(" listening on ") {
                        break rest.split(';').next().unwrap().parse().expect("address");
                    }
                    seen.push(line);
                }
                Err(_) => {
                    let _ = child.kill();
                    panic!("report-server did not start: {seen:?}");
                }
            }
        };
        Sink { child, addr }
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

fn field(body: &str, key: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("{body}"));
    let s = v[key]
        .as_str()
        .unwrap_or_else(|| panic!("no {key} in {body}"));
    s.to_string()
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
