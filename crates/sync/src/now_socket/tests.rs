use std::io::{BufRead, Read, Write};
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use super::share::{decide, Decision, Pacer};
use super::*;
use crate::now::{self, Anchor, Floor};

fn quiet() -> Log {
    Arc::new(|_: &str| {})
}

fn ask(path: &Path, request: &str) -> serde_json::Value {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut line = String::new();
    io::BufReader::new(s).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap()
}

#[test]
fn answers_refuses_bad_requests_and_is_not_stalled_by_a_silent_client() {
    let dir = std::env::temp_dir().join(format!("gnomon-now-sock-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("now.sock");
    let board = Arc::new(Board::with_floor(Some(5)));
    let counts = Arc::new(Counts::default());
    let access = Access {
        gid: None,
        mode: 0o660,
    };
    spawn(&path, &access, board.clone(), 100, counts.clone(), quiet()).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o660);
    // A second sync does not take a live socket over.
    assert!(spawn(&path, &access, board.clone(), 100, counts.clone(), quiet()).is_err());

    let _silent = UnixStream::connect(&path).unwrap();
    let a = ask(&path, "\n");
    assert_eq!(a["known"], "floor");
    assert_eq!(a["earliest_unix_us"], 5);
    board.update(
        Some(Anchor {
            at: board.read(),
            earliest_us: now::wall_us() - 1_000_000,
            latest_us: now::wall_us() + 1_000_000,
            round: 1,
            servers: vec!["x".into()],
            assumption: "assumes at most 0 of the 1 listed servers lie".into(),
        }),
        Some(Floor::bare(5)),
    );
    let a = ask(&path, "{\"at-least\": 7}\n");
    assert_eq!(a["known"], "interval");
    assert_eq!(a["wall_clock_inside"], true);
    assert_eq!(a["at_least_proven"], true);
    // A floor above the interval: a contradiction on the wire too,
    // and nothing proven past.
    board.update(None, Some(Floor::bare(now::wall_us() + 3_600_000_000)));
    let a = ask(&path, "{\"at-least\": 7}\n");
    assert_eq!(a["known"], "contradiction");
    assert_eq!(a["at_least_proven"], false);
    assert!(ask(&path, "{\"set\": 1}\n")["error"]
        .as_str()
        .unwrap()
        .contains("unknown"));
    let long = "x".repeat(MAX_LINE + 10);
    let mut s = UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(long.as_bytes());
    let mut line = String::new();
    io::BufReader::new(s).read_line(&mut line).unwrap();
    assert!(line.contains("too long"), "{line}");
    let c = counts.get();
    // The three asks above, each counted before its answer was written;
    // the second spawn's probe of the live socket (a connection closed
    // at once: an empty request) may add one, when its thread got to
    // it before the probe's close did, which a busy machine decides.
    assert_eq!(c[0].0, "answered");
    assert!((3..=4).contains(&c[0].1), "{c:?}");
    assert_eq!(c[1], ("bad_request", 1));
    assert_eq!(c[2], ("too_long", 1));
    assert_eq!(c[4], ("evicted", 0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_share_rule_closes_the_greediest_users_oldest_reading() {
    let r = |u: u32, reading: bool| (Some(u), reading);
    assert_eq!(decide(&[], Some(1)), Decision::Admit);
    // At its share, a user gives up its own oldest still reading.
    let four = [r(1, false), r(1, true), r(2, true), r(1, true), r(1, true)];
    assert_eq!(decide(&four, Some(1)), Decision::Evict(1));
    assert_eq!(decide(&four, Some(2)), Decision::Admit);
    let answering = [r(1, false); MAX_PER_USER];
    assert_eq!(decide(&answering, Some(1)), Decision::Busy);
    // At the cap: the user holding the most gives up its oldest.
    let mut full: Vec<(Option<u32>, bool)> = (0..MAX_CONNECTIONS as u32)
        .map(|i| r(10 + i % 5, true))
        .collect();
    full[0] = r(99, true);
    // Users 10..=14 hold 3 each (one of 10's replaced by 99): 11 is
    // the oldest of those with the most.
    assert_eq!(decide(&full, Some(7)), Decision::Evict(1));
    assert_eq!(
        decide(&[r(1, false); MAX_CONNECTIONS], Some(7)),
        Decision::Busy
    );
}

/// One user's silent holders keep only its share; its newcomer is
/// answered at once (not at the deadline, a second away), closing the
/// oldest of them, and only that one.
#[test]
fn a_newcomer_closes_the_oldest_silent_holder_of_its_user() {
    let dir = std::env::temp_dir().join(format!("gnomon-now-evict-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("now.sock");
    let counts = Arc::new(Counts::default());
    let access = Access {
        gid: None,
        mode: 0o600,
    };
    let board = Arc::new(Board::with_floor(None));
    spawn(&path, &access, board, 100, counts.clone(), quiet()).unwrap();
    let mut silent: Vec<UnixStream> = (0..MAX_CONNECTIONS)
        .map(|_| UnixStream::connect(&path).unwrap())
        .collect();
    let started = Instant::now();
    let a = ask(&path, "{}\n");
    assert_eq!(a["known"], "none");
    assert!(
        started.elapsed() < DEADLINE,
        "answered only at the deadline"
    );
    let c = counts.get();
    // 16 holders kept 4 (12 closed); the newcomer closed one more.
    let held = MAX_CONNECTIONS - MAX_PER_USER;
    assert_eq!(
        (c[0], c[3], c[4]),
        (
            ("answered", 1),
            ("deadline", 0),
            ("evicted", held as u64 + 1)
        )
    );
    // The oldest still held sees end of input; the next is open.
    silent[held]
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(silent[held].read(&mut [0u8; 8]).unwrap(), 0);
    silent[held + 1].set_nonblocking(true).unwrap();
    let e = silent[held + 1].read(&mut [0u8; 8]).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Threads of this process that the now socket made (their names start
/// "gnomon-now"), counted from /proc/self/task. By name: the test harness
/// runs other tests' threads in the same process.
fn socket_threads() -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| c.starts_with("gnomon-now"))
        })
        .count()
}

/// Every request counted, under whichever result.
fn counted(counts: &Counts) -> u64 {
    counts.get().iter().map(|c| c.1).sum()
}

/// Until `done` holds, for at most 60 s (then the test fails).
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < until, "never: {what}");
        std::thread::yield_now();
    }
}

const CHURN_ENV: &str = "GNOMON_NOW_CHURN";
/// The most connections a churner tries: bounded even if nobody stops it.
const CHURN_MOST: u64 = 1_000_000;

/// A churn: connect and close, one in 8 held open (the 32 newest kept),
/// until `stop` says so (asked every 64 tries) or `CHURN_MOST` tries.
/// Says "CHURN started" after its first 100 connections; the connections
/// made (those the kernel queued: each reaches sync).
fn churn(
    connect: impl Fn() -> io::Result<UnixStream>,
    stop: impl Fn() -> bool,
    mut said: impl FnMut(&str),
) -> u64 {
    let mut held = std::collections::VecDeque::new();
    let (mut n, mut tries) = (0u64, 0u64);
    while tries < CHURN_MOST && (tries % 64 != 0 || !stop()) {
        tries += 1;
        let Ok(s) = connect() else {
            continue;
        };
        n += 1;
        if n % 8 == 0 {
            held.push_back(s);
            if held.len() > 32 {
                held.pop_front();
            }
        }
        if n == 100 {
            said("CHURN started");
        }
    }
    n
}

/// Run as user nobody by
/// `a_churn_from_another_user_keeps_the_threads_under_the_cap_and_root_is_answered`.
#[test]
#[ignore = "run as another user by a_churn_from_another_user_keeps_the_threads_under_the_cap_and_root_is_answered"]
fn churn_as_another_user() {
    let Ok(arg) = std::env::var(CHURN_ENV) else {
        return;
    };
    let (sock, stop) = arg.split_once('\n').expect("socket and stop file");
    let say = |line: &str| {
        println!("{line}");
        let _ = io::stdout().flush();
    };
    let n = churn(
        || UnixStream::connect(sock),
        || Path::new(stop).exists(),
        say,
    );
    say(&format!("CHURN connections {n}"));
}

/// Another user (nobody: a child of this test binary, run with its uid)
/// connects and closes, and holds some, as fast as it can. The socket's
/// threads stay at or under the cap the whole time, root's requests meanwhile
/// are answered, and every connection is counted under some result.
/// Needs root (SO_PEERCRED cannot be faked): skipped otherwise.
#[test]
fn a_churn_from_another_user_keeps_the_threads_under_the_cap_and_root_is_answered() {
    use std::os::unix::process::CommandExt;
    let test = "now_socket::tests::a_churn_from_another_user_keeps_the_threads_under_the_cap_and_root_is_answered";
    if !rustix::process::geteuid().is_root() {
        gnomon_testkit::skip(test, "needs root to run the churner as another user");
        return;
    }
    let dir = PathBuf::from(format!("/tmp/gnomon-now-churn-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.join("now.sock");
    let stop = dir.join("stop");
    let counts = Arc::new(Counts::default());
    let access = Access {
        gid: None,
        mode: 0o666,
    };
    spawn(&path, &access, Arc::default(), 100, counts.clone(), quiet()).unwrap();
    // A copy that nobody may run: the clone may sit under a directory only
    // its owner may enter.
    let exe = gnomon_testkit::runnable_by_anyone(&std::env::current_exe().unwrap());
    let child = gnomon_testkit::command(exe)
        .args([
            "--exact",
            "now_socket::tests::churn_as_another_user",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHURN_ENV, format!("{}\n{}", path.display(), stop.display()))
        .uid(65534)
        .gid(65534)
        .current_dir("/")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => gnomon_testkit::Reaped(c),
        Err(e) => {
            gnomon_testkit::skip(test, &format!("cannot run this binary as nobody: {e}"));
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
    };
    let mut said = io::BufReader::new(child.stdout.take().unwrap()).lines();
    let started = said
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains("CHURN started"));
    assert!(started, "the churner never started: {:?}", child.wait());
    let mut most = socket_threads();
    let asks = 20;
    for _ in 0..asks {
        let a = ask(&path, "{}\n");
        assert_eq!(a["known"], "none", "{a}");
        for _ in 0..10 {
            most = most.max(socket_threads());
        }
    }
    std::fs::write(&stop, b"").unwrap();
    // Read to the end: the churner's last lines are libtest's.
    let rest: Vec<String> = said.map_while(Result::ok).collect();
    let made: u64 = rest
        .iter()
        .find_map(|l| l.split("CHURN connections ").nth(1)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("the churner's count: {rest:?}"));
    assert!(child.wait().unwrap().success());
    assert!(
        most <= MAX_CONNECTIONS,
        "{most} threads of the socket at once"
    );
    wait_until("every connection counted", || {
        counted(&counts) == made + asks
    });
    eprintln!("{made} connections from nobody; {:?}", counts.get());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A connection that says it is of user `uid`: its socket bound, before
/// it connects, to an abstract name ending "-uid-N", which [`said_uid`]
/// reads back where the kernel's SO_PEERCRED would be.
fn connect_as(path: &Path, uid: u32) -> io::Result<UnixStream> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    let name = format!(
        "gnomon-now-test-{}-{}-uid-{uid}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    rustix::net::bind(&fd, &SocketAddrUnix::new_abstract_name(name.as_bytes())?)?;
    rustix::net::connect(&fd, &SocketAddrUnix::new(path)?)?;
    Ok(UnixStream::from(fd))
}

/// The uid a connection of [`connect_as`] says; the kernel's for any other.
fn said_uid(s: &UnixStream) -> Option<u32> {
    use std::os::linux::net::SocketAddrExt;
    let said = s.peer_addr().ok().and_then(|a| {
        let name = std::str::from_utf8(a.as_abstract_name()?).ok()?;
        name.rsplit_once("-uid-")?.1.parse().ok()
    });
    said.or_else(|| {
        rustix::net::sockopt::socket_peercred(s)
            .ok()
            .map(|c| c.uid.as_raw())
    })
}

/// Users by [`said_uid`], paced by `burst` on a clock that never moves:
/// exactly `burst` connections of each user are served, of every user
/// but `unpaced`.
fn said_users(burst: u32, unpaced: &[u32]) -> Peers {
    let at = Instant::now();
    Peers {
        uid_of: Box::new(said_uid),
        clock: Box::new(move || at),
        burst,
        per_second: PACE_PER_SECOND,
        unpaced: unpaced.to_vec(),
    }
}

fn socket_in(name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("gnomon-now-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    (dir.join("now.sock"), dir)
}

const OURS: Access = Access {
    gid: None,
    mode: 0o600,
};

/// One user (said) connects and closes, and holds some, as fast as one
/// thread can, unpaced; meanwhile the socket has one thread, another user
/// (this process's own) is answered every time, and every connection is
/// counted under some result.
#[test]
fn a_churn_of_one_user_keeps_the_threads_under_the_cap_and_another_user_is_answered() {
    let (path, dir) = socket_in("said-churn");
    let counts = Arc::new(Counts::default());
    let board = Arc::new(Board::with_floor(Some(5)));
    let unpaced = said_users(u32::MAX, &[]);
    spawn_with(&path, &OURS, board, 100, counts.clone(), quiet(), unpaced).unwrap();
    let me = rustix::process::getuid().as_raw();
    let churner = me.wrapping_add(1);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (started, on_start) = std::sync::mpsc::channel();
    let churning = {
        let (path, stop) = (path.clone(), stop.clone());
        std::thread::spawn(move || {
            churn(
                || connect_as(&path, churner),
                || stop.load(Ordering::Relaxed),
                |_| {
                    let _ = started.send(());
                },
            )
        })
    };
    on_start.recv().unwrap();
    let mut most = socket_threads();
    let asks = 20;
    for _ in 0..asks {
        let a = ask(&path, "{}\n");
        assert_eq!(a["earliest_unix_us"], 5, "{a}");
        for _ in 0..10 {
            most = most.max(socket_threads());
        }
    }
    stop.store(true, Ordering::Relaxed);
    let made = churning.join().unwrap();
    assert!(
        most <= MAX_CONNECTIONS,
        "{most} threads of the socket at once"
    );
    wait_until("every connection counted", || {
        counted(&counts) == made + asks
    });
    let c = counts.get();
    assert_eq!((c[5], c[6]), (("busy", 0), ("paced", 0)), "{c:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A user's connections past its burst (the clock stands still: no more
/// come due) are closed at once, unanswered, and counted `paced`; another
/// user's are served as before, its pace its own; root is not paced.
#[test]
fn a_user_past_its_pace_is_closed_at_once_and_counted_and_another_is_not() {
    let (path, dir) = socket_in("said-paced");
    let counts = Arc::new(Counts::default());
    let board = Arc::new(Board::with_floor(None));
    let peers = said_users(PACE_BURST, &[0]);
    spawn_with(&path, &OURS, board, 100, counts.clone(), quiet(), peers).unwrap();
    let me = rustix::process::getuid().as_raw();
    let greedy = me.wrapping_add(1).max(1);
    let tries = 3 * PACE_BURST as usize;
    let served = |uid: u32| -> Vec<bool> {
        (0..tries)
            .map(|_| {
                let mut s = connect_as(&path, uid).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                // A paced one may be closed before this is written, or with
                // it unread (then the read says reset).
                let _ = s.write_all(b"{}\n");
                let mut answer = String::new();
                let _ = s.read_to_string(&mut answer);
                answer.contains("\"known\"")
            })
            .collect()
    };
    let burst = PACE_BURST as usize;
    let greedys = served(greedy);
    assert!(greedys[..burst].iter().all(|&s| s), "{greedys:?}");
    assert!(!greedys[burst..].iter().any(|&s| s), "{greedys:?}");
    assert_eq!(ask(&path, "{}\n")["known"], "none");
    let roots = served(0);
    assert!(roots.iter().all(|&s| s), "{roots:?}");
    wait_until("every connection counted", || {
        counted(&counts) == 2 * tries as u64 + 1
    });
    let c = counts.get();
    let answered = (burst + 1 + tries) as u64;
    assert_eq!(c[0], ("answered", answered), "{c:?}");
    assert_eq!(c[6], ("paced", 2 * PACE_BURST as u64), "{c:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A request in pieces is answered; a connection that never finishes its
/// request is closed at the deadline and counted so.
#[test]
fn a_request_in_pieces_is_answered_and_a_silent_one_meets_the_deadline() {
    let (path, dir) = socket_in("pieces");
    let counts = Arc::new(Counts::default());
    spawn(&path, &OURS, Arc::default(), 100, counts.clone(), quiet()).unwrap();
    let mut silent = UnixStream::connect(&path).unwrap();
    let mut s = UnixStream::connect(&path).unwrap();
    s.write_all(b"{\"at-").unwrap();
    s.flush().unwrap();
    s.write_all(b"least\": 7}\n").unwrap();
    let mut line = String::new();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    io::BufReader::new(s).read_line(&mut line).unwrap();
    let a: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(a["at_least_unix_us"], 7, "{a}");
    // Closed at the deadline (a second), unanswered.
    silent
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    assert_eq!(silent.read(&mut [0u8; 8]).unwrap(), 0);
    wait_until("the deadline counted", || counts.get()[3].1 == 1);
    assert_eq!(counts.get()[0], ("answered", 1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_pace_is_a_burst_then_a_rate_per_user_and_a_paced_try_costs_nothing() {
    let t0 = Instant::now();
    let ms = |n: u64| t0 + Duration::from_millis(n);
    let mut p = Pacer::new(4, 10);
    assert!((0..4).all(|_| p.take(Some(1), t0)));
    assert!(!p.take(Some(1), t0));
    // Another user's pace is its own; so is an unknown one's.
    assert!(p.take(Some(2), t0));
    assert!(p.take(None, t0));
    // One every 100 ms past the burst, and tries meanwhile do not push the
    // next one back.
    assert!(!p.take(Some(1), ms(99)));
    assert!(p.take(Some(1), ms(100)));
    for _ in 0..1000 {
        assert!(!p.take(Some(1), ms(150)));
    }
    assert!(p.take(Some(1), ms(200)));
    // Idle long enough: a whole burst again, never more.
    assert!((0..4).all(|_| p.take(Some(1), ms(10_000))));
    assert!(!p.take(Some(1), ms(10_000)));
    // Users whose burst is whole again are forgotten once many are kept.
    for u in 0..100 {
        assert!(p.take(Some(100 + u), ms(10_000)));
    }
    assert!(p.remembered() > 64);
    assert!(p.take(Some(7), ms(60_000)));
    assert_eq!(p.remembered(), 1);
}
