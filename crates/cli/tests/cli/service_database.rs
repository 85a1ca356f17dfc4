//! The database of `watch` and `report-server` as an operator meets it
//! (issue 36): named at once (the SQLite file, or the URL without its
//! password), given up on with the cause and the fix when it cannot be
//! used, never in sqlx's words, and a SIGTERM while it is being opened
//! stops the service there and then.

use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use crate::client_support::temp;
use crate::service_logs::Running;

/// Far more than a start takes; the services give up on a database
/// after 10 s.
const PATIENCE: Duration = Duration::from_secs(60);

/// A server's key, for a list whose server is never asked.
const KEY: &str = "iBVjxg/1j7y1+kQUTBYdTabxCppesU/07D4PMDJk2WA=";

/// What sqlx says in its own words, which no user should read.
const SQLX_WORDS: [&str; 5] = [
    "pool timed out",
    "(code: 14)",
    "unable to open database file",
    "error returned from database",
    "Sqlite",
];

/// The two commands with a database, each with `database` (and a list of
/// one server, for watch), `--json` and `extra`.
fn commands(database: &str, extra: &[&str]) -> Vec<(&'static str, Vec<String>)> {
    // Never probed: the database comes first.
    let list = temp("service-db-list.json");
    let entry =
        crate::sync_support::list_entry("one", "ed25519", KEY, 1, Some("127.0.0.1:9"), None);
    crate::sync_support::write_list(&list, &[entry]);
    let list = list.to_str().unwrap().to_owned();
    let mut out = vec![
        (
            "watch",
            vec!["watch", "--servers", &list, "--listen", "127.0.0.1:0"],
        ),
        (
            "report-server",
            vec!["report-server", "--listen", "127.0.0.1:0"],
        ),
    ];
    for (_, args) in &mut out {
        args.extend(["--database", database, "--json"]);
        args.extend(extra);
    }
    out.into_iter()
        .map(|(what, args)| (what, args.into_iter().map(String::from).collect()))
        .collect()
}

fn start(args: &[String]) -> Running {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Running::start(&args)
}

/// The one object a run printed.
fn object(what: &str, out: &str) -> serde_json::Value {
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: not one object: {out}");
    serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("{what}: {e}: {out}"))
}

/// Every message of `seen` (JSON log lines), and the object's.
fn messages(seen: &[String], v: &serde_json::Value) -> String {
    let mut all: Vec<String> = seen
        .iter()
        .map(|l| crate::service_logs::json_line(l).1)
        .collect();
    all.extend(v["error"]["message"].as_str().map(String::from));
    all.join("\n")
}

/// A PostgreSQL URL on a loopback port nothing listens on: each command
/// says at once which database it opens (the password left out), then
/// gives up with the URL and the cause (the refused connection) and exits
/// 69, the status of a service it depends on being unavailable.
#[test]
fn an_unreachable_postgres_is_named_at_once_and_given_up_with_its_cause() {
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://gnomon:s3cret@127.0.0.1:{closed}/watch");
    let said = format!("postgres://gnomon@127.0.0.1:{closed}/watch");
    for (what, args) in commands(&url, &[]) {
        let (code, out, seen) = start(&args).finish();
        let v = object(what, &out);
        let all = messages(&seen, &v);
        assert_eq!(code, 69, "{what}: {all}");
        assert_eq!(v["exit_code"], 69, "{what}: {v}");
        assert_eq!(v["error"]["kind"], "database_unavailable", "{what}: {v}");
        let opening = seen
            .iter()
            .position(|l| l.contains("opening the database") && l.contains(&said))
            .unwrap_or_else(|| panic!("{what} did not say what it connects to: {all}"));
        let failed = seen
            .iter()
            .position(|l| l.contains("connection was refused"))
            .unwrap_or_else(|| panic!("{what} did not say why: {all}"));
        assert!(opening < failed, "{what}: {all}");
        let error = v["error"]["message"].as_str().unwrap();
        assert!(error.contains(&said), "{what}: {error}");
        assert!(error.contains("start PostgreSQL"), "{what}: {error}");
        assert!(!all.contains("s3cret"), "{what} said the password: {all}");
        for words in SQLX_WORDS {
            assert!(!all.contains(words), "{what}: `{words}` in {all}");
        }
    }
}

/// A PostgreSQL "server" that accepts the connection and never answers:
/// once it holds each command's connection, SIGTERM stops the command
/// there, exit 0, saying so, rather than after the 10 s it would wait.
#[test]
fn sigterm_while_the_database_is_being_opened_stops_at_once() {
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let url = format!("postgres://gnomon@127.0.0.1:{port}/watch");
    for (what, args) in commands(&url, &[]) {
        let run = start(&args);
        // Accepted: the command is inside its connect, waiting for an
        // answer that never comes.
        let (held, _) = silent.accept().unwrap();
        let sent = Command::new("kill")
            .args(["-TERM", &run.pid()])
            .status()
            .unwrap();
        assert!(sent.success());
        let (code, out, seen) = run.finish();
        drop(held);
        let v = object(what, &out);
        let all = messages(&seen, &v);
        assert_eq!(code, 0, "{what}: {all}");
        assert_eq!(v["exit_code"], 0, "{what}: {v}");
        assert_eq!(v["stopped_by"], "SIGTERM", "{what}: {v}");
        assert_eq!(v["while"], "opening the database", "{what}: {v}");
        assert!(
            all.contains("stopped by SIGTERM before the database"),
            "{what}: {all}"
        );
        assert!(
            !all.contains("no answer within"),
            "{what} waited it out: {all}"
        );
    }
}

/// The same silent "server", left alone: each command gives up on it
/// after its bound (10 s), naming the URL and that nothing answered, and
/// exits 69. Both run at once, so the test waits the bound once.
#[test]
fn a_database_that_never_answers_is_given_up_within_the_bound() {
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let url = format!("postgres://gnomon@127.0.0.1:{port}/watch");
    let runs: Vec<(&str, Running)> = commands(&url, &[])
        .into_iter()
        .map(|(what, args)| (what, start(&args)))
        .collect();
    for (what, run) in runs {
        let (code, out, seen) = run.finish();
        let v = object(what, &out);
        let all = messages(&seen, &v);
        assert_eq!(code, 69, "{what}: {all}");
        let error = v["error"]["message"].as_str().unwrap();
        assert!(error.contains(&url), "{what}: {error}");
        assert!(error.contains("no answer within 10 s"), "{what}: {error}");
        for words in SQLX_WORDS {
            assert!(!all.contains(words), "{what}: `{words}` in {all}");
        }
    }
    drop(silent);
}

/// An SQLite file in a directory that does not exist, and a file that is
/// not a database: each command names the file and what to do, in its
/// own words, and exits 73 (the file cannot be made or opened).
#[test]
fn an_sqlite_file_that_cannot_be_used_is_named_with_the_fix() {
    let dir = temp("service-db-missing");
    let missing = dir.join("reports.db");
    let garbage = temp("service-db-garbage.db");
    std::fs::write(&garbage, vec![0x5a; 8192]).unwrap();
    let cases = [
        (
            missing.clone(),
            format!("the directory {} does not exist; create it", dir.display()),
        ),
        (garbage.clone(), "not an SQLite database".to_string()),
    ];
    for (file, why) in cases {
        let database = format!("sqlite:{}", file.display());
        for (what, args) in commands(&database, &[]) {
            let (code, out, seen) = start(&args).finish();
            let v = object(what, &out);
            let all = messages(&seen, &v);
            assert_eq!(code, 73, "{what}: {all}");
            assert_eq!(v["error"]["kind"], "database_file", "{what}: {v}");
            let error = v["error"]["message"].as_str().unwrap();
            assert!(
                error.contains(&format!("the SQLite database {}", file.display())),
                "{what}: {error}"
            );
            assert!(error.contains(&why), "{what}: {error}");
            for words in SQLX_WORDS {
                assert!(!all.contains(words), "{what}: `{words}` in {all}");
            }
        }
    }
    assert!(!dir.exists(), "a directory was made for the database");
    let _ = std::fs::remove_file(&garbage);
}

/// The report server names the file its reports are kept in, as an
/// absolute path even when given relative, where it said "Sqlite
/// database".
#[test]
fn the_report_server_names_its_database_file() {
    let cwd = crate::sync_support::tempdir("service-db-cwd");
    let mut cmd = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"));
    cmd.current_dir(&cwd).args([
        "report-server",
        "--listen",
        "127.0.0.1:0",
        "--database",
        "sqlite:reports.db",
    ]);
    let mut run = Running::spawn(&mut cmd);
    let line = run.wait_for("listening on ", PATIENCE);
    let file = cwd.join("reports.db");
    assert!(
        line.contains(&format!(
            "reports kept in the SQLite database {}",
            file.display()
        )),
        "{line}"
    );
    assert!(!line.contains("Sqlite"), "{line}");
    let (code, _, seen) = run.stop();
    assert_eq!(code, 0, "{seen:#?}");
    assert!(file.exists());
    let _ = std::fs::remove_dir_all(cwd);
}
