//! Each user's share of the now socket: of its slots ([`decide`]), and of
//! the connections it is served ([`Pacer`]).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::{MAX_CONNECTIONS, MAX_PER_USER};

/// What to do with a newcomer from `uid`, given the open connections
/// oldest first as (user, still reading its request).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Decision {
    Admit,
    /// Close this one first, then decide again.
    Evict(usize),
    Busy,
}

/// The share rule: a user at `MAX_PER_USER` gives up its own oldest
/// connection still reading its request; at `MAX_CONNECTIONS` the user
/// with the most connections gives up its oldest one. `Busy` when no such
/// connection is left to close (every one is past its request: gone in
/// microseconds).
pub(super) fn decide(open: &[(Option<u32>, bool)], uid: Option<u32>) -> Decision {
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

/// Users remembered before those whose pace is back to a full burst are
/// forgotten (a full burst is what a user never seen has).
const USERS_REMEMBERED: usize = 64;

/// The pace of each user's connections, a token bucket per user kept as
/// the time its bucket is full again (GCRA): `burst` connections back to
/// back, then one every `1 s / per_second`. A connection over the pace is
/// not served and costs its user nothing: the user keeps its rate, no
/// more, however fast it connects. The time is the caller's (injected in
/// tests).
///
/// Why accepts, and not handler time: what a connection costs sync past
/// its accept is nearly fixed (a read, one answer, a close), so a count
/// of connections served is a share of CPU, without a clock read around
/// every piece of work; and the cost of a paced connection (accept,
/// SO_PEERCRED, close) is about what making it cost the client.
#[derive(Debug)]
pub(super) struct Pacer {
    every: Duration,
    /// How far ahead of now a user's bucket may be full again and still
    /// take one more: (burst − 1) × every.
    slack: Duration,
    full_at: HashMap<Option<u32>, Instant>,
}

impl Pacer {
    pub(super) fn new(burst: u32, per_second: u32) -> Pacer {
        let every = Duration::from_secs(1) / per_second.max(1);
        Pacer {
            every,
            slack: every.saturating_mul(burst.max(1) - 1),
            full_at: HashMap::new(),
        }
    }

    /// Whether a connection of `uid` at `now` is within its user's pace;
    /// when it is, it is charged.
    pub(super) fn take(&mut self, uid: Option<u32>, now: Instant) -> bool {
        let full_at = self.full_at.get(&uid).map_or(now, |&t| t.max(now));
        if full_at.saturating_duration_since(now) > self.slack {
            return false;
        }
        if self.full_at.len() >= USERS_REMEMBERED && !self.full_at.contains_key(&uid) {
            self.full_at.retain(|_, t| *t > now);
        }
        self.full_at.insert(uid, full_at + self.every);
        true
    }

    #[cfg(test)]
    pub(super) fn remembered(&self) -> usize {
        self.full_at.len()
    }
}
