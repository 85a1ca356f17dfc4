//! One logging setup for every service (issue 36): `watch`,
//! `report-server` and `sync` as a service log as `serve` does, each line
//! with its time and level, text or JSON (`--log-format`, the same flag,
//! variable and help in each); under `--json` watch and the report server
//! end with one object on stdout.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use gnomon_testkit::{Fixture, Reaped};

use crate::client_support::temp;
use crate::sync_support;

/// Generous: each service is up in well under a second on an idle machine.
const START: Duration = Duration::from_secs(60);

/// A service started by the test, its stderr read line by line as it
/// comes; killed when dropped.
pub(crate) struct Running {
    child: Reaped,
    lines: Receiver<String>,
    /// Every stderr line read so far.
    pub(crate) seen: Vec<String>,
}

impl Running {
    /// `gnomon ARGS`, stdout kept for [`Running::stop`].
    pub(crate) fn start(args: &[&str]) -> Running {
        Running::start_with(args, &[])
    }

    /// [`Running::start`] with variables `env` set.
    pub(crate) fn start_with(args: &[&str], env: &[(&str, &str)]) -> Running {
        let mut cmd = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"));
        cmd.args(args).envs(env.iter().copied());
        Running::spawn(&mut cmd)
    }

    /// `cmd` (a gnomon command), its stdout and stderr piped.
    pub(crate) fn spawn(cmd: &mut Command) -> Running {
        let mut child = Reaped::spawn(
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        );
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The first line from now on that contains `needle`, within
    /// `patience`; panics with what was seen when none does.
    pub(crate) fn wait_for(&mut self, needle: &str, patience: Duration) -> String {
        let until = Instant::now() + patience;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no line with {needle:?} within {patience:?}: {:#?}",
                    self.seen
                ),
            }
        }
    }

    /// The pid, for signals.
    pub(crate) fn pid(&self) -> String {
        self.child.id().to_string()
    }

    /// SIGTERM, then everything: exit code, stdout, and the rest of stderr
    /// (in `seen`).
    pub(crate) fn stop(self) -> (i32, String, Vec<String>) {
        let sent = Command::new("kill")
            .args(["-TERM", &self.pid()])
            .status()
            .unwrap();
        assert!(sent.success());
        self.finish()
    }

    /// Waits for the exit: code, stdout, every stderr line.
    pub(crate) fn finish(mut self) -> (i32, String, Vec<String>) {
        let mut out = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            o.read_to_string(&mut out).unwrap();
        }
        let status = self.child.wait().unwrap();
        // The reader ends with the pipe, after the last line.
        while let Ok(line) = self.lines.recv() {
            self.seen.push(line);
        }
        (status.code().unwrap_or(-1), out, self.seen)
    }
}

/// Whether `line` is a text log line: an RFC 3339 time in UTC, a level,
/// then the sentence.
pub(crate) fn is_text_line(line: &str) -> bool {
    let mut words = line.split_whitespace();
    let (Some(time), Some(level)) = (words.next(), words.next()) else {
        return false;
    };
    let shaped = time.len() >= 20
        && time.as_bytes()[4] == b'-'
        && time.as_bytes()[10] == b'T'
        && time.ends_with('Z')
        && time[..4].bytes().all(|b| b.is_ascii_digit());
    shaped && ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(&level)
}

/// `line` as a JSON log line: its level and sentence (panics when it is
/// not one).
pub(crate) fn json_line(line: &str) -> (String, String) {
    let v: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
    assert!(
        v["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{line}"
    );
    let level = v["level"]
        .as_str()
        .unwrap_or_else(|| panic!("no level: {line}"));
    let message = v["fields"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no message: {line}"));
    (level.to_string(), message.to_string())
}

/// A server list of one honest fixture, in a file of its own.
fn one_server(fixture: &Fixture) -> String {
    let list = temp("service-logs-list.json");
    std::fs::write(
        &list,
        gnomon_testkit::server_list(&[("one", fixture, 1)], None),
    )
    .unwrap();
    list.to_str().unwrap().to_owned()
}

/// The arguments that start each service on loopback, with the line it
/// says once it serves.
fn services(list: &str, state: &str, db: &str) -> Vec<(&'static str, Vec<String>, &'static str)> {
    let own = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        (
            "watch",
            own(&[
                "watch",
                "--servers",
                list,
                "--listen",
                "127.0.0.1:0",
                "--interval",
                "1s",
            ]),
            "listening on http://",
        ),
        (
            "report-server",
            own(&["report-server", "--listen", "127.0.0.1:0", "--database", db]),
            "listening on ",
        ),
        (
            "sync",
            own(&[
                "sync",
                "--servers",
                list,
                "--state-dir",
                state,
                "--interval",
                "1s",
                "--now-socket",
                "off",
                "--min-servers",
                "1",
                "--quorum",
                "1",
            ]),
            "started: ",
        ),
    ]
}

/// Each service's lines carry their time and level as text, and are one
/// JSON object each under `--log-format json`: the same setup as serve's.
#[test]
fn every_service_logs_time_and_level_as_text_or_json() {
    let fixture = Fixture::honest(gnomon_testkit::modern_profiles(), 41);
    let list = one_server(&fixture);
    let state = sync_support::tempdir("service-logs-state");
    let db = format!("sqlite:{}", temp("service-logs.db").display());
    for (what, args, ready) in services(&list, state.to_str().unwrap(), &db) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut text = Running::start(&args);
        let line = text.wait_for(ready, START);
        assert!(is_text_line(&line), "{what}: {line}");
        let (code, _, seen) = text.stop();
        assert_eq!(code, 0, "{what}: {seen:#?}");
        for line in &seen {
            assert!(is_text_line(line), "{what}: not a log line: {line}");
            assert!(!line.contains(&format!("gnomon {what}:")), "{what}: {line}");
        }
        let stopped = seen.last().unwrap();
        assert!(stopped.contains(" INFO "), "{what}: {stopped}");

        let json: Vec<&str> = args
            .iter()
            .copied()
            .chain(["--log-format", "json"])
            .collect();
        let mut run = Running::start(&json);
        let line = run.wait_for(ready, START);
        assert_eq!(json_line(&line).0, "INFO", "{what}: {line}");
        let (code, _, seen) = run.stop();
        assert_eq!(code, 0, "{what}: {seen:#?}");
        for line in &seen {
            json_line(line);
        }
    }
    let _ = std::fs::remove_dir_all(state);
}

/// The variables are serve's too: `GNOMON_LOG_LEVEL=warn` leaves only the
/// warnings (here: `--report` without a `reports` URL in the list), in
/// JSON by `GNOMON_LOG_FORMAT`.
#[test]
fn the_log_variables_are_serves() {
    let fixture = Fixture::honest(gnomon_testkit::modern_profiles(), 43);
    let list = one_server(&fixture);
    let args = [
        "watch",
        "--servers",
        &list,
        "--listen",
        "127.0.0.1:0",
        "--report",
    ];
    let env = [("GNOMON_LOG_FORMAT", "json"), ("GNOMON_LOG_LEVEL", "warn")];
    let mut run = Running::start_with(&args, &env);
    let line = run.wait_for("--report given", START);
    assert_eq!(json_line(&line).0, "WARN", "{line}");
    let (code, _, seen) = run.stop();
    assert_eq!(code, 0, "{seen:#?}");
    for line in &seen {
        let (level, message) = json_line(line);
        assert!(level == "WARN" || level == "ERROR", "{level}: {message}");
    }
}

/// `--log-format` and `--log-level` are one flag each, named, read from
/// the same variable and explained in the same words by every service.
#[test]
fn every_service_takes_the_log_flags_of_serve() {
    let root = gnomon::command();
    let flag = |cmd: &str, long: &str| {
        let sub = root.find_subcommand(cmd).unwrap();
        let arg = sub
            .get_arguments()
            .find(|a| a.get_long() == Some(long))
            .unwrap_or_else(|| panic!("gnomon {cmd} has no --{long}"));
        (
            arg.get_help().map(ToString::to_string),
            arg.get_env().map(|e| e.to_string_lossy().into_owned()),
            arg.get_value_names().map(|v| v.to_vec()),
        )
    };
    for long in ["log-format", "log-level"] {
        let serve = flag("serve", long);
        assert!(serve.1.is_some(), "{long}: {serve:?}");
        for cmd in ["sync", "watch", "report-server"] {
            assert_eq!(flag(cmd, long), serve, "gnomon {cmd} --{long}");
        }
    }
    let bad = crate::client_support::gnomon(&["watch", "--log-format", "xml", "--servers", "x"]);
    assert_eq!(bad.code, 64, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("\"text\" or \"json\""),
        "{}",
        bad.stderr
    );
}

/// Under `--json`, watch and the report server log JSON and, stopped by
/// SIGTERM, print one object on stdout saying so, with `exit_code` 0 and
/// what they did.
#[test]
fn watch_and_the_report_server_end_with_one_object_under_json() {
    let fixture = Fixture::honest(gnomon_testkit::modern_profiles(), 42);
    let list = one_server(&fixture);
    let state = sync_support::tempdir("service-json-state");
    let path = temp("service-json.db");
    let db = format!("sqlite:{}", path.display());
    for (what, args, ready) in services(&list, state.to_str().unwrap(), &db) {
        if what == "sync" {
            continue;
        }
        let args: Vec<&str> = args.iter().map(String::as_str).chain(["--json"]).collect();
        let mut run = Running::start(&args);
        run.wait_for(ready, START);
        if what == "watch" {
            // A round done, so that the object has one to count; the
            // server's state is said with its fields for a collector.
            let line = run.wait_for("server \\\"one\\\"", START);
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            assert_eq!(v["fields"]["server"], "one", "{line}");
            assert!(v["fields"]["to"].is_string(), "{line}");
            assert!(v["fields"].get("from").is_none(), "{line}");
        }
        let (code, out, seen) = run.stop();
        assert_eq!(code, 0, "{what}: {seen:#?}");
        for line in &seen {
            json_line(line);
        }
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 1, "{what}: {out}");
        let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(v["exit_code"], 0, "{what}: {v}");
        assert_eq!(v["stopped_by"], "SIGTERM", "{what}: {v}");
        if what == "watch" {
            assert!(v["rounds"].as_u64().unwrap() >= 1, "{v}");
            assert_eq!(v["servers"], 1, "{v}");
        } else {
            assert_eq!(v["reports"]["accepted"], 0, "{v}");
            let named = v["database"].as_str().unwrap();
            assert!(named.ends_with(&path.display().to_string()), "{v}");
        }
    }
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir_all(state);
}
