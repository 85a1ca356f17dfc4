//! A lineup of loopback servers for `gnomon watch` to monitor, each in a
//! known state, and `gnomon watch` itself, all stopped when dropped.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gnomon_testkit::{Fixture, FixtureConfig, Mode, Reaped};

use crate::serve_support::{gnomon_ok, keygen, start_serve};
use crate::sync_support::{shift_clock, tempdir};

/// What each server of the lineup is.
pub const HONEST: [&str; 3] = ["honest-rfc", "honest-draft-08", "honest-draft-05"];
pub const LIAR: &str = "liar";
pub const SILENT: &str = "silent";
pub const GARBAGE: &str = "garbage";
pub const EXPIRING: &str = "expiring";

pub struct Lineup {
    children: Vec<Reaped>,
    _fixture: Fixture,
    _silent: UdpSocket,
    pub list: PathBuf,
    pub dir: PathBuf,
}

impl Drop for Lineup {
    fn drop(&mut self) {
        // Stopped before their directory goes.
        self.children.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn entry(name: &str, version: u32, key: &[u8; 32], addr: SocketAddr, tcp: bool) -> String {
    let tcp = if tcp {
        format!(r#",{{"protocol":"tcp","address":"{addr}"}}"#)
    } else {
        String::new()
    };
    format!(
        r#"{{"name":"{name}","version":{version},"publicKeyType":"ed25519","publicKey":"{}","addresses":[{{"protocol":"udp","address":"{addr}"}}{tcp}]}}"#,
        gnomon_testkit::base64(key)
    )
}

/// Start every server: three honest `gnomon serve` on different versions,
/// one 1 h ahead through libfaketime (`with_liar`), one whose only
/// delegation (from `gnomon delegate`) ends in 20 minutes, a socket that
/// never answers, and a fixture answering garbage.
pub fn start(test: &str, with_liar: bool) -> Lineup {
    start_reporting(test, with_liar, None)
}

/// [`start`] with a `reports` URL in the list.
pub fn start_reporting(test: &str, with_liar: bool, reports: Option<&str>) -> Lineup {
    let dir = tempdir(test);
    let mut children = Vec::new();
    let mut entries = Vec::new();
    let unsync = [
        "--workers",
        "1",
        "--clock-unsynchronized",
        "answer-with-radius",
        "--clock-unsynchronized-radius",
        "3s",
    ];
    let mut serve = |name: &str, list_version: u32, extra: &[&str], fake: Option<&str>| {
        let args: Vec<&str> = unsync.iter().chain(extra).copied().collect();
        let started = start_serve(&args, |c| {
            if let Some(f) = fake {
                shift_clock(c, f);
            }
        });
        entries.push(entry(
            name,
            list_version,
            &started.public,
            started.addr,
            true,
        ));
        let mut stderr = started.stderr;
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        children.push(started.child);
    };
    serve(HONEST[0], 1, &[], None);
    serve(HONEST[1], 0x8000_0008, &["--versions", "draft-08"], None);
    serve(HONEST[2], 0x8000_0005, &["--versions", "draft-05"], None);
    if with_liar {
        serve(LIAR, 1, &[], Some("+3600"));
    }
    // One delegation, 20 minutes long, and no long-term key to make more.
    let (key, _) = keygen(&dir);
    let delegations = dir.join("delegations");
    gnomon_ok(&[
        "delegate",
        "--key-file",
        key.to_str().unwrap(),
        "--out-dir",
        delegations.to_str().unwrap(),
        "--validity",
        "20m",
        "--step",
        "20m",
        "--count",
        "1",
    ]);
    std::fs::remove_file(&key).unwrap();
    serve(
        EXPIRING,
        1,
        &["--offline-dir", delegations.to_str().unwrap()],
        None,
    );
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    entries.push(entry(
        SILENT,
        1,
        &[7; 32],
        silent.local_addr().unwrap(),
        false,
    ));
    let fixture = Fixture::start(FixtureConfig {
        mode: Mode::Garbage,
        seed: 9,
        ..FixtureConfig::default()
    });
    entries.push(entry(
        GARBAGE,
        1,
        &fixture.public_key(),
        fixture.addr(),
        true,
    ));
    let list = dir.join("servers.json");
    let reports = reports
        .map(|r| format!(r#","reports":"{r}""#))
        .unwrap_or_default();
    std::fs::write(
        &list,
        format!(r#"{{"servers":[{}]{reports}}}"#, entries.join(",")),
    )
    .unwrap();
    Lineup {
        children,
        _fixture: fixture,
        _silent: silent,
        list,
        dir,
    }
}

/// `gnomon watch`, stopped when dropped.
pub struct Watch {
    child: Reaped,
    pub addr: SocketAddr,
    /// Its stderr lines after the one saying where it listens.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// The thread that reads them: it ends at the pipe's end, after the
    /// last line, so `terminate` waits for it before `log` is read.
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    /// Start watching `list` every second on a loopback port of its own.
    pub fn start(list: &std::path::Path) -> Watch {
        Watch::start_with(list, &[])
    }

    /// [`Watch::start`] with `extra` arguments.
    pub fn start_with(list: &std::path::Path, extra: &[&str]) -> Watch {
        let list = list.to_str().unwrap();
        Watch::start_args(&[&["--servers", list], extra].concat())
    }

    /// [`Watch::start`] with `args` in place of `--servers LIST` (a
    /// monitor of monitors: `--servers-url`).
    pub fn start_args(args: &[&str]) -> Watch {
        let mut child = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
            .arg("watch")
            .args(args)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--interval",
                "1s",
                "--timeout",
                "500ms",
                // The loopback servers answer with at least the kernel's
                // maximum error, up to 16 s on a machine whose clock is
                // not synchronized: past the default limit, which would
                // make every honest server's state depend on the machine.
                "--warn-radius",
                "1m",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map(Reaped)
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut addr = None;
        for line in lines.by_ref() {
            let line = line.unwrap();
            if let Some((_, rest)) = line.split_once("listening on http://") {
                addr = Some(rest.trim_end_matches('/').parse().unwrap());
                break;
            }
        }
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = log.clone();
        let reader = std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                kept.lock().unwrap().push(line);
            }
        });
        Watch {
            addr: addr.expect("gnomon watch says where it listens"),
            child,
            log,
            reader: Some(reader),
        }
    }

    /// Its stderr so far (after the listening line).
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// SIGTERM, then its exit status, within `patience` (a panic if it
    /// is still running then; the drop kills it).
    pub fn terminate(&mut self, patience: Duration) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
        let until = Instant::now() + patience;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Its last lines may still be in the pipe: the reader ends
                // when the pipe does.
                if let Some(r) = self.reader.take() {
                    let _ = r.join();
                }
                return status;
            }
            assert!(
                Instant::now() < until,
                "gnomon watch still runs {patience:?} after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// GET `path`: status and body.
    pub fn get(&self, path: &str) -> (u16, String) {
        get(self.addr, path)
    }

    /// `/api/servers` once a round has finished (at most `patience`).
    pub fn first_round(&self, patience: Duration) -> serde_json::Value {
        self.round_where(patience, |_| true)
    }

    /// The first `/api/servers` after a finished round for which `ready`
    /// holds: a probe that one round lost to a busy machine (a TCP
    /// connection past `--timeout`) is taken again a second later.
    pub fn round_where(
        &self,
        patience: Duration,
        ready: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let until = Instant::now() + patience;
        let mut last = serde_json::Value::Null;
        loop {
            let (status, body) = self.get("/api/servers");
            assert_eq!(status, 200, "{body}");
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            if v["rounds"].as_u64().unwrap_or(0) >= 1 {
                if ready(&v) {
                    return v;
                }
                last = v;
            }
            assert!(
                Instant::now() < until,
                "no round as awaited within {patience:?}; the last: {last}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// A plain HTTP/1.1 GET: status and body.
pub fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    request(addr, &format!("GET {path} HTTP/1.1\r\n"), b"")
}

/// A POST of a malfeasance report: status and body.
pub fn post(addr: SocketAddr, path: &str, body: &[u8]) -> (u16, String) {
    let head = format!(
        "POST {path} HTTP/1.1\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
        gnomon_protocol::report::MEDIA_TYPE,
        body.len()
    );
    request(addr, &head, body)
}

/// `start` (request line and headers but the last), then `Host`,
/// `Connection: close` and `body`: the status and body of the answer.
fn request(addr: SocketAddr, start: &str, body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "{start}Host: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    s.write_all(body).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, body.to_string())
}

/// The server named `name` in an `/api/servers` document.
pub fn server<'a>(api: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    api["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {api}"))
}

/// The state of check `check` of a server.
pub fn check<'a>(server: &'a serde_json::Value, check: &str) -> &'a str {
    server["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == check)
        .and_then(|c| c["state"].as_str())
        .unwrap_or_else(|| panic!("no {check} in {server}"))
}
