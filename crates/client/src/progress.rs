//! What a query is doing while nothing answers, for a caller that says so.
//!
//! A silent server costs a query its whole schedule (about 9 s with the
//! defaults): without a word in between, that reads as a hung program.
//! [`crate::Client::on_progress`] is told before every attempt after the
//! first, so a command line can say "no answer from X yet; retrying".

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use gnomon_protocol::serverlist::Transport;

/// An attempt about to go out because the earlier ones got no answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retry {
    /// The address that has not answered.
    pub peer: SocketAddr,
    /// How the next attempt goes.
    pub transport: Transport,
    /// Which attempt this is, from 1 (the first is never reported).
    pub attempt: u32,
    /// Attempts the schedule holds for a silent server, every version
    /// family and transport counted; a refusal or the deadline ends it
    /// sooner.
    pub planned: u32,
    /// Time since the query began.
    pub elapsed: Duration,
    /// The attempts so far were refused (ICMP port unreachable), not met
    /// with silence: nothing may listen there.
    pub refused: bool,
}

/// The caller's hook.
pub(crate) type Hook = Box<dyn FnMut(&Retry) + Send>;

/// Counts a query's attempts and tells the hook of every one after the
/// first.
pub(crate) struct Pacer<'a> {
    hook: Option<&'a mut Hook>,
    attempt: u32,
    planned: u32,
    start: Instant,
}

impl<'a> Pacer<'a> {
    pub(crate) fn new(hook: Option<&'a mut Hook>, planned: u32, start: Instant) -> Self {
        Pacer {
            hook,
            attempt: 0,
            planned,
            start,
        }
    }

    /// An attempt to `peer` over `transport` is about to go out; `refused`:
    /// the earlier ones were refused rather than unanswered.
    pub(crate) fn attempt(&mut self, peer: SocketAddr, transport: Transport, refused: bool) {
        self.attempt += 1;
        if self.attempt < 2 {
            return;
        }
        if let Some(hook) = self.hook.as_mut() {
            hook(&Retry {
                peer,
                transport,
                attempt: self.attempt,
                planned: self.planned.max(self.attempt),
                elapsed: self.start.elapsed(),
                refused,
            });
        }
    }
}
