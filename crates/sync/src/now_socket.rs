//! `--now-socket`: the answers of [`crate::now`] to local programs, over
//! a Unix stream socket, one JSON line each way (docs/NOW.md).
//!
//! ```text
//!  accept thread ──(a slot)──▶ a thread per connection: read one line
//!        │                       (≤ MAX_LINE bytes, by DEADLINE) ─▶ one answer line ─▶ close
//!        └─(its user at MAX_PER_USER, or MAX_CONNECTIONS open)─▶ close the oldest still
//!              reading its request (of that user; of the user holding the most), admit
//!              the new one (none reading: {"error":"busy"} to the new one)
//! ```
//!
//! A client can only ask: nothing it sends reaches the service, which
//! writes the [`Board`] and never waits on a connection. A client that
//! never writes, writes forever or never reads holds one of
//! `MAX_CONNECTIONS` threads for at most `DEADLINE`, and only until
//! someone else connects. The rule of every listener of gnomon's
//! (docs/RELIABILITY.md, "Holders of connection slots"): a share per
//! source, here the peer's user (SO_PEERCRED: the kernel's word, not the
//! client's), and at a cap the newcomer is admitted and the oldest
//! connection that has not finished its request is closed. One user's
//! holders therefore never shut another user out; a process of the same
//! user competes for that user's share, and could stop its fellow by
//! other means anyway (signals, ptrace). Every drop is counted
//! (`gnomon_sync_now_requests_total`).

use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::now::{self, Board};
use crate::service::Log;

/// Connections open at once; a newcomer past it closes the oldest still
/// reading its request of the user holding the most.
pub const MAX_CONNECTIONS: usize = 16;
/// Connections of one user (the peer's uid) open at once; past it the
/// user's own oldest still reading is closed.
pub const MAX_PER_USER: usize = 4;
/// From accept to the answer written: a connection is closed after this.
pub const DEADLINE: Duration = Duration::from_secs(1);
/// The longest request line, newline included.
pub const MAX_LINE: usize = 1024;

/// What happened to requests, the `result` label of
/// `gnomon_sync_now_requests_total`.
#[derive(Debug, Default)]
pub struct Counts {
    answered: AtomicU64,
    bad_request: AtomicU64,
    too_long: AtomicU64,
    deadline: AtomicU64,
    evicted: AtomicU64,
    busy: AtomicU64,
}

impl Counts {
    /// (result, count), in a fixed order.
    pub fn get(&self) -> [(&'static str, u64); 6] {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        [
            ("answered", l(&self.answered)),
            ("bad_request", l(&self.bad_request)),
            ("too_long", l(&self.too_long)),
            ("deadline", l(&self.deadline)),
            ("evicted", l(&self.evicted)),
            ("busy", l(&self.busy)),
        ]
    }
}

/// Who may connect: the socket file's group and mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    /// The group (a gid), or the process's.
    pub gid: Option<u32>,
    /// 0600, 0660 or 0666.
    pub mode: u32,
}

/// Bind `path` and answer from `board` on threads of their own, for as
/// long as the process lives. A live socket at `path` (another sync
/// answering there) is an error, never taken over; a stale one is
/// replaced.
pub fn spawn(
    path: &Path,
    access: &Access,
    board: Arc<Board>,
    drift_ppm: u32,
    counts: Arc<Counts>,
    log: Log,
) -> io::Result<()> {
    let listener = bind(path, access)?;
    let path: PathBuf = path.to_owned();
    std::thread::Builder::new()
        .name("gnomon-now".into())
        .spawn(move || accept_loop(&listener, &path, &board, drift_ppm, &counts, &log))?;
    Ok(())
}

fn bind(path: &Path, access: &Access) -> io::Result<UnixListener> {
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                "another process answers there",
            ));
        }
        // Only a socket is removed: a typo naming a file loses nothing.
        use std::os::unix::fs::FileTypeExt;
        if !std::fs::symlink_metadata(path)?.file_type().is_socket() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "exists and is not a socket",
            ));
        }
        std::fs::remove_file(path)?;
    }
    // Created with the umask's mode, at most as open as the one set next:
    // until then a client may find it closed, never more open.
    let listener = UnixListener::bind(path)?;
    if let Some(gid) = access.gid {
        std::os::unix::fs::chown(path, None, Some(gid))?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(access.mode))?;
    Ok(listener)
}

/// A connection's phase: only one still reading its request may be
/// evicted, and the switch is a compare-and-swap, so a connection is
/// either answered or evicted, never both.
const READING: u8 = 0;
const ANSWERING: u8 = 1;
const EVICTED: u8 = 2;

/// An open connection, oldest first in [`Slots`].
struct Slot {
    id: u64,
    /// The peer's user (SO_PEERCRED), when the kernel says.
    uid: Option<u32>,
    /// A handle to shut it down with.
    stream: UnixStream,
    phase: Arc<AtomicU8>,
}

type Slots = Arc<Mutex<Vec<Slot>>>;

fn accept_loop(
    listener: &UnixListener,
    path: &Path,
    board: &Arc<Board>,
    drift_ppm: u32,
    counts: &Arc<Counts>,
    log: &Log,
) {
    let slots: Slots = Arc::default();
    let mut errors_in_a_row = 0u32;
    let mut next_id = 0u64;
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => {
                errors_in_a_row = 0;
                s
            }
            Err(e) => {
                // EMFILE and the like: wait rather than spin; never end
                // (the service goes on either way).
                errors_in_a_row = errors_in_a_row.saturating_add(1);
                if errors_in_a_row == 1 {
                    log(&format!(
                        "now socket {}: cannot accept: {e}",
                        path.display()
                    ));
                }
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        next_id += 1;
        let id = next_id;
        let phase = Arc::new(AtomicU8::new(READING));
        let uid = rustix::net::sockopt::socket_peercred(&stream)
            .ok()
            .map(|c| c.uid.as_raw());
        if !admit(&slots, id, uid, &stream, &phase, counts) {
            counts.busy.fetch_add(1, Ordering::Relaxed);
            refuse(stream);
            continue;
        }
        let (board, mine, table) = (board.clone(), counts.clone(), slots.clone());
        let spawned = std::thread::Builder::new()
            .name("gnomon-now-conn".into())
            .spawn(move || {
                let _ = serve(stream, &board, drift_ppm, &mine, &phase);
                lock(&table).retain(|s| s.id != id);
            });
        if spawned.is_err() {
            lock(&slots).retain(|s| s.id != id);
            counts.busy.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn lock(slots: &Slots) -> std::sync::MutexGuard<'_, Vec<Slot>> {
    slots.lock().unwrap_or_else(|p| p.into_inner())
}

/// Take a slot for connection `id` from user `uid`, by the share rule:
/// a user at `MAX_PER_USER` gives up its own oldest connection still
/// reading its request; at `MAX_CONNECTIONS` the user with the most
/// connections gives up its oldest one. `false` when no such connection
/// is left to close (every one is past its request: gone in
/// microseconds), or the handle cannot be made.
fn admit(
    slots: &Slots,
    id: u64,
    uid: Option<u32>,
    stream: &UnixStream,
    phase: &Arc<AtomicU8>,
    counts: &Counts,
) -> bool {
    let mut open = lock(slots);
    // Bounded: each pass closes one, admits, or refuses; a pass whose
    // victim just finished its request (the swap failed) looks again,
    // and that connection is then no candidate.
    for _ in 0..=MAX_CONNECTIONS {
        let view: Vec<(Option<u32>, bool)> = open
            .iter()
            .map(|s| (s.uid, s.phase.load(Ordering::Acquire) == READING))
            .collect();
        match decide(&view, uid) {
            Decision::Admit => {
                let Ok(handle) = stream.try_clone() else {
                    return false;
                };
                open.push(Slot {
                    id,
                    uid,
                    stream: handle,
                    phase: phase.clone(),
                });
                return true;
            }
            Decision::Busy => return false,
            Decision::Evict(i) => {
                let swapped = open[i]
                    .phase
                    .compare_exchange(READING, EVICTED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok();
                if swapped {
                    let old = open.remove(i);
                    // Its thread sees end of input (or an error) and
                    // ends, unanswered.
                    let _ = old.stream.shutdown(std::net::Shutdown::Both);
                    counts.evicted.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
    false
}

/// What to do with a newcomer from `uid`, given the open connections
/// oldest first as (user, still reading its request).
#[derive(Debug, PartialEq, Eq)]
enum Decision {
    Admit,
    /// Close this one first, then decide again.
    Evict(usize),
    Busy,
}

fn decide(open: &[(Option<u32>, bool)], uid: Option<u32>) -> Decision {
    let of = |u: Option<u32>| open.iter().filter(|c| c.0 == u).count();
    let oldest_reading_of = |u: Option<u32>| open.iter().position(|c| c.0 == u && c.1);
    if of(uid) >= MAX_PER_USER {
        return oldest_reading_of(uid).map_or(Decision::Busy, Decision::Evict);
    }
    if open.len() < MAX_CONNECTIONS {
        return Decision::Admit;
    }
    // The user holding the most (with one still reading); the oldest such
    // connection among ties.
    let victim = open
        .iter()
        .enumerate()
        .filter(|(_, c)| c.1)
        .max_by_key(|&(i, c)| (of(c.0), std::cmp::Reverse(i)))
        .map(|(i, _)| i);
    victim.map_or(Decision::Busy, Decision::Evict)
}

/// Tell a connection over the cap, without waiting on it.
fn refuse(mut stream: UnixStream) {
    let _ = stream.set_nonblocking(true);
    let mut line = now::error_json("busy").to_string();
    line.push('\n');
    let _ = stream.write_all(line.as_bytes());
}

/// One connection: one request line, one answer line (none when it is
/// evicted while reading: its evictor counted it).
fn serve(
    mut stream: UnixStream,
    board: &Board,
    drift_ppm: u32,
    counts: &Counts,
    phase: &AtomicU8,
) -> io::Result<()> {
    let evicted = || phase.load(Ordering::Acquire) == EVICTED;
    let until = Instant::now() + DEADLINE;
    let mut buf = [0u8; MAX_LINE];
    let mut len = 0;
    // Bounded: every pass reads at least a byte, ends the line, or fails
    // (the deadline and an eviction included).
    let line_end = loop {
        if evicted() {
            return Ok(());
        }
        if let Some(i) = buf[..len].iter().position(|&b| b == b'\n') {
            break Some(i);
        }
        if len == MAX_LINE {
            break None;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            if !evicted() {
                counts.deadline.fetch_add(1, Ordering::Relaxed);
            }
            return Ok(());
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut buf[len..]) {
            // End of input ends the request as a newline would.
            Ok(0) => break None,
            Ok(n) => len += n,
            Err(_) if evicted() => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                counts.deadline.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            Err(e) => return Err(e),
        }
    };
    // From here on it is answered: an evictor that got here first wins.
    if phase
        .compare_exchange(READING, ANSWERING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return Ok(());
    }
    if line_end.is_none() && len == MAX_LINE {
        counts.too_long.fetch_add(1, Ordering::Relaxed);
        return write_line(
            &mut stream,
            &now::error_json("request line too long"),
            until,
        );
    }
    let request = &buf[..line_end.unwrap_or(len)];
    let answer = match now::parse_request(request) {
        Ok(at_least) => {
            counts.answered.fetch_add(1, Ordering::Relaxed);
            board.answer(drift_ppm, at_least).to_json()
        }
        Err(why) => {
            counts.bad_request.fetch_add(1, Ordering::Relaxed);
            now::error_json(&why)
        }
    };
    write_line(&mut stream, &answer, until)
}

fn write_line(stream: &mut UnixStream, v: &serde_json::Value, until: Instant) -> io::Result<()> {
    let mut line = v.to_string();
    line.push('\n');
    let left = until.saturating_duration_since(Instant::now());
    stream.set_write_timeout(Some(left.max(Duration::from_millis(1))))?;
    stream.write_all(line.as_bytes())
}

#[cfg(test)]
mod tests {
    use std::io::BufRead;

    use super::*;
    use crate::now::{Anchor, Floor};

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
}
