//! `gnomon sync --once`, `--check`, `--set-clock --dry-run`, `--status`
//! against real `gnomon serve` processes on loopback, one of them lying
//! through libfaketime, and sync's own clock shifted the same way.
//!
//! No test steps this machine's clock: CLOCK_REALTIME has no namespace
//! of its own, so a real `--set-clock` would move every process's time.
//! The step is tested as a plan (`--dry-run`) here and as a decision in
//! crates/sync/src/decision.rs.

use crate::serve_support;
use crate::sync_support;

use std::time::Duration;

use gnomon_protocol::report::MEDIA_TYPE;
use gnomon_testkit::ReportSink;
use sync_support::{
    have_faketime, real_now_us, start_servers, state, sync, tempdir, FAST, LIBFAKETIME,
};

const HONEST: [(&str, Option<&str>); 3] = [("alpha", None), ("bravo", None), ("charlie", None)];
const S: i64 = 1_000_000;

/// The servers' radius is the kernel's error estimate when larger than
/// 3 s; on an unsynchronized test host that can be tens of seconds, wider
/// than the default `max-radius`: a minute unless `extra` says.
fn args<'a>(list: &'a str, dir: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--servers", list, "--state-dir", dir];
    v.extend_from_slice(&FAST);
    if !extra.contains(&"--max-radius") {
        v.extend_from_slice(&["--max-radius", "1m"]);
    }
    v.extend_from_slice(extra);
    v
}

#[test]
fn a_liar_is_excluded_named_reported_and_stays_out_after_a_restart() {
    let test = "sync_liar";
    if !have_faketime(test) {
        return;
    }
    let sink = ReportSink::start(0);
    let mut spec = HONEST.to_vec();
    spec.push(("liar", Some("+3600")));
    let servers = start_servers(test, &spec, Some(&sink.url()));
    let dir = tempdir(test);
    let (list, d) = (servers.list.to_str().unwrap(), dir.to_str().unwrap());
    let loopback = "--allow-loopback-http-reports";

    let r = sync(&args(list, d, &["--once", "--json", loopback]), None);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["outside"], serde_json::json!(["liar"]), "{j}");
    let mut agreeing: Vec<&str> = j["consensus"]["agreeing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    agreeing.sort_unstable();
    assert_eq!(agreeing, ["alpha", "bravo", "charlie"]);
    // The consensus holds now (sync's clock is real): within the honest
    // servers' radius of it.
    let c = &j["consensus"];
    let (lo, hi) = (
        c["offset_low_us"].as_i64().unwrap(),
        c["offset_high_us"].as_i64().unwrap(),
    );
    assert!(lo <= 0 && 0 <= hi, "{c}");
    assert!(c["offset_us"].as_i64().unwrap().abs() <= c["radius_us"].as_i64().unwrap());
    // 3 s, or the kernel's error estimate on a host whose clock is
    // unsynchronized (17 s on the machine these tests were written on).
    assert!(c["radius_us"].as_i64().unwrap() <= 60 * S, "{c}");

    // The report: written, posted, and a proof for verify-report.
    let file = j["report_file"]
        .as_str()
        .expect("a report file")
        .to_string();
    let v = gnomon(&["verify-report", &file]);
    assert_eq!(v.code, 3, "{}{}", v.stdout, v.stderr);
    assert!(v.stdout.contains("PROOF OF MALFEASANCE"), "{}", v.stdout);
    let posted = sink.received();
    assert_eq!(posted.len(), 1, "{}", r.stderr);
    assert_eq!(posted[0].body, std::fs::read(&file).unwrap());
    assert_eq!(posted[0].content_type.as_deref(), Some(MEDIA_TYPE));

    // The state names it; a restart keeps it out without a second report.
    let status = sync(&["--status", "--state-dir", d], None);
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(
        status.stdout.contains("excluded     liar"),
        "{}",
        status.stdout
    );
    assert!(
        status
            .stdout
            .contains("assumption   assumes at most 1 of the 4 listed servers lies"),
        "{}",
        status.stdout
    );
    let floor1 = state(&dir)["floor_us"].as_i64().unwrap();
    let r2 = sync(&args(list, d, &["--once", "--json", loopback]), None);
    assert_eq!(r2.code, 0, "{}{}", r2.stdout, r2.stderr);
    let j2 = r2.json();
    assert_eq!(j2["outside"], serde_json::json!(["liar"]), "{j2}");
    assert!(r2.stdout.contains("\"report_file\":null"), "{}", r2.stdout);
    assert_eq!(
        j2["consensus"]["answering"], 4,
        "a marked liar still votes (history takes no vote away): {j2}"
    );
    assert_eq!(sink.received().len(), 1);
    let floor2 = state(&dir)["floor_us"].as_i64().unwrap();
    assert!(
        floor1 <= floor2 && floor2 <= real_now_us(),
        "{floor1} {floor2}"
    );
    // The chain of the last round, kept for reports, verifies.
    let chain = dir.join("sync-chain.json");
    let v = gnomon(&["verify-report", chain.to_str().unwrap()]);
    assert_eq!(v.code, 3, "{}{}", v.stdout, v.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

fn gnomon(args: &[&str]) -> sync_support::Run {
    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(args)
        .output()
        .unwrap();
    sync_support::Run {
        code: out.status.code().unwrap(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The step planned with the local clock at real time + `offset`.
fn plan(list: &str, dir: &str, offset: Option<&str>, extra: &[&str]) -> (i32, serde_json::Value) {
    // The servers' radius is the kernel's error estimate when larger than
    // 3 s; on an unsynchronized test host that can be tens of seconds.
    let mut a = vec!["--once", "--set-clock", "--dry-run", "--json"];
    a.extend_from_slice(extra);
    let a = args(list, dir, &a);
    let r = sync(&a, offset);
    (r.code, r.json())
}

/// Three honest servers and a state directory, where libfaketime can
/// shift sync's clock.
fn honest_under_faketime(test: &str) -> Option<(sync_support::Servers, std::path::PathBuf)> {
    if !have_faketime(test) {
        return None;
    }
    Some((start_servers(test, &HONEST, None), tempdir(test)))
}

#[test]
fn set_clock_dry_run_plans_steps_and_refuses_what_is_unsafe() {
    let Some((servers, dir)) = honest_under_faketime("sync_set_clock") else {
        return;
    };
    let (list, d) = (servers.list.to_str().unwrap(), dir.to_str().unwrap());
    let near = |v: &serde_json::Value, want: i64| (v.as_i64().unwrap() - want).abs() < 5 * S;

    // Inside: nothing to do; the floor is proven.
    let (code, j) = plan(list, d, None, &[]);
    assert_eq!(code, 0, "{j}");
    assert_eq!(j["step"]["action"], "none", "{j}");
    // Behind by 300 s: forward; ahead: back (past an honest floor).
    let (code, j) = plan(list, d, Some("-300"), &[]);
    assert_eq!((code, &j["step"]["action"]), (0, &"step".into()), "{j}");
    assert!(near(&j["step"]["delta_us"], 300 * S), "{j}");
    assert_eq!(j["step"]["dry_run"], true);
    let (code, j) = plan(list, d, Some("+300"), &[]);
    assert_eq!((code, &j["step"]["action"]), (0, &"step".into()), "{j}");
    assert!(near(&j["step"]["delta_us"], -300 * S), "{j}");
    // A board without an RTC, booted in 1971: forward by decades.
    let (code, j) = plan(list, d, Some("@1971-01-01 00:00:00"), &[]);
    assert_eq!((code, &j["step"]["action"]), (0, &"step".into()), "{j}");
    assert!(
        near(&j["step"]["delta_us"], real_now_us() - 31_536_000 * S),
        "{j}"
    );
    // A clock 300 s ahead proved nothing beyond the real time: the floor
    // is the consensus's lower bound in real time, not local time.
    let floor = state(&dir)["floor_us"].as_i64().unwrap();
    assert!(
        floor <= real_now_us() && floor > real_now_us() - 60 * S,
        "{floor}"
    );

    // Refusals: too few agree, too wide, below the persisted floor.
    let (code, j) = plan(list, d, Some("+300"), &["--quorum", "4"]);
    assert_eq!((code, &j["step"]["reason"]), (1, &"quorum".into()), "{j}");
    let (code, j) = plan(list, d, Some("+300"), &["--max-radius", "1s"]);
    assert_eq!((code, &j["step"]["reason"]), (5, &"too_wide".into()), "{j}");
    // As if this machine had proven an hour from now before.
    let path = dir.join("sync-state.json");
    let mut st = state(&dir);
    st["floor_us"] = (real_now_us() + 3600 * S).into();
    std::fs::write(&path, st.to_string()).unwrap();
    let (code, j) = plan(list, d, Some("+300"), &[]);
    assert_eq!(
        (code, &j["step"]["reason"]),
        (5, &"below_floor".into()),
        "{j}"
    );
    // A forward step that still lands below the floor is refused too:
    // the servers agree on a time this machine proved has passed.
    let (code, j) = plan(list, d, Some("-7200"), &[]);
    assert_eq!(
        (code, &j["step"]["reason"]),
        (5, &"below_floor".into()),
        "{j}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_exits_0_inside_and_4_outside() {
    let Some((servers, dir)) = honest_under_faketime("sync_check") else {
        return;
    };
    let (list, d) = (servers.list.to_str().unwrap(), dir.to_str().unwrap());
    let r = sync(&args(list, d, &["--check", "--json"]), None);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(
        (&j["inside"], &j["outside_by_us"]),
        (&true.into(), &0.into()),
        "{j}"
    );

    let r = sync(&args(list, d, &["--check", "--json"]), Some("+300"));
    assert_eq!(r.code, 4, "{}{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["inside"], false, "{j}");
    let by = j["outside_by_us"].as_i64().unwrap();
    let radius = j["consensus"]["radius_us"].as_i64().unwrap();
    assert!(
        ((-300 * S - 1)..=(-300 * S + 2 * radius)).contains(&by),
        "{j}"
    );
    assert_eq!(j["exit_code"], 4);

    let r = sync(&args(list, d, &["--check"]), Some("+300"));
    assert_eq!(r.code, 4);
    assert!(
        r.stdout
            .contains("local clock OUTSIDE the consensus interval"),
        "{}",
        r.stdout
    );
    let r = sync(
        &args(list, d, &["--check", "--max-offset", "10m"]),
        Some("+300"),
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("local clock inside"), "{}", r.stdout);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn corrupt_state_and_a_missing_list_are_warnings_not_crashes() {
    let test = "sync_corrupt";
    let servers = start_servers(test, &HONEST, None);
    let dir = tempdir(test);
    let (list, d) = (servers.list.to_str().unwrap(), dir.to_str().unwrap());
    std::fs::write(dir.join("sync-state.json"), b"{\"floor_us\": 17\x00\xff").unwrap();
    let status = sync(&["--status", "--state-dir", d], None);
    assert_eq!(status.code, 1, "{}", status.stderr);
    assert!(status.stderr.contains("corrupt"), "{}", status.stderr);

    let r = sync(&args(list, d, &["--once"]), None);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains("warning: ") && r.stderr.contains("is corrupt"),
        "{}",
        r.stderr
    );
    assert!(dir.join("sync-state.json.corrupt").exists());
    let status = sync(&["--status", "--state-dir", d], None);
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(
        status.stdout.contains("floor        20"),
        "{}",
        status.stdout
    );

    // The list file gone: the copy cached in the state directory.
    let moved = dir.join("moved.json");
    std::fs::rename(&servers.list, &moved).unwrap();
    let r = sync(&args(list, d, &["--once"]), None);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("using the cached list"), "{}", r.stderr);
    // Neither the file nor a cache: a usage error, no crash.
    let empty = tempdir(test);
    let r = sync(&args(list, empty.to_str().unwrap(), &["--once"]), None);
    assert_eq!(r.code, 64, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("no cached list"), "{}", r.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&empty);
}

#[test]
fn deploy_sync_toml_loads_and_prints_back() {
    let file = serve_support::repo().join("deploy/gnomon-sync.toml");
    let r = sync(
        &["--config", file.to_str().unwrap(), "--print-config"],
        None,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("interval = \"10m\""), "{}", r.stdout);
    // Flags win over the file; a value out of range names its key.
    let r = sync(
        &[
            "--config",
            file.to_str().unwrap(),
            "--print-config",
            "--quorum",
            "3",
        ],
        None,
    );
    assert!(r.stdout.contains("quorum = 3"), "{}", r.stdout);
    // GNOMON_SYNC_* over the file, flags over both.
    let env = |extra: &[&str]| {
        let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
            .args(["sync", "--config", file.to_str().unwrap(), "--print-config"])
            .args(extra)
            .env("GNOMON_SYNC_QUORUM", "4")
            .env("GNOMON_SYNC_INTERVAL", "90s")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = env(&[]);
    assert!(
        out.contains("quorum = 4") && out.contains("interval = \"90s\""),
        "{out}"
    );
    assert!(env(&["--quorum", "5"]).contains("quorum = 5"));
    let bad = tempdir("sync_toml").join("bad.toml");
    std::fs::write(&bad, "[sync]\ninterval = \"0s\"\n").unwrap();
    let r = sync(&["--config", bad.to_str().unwrap(), "--print-config"], None);
    assert_eq!(r.code, 64, "{}", r.stderr);
    assert!(r.stderr.contains("[sync] interval"), "{}", r.stderr);
    let _ = Duration::ZERO;
}

/// The sync units' command lines, as written in deploy/, parse and load
/// what their comments say: a misspelt flag or a path changed in one place
/// fails here, not at an operator's boot.
#[test]
fn the_sync_units_command_lines_are_what_sync_accepts() {
    for (file, flags, extra) in [
        (
            "deploy/gnomon-bootstrap.service",
            &["--once", "--set-clock"][..],
            None,
        ),
        (
            "deploy/gnomon-sync.service",
            &["--chrony-sock"][..],
            Some("chrony-sock = \"/run/chrony.gnomon.sock\""),
        ),
    ] {
        let unit = std::fs::read_to_string(serve_support::repo().join(file)).unwrap();
        let exec = unit
            .lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .expect("an ExecStart line");
        let mut words = exec.split_whitespace();
        assert!(words.next().unwrap().ends_with("/gnomon"), "{file}: {exec}");
        assert_eq!(words.next(), Some("sync"), "{file}: {exec}");
        let mut args: Vec<&str> = words.collect();
        for flag in flags {
            assert!(args.contains(flag), "{file}: {exec}");
        }
        args.push("--print-config");
        let r = sync(&args, None);
        assert_eq!(r.code, 0, "{file}: {exec}: {}", r.stderr);
        for line in [
            "servers = \"/etc/gnomon/servers.json\"",
            "state-dir = \"/var/lib/gnomon\"",
        ]
        .into_iter()
        .chain(extra)
        {
            assert!(r.stdout.contains(line), "{file}: {line}\n{}", r.stdout);
        }
    }
}

/// The one real `--set-clock` this suite makes: as `nobody` with every
/// capability dropped, where the kernel refuses it (EPERM), so the system
/// call is made and this machine's clock cannot move. Root is needed to
/// drop to `nobody`; without root or setpriv the test says so and stops.
#[test]
fn set_clock_without_cap_sys_time_exits_71_and_moves_nothing() {
    let test = "sync_set_clock_eperm";
    if !gnomon_testkit::is_root() {
        gnomon_testkit::skip(
            test,
            "needs root to run sync as nobody without capabilities",
        );
        return;
    }
    if !std::path::Path::new("/usr/bin/setpriv").exists() {
        gnomon_testkit::skip(test, "/usr/bin/setpriv missing (package util-linux)");
        return;
    }
    let Some((servers, dir)) = honest_under_faketime(test) else {
        return;
    };
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let gnomon = serve_support::gnomon_for_anyone();
    let mut cmd = gnomon_testkit::command("/usr/bin/setpriv");
    cmd.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--bounding-set=-all",
        "--inh-caps=-all",
        "--no-new-privs",
        // libfaketime in gnomon only: preloaded into setpriv (root), it
        // makes a semaphore the dropped process may not open.
        "/usr/bin/env",
        &format!("LD_PRELOAD={LIBFAKETIME}"),
        "FAKETIME=-300",
        "FAKETIME_DONT_FAKE_MONOTONIC=1",
        gnomon.to_str().unwrap(),
        "sync",
    ])
    // 300 s behind (FAKETIME above): a step is planned and attempted.
    .args(args(
        servers.list.to_str().unwrap(),
        dir.to_str().unwrap(),
        &["--once", "--set-clock", "--json", "--max-radius", "1m"],
    ));
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(71),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(j["step"]["action"], "step", "{j}");
    assert_eq!(j["step"]["done"], false, "{j}");
    // In words, naming what is missing, without the errno.
    let error = j["step"]["error"].as_str().unwrap();
    assert!(
        error.contains("permission denied") && error.contains("CAP_SYS_TIME"),
        "{j}"
    );
    assert!(!stdout.contains("os error"), "{j}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A usage error leaves the machine as it was: `--once` without a server
/// list must not create the state directory (by default /var/lib/gnomon)
/// on its way to exit 64.
#[test]
fn no_server_list_is_a_usage_error_that_creates_nothing() {
    let parent = tempdir("no-list");
    let state = parent.join("state");
    let r = sync(&["--once", "--state-dir", state.to_str().unwrap()], None);
    assert_eq!(r.code, 64, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("no server list"), "{}", r.stderr);
    assert!(!state.exists(), "{} was created", state.display());
    std::fs::remove_dir_all(&parent).unwrap();
}
