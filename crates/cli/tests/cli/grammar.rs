//! One grammar for every subcommand (issue 36), walked over the command
//! definition itself so that a subcommand added later is held to it too:
//! each `--help` ends with the exit codes that command returns, each
//! command that prints a result takes `--json` and prints one object that
//! carries its `exit_code`, and nothing a user reads carries an errno's
//! number or a library's type names.

use std::collections::BTreeSet;
use std::net::{TcpListener, UdpSocket};

use crate::client_support::{gnomon, temp, write, Run};

/// Every subcommand's path (`query`, `bench load`), parents included.
fn paths() -> Vec<String> {
    fn walk(cmd: &clap::Command, prefix: &str, out: &mut Vec<String>) {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let path = format!("{prefix}{}", sub.get_name());
            out.push(path.clone());
            walk(sub, &format!("{path} "), out);
        }
    }
    let mut out = Vec::new();
    walk(&gnomon::command(), "", &mut out);
    out
}

fn find<'a>(cmd: &'a clap::Command, path: &str) -> &'a clap::Command {
    path.split(' ').fold(cmd, |c, name| {
        c.find_subcommand(name)
            .unwrap_or_else(|| panic!("no subcommand {path}"))
    })
}

/// The codes listed under `Exit codes:` in a help text.
fn listed_codes(help: &str) -> BTreeSet<u8> {
    let (_, section) = help
        .split_once("Exit codes:")
        .unwrap_or_else(|| panic!("no `Exit codes:` section in:\n{help}"));
    section
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let l = l.strip_prefix("  ")?;
            l.split_whitespace().next()?.parse().ok()
        })
        .collect()
}

/// Every subcommand's `--help` ends with the codes it can return, exactly
/// the rows of the one exit table that name it: not query's codes on
/// inspect, not none on serve.
#[test]
fn every_help_ends_with_its_own_exit_codes() {
    let all = paths();
    assert!(all.len() >= 17, "{all:?}");
    let mut wrong = Vec::new();
    for path in all {
        let mut args: Vec<&str> = path.split(' ').collect();
        args.push("--help");
        let run = gnomon(&args);
        assert_eq!(run.code, 0, "{path}: {}", run.stderr);
        let listed = listed_codes(&run.stdout);
        let table: BTreeSet<u8> = gnomon::exit::rows_for(&path)
            .iter()
            .map(|s| s.code)
            .collect();
        if listed != table {
            wrong.push(format!(
                "{path}: --help lists {listed:?}, the table {table:?}"
            ));
        }
        // A default is said once, where clap says it (`now --help` once
        // printed `[default: 2s] [default: 2s]`); crate::defaults compares
        // each with the constant the code uses.
        for line in run.stdout.lines() {
            assert!(line.matches("[default:").count() <= 1, "{path}: {line}");
        }
        // The section ends the help: nothing after it but its pointer.
        let tail = run.stdout.rsplit_once("Exit codes:").unwrap().1;
        assert!(!tail.contains("Options:"), "{path}: codes are not last");
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Commands that print no result of their own: a parent that only holds
/// subcommands, and the completion script, which is shell text by design.
const NO_RESULT: &[&str] = &["bench", "config", "completions"];

#[test]
fn every_command_that_prints_a_result_takes_json() {
    let root = gnomon::command();
    for path in paths() {
        if NO_RESULT.contains(&path.as_str()) {
            continue;
        }
        let cmd = find(&root, &path);
        assert!(
            cmd.get_arguments().any(|a| a.get_long() == Some("json")),
            "gnomon {path} has no --json"
        );
    }
}

/// Words that only a library or the kernel's headers explain.
const NOT_FOR_USERS: &[&str] = &[
    "os error",
    "Os {",
    "kind: ",
    "sqlx",
    "ureq",
    "io::Error",
    "serde",
    "toml::",
    "hyper::",
    "Custom {",
    "bad uri",
];

fn assert_plain(what: &str, run: &Run) {
    for text in [&run.stdout, &run.stderr] {
        for word in NOT_FOR_USERS {
            assert!(
                !text.contains(word),
                "{what}: `{word}` in what a user reads:\n{text}"
            );
        }
    }
}

/// One JSON object on stdout, whose `exit_code` is the status.
fn assert_one_object(what: &str, run: &Run) -> serde_json::Value {
    let lines: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "{what}: not one line on stdout:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    let v: serde_json::Value = serde_json::from_str(lines[0])
        .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {}", lines[0]));
    assert!(v.is_object(), "{what}: {v}");
    assert_eq!(
        v["exit_code"].as_i64(),
        Some(i64::from(run.code)),
        "{what}: exit_code is not the status: {v}\n{}",
        run.stderr
    );
    v
}

/// Every command that takes `--json`, run as a user would meet it where
/// it ends at once (nothing answers, the port is taken, the input is
/// garbage, or it succeeds): one object with `exit_code`, and plain words.
#[test]
fn every_json_outcome_is_one_object_with_its_exit_code() {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let taken_udp = udp.local_addr().unwrap().to_string();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_tcp = tcp.local_addr().unwrap().to_string();
    // A port nothing listens on: bound and dropped.
    let closed = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let closed_tcp = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let key = "iBVjxg/1j7y1+kQUTBYdTabxCppesU/07D4PMDJk2WA=";
    let list = write(
        "grammar-list.json",
        format!(
            r#"{{"servers":[{{"name":"silent","version":1,"publicKeyType":"ed25519",
                "publicKey":"{key}","addresses":[{{"protocol":"udp","address":"{closed}"}}]}}]}}"#
        )
        .as_bytes(),
    );
    let list = list.to_str().unwrap().to_owned();
    let garbage = write("grammar-garbage", b"\x00\x01 not a roughtime message");
    let garbage = garbage.to_str().unwrap().to_owned();
    let key_file = temp("grammar-key");
    let key_file = key_file.to_str().unwrap().to_owned();
    let out_dir = temp("grammar-delegations");
    let out_dir = out_dir.to_str().unwrap().to_owned();
    let state = temp("grammar-state");
    let state = state.to_str().unwrap().to_owned();
    let database = format!("sqlite:{}", temp("grammar-reports.db").display());
    let socket = temp("grammar-now.sock");
    let socket = socket.to_str().unwrap().to_owned();
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/gnomon.toml");
    let health_url = format!("http://{closed_tcp}/health");
    let nonce = "00112233445566778899aabbccddeeff";
    let fast = ["--timeout", "100ms"];

    let runs: Vec<(&str, Vec<&str>)> = vec![
        ("serve", vec!["serve", "--listen", &taken_udp]),
        ("keygen", vec!["keygen", "--out", &key_file]),
        (
            "delegate",
            vec!["delegate", "--key-file", &key_file, "--out-dir", &out_dir],
        ),
        ("config check", vec!["config", "check", config]),
        (
            "query",
            [&["query", &closed, "--key", key][..], &fast].concat(),
        ),
        (
            "sync",
            [
                &["sync", "--once", "--servers", &list, "--state-dir", &state][..],
                &fast,
            ]
            .concat(),
        ),
        (
            "watch",
            vec!["watch", "--servers", &list, "--listen", &taken_tcp],
        ),
        ("verify-report", vec!["verify-report", &garbage]),
        (
            "relay",
            [
                &[
                    "relay",
                    "--servers",
                    &list,
                    "--device-nonce",
                    nonce,
                    "--out",
                    "-",
                ][..],
                &fast,
            ]
            .concat(),
        ),
        (
            "verify-proof",
            vec![
                "verify-proof",
                &garbage,
                "--servers",
                &list,
                "--device-nonce",
                nonce,
                "--elapsed",
                "1s",
            ],
        ),
        (
            "report-server",
            vec![
                "report-server",
                "--listen",
                &taken_tcp,
                "--database",
                &database,
            ],
        ),
        ("inspect", vec!["inspect", &garbage]),
        (
            "bench load",
            vec![
                "bench",
                "load",
                &closed,
                "--key",
                key,
                "--count",
                "3",
                "--timeout",
                "100ms",
            ],
        ),
        (
            "bench null-server",
            vec![
                "bench",
                "null-server",
                "--listen",
                &taken_udp,
                "--duration",
                "1s",
            ],
        ),
        ("health", vec!["health", "--url", &health_url]),
        ("now", vec!["now", "--socket", &socket]),
    ];
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for (what, mut args) in runs {
        args.push("--json");
        let run = gnomon(&args);
        assert_one_object(what, &run);
        assert_plain(what, &run);
        seen.insert(what.to_owned());
    }
    // A command that takes --json and is missing here is not held to it.
    for path in paths() {
        if !NO_RESULT.contains(&path.as_str()) {
            assert!(seen.contains(&path), "no --json run of gnomon {path}");
        }
    }
    for p in [&out_dir, &state] {
        let _ = std::fs::remove_dir_all(p);
    }
    let _ = std::fs::remove_file(&key_file);
}

/// A usage error under `--json` is an object too, with 64, wherever the
/// bad argument sits.
#[test]
fn a_usage_error_under_json_is_one_object_with_64() {
    for path in paths() {
        if NO_RESULT.contains(&path.as_str()) {
            continue;
        }
        let mut args: Vec<&str> = path.split(' ').collect();
        args.extend(["--json", "--no-such-flag"]);
        let run = gnomon(&args);
        assert_eq!(run.code, 64, "{path}: {}", run.stderr);
        let v = assert_one_object(&path, &run);
        assert_eq!(v["error"]["kind"], "usage", "{path}: {v}");
        assert_plain(&path, &run);
    }
}

/// `gnomon completions SHELL` prints a script that completes the
/// subcommands the binary has, for each shell the help names.
#[test]
fn completions_come_from_the_binary_itself() {
    let bash = gnomon(&["completions", "bash"]);
    assert_eq!(bash.code, 0, "{}", bash.stderr);
    for sub in ["serve", "verify-proof", "report-server", "completions"] {
        assert!(bash.stdout.contains(sub), "bash script lacks {sub}");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let run = gnomon(&["completions", shell]);
        assert_eq!(run.code, 0, "{shell}: {}", run.stderr);
        assert!(run.stdout.contains("verify-proof"), "{shell}");
    }
    let bad = gnomon(&["completions", "tcsh"]);
    assert_eq!(bad.code, 64, "{}", bad.stderr);
    assert!(bad.stderr.contains("bash"), "{}", bad.stderr);
}

/// `-V`/`--version` is gnomon's version in every subcommand; given a value,
/// as scripts once chose the protocol version, it is refused rather than
/// taken for a query that succeeded.
#[test]
fn version_is_gnomons_everywhere_and_never_a_silent_success() {
    for path in paths() {
        let mut args: Vec<&str> = path.split(' ').collect();
        args.push("-V");
        let run = gnomon(&args);
        assert_eq!(run.code, 0, "{path} -V: {}", run.stderr);
        assert!(run.stdout.starts_with("gnomon"), "{path}: {}", run.stdout);
    }
    let key = "iBVjxg/1j7y1+kQUTBYdTabxCppesU/07D4PMDJk2WA=";
    for args in [
        vec!["query", "127.0.0.1:9", "--key", key, "--version", "1"],
        vec![
            "bench",
            "load",
            "127.0.0.1:9",
            "--key",
            key,
            "-V",
            "draft-11",
        ],
    ] {
        let run = gnomon(&args);
        assert_eq!(run.code, 64, "{args:?}: {}", run.stdout);
        assert!(run.stderr.contains("--protocol"), "{}", run.stderr);
        assert!(!run.stdout.starts_with("gnomon "), "{}", run.stdout);
    }
}
