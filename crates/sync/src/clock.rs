//! The local clock: the one reading a round is measured against, and the
//! one system call that sets it.
//!
//! The client reads the wall clock once per sequence and places every
//! answer by monotonic time since (gnomon-client's `clock` module). Sync
//! needs that same reading, to turn offsets into times: [`Recorder`] is a
//! `WallClock` that remembers it.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use gnomon_client::{SystemClock, WallClock};

/// A wall clock that remembers its last reading and when it was taken.
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    last: Arc<Mutex<Option<(i128, Instant)>>>,
}

impl WallClock for Recorder {
    fn now_us(&mut self) -> i128 {
        let at = Instant::now();
        let wall = SystemClock.now_us();
        if let Ok(mut l) = self.last.lock() {
            *l = Some((wall, at));
        }
        wall
    }
}

impl Recorder {
    /// The local clock at `instant` as the last reading places it (the
    /// system clock now when nothing was read).
    pub fn local_at(&self, instant: Instant) -> i128 {
        let last = self.last.lock().ok().and_then(|l| *l);
        match last {
            Some((wall, at)) => wall + instant.saturating_duration_since(at).as_micros() as i128,
            None => SystemClock.now_us(),
        }
    }
}

/// Set CLOCK_REALTIME to `unix_us`. Needs CAP_SYS_TIME. rustix makes the
/// call without an unsafe block of ours.
pub fn set_realtime(unix_us: i128) -> std::io::Result<()> {
    let secs = unix_us.div_euclid(1_000_000);
    let nanos = unix_us.rem_euclid(1_000_000) * 1000;
    let ts = rustix::time::Timespec {
        tv_sec: i64::try_from(secs).map_err(|_| std::io::Error::other("time out of range"))?,
        tv_nsec: nanos as _,
    };
    rustix::time::clock_settime(rustix::time::ClockId::Realtime, ts).map_err(std::io::Error::from)
}
