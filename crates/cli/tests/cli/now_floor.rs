//! Issue 33's attack on the floor, as real processes: a state file whose
//! floor an attacker set an hour ahead, then real honest `gnomon serve`
//! processes. `gnomon now` must report the contradiction and exit 3 (not
//! answer a zero-width interval and exit 0), sync must log and count it,
//! and `gnomon sync --clear-floor` must clear it for good, with the
//! service running: at its next round, or at once on SIGHUP, and never
//! written back.

use crate::sync_support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use sync_support::{
    every_second, metrics_addr, now, real_now_us, scrape, start_servers, state, sync, tempdir,
    value, Now, Service, FAST,
};

/// Generous bounds against hangs, never expected times.
const PATIENCE: Duration = Duration::from_secs(60);
const HOUR: i64 = 3_600_000_000;

/// `gnomon now --json` until its answer is `known`, for at most PATIENCE;
/// with the real time just before and after it was asked.
fn until_known(socket: &Path, known: &str) -> (Now, i64, i64) {
    let until = Instant::now() + PATIENCE;
    loop {
        let before = real_now_us();
        let n = now(socket, &["--json"]);
        let after = real_now_us();
        if n.stdout.contains(&format!("\"known\":\"{known}\"")) {
            return (n, before, after);
        }
        assert!(Instant::now() < until, "never {known}: {}", n.stdout);
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn short_socket(name: &str) -> (PathBuf, PathBuf) {
    // A socket path holds 107 bytes: under /tmp, not a long tempdir.
    let dir = PathBuf::from(format!("/tmp/gn-floor-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    (dir.join("now.sock"), dir)
}

/// The state an attacker left: a floor an hour ahead of the true time.
fn poison(dir: &Path, state: Value) -> i64 {
    let floor = real_now_us() + HOUR;
    let mut s = state;
    s["format"] = json!(1);
    s["floor_us"] = json!(floor);
    std::fs::write(dir.join("sync-state.json"), s.to_string()).unwrap();
    floor
}

/// The number of the last round the log has a summary line of.
fn last_round(log: &str) -> u64 {
    log.lines()
        .filter_map(|l| {
            l.split_once(" INFO round ")?
                .1
                .split(':')
                .next()?
                .parse()
                .ok()
        })
        .max()
        .unwrap_or(0)
}

fn utc(us: i64) -> String {
    gnomon_client::format_utc(us as u64)
}

/// Rounds every second; the state file written before this change (no
/// proving time, no count of clears), so it must still read.
#[test]
fn a_poisoned_floor_is_a_contradiction_until_cleared_and_never_comes_back() {
    let servers = start_servers(
        "floor-poison",
        &[("a", None), ("b", None), ("c", None)],
        None,
    );
    let (sock, sock_dir) = short_socket("poison");
    let dir = tempdir("floor-poison-state");
    let floor = poison(&dir, json!({"last": null, "excluded": []}));
    let (list, dir_s) = (servers.list.to_str().unwrap(), dir.to_str().unwrap());
    let sock_s = sock.to_str().unwrap();
    let mut s = Service::start(&every_second(
        list,
        dir_s,
        &["--now-socket", sock_s, "--metrics", "127.0.0.1:0"],
    ));
    let metrics = metrics_addr(&mut s);

    let (n, before, after) = until_known(&sock, "contradiction");
    let j = n.json();
    assert_eq!((n.code, &j["exit_code"]), (3, &json!(3)), "{j}");
    let (lo, hi) = (
        j["earliest_unix_us"].as_i64().unwrap(),
        j["latest_unix_us"].as_i64().unwrap(),
    );
    // The round's own interval, which holds the true time, and the floor
    // above it: both proofs are in the answer.
    assert!(lo <= after && before <= hi, "{j}");
    assert_eq!(j["floor_unix_us"], floor, "{j}");
    assert!(hi < floor, "{j}");
    assert_eq!(
        j["floor_proven_unix_us"],
        Value::Null,
        "an old state file: {j}"
    );
    assert_eq!(j["wall_clock_inside"], Value::Null, "{j}");
    // Not even an hour ago is proven past.
    let hour_ago = ((real_now_us() - HOUR) / 1_000_000).to_string();
    let at = now(&sock, &["--json", "--at-least", &hour_ago]);
    assert_eq!(at.code, 3, "{}", at.stdout);
    assert_eq!(at.json()["at_least_proven"], false);
    let text = now(&sock, &[]);
    assert_eq!(text.code, 3);
    assert!(text.stdout.contains("CONTRADICTION"), "{}", text.stdout);
    assert!(text.stdout.contains(&utc(floor)), "{}", text.stdout);

    // Logged, naming the floor, once per round; counted.
    assert!(
        s.wait_for("lies wholly below the proven floor", PATIENCE),
        "{}",
        s.log
    );
    assert!(s.wait_for("round 3:", PATIENCE), "{}", s.log);
    let warned: Vec<&str> = s
        .log
        .lines()
        .filter(|l| l.contains("lies wholly below the proven floor"))
        .collect();
    assert!(warned.iter().all(|l| l.contains(&utc(floor))), "{warned:?}");
    let rounds: Vec<&str> = warned
        .iter()
        .map(|l| l.split(':').nth(2).unwrap_or(""))
        .collect();
    let mut distinct = rounds.clone();
    distinct.dedup();
    assert_eq!(distinct, rounds, "a round warned twice: {warned:?}");
    let text = scrape(metrics, PATIENCE).expect("metrics");
    assert!(
        value(&text, "gnomon_sync_floor_contradictions_total") >= 2.0,
        "{text}"
    );

    // The operator clears it while the service runs.
    let c = sync(&["--clear-floor", "--state-dir", dir_s], None);
    assert_eq!(c.code, 0, "{}{}", c.stdout, c.stderr);
    assert!(
        c.stdout.contains(&format!("the floor {}", utc(floor))),
        "{}",
        c.stdout
    );
    assert!(c.stdout.contains("SIGHUP"), "{}", c.stdout);
    // The service's next round takes the clear: an interval again.
    let (n, _, after) = until_known(&sock, "interval");
    assert_eq!(n.code, 0, "{}", n.stdout);
    let honest = n.json()["floor_unix_us"].as_i64().unwrap();
    assert!(honest <= after, "{}", n.stdout);
    assert!(s.wait_for("the floor was cleared", PATIENCE), "{}", s.log);
    // Rounds later the saved floor is still an honest one: the service
    // never wrote the poisoned one back.
    let next = last_round(&s.log) + 2;
    assert!(s.wait_for(&format!("round {next}:"), PATIENCE), "{}", s.log);
    let saved = state(&dir);
    assert!(
        saved["floor_us"].as_i64().unwrap() <= real_now_us(),
        "{saved}"
    );
    assert_eq!(saved["floor_clears"], 1, "{saved}");
    assert!(saved["floor_proven_at_us"].is_i64(), "{saved}");
    s.stop_cleanly(PATIENCE);
    let _ = std::fs::remove_dir_all(&sock_dir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An hour between rounds: the clear is not seen until SIGHUP, which
/// takes it at once.
#[test]
fn sighup_takes_a_cleared_floor_at_once_and_clear_floor_says_what_it_removed() {
    let servers = start_servers("floor-hup", &[("a", None), ("b", None), ("c", None)], None);
    let (sock, sock_dir) = short_socket("hup");
    let dir = tempdir("floor-hup-state");
    let proven = real_now_us() - 86_400_000_000;
    let floor = poison(&dir, json!({"floor_proven_at_us": proven}));
    let (list, dir_s) = (servers.list.to_str().unwrap(), dir.to_str().unwrap());
    let mut args = vec![
        "--servers",
        list,
        "--state-dir",
        dir_s,
        "--interval",
        "1h",
        "--now-socket",
        sock.to_str().unwrap(),
    ];
    args.extend_from_slice(&FAST);
    let mut s = Service::start(&args);
    let (n, ..) = until_known(&sock, "contradiction");
    let j = n.json();
    assert_eq!(j["floor_proven_unix_us"], proven, "{j}");
    // A day old by the wall clock: the floor came from the state file.
    let age = j["floor_age_s"].as_f64().unwrap();
    assert!((86_400.0..86_400.0 + 600.0).contains(&age), "{j}");
    let text = now(&sock, &[]);
    assert!(text.stdout.contains("(24.0 h ago)"), "{}", text.stdout);

    let c = sync(&["--clear-floor", "--state-dir", dir_s, "--json"], None);
    assert_eq!(c.code, 0, "{}{}", c.stdout, c.stderr);
    let cj = c.json();
    assert_eq!(cj["removed_floor_unix_us"], floor, "{cj}");
    assert_eq!(cj["removed_floor_proven_utc"], utc(proven), "{cj}");
    assert_eq!(
        (&cj["floor_clears"], &cj["exit_code"]),
        (&json!(1), &json!(0))
    );
    let saved = state(&dir);
    assert_eq!(
        (&saved["floor_us"], &saved["floor_clears"]),
        (&Value::Null, &json!(1))
    );
    // No round since: the service still holds the floor in memory.
    assert_eq!(now(&sock, &[]).code, 3);
    s.signal("-HUP");
    assert!(s.wait_for("the floor was cleared", PATIENCE), "{}", s.log);
    let (n, ..) = until_known(&sock, "interval");
    assert_eq!(n.code, 0, "{}", n.stdout);
    assert_eq!(n.json()["floor_unix_us"], Value::Null, "{}", n.stdout);
    s.stop_cleanly(PATIENCE);

    // Without a state there is nothing to clear: said, and exit 1.
    let missing = dir.join("missing");
    let c = sync(
        &["--clear-floor", "--state-dir", missing.to_str().unwrap()],
        None,
    );
    assert_eq!(c.code, 1, "{}{}", c.stdout, c.stderr);
    assert!(c.stderr.contains("no floor to clear"), "{}", c.stderr);
    let _ = std::fs::remove_dir_all(&sock_dir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The bar: a round without the quorum raises no floor (a planted old one
/// stays, to the µs); one with it does, and records when. `--status`
/// shows both.
#[test]
fn only_a_round_the_quorum_agrees_on_raises_the_floor() {
    let servers = start_servers("floor-bar", &[("a", None), ("b", None), ("c", None)], None);
    let dir = tempdir("floor-bar-state");
    let old = real_now_us() - 86_400_000_000;
    std::fs::write(
        dir.join("sync-state.json"),
        json!({"format": 1, "floor_us": old}).to_string(),
    )
    .unwrap();
    let (list, dir_s) = (servers.list.to_str().unwrap(), dir.to_str().unwrap());
    let once = |quorum: &str| {
        let mut args = vec![
            "--once",
            "--servers",
            list,
            "--state-dir",
            dir_s,
            "--quorum",
            quorum,
        ];
        args.extend_from_slice(&FAST);
        sync(&args, None)
    };
    let r = once("4");
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    let saved = state(&dir);
    assert_eq!(saved["floor_us"], old, "{saved}");
    assert_eq!(saved["floor_proven_at_us"], Value::Null, "{saved}");
    let before = real_now_us();
    let r = once("3");
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let saved = state(&dir);
    let floor = saved["floor_us"].as_i64().unwrap();
    let proven = saved["floor_proven_at_us"].as_i64().unwrap();
    assert!(old < floor && floor <= real_now_us(), "{saved}");
    assert!(before <= proven && proven <= real_now_us(), "{saved}");
    let st = sync(&["--status", "--state-dir", dir_s], None);
    assert!(
        st.stdout.contains(&format!(
            "{} (the last proven time; proven at {})",
            utc(floor),
            utc(proven)
        )),
        "{}",
        st.stdout
    );
    let _ = std::fs::remove_dir_all(&dir);
}
