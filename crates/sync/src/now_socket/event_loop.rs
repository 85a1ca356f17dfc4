//! The now socket's one thread: a poll(2) loop over the listener and the
//! open connections.
//!
//! One loop rather than a pool of threads: a connection's whole work is
//! a read, an answer computed in microseconds from the [`Board`] and one
//! short write, so nothing is gained by running connections side by
//! side, and with one thread the count is 1 whatever clients do, closing
//! a connection for a newcomer is dropping it (no other thread to wake
//! and race with), and a deadline is the poll's timeout. poll, not
//! epoll: at most `MAX_CONNECTIONS + 1` descriptors, rebuilt each pass, is
//! less code and fewer system calls than keeping an epoll set in step.
//! Every socket is non-blocking; nothing here waits but the poll.

use std::io::{self, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::net::SocketFlags;

use super::share::{decide, Decision, Pacer};
use super::{Counts, Peers, ACCEPT_BATCH, DEADLINE, MAX_LINE};
use crate::now::{self, Board};
use crate::sink::Log;

/// What the loop answers from and reports to.
pub(super) struct On {
    pub(super) path: PathBuf,
    pub(super) board: Arc<Board>,
    pub(super) drift_ppm: u32,
    pub(super) counts: Arc<Counts>,
    pub(super) log: Log,
}

/// After an accept fails (EMFILE and the like): how long the listener is
/// left alone, the open connections served meanwhile.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// An open connection, in accept order in the loop's list (oldest first,
/// as [`decide`] takes them).
struct Conn {
    stream: UnixStream,
    /// The peer's user, when the kernel says.
    uid: Option<u32>,
    until: Instant,
    buf: [u8; MAX_LINE],
    len: usize,
    /// The answer line and how much of it is written: `None` while the
    /// request is read (only then may the connection be closed for a
    /// newcomer).
    out: Option<(Vec<u8>, usize)>,
}

/// After a connection's turn: keep it, or close it (its result counted).
enum Next {
    Wait,
    Close,
}

impl Conn {
    fn reading(&self) -> bool {
        self.out.is_none()
    }

    /// Read what has come; once the line is whole (a newline, end of
    /// input, or `MAX_LINE` bytes without one), answer it.
    fn read(&mut self, on: &On) -> Next {
        // Bounded: every pass reads at least a byte, ends the line, or
        // ends the turn.
        loop {
            if let Some(i) = self.buf[..self.len].iter().position(|&b| b == b'\n') {
                return self.answer(Some(i), on);
            }
            if self.len == MAX_LINE {
                return self.answer(None, on);
            }
            match self.stream.read(&mut self.buf[self.len..]) {
                // End of input ends the request as a newline would.
                Ok(0) => return self.answer(None, on),
                Ok(n) => self.len += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                // Reset by the peer: nobody left to answer.
                Err(_) => return Next::Close,
            }
        }
    }

    fn answer(&mut self, line_end: Option<usize>, on: &On) -> Next {
        let c = &on.counts;
        let answer = if line_end.is_none() && self.len == MAX_LINE {
            Counts::add(&c.too_long);
            now::error_json("request line too long")
        } else {
            match now::parse_request(&self.buf[..line_end.unwrap_or(self.len)]) {
                Ok(at_least) => {
                    Counts::add(&c.answered);
                    on.board.answer(on.drift_ppm, at_least).to_json()
                }
                Err(why) => {
                    Counts::add(&c.bad_request);
                    now::error_json(&why)
                }
            }
        };
        let mut line = answer.to_string().into_bytes();
        line.push(b'\n');
        self.out = Some((line, 0));
        self.write()
    }

    /// Write what is left of the answer (std's sends carry MSG_NOSIGNAL:
    /// a peer gone is an error here, never a SIGPIPE).
    fn write(&mut self) -> Next {
        let Some((line, done)) = &mut self.out else {
            return Next::Wait;
        };
        // Bounded: every pass writes at least a byte or ends the turn.
        while *done < line.len() {
            match self.stream.write(&line[*done..]) {
                Ok(0) => return Next::Close,
                Ok(n) => *done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                Err(_) => return Next::Close,
            }
        }
        Next::Close
    }
}

/// Serve `listener` for as long as the process lives.
pub(super) fn run(listener: &UnixListener, on: &On, peers: Peers) {
    let mut open: Vec<Conn> = Vec::with_capacity(super::MAX_CONNECTIONS);
    let mut pacer = Pacer::new(peers.burst, peers.per_second);
    let mut accept_again: Option<Instant> = None;
    let mut errors_in_a_row = 0u32;
    loop {
        let now = Instant::now();
        if accept_again.is_some_and(|t| t <= now) {
            accept_again = None;
        }
        let wake = open.iter().map(|c| c.until).chain(accept_again).min();
        let timeout = wake.map(|w| {
            Timespec::try_from(w.saturating_duration_since(now)).unwrap_or(Timespec {
                tv_sec: 1,
                tv_nsec: 0,
            })
        });
        let ready: Vec<PollFlags> = {
            let mut fds = Vec::with_capacity(open.len() + 1);
            let listening = if accept_again.is_none() {
                PollFlags::IN
            } else {
                PollFlags::empty()
            };
            fds.push(PollFd::new(listener, listening));
            for c in &open {
                let want = if c.reading() {
                    PollFlags::IN
                } else {
                    PollFlags::OUT
                };
                fds.push(PollFd::new(&c.stream, want));
            }
            match rustix::event::poll(&mut fds, timeout.as_ref()) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(e) => {
                    // Not seen (EINVAL, ENOMEM): say it, and do not spin.
                    (on.log)(&format!("now socket {}: poll: {e}", on.path.display()));
                    std::thread::sleep(ACCEPT_BACKOFF);
                    continue;
                }
            }
            fds.iter().map(PollFd::revents).collect()
        };
        // The open connections first: a request that has come is answered
        // before a newcomer may close its connection.
        let now = Instant::now();
        let was = std::mem::take(&mut open);
        for (mut c, r) in was.into_iter().zip(&ready[1..]) {
            let next = if r.is_empty() {
                Next::Wait
            } else if c.reading() {
                c.read(on)
            } else {
                c.write()
            };
            match next {
                Next::Wait if now < c.until => open.push(c),
                Next::Wait => {
                    // Past its deadline: counted when its request was not
                    // read (one that was is counted already).
                    if c.reading() {
                        Counts::add(&on.counts.deadline);
                    }
                }
                Next::Close => {}
            }
        }
        if ready[0].is_empty() || accept_again.is_some() {
            continue;
        }
        for _ in 0..ACCEPT_BATCH {
            match rustix::net::accept_with(listener, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC) {
                Ok(fd) => {
                    errors_in_a_row = 0;
                    admit(UnixStream::from(fd), &mut open, &mut pacer, &peers, on);
                }
                Err(Errno::AGAIN) => break,
                // A connection gone before it was taken.
                Err(Errno::INTR | Errno::CONNABORTED) => {}
                Err(e) => {
                    // EMFILE and the like: leave the listener for a moment
                    // rather than spin; never end (the service goes on
                    // either way).
                    errors_in_a_row = errors_in_a_row.saturating_add(1);
                    if errors_in_a_row == 1 {
                        (on.log)(&format!(
                            "now socket {}: cannot accept: {e}",
                            on.path.display()
                        ));
                    }
                    accept_again = Some(Instant::now() + ACCEPT_BACKOFF);
                    break;
                }
            }
        }
    }
}

/// A newcomer: closed at once past its user's pace (root and the service's
/// own user are not paced); else given a slot by
/// the share rule (closing the connection [`decide`] names), and read at
/// once, since a client's request is most often there already.
fn admit(stream: UnixStream, open: &mut Vec<Conn>, pacer: &mut Pacer, peers: &Peers, on: &On) {
    let uid = (peers.uid_of)(&stream);
    let paced = !uid.is_some_and(|u| peers.unpaced.contains(&u));
    if paced && !pacer.take(uid, (peers.clock)()) {
        Counts::add(&on.counts.paced);
        return;
    }
    // Bounded: each pass admits, refuses, or closes one of the at most
    // MAX_CONNECTIONS open.
    loop {
        let view: Vec<(Option<u32>, bool)> = open.iter().map(|c| (c.uid, c.reading())).collect();
        match decide(&view, uid) {
            Decision::Admit => break,
            Decision::Evict(i) => {
                // Dropped: closed, unanswered; its peer sees end of input.
                open.remove(i);
                Counts::add(&on.counts.evicted);
            }
            Decision::Busy => {
                Counts::add(&on.counts.busy);
                refuse(stream);
                return;
            }
        }
    }
    let mut c = Conn {
        stream,
        uid,
        until: Instant::now() + DEADLINE,
        buf: [0; MAX_LINE],
        len: 0,
        out: None,
    };
    if let Next::Wait = c.read(on) {
        open.push(c);
    }
}

/// Tell a connection over the cap, without waiting on it.
fn refuse(mut stream: UnixStream) {
    let mut line = now::error_json("busy").to_string();
    line.push('\n');
    let _ = stream.write_all(line.as_bytes());
}
