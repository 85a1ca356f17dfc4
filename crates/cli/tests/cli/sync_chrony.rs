//! `gnomon sync --chrony-sock` feeding a real chronyd (Debian's package)
//! from real `gnomon serve` processes on loopback: chrony uses Roughtime
//! as its source, or measures it without steering by it (`noselect`), with
//! the chrony.conf lines `gnomon sync --print-chrony-conf` prints (for a
//! round a second). A consensus wider than what those lines declare is
//! never sent.
//! chronyd runs with -x: it never touches this machine's clock, and with
//! -x a selected source's offset shows in `tracking` as how far chrony
//! believes the clock is behind.
//!
//! Where chrony is not installed or cannot run, the chrony tests skip and
//! say so; the hostile-path test needs no chrony.

use crate::serve_support;
use crate::sync_support;

use std::path::Path;
use std::time::Duration;

use gnomon_testkit::chrony::{Chronyd, Source, REFID};
use sync_support::{
    have_faketime, metrics_addr, scrape, start_servers, sync, tempdir, value, Run, Servers,
    Service, FAST,
};

/// What chrony is told of every sample (`--chrony-max-radius`): wider than
/// any consensus of the test servers, whose radius is 3 s, or the kernel's
/// maximum error (at most 16 s) on an unsynchronized host, plus round trips.
const BOUND: &str = "30s";
/// Beyond the consensus radius: chronyc prints nanoseconds, and rounds
/// are sent a moment after they are measured.
const MARGIN: f64 = 0.5;

/// `gnomon sync --print-chrony-conf ARGS`.
fn print_chrony_conf(args: &[&str]) -> Run {
    let mut a = vec!["--print-chrony-conf"];
    a.extend_from_slice(args);
    sync(&a, None)
}

/// The chrony.conf lines sync prints for `--chrony-sock PATH` and `args`,
/// comments left out; the refclock's first.
fn printed(path: &str, args: &[&str]) -> Vec<String> {
    let mut a = vec!["--chrony-sock", path];
    a.extend_from_slice(args);
    let r = print_chrony_conf(&a);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let lines: Vec<String> = r
        .stdout
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    assert!(
        lines[0].starts_with(&format!("refclock SOCK {path} refid {REFID} ")),
        "{}",
        r.stdout
    );
    lines
}

/// What sync prints for a round a second within `BOUND`, split for
/// [`Chronyd::start`] (which names the socket and refid itself): the
/// refclock options followed by `extra`, and the other lines.
fn chrony_lines(extra: &str) -> (String, String) {
    let path = "/run/chrony.gnomon.sock";
    let lines = printed(
        path,
        &[
            "--interval",
            "1s",
            "--jitter",
            "0",
            "--chrony-max-radius",
            BOUND,
        ],
    );
    let options = &lines[0][format!("refclock SOCK {path} refid {REFID} ").len()..];
    // The lines docs/SYNC.md explains, polled every second to match
    // `--interval 1s`, with delay twice the bound.
    assert_eq!(options, "poll 0 filter 1 delay 60");
    (format!("{options} {extra}"), lines[1..].join("\n"))
}

/// Three servers with their clocks at real time + `offset` ("+300"), and
/// `gnomon sync` sending every round to chronyd's refclock socket.
fn feed(test: &str, offset: Option<&str>, chronyd: &Chronyd) -> (Servers, Service) {
    let spec = [("alpha", offset), ("bravo", offset), ("charlie", offset)];
    let servers = start_servers(test, &spec, None);
    let service = every_second(
        &servers.list,
        &servers.dir.join("state"),
        &chronyd.sock(),
        &[],
    );
    (servers, service)
}

/// `gnomon sync` as a service, a round a second, feeding `sock` samples
/// within `BOUND` unless `extra` names another.
fn every_second(list: &Path, state: &Path, sock: &Path, extra: &[&str]) -> Service {
    let mut args = vec![
        "--servers",
        list.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "--interval",
        "1s",
        "--jitter",
        "0",
        "--chrony-sock",
        sock.to_str().unwrap(),
    ];
    if !extra.contains(&"--chrony-max-radius") {
        args.extend_from_slice(&["--chrony-max-radius", BOUND]);
    }
    // A wider consensus is not used at all, for chrony either.
    if !extra.contains(&"--max-radius") {
        args.extend_from_slice(&["--max-radius", BOUND]);
    }
    args.extend_from_slice(&FAST);
    args.extend_from_slice(extra);
    Service::start(&args)
}

/// The widest consensus radius `gnomon sync` logged ("… ±1.234 s …"),
/// seconds; panics when it logged none.
fn widest_radius(log: &str) -> f64 {
    log.lines()
        .filter(|l| l.contains("consensus"))
        .filter_map(|l| l.split_once('±')?.1.split_once(" s")?.0.parse().ok())
        .fold(None, |w: Option<f64>, r| Some(w.map_or(r, |w| w.max(r))))
        .unwrap_or_else(|| panic!("no consensus logged:\n{log}"))
}

fn stop(mut service: Service) -> String {
    service.stop_cleanly(Duration::from_secs(30));
    std::mem::take(&mut service.log)
}

/// chrony selects the refclock and believes the clock is `expected_s`
/// behind true time, within the consensus radius.
fn chrony_follows(test: &str, offset: Option<&str>, expected_s: f64) {
    if offset.is_some() && !have_faketime(test) {
        return;
    }
    let (options, conf) = chrony_lines("");
    let Some(chronyd) = Chronyd::start(test, &options, &conf) else {
        return;
    };
    let (_servers, mut service) = feed(test, offset, &chronyd);
    let source = chronyd.wait_for(
        "the Roughtime refclock selected",
        Duration::from_secs(90),
        |s, n| {
            // Keep sync's log flowing so its pipe never fills.
            service.wait_for("\u{0}", Duration::ZERO);
            s.state == '*' && n >= 3
        },
    );
    let tracking = chronyd.tracking().expect("chronyc tracking");
    let log = stop(service);
    let bound = widest_radius(&log) + MARGIN;
    assert_eq!(tracking.reference, REFID, "{tracking:?}\n{log}");
    assert!(
        (tracking.behind - expected_s).abs() <= bound,
        "chrony believes the clock is {} s behind, expected {expected_s} ± {bound}; {source:?}\n{log}",
        tracking.behind
    );
    assert!(!log.contains("chrony: cannot"), "a sample failed:\n{log}");
}

#[test]
fn chrony_uses_roughtime_as_its_source_and_agrees_with_the_servers() {
    chrony_follows("sync_chrony_source", None, 0.0);
}

#[test]
fn servers_300_s_ahead_put_chrony_300_s_ahead() {
    chrony_follows("sync_chrony_source_300", Some("+300"), 300.0);
}

#[test]
fn with_noselect_chrony_measures_roughtime_and_never_follows_it() {
    let test = "sync_chrony_noselect";
    if !have_faketime(test) {
        return;
    }
    // noselect: the source is never selected, so its distance is never
    // held against maxdistance; chrony's default stays.
    let (options, _) = chrony_lines("noselect");
    let Some(chronyd) = Chronyd::start(test, &options, "") else {
        return;
    };
    let (_servers, mut service) = feed(test, Some("+300"), &chronyd);
    let source: Source = chronyd.wait_for("three samples", Duration::from_secs(90), |s, n| {
        service.wait_for("\u{0}", Duration::ZERO);
        s.last_rx.is_some() && n >= 3
    });
    let tracking = chronyd.tracking().expect("chronyc tracking");
    let log = stop(service);
    let bound = widest_radius(&log) + MARGIN;
    // chronyc prints the local clock minus the source: a source ahead of
    // us is negative.
    assert!(
        (source.measured_offset + 300.0).abs() <= bound,
        "{source:?}, expected -300 ± {bound}\n{log}"
    );
    assert_ne!(source.state, '*', "{source:?}");
    assert_eq!(tracking.reference, "", "{tracking:?}");
    assert_eq!(tracking.leap, "Not synchronised", "{tracking:?}");
}

/// A round whose consensus is not used (fewer than the quorum agree) is
/// not sent: chrony hears nothing rather than a guess.
#[test]
fn a_round_without_the_quorum_sends_chrony_nothing() {
    let test = "sync_chrony_no_quorum";
    let (options, conf) = chrony_lines("noselect");
    let Some(chronyd) = Chronyd::start(test, &options, &conf) else {
        return;
    };
    // One server that answers, trusted (no liar assumed, so its answer is
    // a consensus), and a quorum of two.
    let servers = start_servers(test, &[("alpha", None)], None);
    let extra = ["--min-servers", "1", "--quorum", "2", "--max-liars", "0"];
    let state = servers.dir.join("state");
    let mut service = every_second(&servers.list, &state, &chronyd.sock(), &extra);
    for round in 0..3 {
        assert!(
            service.wait_for("NOT USED", Duration::from_secs(30)),
            "round {round}:\n{}",
            service.log
        );
    }
    let source = chronyd.source().expect("chronyc sources");
    let samples = chronyd.samples().expect("chronyc sourcestats");
    let log = stop(service);
    assert_eq!((source.last_rx, samples), (None, 0), "{source:?}\n{log}");
    assert!(!log.contains("chrony:"), "{log}");
}

#[test]
fn hostile_chrony_paths_never_stop_or_slow_sync() {
    let test = "sync_chrony_hostile";
    let servers = start_servers(
        test,
        &[("alpha", None), ("bravo", None), ("charlie", None)],
        None,
    );
    let dir = tempdir(test);
    let file = dir.join("regular-file");
    std::fs::write(&file, b"not a socket").unwrap();
    let state = dir.join("state");

    // A service whose socket path is a regular file: it keeps measuring,
    // and says so once, not every round.
    let mut service = every_second(&servers.list, &state, &file, &[]);
    for round in 0..4 {
        assert!(
            service.wait_for("consensus", Duration::from_secs(30)),
            "round {round} never came:\n{}",
            service.log
        );
    }
    let log = stop(service);
    let warnings = log.lines().filter(|l| l.contains("chrony: cannot")).count();
    assert_eq!(warnings, 1, "{log}");
    assert!(log.contains("nothing reads this path"), "{log}");

    let (list, state) = (servers.list.to_str().unwrap(), state.to_str().unwrap());
    // --once with a directory, and with no socket at all (chronyd not
    // started yet): the round succeeds, the failure is said.
    for (path, hint) in [
        (dir.clone(), "nothing reads this path"),
        (dir.join("missing.sock"), "is chronyd running"),
    ] {
        let mut args = vec!["--servers", list, "--state-dir", state, "--once"];
        args.extend_from_slice(&FAST);
        args.extend_from_slice(&["--chrony-max-radius", BOUND, "--max-radius", BOUND]);
        args.extend_from_slice(&["--chrony-sock", path.to_str().unwrap()]);
        let r = sync(&args, None);
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(hint), "{}", r.stderr);
    }
    // A path no socket address can hold is refused at start.
    let long = format!("/{}", "x".repeat(200));
    let r = sync(&["--servers", list, "--once", "--chrony-sock", &long], None);
    assert_eq!(r.code, 64, "{}{}", r.stdout, r.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The shell command of the chrony drop-in docs/SYNC.md gives.
fn drop_in_command() -> String {
    let doc = std::fs::read_to_string(serve_support::repo().join("docs/SYNC.md")).unwrap();
    let line = doc
        .lines()
        .find_map(|l| l.trim().strip_prefix("ExecStartPost=+/bin/sh -c '"))
        .expect("SYNC.md's chrony drop-in");
    line.strip_suffix('\'').expect("quoted").to_string()
}

/// The chrony drop-in docs/SYNC.md gives is a valid unit file section,
/// where `systemd-analyze` exists.
#[test]
fn the_chrony_drop_in_verifies() {
    let test = "sync_chrony_drop_in";
    let analyze = std::process::Command::new("systemd-analyze")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .status();
    if !analyze.is_ok_and(|s| s.success()) {
        gnomon_testkit::skip(
            test,
            "no systemd-analyze: the drop-in's syntax was not verified",
        );
        return;
    }
    let dir = tempdir(test);
    let unit = dir.join("chrony-like.service");
    std::fs::write(
        &unit,
        format!(
            "[Service]\nType=oneshot\nExecStart=/bin/true\nExecStartPost=+/bin/sh -c '{}'\n",
            drop_in_command()
        ),
    )
    .unwrap();
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.is_empty(), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `gnomon sync --once` as `nobody` (group `nogroup`), feeding `sock`.
fn once_as_nobody(servers: &Servers, state: &Path, sock: &Path) -> std::process::Output {
    let gnomon = serve_support::gnomon_for_anyone();
    let mut cmd = gnomon_testkit::command("/usr/bin/setpriv");
    cmd.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--no-new-privs",
        gnomon.to_str().unwrap(),
        "sync",
        "--once",
        "--servers",
        servers.list.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "--chrony-sock",
        sock.to_str().unwrap(),
        "--chrony-max-radius",
        BOUND,
        "--max-radius",
        BOUND,
    ])
    .args(FAST);
    cmd.output().unwrap()
}

/// chronyd makes its refclock socket as root, writable by root only: the
/// unprivileged user sync runs as is refused (and told why) until the
/// socket's group is its own and may write, as docs/SYNC.md's chrony
/// drop-in arranges.
#[test]
fn the_socket_chronyd_makes_needs_its_group_opened_to_the_sync_user() {
    let test = "sync_chrony_permissions";
    if !gnomon_testkit::is_root() {
        gnomon_testkit::skip(test, "needs root to run sync as another user");
        return;
    }
    if !Path::new("/usr/bin/setpriv").exists() {
        gnomon_testkit::skip(test, "/usr/bin/setpriv missing (package util-linux)");
        return;
    }
    let (options, conf) = chrony_lines("noselect");
    let Some(chronyd) = Chronyd::start(test, &options, &conf) else {
        return;
    };
    let servers = start_servers(
        test,
        &[("alpha", None), ("bravo", None), ("charlie", None)],
        None,
    );
    let state = tempdir(test);
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
    let sock = chronyd.sock();
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode();
    assert_eq!(
        mode & 0o022,
        0,
        "chronyd's socket is writable by others: {mode:o}"
    );

    let out = once_as_nobody(&servers, &state, &sock);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("Permission denied"), "{stderr}");
    assert!(stderr.contains("writable by this user"), "{stderr}");

    // The drop-in's own command, with nogroup for the gnomon group.
    let command = drop_in_command()
        .replace("/run/chrony.gnomon.sock", sock.to_str().unwrap())
        .replace("chgrp gnomon", "chgrp nogroup");
    let status = std::process::Command::new("/bin/sh")
        .args(["-c", &command])
        .status()
        .unwrap();
    assert!(status.success(), "{command}");
    let out = once_as_nobody(&servers, &state, &sock);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("chrony: cannot"), "{stderr}");
    chronyd.wait_for("the sample", Duration::from_secs(30), |s, _| {
        s.last_rx.is_some()
    });
    let _ = std::fs::remove_dir_all(&state);
}

/// `--print-chrony-conf` prints docs/SYNC.md's lines for the defaults, and
/// the lines for other settings (flags, variables, a file), without a
/// server list or a round; a real chronyd takes them.
#[test]
fn print_chrony_conf_prints_the_lines_for_the_settings_and_chronyd_takes_them() {
    let test = "sync_chrony_print_conf";
    let sock = "/run/chrony.gnomon.sock";
    // The defaults: a round every 10 m ± 10 %, ±5 s. No list is needed: no
    // round runs.
    let lines = printed(sock, &[]);
    assert_eq!(
        lines,
        [
            "refclock SOCK /run/chrony.gnomon.sock refid RTIM poll 10 filter 1 delay 10",
            "maxdistance 10"
        ]
    );
    // docs/SYNC.md gives those very lines.
    let doc = std::fs::read_to_string(serve_support::repo().join("docs/SYNC.md")).unwrap();
    for l in &lines {
        assert!(
            doc.lines().any(|d| d.trim() == l),
            "docs/SYNC.md lacks `{l}`"
        );
    }
    // Flags, a variable and a file: a round every 64 s ± 10 % (up to
    // 70.4 s: poll 7), ±20 s.
    let dir = tempdir(test);
    let file = dir.join("sync.toml");
    std::fs::write(
        &file,
        format!("[sync]\nchrony-sock = \"{sock}\"\ninterval = \"64s\"\n"),
    )
    .unwrap();
    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args([
            "sync",
            "--print-chrony-conf",
            "--config",
            file.to_str().unwrap(),
        ])
        .env("GNOMON_SYNC_CHRONY_MAX_RADIUS", "20s")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let got: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        got,
        [
            "refclock SOCK /run/chrony.gnomon.sock refid RTIM poll 7 filter 1 delay 40",
            "maxdistance 40"
        ]
    );
    // Without a socket there is no line to print; a path chrony.conf cannot
    // hold is refused.
    let r = print_chrony_conf(&[]);
    assert_eq!(r.code, 64, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("no chrony-sock"), "{}", r.stderr);
    let r = print_chrony_conf(&["--chrony-sock", "/run/a:b.sock"]);
    assert_eq!(r.code, 64, "{}{}", r.stdout, r.stderr);

    // chronyd starts with the default lines: the refclock polled as
    // printed (chronyc's poll column).
    let options = &lines[0][format!("refclock SOCK {sock} refid {REFID} ").len()..];
    let Some(chronyd) = Chronyd::start(test, options, &lines[1]) else {
        return;
    };
    let sources = chronyd
        .chronyc(&["-c", "sources"])
        .expect("chronyc sources");
    let poll = sources
        .lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|f| f.get(2) == Some(&REFID))
        .map(|f| f[4].to_string());
    assert_eq!(poll.as_deref(), Some("10"), "{sources}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A consensus wider than `--chrony-max-radius` (the error chrony's line
/// declares) never reaches the socket: every round is counted as too_wide
/// and one line says so. With a bound that holds it, the same servers'
/// samples arrive: the socket was listening.
#[test]
fn a_consensus_wider_than_chrony_max_radius_is_never_sent() {
    let test = "sync_chrony_too_wide";
    let servers = start_servers(
        test,
        &[("alpha", None), ("bravo", None), ("charlie", None)],
        None,
    );
    let dir = tempdir(test);
    let path = dir.join("refclock.sock");
    // Where chrony would read: a datagram socket of the test's own.
    let chrony = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    chrony.set_nonblocking(true).unwrap();
    let state = dir.join("state");
    // The servers' radius is at least 3 s: no consensus is within 1 s.
    let mut service = every_second(
        &servers.list,
        &state,
        &path,
        &["--chrony-max-radius", "1s", "--metrics", "127.0.0.1:0"],
    );
    let addr = metrics_addr(&mut service);
    assert!(
        service.wait_for("round 3: consensus", Duration::from_secs(30)),
        "{}",
        service.log
    );
    // The sink runs after the round's line: scrape until it has counted
    // three rounds, for at most 30 s.
    let series = |r: &str| format!("gnomon_sync_chrony_samples_total{{result=\"{r}\"}}");
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let text = loop {
        let text = scrape(addr, Duration::from_secs(5)).expect("a scrape");
        if value(&text, &series("too_wide")) >= 3.0 {
            break text;
        }
        assert!(std::time::Instant::now() < until, "{text}\n{}", service.log);
    };
    assert_eq!(value(&text, &series("sent")), 0.0, "{text}");
    assert_eq!(value(&text, &series("failed")), 0.0, "{text}");
    let log = stop(service);
    let mut buf = [0u8; 128];
    let nothing = chrony.recv(&mut buf);
    assert!(nothing.is_err(), "a sample reached the socket\n{log}");
    let said: Vec<&str> = log.lines().filter(|l| l.contains("chrony:")).collect();
    assert_eq!(said.len(), 1, "{log}");
    assert!(
        said[0].contains("not sending: the consensus radius")
            && said[0].contains(
                "exceeds chrony-max-radius (1 s, the error the refclock's `delay 2` declares)"
            ),
        "{log}"
    );
    assert!(widest_radius(&log) > 1.0, "{log}");

    // The same servers within the bound: samples arrive.
    let mut service = every_second(&servers.list, &state, &path, &[]);
    assert!(
        service.wait_for("chrony: sending samples", Duration::from_secs(30)),
        "{}",
        service.log
    );
    chrony.set_nonblocking(false).unwrap();
    chrony
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let n = chrony.recv(&mut buf).expect("a sample");
    assert_eq!(n, gnomon_sync::chrony::SAMPLE_LEN);
    let log = stop(service);
    assert!(!log.contains("not sending"), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}
