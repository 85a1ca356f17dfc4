//! The local clock: read once, then advanced on the monotonic clock.
//!
//! An offset is the server's time minus ours at the middle of the round
//! trip. If every query read the wall clock afresh, a step of the local
//! clock in the middle of a measurement (NTP, an operator, a VM resuming)
//! would shift some answers' offsets and not others, and the consensus
//! would flag honest servers. So a measurement reads the wall clock once
//! and places every later moment by monotonic time elapsed since.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A source of wall-clock time, Unix µs. The system clock unless a test or
/// an embedding program injects another.
pub trait WallClock {
    /// The current wall-clock time, Unix µs (negative before 1970).
    fn now_us(&mut self) -> i128;
}

/// The operating system's real-time clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl WallClock for SystemClock {
    fn now_us(&mut self) -> i128 {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_micros() as i128,
            Err(e) => -(e.duration().as_micros() as i128),
        }
    }
}

/// One wall-clock reading and the monotonic instant it was taken at.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Anchor {
    wall_us: i128,
    at: Instant,
}

impl Anchor {
    pub(crate) fn read(clock: &mut dyn WallClock) -> Anchor {
        let at = Instant::now();
        Anchor {
            wall_us: clock.now_us(),
            at,
        }
    }

    /// Wall time at `instant` (not before the reading), Unix µs.
    pub(crate) fn wall_at(&self, instant: Instant) -> i128 {
        self.wall_us + instant.saturating_duration_since(self.at).as_micros() as i128
    }
}
