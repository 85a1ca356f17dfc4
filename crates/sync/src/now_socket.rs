//! `--now-socket`: the answers of [`crate::now`] to local programs, over
//! a Unix stream socket, one JSON line each way (docs/NOW.md).
//!
//! ```text
//!  accept thread ──(slot free)──▶ a thread per connection: read one line
//!        │                          (≤ MAX_LINE bytes, by DEADLINE) ─▶ one answer line ─▶ close
//!        └──(MAX_CONNECTIONS busy)──▶ {"error":"busy"}, close, counted
//! ```
//!
//! A client can only ask: nothing it sends reaches the service, which
//! writes the [`Board`] and never waits on a connection. A client that
//! never writes, writes forever or never reads holds one of
//! `MAX_CONNECTIONS` threads for at most `DEADLINE`; every drop is
//! counted (`gnomon_sync_now_requests_total`).

use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::now::{self, Board};

/// Connections answered at once; more are told "busy" and closed.
pub const MAX_CONNECTIONS: usize = 16;
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
    busy: AtomicU64,
}

impl Counts {
    /// (result, count), in a fixed order.
    pub fn get(&self) -> [(&'static str, u64); 5] {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        [
            ("answered", l(&self.answered)),
            ("bad_request", l(&self.bad_request)),
            ("too_long", l(&self.too_long)),
            ("deadline", l(&self.deadline)),
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
) -> io::Result<()> {
    let listener = bind(path, access)?;
    let path: PathBuf = path.to_owned();
    std::thread::Builder::new()
        .name("gnomon-now".into())
        .spawn(move || accept_loop(&listener, &path, &board, drift_ppm, &counts))?;
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

fn accept_loop(
    listener: &UnixListener,
    path: &Path,
    board: &Arc<Board>,
    drift_ppm: u32,
    counts: &Arc<Counts>,
) {
    let busy = Arc::new(AtomicUsize::new(0));
    let mut errors_in_a_row = 0u32;
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
                    eprintln!("gnomon sync: now socket {}: {e}", path.display());
                }
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if busy.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            busy.fetch_sub(1, Ordering::AcqRel);
            counts.busy.fetch_add(1, Ordering::Relaxed);
            refuse(stream);
            continue;
        }
        let (board, mine, slot) = (board.clone(), counts.clone(), busy.clone());
        let spawned = std::thread::Builder::new()
            .name("gnomon-now-conn".into())
            .spawn(move || {
                let _ = serve(stream, &board, drift_ppm, &mine);
                slot.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            busy.fetch_sub(1, Ordering::AcqRel);
            counts.busy.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Tell a connection over the cap, without waiting on it.
fn refuse(mut stream: UnixStream) {
    let _ = stream.set_nonblocking(true);
    let mut line = now::error_json("busy").to_string();
    line.push('\n');
    let _ = stream.write_all(line.as_bytes());
}

/// One connection: one request line, one answer line.
fn serve(mut stream: UnixStream, board: &Board, drift_ppm: u32, counts: &Counts) -> io::Result<()> {
    let until = Instant::now() + DEADLINE;
    let mut buf = [0u8; MAX_LINE];
    let mut len = 0;
    // Bounded: every pass reads at least a byte, ends the line, or fails
    // (the deadline included).
    let line_end = loop {
        if let Some(i) = buf[..len].iter().position(|&b| b == b'\n') {
            break Some(i);
        }
        if len == MAX_LINE {
            counts.too_long.fetch_add(1, Ordering::Relaxed);
            write_line(
                &mut stream,
                &now::error_json("request line too long"),
                until,
            )?;
            return Ok(());
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            counts.deadline.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut buf[len..]) {
            // End of input ends the request as a newline would.
            Ok(0) => break None,
            Ok(n) => len += n,
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
    let request = &buf[..line_end.unwrap_or(len)];
    let answer = match now::parse_request(request) {
        Ok(at_least) => {
            counts.answered.fetch_add(1, Ordering::Relaxed);
            board
                .known()
                .answer(now::boot_ns(), now::wall_us(), drift_ppm, at_least)
                .to_json()
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
    use crate::now::Anchor;

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
        spawn(&path, &access, board.clone(), 100, counts.clone()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o660);
        // A second sync does not take a live socket over.
        assert!(spawn(&path, &access, board.clone(), 100, counts.clone()).is_err());

        let _silent = UnixStream::connect(&path).unwrap();
        let a = ask(&path, "\n");
        assert_eq!(a["known"], "floor");
        assert_eq!(a["earliest_unix_us"], 5);
        board.update(
            Some(Anchor {
                boot_ns: now::boot_ns(),
                earliest_us: now::wall_us() - 1_000_000,
                latest_us: now::wall_us() + 1_000_000,
                round: 1,
                servers: vec!["x".into()],
            }),
            Some(5),
        );
        let a = ask(&path, "{\"at-least\": 7}\n");
        assert_eq!(a["known"], "interval");
        assert_eq!(a["wall_clock_inside"], true);
        assert_eq!(a["at_least_proven"], true);
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
        // Three: the second spawn's probe of the live socket is an empty
        // request, answered.
        assert_eq!(c[0], ("answered", 3));
        assert_eq!(c[1], ("bad_request", 1));
        assert_eq!(c[2], ("too_long", 1));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
