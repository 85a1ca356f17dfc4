//! Heartbeats: proof that each long-lived thread still goes round its
//! loop, for the service manager's watchdog.
//!
//! Every UDP worker, every TCP listener and the key thread ticks its own
//! [`Beat`] once per loop iteration, including the wake-ups of an idle
//! loop (a receive or accept timeout, the key thread's park), so an idle
//! server still shows progress. A [`Watch`] samples all of them and says
//! which did not move since it last looked; the caller pings the watchdog
//! only when none is stuck, so one stuck thread is enough for systemd to
//! restart the process.
//!
//! A beat is written by one thread and read by one: a plain load and
//! store on a cache line of its own, so ticking costs the worker nothing
//! measurable and no two workers share the line.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One thread's loop counter.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct Beat(AtomicU64);

impl Beat {
    /// A new beat, shared between its thread and the watch.
    pub fn new() -> Arc<Beat> {
        Arc::new(Beat::default())
    }

    /// One more loop iteration. Only the owning thread calls this.
    #[inline]
    pub fn tick(&self) {
        let n = self.0.load(Ordering::Relaxed);
        self.0.store(n.wrapping_add(1), Ordering::Relaxed);
    }

    /// Iterations so far.
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A named beat: the name says which thread is stuck.
pub type Named = (String, Arc<Beat>);

/// Samples beats and reports the ones that did not advance.
#[derive(Debug)]
pub struct Watch {
    beats: Vec<(String, Arc<Beat>, u64)>,
}

impl Watch {
    /// Watch `beats`, starting from their counts now.
    pub fn new(beats: Vec<Named>) -> Watch {
        Watch {
            beats: beats
                .into_iter()
                .map(|(name, b)| {
                    let seen = b.count();
                    (name, b, seen)
                })
                .collect(),
        }
    }

    /// The names of the beats that did not advance since the last call (or
    /// since [`Watch::new`]); empty when every thread made progress.
    pub fn stalled(&mut self) -> Vec<&str> {
        let mut stuck = Vec::new();
        for (name, beat, seen) in &mut self.beats {
            let now = beat.count();
            if now == *seen {
                stuck.push(name.as_str());
            }
            *seen = now;
        }
        stuck
    }

    /// How many beats are watched.
    pub fn len(&self) -> usize {
        self.beats.len()
    }

    /// Whether nothing is watched.
    pub fn is_empty(&self) -> bool {
        self.beats.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_beat_that_did_not_move_is_named_until_it_moves() {
        let (a, b) = (Beat::new(), Beat::new());
        let mut w = Watch::new(vec![("a".into(), a.clone()), ("b".into(), b.clone())]);
        // Nothing ticked since the watch began.
        assert_eq!(w.stalled(), ["a", "b"]);
        a.tick();
        b.tick();
        assert!(w.stalled().is_empty());
        a.tick();
        assert_eq!(w.stalled(), ["b"]);
        // A tick before the previous look does not count for the next one.
        assert_eq!(w.stalled(), ["a", "b"]);
        b.tick();
        a.tick();
        assert!(w.stalled().is_empty());
    }

    #[test]
    fn each_beat_has_its_own_cache_line() {
        assert_eq!(align_of::<Beat>(), 64);
    }
}
