//! `gnomon now` against a running `gnomon sync --now-socket` (docs/NOW.md):
//! "no proof" before a round, an interval containing the true time after
//! one from real `gnomon serve` processes, the same interval after the
//! sync process's wall clock is stepped an hour under libfaketime, and
//! hostile clients that neither stall the socket nor the rounds.

use crate::sync_support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use sync_support::{
    every_second, metrics_addr, now, real_now_us, scrape, start_servers, tempdir, value, Now,
    Service, FAST, LIBFAKETIME,
};

/// Generous bounds against hangs, never expected times.
const PATIENCE: Duration = Duration::from_secs(60);

/// `gnomon now --json` until `ok` holds for the answer, for at most
/// PATIENCE; the last answer, with the real time just before and just
/// after it was asked (true time was between them when sync answered).
fn poll(socket: &Path, extra: &[&str], ok: impl Fn(&Now) -> bool) -> (Now, i64, i64) {
    let until = Instant::now() + PATIENCE;
    loop {
        let before = real_now_us();
        let mut args = vec!["--json"];
        args.extend_from_slice(extra);
        let n = now(socket, &args);
        let after = real_now_us();
        if ok(&n) {
            return (n, before, after);
        }
        assert!(
            Instant::now() < until,
            "no such answer in time: {} {}",
            n.stdout,
            n.stderr
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn short_socket(name: &str) -> (PathBuf, PathBuf) {
    // A socket path holds 107 bytes: under /tmp, not a long tempdir.
    let dir = PathBuf::from(format!("/tmp/gn-now-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Whatever the umask: another user may reach the socket in it.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir.join("now.sock"), dir)
}

fn interval(j: &Value) -> (i64, i64) {
    (
        j["earliest_unix_us"].as_i64().unwrap(),
        j["latest_unix_us"].as_i64().unwrap(),
    )
}

/// A list of three servers that never answer (UDP sockets nobody reads),
/// written into `dir`; the sockets must be kept.
fn silent_list(dir: &Path) -> (PathBuf, Vec<std::net::UdpSocket>) {
    let silent: Vec<std::net::UdpSocket> = (0..3)
        .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
        .collect();
    let entries: Vec<String> = silent
        .iter()
        .enumerate()
        .map(|(i, s)| {
            format!(
                r#"{{"name":"s{i}","version":1,"publicKeyType":"ed25519","publicKey":"{}","addresses":[{{"protocol":"udp","address":"{}"}}]}}"#,
                gnomon_testkit::base64(&[i as u8 + 1; 32]),
                s.local_addr().unwrap()
            )
        })
        .collect();
    let list = dir.join("silent.json");
    std::fs::write(&list, format!(r#"{{"servers":[{}]}}"#, entries.join(","))).unwrap();
    (list, silent)
}

#[test]
fn no_socket_and_no_round_yet_are_no_proof() {
    let (sock, dir) = short_socket("noproof");
    // No socket: sync is not running; exit 1, and the JSON says why.
    let n = now(&sock, &[]);
    assert_eq!(n.code, 1, "{}{}", n.stdout, n.stderr);
    assert!(
        n.stderr.contains("gnomon sync is not running"),
        "{}",
        n.stderr
    );
    let j = now(&sock, &["--json"]).json();
    assert_eq!(j["error"]["kind"], "not_running");
    assert_eq!(j["exit_code"], 1);

    // A sync whose servers never answer: its first round takes seconds
    // and ends with nothing proven; the socket answers from the start.
    let state = tempdir("now-noproof");
    let (list, _silent) = silent_list(&state);
    let (list_s, state_s) = (list.to_str().unwrap(), state.to_str().unwrap());
    let sock_s = sock.to_str().unwrap();
    let mut args = vec![
        "--servers",
        list_s,
        "--state-dir",
        state_s,
        "--interval",
        "1h",
        "--now-socket",
        sock_s,
    ];
    args.extend_from_slice(&FAST);
    let mut sync = Service::start(&args);
    assert!(sync.wait_for("now socket on", PATIENCE), "{}", sync.log);
    let (n, ..) = poll(&sock, &[], |n| {
        n.code != 1 || n.stdout.contains("\"known\"")
    });
    let j = n.json();
    assert_eq!(n.code, 1, "{}", n.stdout);
    assert_eq!(j["known"], "none");
    assert_eq!(j["earliest_unix_us"], Value::Null);
    assert_eq!(j["wall_clock_inside"], Value::Null);
    assert_eq!(j["exit_code"], 1);
    let text = now(&sock, &[]);
    assert_eq!(text.code, 1);
    assert!(text.stdout.contains("no proof"), "{}", text.stdout);
    // Nothing proven: no time is proven past.
    let at = now(&sock, &["--at-least", "0"]);
    assert_eq!(at.code, 4, "{}", at.stdout);
    sync.terminate(PATIENCE);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&state);
}

#[test]
fn an_interval_from_real_servers_contains_the_true_time_and_a_restart_keeps_the_floor() {
    let servers = start_servers(
        "now-interval",
        &[("a", None), ("b", None), ("c", None)],
        None,
    );
    let (sock, dir) = short_socket("interval");
    // Its own, to outlive the servers' directory.
    let state = tempdir("now-interval-state");
    let (list, state_s) = (
        servers.list.to_str().unwrap().to_owned(),
        state.to_str().unwrap().to_owned(),
    );
    let sock_s = sock.to_str().unwrap();
    let mut args = vec![
        "--servers",
        &list,
        "--state-dir",
        &state_s,
        "--interval",
        "1h",
        "--now-socket",
        sock_s,
    ];
    args.extend_from_slice(&FAST);
    let started = real_now_us();
    let mut sync = Service::start(&args);
    let (n, before, after) = poll(&sock, &[], |n| n.code == 0);
    let proven_by = after;
    let j = n.json();
    assert_eq!(j["known"], "interval", "{j}");
    let (lo, hi) = interval(&j);
    assert!(
        lo <= after && before <= hi,
        "{j}: true time in [{before}, {after}]"
    );
    assert_eq!(j["source"]["round"], 1);
    assert_eq!(j["source"]["servers"], serde_json::json!(["a", "b", "c"]));
    assert_eq!(
        j["source"]["assumption"],
        "assumes at most 1 of the 3 listed servers lies; 3 answered, 3 needed",
        "{j}"
    );
    assert_eq!(j["wall_clock_inside"], true);
    assert_eq!(j["drift_ppm"], 100);
    assert_eq!(j["exit_code"], 0);
    let text = now(&sock, &[]);
    assert_eq!(text.code, 0);
    assert!(text.stdout.contains("between"), "{}", text.stdout);
    assert!(
        text.stdout
            .contains("assumption   assumes at most 1 of the 3 listed"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("round 1"), "{}", text.stdout);
    // --at-least: an hour ago is proven past, a day ahead is not.
    let hour_ago = ((real_now_us() / 1_000_000) - 3600).to_string();
    assert_eq!(now(&sock, &["--at-least", &hour_ago]).code, 0);
    let tomorrow = ((real_now_us() / 1_000_000) + 86_400).to_string();
    let t = now(&sock, &["--at-least", &tomorrow, "--json"]);
    assert_eq!(t.code, 4, "{}", t.stdout);
    assert_eq!(t.json()["at_least_proven"], false);
    assert_eq!(sync.terminate(PATIENCE), Some(0), "{}", sync.log);

    // A restarted sync knows the floor only, until its next good round
    // (its servers never answer now, so there is none).
    drop(servers);
    let (silent, _keep) = silent_list(&state);
    let silent = silent.to_str().unwrap().to_owned();
    let mut args = args.clone();
    args[1] = &silent;
    let mut again = Service::start(&args);
    let (n, _, after) = poll(&sock, &[], |n| n.stdout.contains("\"known\""));
    let j = n.json();
    assert_eq!(j["known"], "floor", "{j}");
    assert_eq!(n.code, 1);
    assert!(j["earliest_unix_us"].as_i64().unwrap() <= after, "{j}");
    assert_eq!(j["latest_unix_us"], Value::Null);
    assert_eq!(j["source"], Value::Null);
    // The floor says when it was proven (the first run's round, as its
    // clock read then) and how old it is (by the wall clock now: the
    // round was in another run).
    let proven = j["floor_proven_unix_us"].as_i64().expect("proving time");
    assert!(started <= proven && proven <= proven_by, "{j}");
    let age = j["floor_age_s"].as_f64().unwrap();
    assert!(
        age >= 0.0 && age <= (real_now_us() - started) as f64 / 1e6,
        "{j}"
    );
    let text = now(&sock, &[]);
    assert!(text.stdout.contains("floor        "), "{}", text.stdout);
    assert!(text.stdout.contains(" ago)"), "{}", text.stdout);
    assert_eq!(now(&sock, &["--at-least", &hour_ago]).code, 0);
    again.terminate(PATIENCE);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&state);
}

/// The sync process runs under libfaketime with its wall clock (the
/// offset file) stepped +1 h after its first round; the monotonic clock
/// is left alone (FAKETIME_DONT_FAKE_MONOTONIC=1), and the clocks the
/// anchor runs on (CLOCK_MONOTONIC_RAW, CLOCK_MONOTONIC, CLOCK_BOOTTIME)
/// are read by rustix through the vDSO, which libfaketime does not
/// intercept.
/// The answer proves both: `wall_clock_unix_us` moves by the hour (the
/// step took), the interval does not (it still holds the true time and
/// only advanced by the real time between the two answers).
#[test]
fn stepping_the_wall_clock_an_hour_changes_nothing_but_wall_clock_inside() {
    if !sync_support::have_faketime(
        "stepping_the_wall_clock_an_hour_changes_nothing_but_wall_clock_inside",
    ) {
        return;
    }
    let servers = start_servers("now-step", &[("a", None), ("b", None), ("c", None)], None);
    let (sock, dir) = short_socket("step");
    let offset = dir.join("offset");
    let write_offset = |o: &str| {
        let tmp = dir.join("offset.tmp");
        std::fs::write(&tmp, format!("{o}\n")).unwrap();
        std::fs::rename(&tmp, &offset).unwrap();
    };
    write_offset("+0");
    let state = servers.dir.join("state");
    let mut child: gnomon_testkit::Reaped = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .arg("sync")
        .arg("--servers")
        .arg(&servers.list)
        .arg("--state-dir")
        .arg(&state)
        .args(["--interval", "1h", "--now-socket"])
        .arg(&sock)
        .args(FAST)
        .env("LD_PRELOAD", LIBFAKETIME)
        .env("FAKETIME_TIMESTAMP_FILE", &offset)
        .env("FAKETIME_NO_CACHE", "1")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
        .into();
    let (a, a_before, a_after) = poll(&sock, &[], |n| n.code == 0);
    let a = a.json();
    let (a_lo, a_hi) = interval(&a);
    assert!(a_lo <= a_after && a_before <= a_hi, "{a}");
    assert_eq!(a["wall_clock_inside"], true, "{a}");

    write_offset("+3600");
    const HOUR: i64 = 3_600_000_000;
    // Until sync's wall clock shows the step (libfaketime rereads the file
    // on every call with FAKETIME_NO_CACHE).
    let (b, b_before, b_after) = poll(&sock, &[], |n| {
        n.stdout.contains("\"known\"")
            && n.json()["wall_clock_unix_us"].as_i64().unwrap() > real_now_us() + HOUR / 2
    });
    let b = b.json();
    let wall = b["wall_clock_unix_us"].as_i64().unwrap();
    assert!(
        (wall - HOUR - b_after).abs() < 60_000_000,
        "the step took: {b}"
    );
    assert_eq!(b["known"], "interval", "{b}");
    assert_eq!(b["source"]["round"], 1, "no round since: {b}");
    let (b_lo, b_hi) = interval(&b);
    assert!(
        b_lo <= b_after && b_before <= b_hi,
        "{b}: true time in [{b_before}, {b_after}]"
    );
    // The interval moved by the real time between the answers (± the
    // drift bound over it), not by the hour.
    let real = b_after - a_before;
    assert!(b_lo - a_lo <= real + 1_000, "{a} {b}");
    assert!(
        b_hi - a_hi >= 0 && b_hi - a_hi <= real + real / 1000 + 1_000,
        "{a} {b}"
    );
    assert_eq!(b["wall_clock_inside"], false, "{b}");
    assert_eq!(now(&sock, &[]).code, 0, "still proven");
    let text = now(&sock, &[]);
    assert!(text.stdout.contains("OUTSIDE"), "{}", text.stdout);
    let _ = child.kill();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A process of user nobody holding connections to `sock` until `stop`
/// exists (at most a minute), printing how many it opened; `None` (the
/// skip recorded) without root, setpriv or the system's python3 (one
/// nobody may run).
fn hold_as_nobody(sock: &Path, stop: &Path) -> Option<gnomon_testkit::Reaped> {
    let test = "hostile_clients_stall_neither_the_socket_nor_the_rounds (holder)";
    if !gnomon_testkit::is_root() {
        gnomon_testkit::skip(test, "needs root to run the holder as nobody");
        return None;
    }
    for tool in ["/usr/bin/setpriv", "/usr/bin/python3"] {
        if !Path::new(tool).exists() {
            gnomon_testkit::skip(test, &format!("{tool} missing"));
            return None;
        }
    }
    const HOLDER: &str = r#"
import collections, os, socket, sys, time
path, stop = sys.argv[1], sys.argv[2]
held, opened, end = collections.deque(), 0, time.monotonic() + 60
while not os.path.exists(stop) and time.monotonic() < end:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        held.append(s)
        opened += 1
    except OSError:
        s.close()
    while len(held) > 32:
        held.popleft().close()
print(opened)
"#;
    let child = Command::new("/usr/bin/setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            HOLDER,
        ])
        .arg(sock)
        .arg(stop)
        .current_dir("/")
        .stdout(std::process::Stdio::piped())
        .spawn();
    match child {
        Ok(c) => Some(gnomon_testkit::Reaped(c)),
        Err(e) => {
            gnomon_testkit::skip(test, &format!("cannot start python3 as nobody: {e}"));
            None
        }
    }
}

#[test]
fn hostile_clients_stall_neither_the_socket_nor_the_rounds() {
    let _heavy = crate::heavy();
    let servers = start_servers(
        "now-hostile",
        &[("a", None), ("b", None), ("c", None)],
        None,
    );
    let (sock, dir) = short_socket("hostile");
    let state = servers.dir.join("state");
    let (list, state_s) = (
        servers.list.to_str().unwrap().to_owned(),
        state.to_str().unwrap().to_owned(),
    );
    let sock_s = sock.to_str().unwrap();
    // 0666: the holder runs as another user.
    let args = every_second(
        &list,
        &state_s,
        &[
            "--now-socket",
            sock_s,
            "--now-socket-mode",
            "0666",
            "--metrics",
            "127.0.0.1:0",
        ],
    );
    let mut sync = Service::start(&args);
    let metrics = metrics_addr(&mut sync);
    poll(&sock, &[], |n| n.code == 0);

    // One that writes a line that never ends (bounded here: 1 MiB, or
    // until sync stops reading): cut at 1024 bytes.
    let mut endless = UnixStream::connect(&sock).unwrap();
    endless
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let chunk = [b'x'; 4096];
    for _ in 0..256 {
        if endless.write_all(&chunk).is_err() {
            break;
        }
    }
    let mut reply = String::new();
    endless
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = endless.read_to_string(&mut reply);
    assert!(
        reply.contains("too long"),
        "an endless line is cut: {reply:?}"
    );
    let consensus = "gnomon_sync_rounds_total{result=\"consensus\"}";
    let rounds_then = value(&scrape(metrics, PATIENCE).expect("metrics"), consensus);
    // Another user (nobody) that keeps twice the connection cap open,
    // silent, opening a new one as fast as it can and closing its oldest,
    // the whole time the honest client (root) asks.
    let stop = dir.join("stop");
    let holder = hold_as_nobody(&sock, &stop);
    if holder.is_some() {
        // The holder is at it: a hundred of its connections dropped
        // (evicted, refused, or closed at accept past its user's pace:
        // whatever the rule, it is pressing).
        let pressed = |t: &str| {
            let c = |r: &str| {
                value(
                    t,
                    &format!("gnomon_sync_now_requests_total{{result=\"{r}\"}}"),
                )
            };
            c("evicted") + c("busy") + c("paced")
        };
        let until = Instant::now() + PATIENCE;
        while scrape(metrics, PATIENCE).map_or(0.0, |t| pressed(&t)) < 100.0 {
            assert!(Instant::now() < until, "the holder never pressed");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // Ten of ten honest asks answered, no retries.
    for i in 0..10 {
        let before = real_now_us();
        let n = now(&sock, &["--json"]);
        let after = real_now_us();
        assert_eq!(n.code, 0, "ask {i}: {}{}", n.stdout, n.stderr);
        let (lo, hi) = interval(&n.json());
        assert!(lo <= after && before <= hi);
    }
    if let Some(holder) = holder {
        std::fs::write(&stop, b"").unwrap();
        let out = holder.wait_with_output().unwrap();
        let opened: u64 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0);
        assert!(opened > 32, "the holder opened {opened}: {out:?}");
    }
    // And the rounds go on.
    let until = Instant::now() + PATIENCE;
    loop {
        let r = scrape(metrics, PATIENCE).map_or(0.0, |t| value(&t, consensus));
        if r >= rounds_then + 2.0 {
            break;
        }
        assert!(
            Instant::now() < until,
            "rounds stopped at {r}: {}",
            sync.log
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let text = scrape(metrics, PATIENCE).expect("metrics");
    let count = |r: &str| {
        value(
            &text,
            &format!("gnomon_sync_now_requests_total{{result=\"{r}\"}}"),
        )
    };
    // The holder was refused by whichever rule met it first: evicted at
    // the cap, or closed at accept past its user's pace (which of them
    // depends on the machine's timing, not on the rule).
    if Path::new(&stop).exists() {
        assert!(
            count("evicted") + count("busy") + count("paced") >= 1.0,
            "{text}"
        );
    }
    assert_eq!(count("too_long"), 1.0, "{text}");
    assert!(count("answered") >= 11.0, "{text}");
    sync.terminate(PATIENCE);
    let _ = std::fs::remove_dir_all(&dir);
}
