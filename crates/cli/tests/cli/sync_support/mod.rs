//! Real `gnomon serve` processes for `gnomon sync` to measure, some of
//! them lying through libfaketime, and `gnomon sync` itself run with its
//! own clock shifted the same way.
#![allow(dead_code, unreachable_pub)]

use gnomon_testkit::Reaped;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::serve_support::start_serve;

pub const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Waits for loopback servers: short, yet long enough for a server slowed
/// by a busy machine (a silent one costs 2.4 s per ask).
pub const FAST: [&str; 4] = ["--timeout", "500ms", "--retries", "3"];

/// What `gnomon now` printed and how it exited.
pub struct Now {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Now {
    /// Its output as JSON (with `--json`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", self.stdout, self.stderr))
    }
}

/// `gnomon now --socket SOCKET` with `extra` flags.
pub fn now(socket: &Path, extra: &[&str]) -> Now {
    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .arg("now")
        .arg("--socket")
        .arg(socket)
        .args(extra)
        .output()
        .unwrap();
    Now {
        code: out.status.code().unwrap(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `gnomon sync --once --set-clock --dry-run --json --max-radius
/// MAX_RADIUS` over `list` with its state in `state`, then `extra` flags
/// (the timeouts among them): the exit code, the object and stderr.
pub fn dry_run_step(
    list: &Path,
    state: &Path,
    max_radius: &str,
    extra: &[&str],
) -> (i32, serde_json::Value, String) {
    let mut a = vec![
        "--servers",
        list.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "--once",
        "--set-clock",
        "--dry-run",
        "--json",
        "--max-radius",
        max_radius,
    ];
    a.extend_from_slice(extra);
    let r = sync(&a, None);
    (r.code, r.json(), r.stderr)
}

/// Servers that are stopped when dropped (a failing test too).
pub struct Servers {
    children: Vec<Reaped>,
    pub names: Vec<String>,
    /// A server list naming them all.
    pub list: PathBuf,
    /// A directory of the test's own.
    pub dir: PathBuf,
    /// Each server's public key, base64.
    pub keys: Vec<String>,
    /// Each server's address.
    pub addrs: Vec<String>,
    /// The list's `reports` member (with its leading comma), or nothing.
    reports: String,
}

impl Drop for Servers {
    fn drop(&mut self) {
        // Stopped before their directory goes.
        self.children.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh directory, mode 0755 whatever the umask: sync believes the
/// list cached in a state directory only when nobody else may write it
/// (and a test running sync as `nobody` still reads the list in it).
pub fn tempdir(name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    let d = std::env::temp_dir().join(format!("gnomon-sync-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// Whether libfaketime is here; records the skip when not.
pub fn have_faketime(test: &str) -> bool {
    if Path::new(LIBFAKETIME).exists() {
        return true;
    }
    gnomon_testkit::skip(
        test,
        &format!("{LIBFAKETIME} missing (package libfaketime)"),
    );
    false
}

/// Run `cmd` with its wall clock at real time + `offset` (libfaketime's
/// syntax: "+300", "-300"); the monotonic clock stays real.
pub fn shift_clock(cmd: &mut Command, offset: &str) {
    cmd.env("LD_PRELOAD", LIBFAKETIME)
        .env("FAKETIME", offset)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
}

/// `gnomon serve` processes, one per (name, clock offset), answering with
/// a 3 s radius on an unsynchronized kernel clock; the list names them
/// (with `reports` when given).
pub fn start_servers(test: &str, spec: &[(&str, Option<&str>)], reports: Option<&str>) -> Servers {
    let spec: Vec<(&str, Option<&str>, &str)> = spec.iter().map(|&(n, o)| (n, o, "3s")).collect();
    start_servers_with(test, &spec, reports)
}

/// As [`start_servers`], each server with its own radius (name, clock
/// offset, radius such as "60s"): the kernel's own error estimate is used
/// instead where it is larger.
pub fn start_servers_with(
    test: &str,
    spec: &[(&str, Option<&str>, &str)],
    reports: Option<&str>,
) -> Servers {
    let dir = tempdir(test);
    let mut children = Vec::new();
    let mut keys = Vec::new();
    let mut addrs = Vec::new();
    for (_, offset, radius) in spec {
        let started = start_serve(
            &[
                "--workers",
                "1",
                "--clock-unsynchronized",
                "answer-with-radius",
                "--clock-unsynchronized-radius",
                radius,
                "--clock-radius-floor",
                radius,
            ],
            |c| {
                if let Some(o) = offset {
                    shift_clock(c, o);
                }
            },
        );
        keys.push(gnomon_testkit::base64(&started.public));
        addrs.push(started.addr.to_string());
        // The server's log must not fill its pipe: read it away.
        let mut stderr = started.stderr;
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        children.push(started.child);
    }
    let reports = reports
        .map(|r| format!(r#","reports":"{r}""#))
        .unwrap_or_default();
    let mut servers = Servers {
        children,
        names: spec.iter().map(|s| s.0.to_string()).collect(),
        list: dir.join("servers.json"),
        dir,
        keys,
        addrs,
        reports,
    };
    let all: Vec<(&str, usize)> = spec.iter().enumerate().map(|(i, s)| (s.0, i)).collect();
    servers.list = servers.list_of("servers.json", &all);
    servers
}

impl Servers {
    /// A list in the test's directory naming server `i` as `name` for each
    /// (name, i): one server may be listed under several names.
    pub fn list_of(&self, file: &str, entries: &[(&str, usize)]) -> PathBuf {
        let entries: Vec<String> = entries
            .iter()
            .map(|&(name, i)| {
                format!(
                    r#"{{"name":"{name}","version":1,"publicKeyType":"ed25519","publicKey":"{key}","addresses":[{{"protocol":"udp","address":"{addr}"}},{{"protocol":"tcp","address":"{addr}"}}]}}"#,
                    key = self.keys[i],
                    addr = self.addrs[i],
                )
            })
            .collect();
        let path = self.dir.join(file);
        std::fs::write(
            &path,
            format!(r#"{{"servers":[{}]{}}}"#, entries.join(","), self.reports),
        )
        .unwrap();
        path
    }
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {}{}", self.stdout, self.stderr))
    }
}

/// `gnomon sync ARGS`, its clock shifted by `offset` when given.
pub fn sync(args: &[&str], offset: Option<&str>) -> Run {
    let mut cmd = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"));
    cmd.arg("sync").args(args);
    if let Some(o) = offset {
        shift_clock(&mut cmd, o);
    }
    let out = cmd.output().expect("run gnomon sync");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `gnomon sync` as a service, stopped when dropped.
pub struct Service {
    pub child: Reaped,
    lines: std::sync::mpsc::Receiver<String>,
    pub log: String,
}

impl Service {
    pub fn start(args: &[&str]) -> Service {
        let mut child = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
            .arg("sync")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map(Reaped)
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Service {
            child,
            lines,
            log: String::new(),
        }
    }

    /// Read the log until a line contains `what`, for at most `patience`.
    pub fn wait_for(&mut self, what: &str, patience: Duration) -> bool {
        let until = Instant::now() + patience;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.log.push_str(&line);
                    self.log.push('\n');
                    if line.contains(what) {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// SIGTERM, then wait at most `patience`: the exit code, or `None`
    /// (after killing it) when it did not stop in time.
    pub fn terminate(&mut self, patience: Duration) -> Option<i32> {
        self.signal("-TERM");
        let t = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                // The rest of the log.
                while self.wait_for("\u{0}", Duration::from_millis(200)) {}
                return s.code();
            }
            if t.elapsed() > patience {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
            std::thread::park_timeout(Duration::from_millis(10));
        }
    }
}

impl Service {
    /// SIGTERM: it must exit 0 within `patience`, stopped by its loop
    /// (not by the signal thread's last resort).
    pub fn stop_cleanly(&mut self, patience: Duration) {
        let code = self.terminate(patience);
        assert_eq!(code, Some(0), "{}", self.log);
        assert!(
            self.log.lines().any(|l| l.ends_with(" INFO stopped")),
            "{}",
            self.log
        );
    }
}

pub fn real_now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// The state file as JSON.
pub fn state(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("sync-state.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// `--servers LIST --state-dir DIR --interval 1s`, then `extra`, then the
/// short loopback waits.
pub fn every_second<'a>(list: &'a str, dir: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["--servers", list, "--state-dir", dir, "--interval", "1s"];
    a.extend_from_slice(extra);
    a.extend_from_slice(&FAST);
    a
}

// `--metrics`: the bound address from the log, a scrape, one value.

/// The address from "metrics on http://ADDR/metrics".
pub fn metrics_addr(s: &mut Service) -> std::net::SocketAddr {
    assert!(
        s.wait_for("metrics on http://", Duration::from_secs(30)),
        "{}",
        s.log
    );
    let line = s.log.lines().last().unwrap();
    let rest = line.split("http://").nth(1).unwrap();
    rest.trim_end_matches("/metrics").parse().unwrap()
}

/// GET /metrics; `None` when the endpoint does not answer within `within`
/// (refused at the cap, or the connection closed).
pub fn scrape(addr: std::net::SocketAddr, within: Duration) -> Option<String> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr).ok()?;
    c.set_read_timeout(Some(within)).unwrap();
    write!(c, "GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n").ok()?;
    let mut s = String::new();
    c.read_to_string(&mut s).ok()?;
    s.starts_with("HTTP/1.1 200").then_some(s)
}

pub fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

// Lists built entry by entry: servers behind forwarders (UDP only, since
// the forwarder passes no TCP), and servers with more than one identity.

/// One server-list entry: `key_type` "ed25519" or "ml-dsa-44", the key in
/// base64, the listed `version`, and its UDP and TCP addresses (either may
/// be absent).
pub fn list_entry(
    name: &str,
    key_type: &str,
    key: &str,
    version: u32,
    udp: Option<&str>,
    tcp: Option<&str>,
) -> String {
    let addresses: Vec<String> = [("udp", udp), ("tcp", tcp)]
        .iter()
        .filter_map(|&(p, a)| Some(format!(r#"{{"protocol":"{p}","address":"{}"}}"#, a?)))
        .collect();
    format!(
        r#"{{"name":"{name}","version":{version},"publicKeyType":"{key_type}","publicKey":"{key}","addresses":[{}]}}"#,
        addresses.join(",")
    )
}

/// A server list of `entries` (from [`list_entry`]) written to `path`.
pub fn write_list(path: &Path, entries: &[String]) {
    std::fs::write(path, format!(r#"{{"servers":[{}]}}"#, entries.join(","))).unwrap();
}

impl Servers {
    /// A list in the test's directory naming server `i` as `name`, reached
    /// over UDP only at `addr` (a forwarder in front of it, or the server
    /// itself), for each (name, i, addr).
    pub fn list_via(&self, file: &str, entries: &[(&str, usize, std::net::SocketAddr)]) -> PathBuf {
        let entries: Vec<String> = entries
            .iter()
            .map(|&(name, i, addr)| {
                list_entry(
                    name,
                    "ed25519",
                    &self.keys[i],
                    1,
                    Some(&addr.to_string()),
                    None,
                )
            })
            .collect();
        let path = self.dir.join(file);
        write_list(&path, &entries);
        path
    }
}
