//! `gnomon sync` and `gnomon now` in the grammar every command speaks
//! (issue 36): `--status --json` shaped as `--check --json` is, one way
//! to say off, `--report[=on|off]`, a bad list refused before anything is
//! made, the now socket gone when sync stops and `gnomon now` saying so,
//! and system errors in words. Real processes throughout.

use crate::sync_support;

use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::time::Duration;

use sync_support::{have_faketime, now, start_servers, sync, tempdir, Service, FAST};

const PATIENCE: Duration = Duration::from_secs(60);

/// No message a user reads carries an errno's number.
fn plain(text: &str) {
    assert!(!text.contains("os error"), "{text}");
}

/// A socket path under /tmp (a socket address holds 107 bytes).
fn short_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(format!("/tmp/gn-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `--status --json` after a round with a liar: one object with
/// `exit_code`; times named as `--check --json` names them (`*_utc`,
/// `*_unix_us`); `outside` and `unreachable` hold names only (the names
/// `--once --json` gives), the reasons beside them; no state is an
/// object too.
#[test]
fn status_json_is_named_as_check_json_and_keeps_words_out_of_its_lists() {
    let test = "sync_status_json";
    if !have_faketime(test) {
        return;
    }
    let servers = start_servers(
        test,
        &[
            ("alpha", None),
            ("bravo", None),
            ("charlie", None),
            ("liar", Some("+3600")),
        ],
        None,
    );
    let dir = tempdir(test);
    let (list, d) = (servers.list.to_str().unwrap(), dir.to_str().unwrap());
    let mut a = vec!["--servers", list, "--state-dir", d, "--max-radius", "1m"];
    a.extend_from_slice(&FAST);
    let check = sync(
        &[&a[..], &["--check", "--max-offset", "1h", "--json"]].concat(),
        None,
    );
    let c = check.json();
    assert_eq!(c["outside"], serde_json::json!(["liar"]), "{c}");

    let r = sync(&["--status", "--json", "--state-dir", d], None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let j = r.json();
    assert_eq!(j["exit_code"], 0, "{j}");
    let last = &j["last_round"];
    // The lists are what --check --json lists: names, nothing else.
    assert_eq!(last["outside"], c["outside"], "{j}");
    assert_eq!(last["unreachable"], c["unreachable"], "{j}");
    assert_eq!(
        last["outside_because"]["liar"], "outside the consensus",
        "{j}"
    );
    assert_eq!(
        last["consensus"]["agreeing"].as_array().map(Vec::len),
        Some(3),
        "{j}"
    );
    // Times: text in *_utc, as --check's local_time_utc and floor_utc.
    assert_eq!(j["floor_utc"], c["floor_utc"], "{j}");
    assert!(j["floor_unix_us"].is_i64(), "{j}");
    let t = last["local_time_utc"].as_str().unwrap();
    assert!(
        t.ends_with('Z') && t.len() == c["local_time_utc"].as_str().unwrap().len(),
        "{j}"
    );
    assert!(last["local_time_unix_us"].is_i64(), "{j}");
    assert!(last["consensus"]["offset_low_us"].is_i64(), "{j}");
    for old in ["floor_us", "last", "at_us"] {
        assert!(
            j.get(old).is_none() && last.get(old).is_none(),
            "{old}: {j}"
        );
    }
    assert_eq!(j["excluded"][0]["name"], "liar", "{j}");
    assert!(j["excluded"][0]["since_utc"].is_string(), "{j}");
    // The text keeps the reasons next to the names.
    let text = sync(&["--status", "--state-dir", d], None);
    assert!(
        text.stdout
            .contains("outside      liar (outside the consensus)"),
        "{}",
        text.stdout
    );

    let empty = tempdir("sync_status_none");
    let r = sync(
        &["--status", "--json", "--state-dir", empty.to_str().unwrap()],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    let j = r.json();
    assert_eq!(
        (j["exit_code"].as_i64(), j["error"]["kind"].as_str()),
        (Some(1), Some("no_state"))
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&empty);
}

/// `off` is said one way: an address takes `off` (`--metrics`, as serve's
/// and `--now-socket` already did), in a flag, a variable and the file;
/// `--report` is a switch: alone it is on, and it takes the words every
/// switch takes.
#[test]
fn off_and_on_are_said_the_way_every_command_says_them() {
    let printed = |args: &[&str], env: &[(&str, &str)]| {
        let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
            .arg("sync")
            .args(args)
            .arg("--print-config")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let dir = tempdir("sync_off");
    let file = dir.join("sync.toml");
    std::fs::write(
        &file,
        "[sync]\nmetrics = \"127.0.0.1:9102\"\nreport = false\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    assert!(printed(&["--config", f], &[]).contains("metrics = \"127.0.0.1:9102\""));
    for (args, env) in [
        (vec!["--config", f, "--metrics", "off"], vec![]),
        (vec!["--config", f, "--metrics", "OFF"], vec![]),
        (vec!["--config", f], vec![("GNOMON_SYNC_METRICS", "off")]),
    ] {
        let out = printed(&args, &env);
        assert!(out.contains("metrics = \"off\""), "{args:?} {env:?}: {out}");
    }
    std::fs::write(&file, "[sync]\nmetrics = \"off\"\nnow-socket = \"off\"\n").unwrap();
    let out = printed(&["--config", f], &[]);
    assert!(
        out.contains("metrics = \"off\"") && out.contains("now-socket = \"off\""),
        "{out}"
    );
    std::fs::write(&file, "[sync]\nreport = false\n").unwrap();
    assert!(printed(&["--config", f, "--report"], &[]).contains("report = true"));
    for on in ["on", "true", "yes", "1"] {
        let flag = format!("--report={on}");
        assert!(
            printed(&["--config", f, &flag], &[]).contains("report = true"),
            "{on}"
        );
    }
    for off in ["off", "false", "no", "0"] {
        assert!(
            printed(&["--report", off], &[]).contains("report = false"),
            "{off}"
        );
    }
    assert!(printed(&[], &[("GNOMON_SYNC_REPORT", "off")]).contains("report = false"));
    let bad = sync(&["--report=maybe", "--print-config"], None);
    assert_eq!(bad.code, 64, "{}", bad.stderr);
    assert!(bad.stderr.contains("neither on nor off"), "{}", bad.stderr);
    let bad = sync(&["--metrics", "nowhere", "--print-config"], None);
    assert_eq!(bad.code, 64, "{}", bad.stderr);
    assert!(bad.stderr.contains("nor `off`"), "{}", bad.stderr);

    // A service told --metrics off serves none, where the file said one.
    let servers = start_servers("sync_off", &[("alpha", None)], None);
    let state = tempdir("sync_off_state");
    std::fs::write(&file, "[sync]\nmetrics = \"127.0.0.1:0\"\n").unwrap();
    let (list, s) = (servers.list.to_str().unwrap(), state.to_str().unwrap());
    let mut args = vec!["--config", f, "--servers", list, "--state-dir", s];
    args.extend_from_slice(&[
        "--metrics",
        "off",
        "--now-socket",
        "off",
        "--interval",
        "1h",
    ]);
    let mut service = Service::start(&args);
    assert!(service.wait_for("started:", PATIENCE), "{}", service.log);
    service.stop_cleanly(PATIENCE);
    assert!(!service.log.contains("metrics on"), "{}", service.log);
    assert!(!service.log.contains("now socket on"), "{}", service.log);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&state);
}

/// A list that does not load is refused before the state directory is
/// made (docs/SYNC.md, "Exit codes"): the machine is left as it was.
#[test]
fn a_bad_list_leaves_no_state_directory_behind() {
    let dir = tempdir("sync_bad_list");
    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, b"{ not a list").unwrap();
    let missing = dir.join("missing.json");
    for (list, mode) in [
        (&garbage, "--once"),
        (&missing, "--once"),
        (&garbage, "--check"),
        (&garbage, "--interval"),
    ] {
        let state = dir.join("state-never-made");
        let mut args = vec![
            "--servers",
            list.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
            mode,
        ];
        if mode == "--interval" {
            // The service, not a one-shot round.
            args.push("1h");
        }
        let r = sync(&args, None);
        assert_eq!(r.code, 64, "{mode} {}: {}", list.display(), r.stderr);
        assert!(r.stderr.contains(&*list.to_string_lossy()), "{}", r.stderr);
        plain(&r.stderr);
        assert!(
            !state.exists(),
            "{mode} {}: {} was made",
            list.display(),
            state.display()
        );
        // Under --json the refusal is the one object.
        let j = sync(&[&args[..], &["--json"]].concat(), None);
        assert_eq!(j.code, 64);
        assert_eq!(j.json()["exit_code"], 64, "{}", j.stdout);
        assert!(!state.exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sync removes its now socket when it stops, so `gnomon now` finds no
/// socket and says that sync is not running, with the path and how to
/// start it, not a raw connect error; a socket left by a sync that was
/// killed says the same; `--json` says it as one object.
#[test]
fn the_now_socket_goes_when_sync_stops_and_now_says_sync_is_not_running() {
    let test = "sync_now_gone";
    let servers = start_servers(test, &[("alpha", None)], None);
    let state = tempdir(test);
    let dir = short_dir("nowgone");
    let sock = dir.join("now.sock");
    let (list, s, k) = (
        servers.list.to_str().unwrap(),
        state.to_str().unwrap(),
        sock.to_str().unwrap(),
    );
    let args = [
        "--servers",
        list,
        "--state-dir",
        s,
        "--now-socket",
        k,
        "--interval",
        "1h",
    ];
    let mut service = Service::start(&args);
    assert!(
        service.wait_for("now socket on", PATIENCE),
        "{}",
        service.log
    );
    assert!(sock.exists());
    service.stop_cleanly(PATIENCE);
    assert!(
        !sock.exists(),
        "{} is left after sync stopped",
        sock.display()
    );

    let n = now(&sock, &[]);
    assert_eq!(n.code, 1, "{}{}", n.stdout, n.stderr);
    for words in [
        "gnomon sync is not running",
        k,
        "systemctl start gnomon-sync",
    ] {
        assert!(n.stderr.contains(words), "{words}: {}", n.stderr);
    }
    plain(&n.stderr);
    let j = now(&sock, &["--json"]).json();
    assert_eq!(j["error"]["kind"], "not_running", "{j}");
    assert_eq!(j["exit_code"], 1, "{j}");

    // A socket nobody answers on: what a killed sync leaves.
    drop(UnixListener::bind(&sock).unwrap());
    let n = now(&sock, &[]);
    assert_eq!(n.code, 1);
    assert!(
        n.stderr.contains("gnomon sync is not running"),
        "{}",
        n.stderr
    );
    assert!(n.stderr.contains("nothing answers"), "{}", n.stderr);
    plain(&n.stderr);
    // And a sync that starts takes its place, then removes its own.
    std::fs::remove_file(&sock).unwrap();
    let mut again = Service::start(&args);
    assert!(again.wait_for("now socket on", PATIENCE), "{}", again.log);
    again.stop_cleanly(PATIENCE);
    assert!(!sock.exists());
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&state);
}

/// A sync stopped in the middle of a round (its signal thread ends the
/// process after the grace) removes the socket too, and under `--json`
/// prints its one object as it goes.
#[test]
fn a_sync_stopped_mid_round_removes_its_socket_and_says_so_under_json() {
    let test = "sync_now_mid";
    let state = tempdir(test);
    let dir = short_dir("nowmid");
    let sock = dir.join("now.sock");
    // A server that never answers: with a 10 s first wait the round
    // outlasts the 2 s grace.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let list = state.join("silent.json");
    std::fs::write(
        &list,
        format!(
            r#"{{"servers":[{{"name":"quiet","version":1,"publicKeyType":"ed25519","publicKey":"{}","addresses":[{{"protocol":"udp","address":"{}"}}]}}]}}"#,
            gnomon_testkit::base64(&[7; 32]),
            silent.local_addr().unwrap()
        ),
    )
    .unwrap();
    let out_file = state.join("stdout.json");
    let mut child = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(["sync", "--json", "--timeout", "10s", "--interval", "1h"])
        .arg("--servers")
        .arg(&list)
        .arg("--state-dir")
        .arg(state.join("s"))
        .arg("--now-socket")
        .arg(&sock)
        .stdout(std::fs::File::create(&out_file).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(gnomon_testkit::Reaped)
        .unwrap();
    let until = std::time::Instant::now() + PATIENCE;
    while !sock.exists() {
        assert!(std::time::Instant::now() < until, "no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(!sock.exists(), "{} left behind", sock.display());
    let out = std::fs::read_to_string(&out_file).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    let j: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(j["exit_code"], 0, "{j}");
    assert_eq!(j["stopped"], "in the middle of a round", "{j}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&state);
}

/// System errors in words, naming what failed and what to do: a metrics
/// address in use (71, also as one JSON object), an unreadable list, a
/// socket where `gnomon now` may not connect.
#[test]
fn system_errors_are_said_in_words() {
    let servers = start_servers("sync_words", &[("alpha", None)], None);
    let state = tempdir("sync_words");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (list, s) = (servers.list.to_str().unwrap(), state.to_str().unwrap());
    let args = [
        "--servers",
        list,
        "--state-dir",
        s,
        "--metrics",
        &addr,
        "--now-socket",
        "off",
    ];
    let r = sync(&args, None);
    assert_eq!(r.code, 71, "{}", r.stderr);
    assert!(
        r.stderr.contains(&addr) && r.stderr.contains("already in use"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("--metrics off"), "{}", r.stderr);
    plain(&r.stderr);
    let j = sync(&[&args[..], &["--json"]].concat(), None);
    assert_eq!(j.code, 71);
    let v = j.json();
    assert_eq!(v["exit_code"], 71, "{v}");
    plain(&j.stdout);

    let missing = state.join("no-such-list.json");
    let r = sync(
        &[
            "--servers",
            missing.to_str().unwrap(),
            "--state-dir",
            s,
            "--once",
        ],
        None,
    );
    assert_eq!(r.code, 64, "{}", r.stderr);
    plain(&r.stderr);
    let r = sync(
        &["--config", missing.to_str().unwrap(), "--print-config"],
        None,
    );
    assert_eq!(r.code, 64, "{}", r.stderr);
    plain(&r.stderr);

    // `gnomon now` on a path it may not reach: said, with what to do.
    let n = now(&PathBuf::from("/proc/1/no-such-dir/now.sock"), &[]);
    assert_eq!(n.code, 1);
    plain(&n.stderr);
    let _ = std::fs::remove_dir_all(&state);
}
