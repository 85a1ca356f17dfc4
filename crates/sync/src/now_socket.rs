//! `--now-socket`: the answers of [`crate::now`] to local programs, over
//! a Unix stream socket, one JSON line each way (docs/NOW.md).
//!
//! ```text
//!  one thread, one poll(2) loop over the listener and ≤ MAX_CONNECTIONS connections
//!   ├─ a connection readable: read (≤ MAX_LINE bytes, by DEADLINE); a whole line ─▶ one
//!   │    answer line ─▶ close
//!   └─ the listener readable: accept (≤ ACCEPT_BATCH a pass); its user (SO_PEERCRED)
//!        ├─ past its pace (PACE_BURST, then PACE_PER_SECOND) ─▶ closed at once ("paced")
//!        └─ its user at MAX_PER_USER, or MAX_CONNECTIONS open ─▶ close the oldest still
//!             reading its request (of that user; of the user holding the most), admit
//!             the new one (none reading: {"error":"busy"} to the new one)
//! ```
//!
//! A client can only ask: nothing it sends reaches the service, which
//! writes the [`Board`] and never waits on a connection. A client that
//! never writes, writes forever or never reads holds one of
//! `MAX_CONNECTIONS` slots for at most `DEADLINE`, and only until
//! someone else connects. The rule of every listener of gnomon's
//! (docs/RELIABILITY.md, "Holders of connection slots"): a share per
//! source, here the peer's user (SO_PEERCRED: the kernel's word, not the
//! client's), and at a cap the newcomer is admitted and the oldest
//! connection that has not finished its request is closed. One user's
//! holders therefore never shut another user out; a process of the same
//! user competes for that user's share, and could stop its fellow by
//! other means anyway (signals, ptrace).
//!
//! Work is bounded too (issue 34): the socket is one thread whatever
//! clients do (no thread per connection: a user connecting and closing in
//! a loop made sync start and end a thread for each, reported at six
//! times the client's CPU and up to 84 threads at once), and each user's
//! connections are paced at accept (`share::Pacer`): past its burst a
//! user gets `PACE_PER_SECOND` connections served, and the rest are
//! closed as soon as they are accepted, at about what each cost the
//! client to make. A user's pace is its own: another user's churn spends
//! none of it. Every drop is counted (`gnomon_sync_now_requests_total`).

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::counts::NowRequests as Counts;
use crate::now::Board;
use crate::sink::Log;

mod event_loop;
mod share;

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
/// Connections of one user served back to back, with none served before.
pub const PACE_BURST: u32 = 32;
/// Connections of one user served a second past its burst; the others are
/// closed at accept, counted `paced`. Far more than a program needs: the
/// answer changes at a round, and in between only widens, by 2ρ a second.
pub const PACE_PER_SECOND: u32 = 100;
/// Connections the kernel queues for accept (listen(2)'s backlog, not the
/// system's 4096): a client that connects behind a churn waits behind at
/// most this many, each closed in microseconds; past it a blocking connect
/// waits for room, a non-blocking one fails (EAGAIN).
pub const LISTEN_BACKLOG: i32 = 128;
/// Connections accepted in one pass of the loop before it turns to the open
/// ones again.
pub const ACCEPT_BATCH: usize = 64;

/// Who may connect: the socket file's group and mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    /// The group (a gid), or the process's.
    pub gid: Option<u32>,
    /// 0600, 0660 or 0666.
    pub mode: u32,
}

/// The user of a connection's peer, when known.
pub(crate) type UidOf = dyn Fn(&UnixStream) -> Option<u32> + Send;

/// What the loop takes from outside it: whose a connection is, and the
/// clock and rate its user's connections are paced by. [`spawn`] uses the
/// kernel's (SO_PEERCRED, the monotonic clock); tests put in others, since
/// SO_PEERCRED cannot be made to say another user without root.
pub(crate) struct Peers {
    pub(crate) uid_of: Box<UidOf>,
    pub(crate) clock: Box<dyn Fn() -> Instant + Send>,
    pub(crate) burst: u32,
    pub(crate) per_second: u32,
    /// Users never paced: root and the service's own, either of which can
    /// stop sync anyway (signals, ptrace); the share rule still holds.
    pub(crate) unpaced: Vec<u32>,
}

impl Peers {
    fn kernel() -> Peers {
        Peers {
            uid_of: Box::new(|s: &UnixStream| {
                rustix::net::sockopt::socket_peercred(s)
                    .ok()
                    .map(|c| c.uid.as_raw())
            }),
            clock: Box::new(Instant::now),
            burst: PACE_BURST,
            per_second: PACE_PER_SECOND,
            unpaced: vec![0, rustix::process::geteuid().as_raw()],
        }
    }
}

/// Bind `path` and answer from `board` on a thread of its own, for as
/// long as the process lives. A live socket at `path` (another sync
/// answering there) is an error, never taken over; a stale one is
/// replaced. The service removes the file when it stops ([`Bound::remove`]),
/// so that a client finds no socket rather than one nobody answers on.
pub fn spawn(
    path: &Path,
    access: &Access,
    board: Arc<Board>,
    drift_ppm: u32,
    counts: Arc<Counts>,
    log: Log,
) -> io::Result<Bound> {
    spawn_with(path, access, board, drift_ppm, counts, log, Peers::kernel())
}

/// The socket file bound, known by its inode: what [`Bound::remove`]
/// removes, and nothing else.
#[derive(Debug)]
pub struct Bound {
    path: PathBuf,
    id: Option<(u64, u64)>,
}

impl Bound {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Remove the socket file when it is still the one bound here: a file
    /// put in its place since (another sync's socket, after this one's was
    /// deleted by hand) is left alone. Safe to call more than once.
    pub fn remove(&self) {
        if self.id.is_some() && file_id(&self.path) == self.id {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A socket file's device and inode; `None` for anything else.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::symlink_metadata(path).ok()?;
    m.file_type().is_socket().then(|| (m.dev(), m.ino()))
}

pub(crate) fn spawn_with(
    path: &Path,
    access: &Access,
    board: Arc<Board>,
    drift_ppm: u32,
    counts: Arc<Counts>,
    log: Log,
    peers: Peers,
) -> io::Result<Bound> {
    let listener = bind(path, access)?;
    let bound = Bound {
        path: path.to_owned(),
        id: file_id(path),
    };
    rustix::net::listen(&listener, LISTEN_BACKLOG)?;
    listener.set_nonblocking(true)?;
    let on = event_loop::On {
        path: path.to_owned(),
        board,
        drift_ppm,
        counts,
        log,
    };
    std::thread::Builder::new()
        .name("gnomon-now".into())
        .spawn(move || event_loop::run(&listener, &on, peers))?;
    Ok(bound)
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

#[cfg(test)]
mod tests;
