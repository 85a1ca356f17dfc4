//! The kernel's wall clock, once per batch, without a system call per batch.
//!
//! Receive timestamps (`SO_TIMESTAMPNS`) are on the kernel's
//! `CLOCK_REALTIME`, so queue delay must be measured on it. The process's
//! own view of the time (`SystemTime`, i.e. `clock_gettime` through the C
//! library and the vDSO) is normally the same clock, but a preloaded shim
//! such as libfaketime moves it and not the timestamps. Reading the
//! kernel's clock directly is a system call, 0.4-0.8 µs more than the vDSO
//! read (docs/COST.md), which at low load, one request per batch, is up to
//! a tenth of the CPU per response. So a worker keeps the offset between
//! the two clocks, measured with one direct read now and then, and adds it
//! to the process clock it reads for the timestamp anyway.
//!
//! When the offset is re-measured: every [`RECALIBRATE`] of monotonic
//! time, and at once when the process clock has moved more than [`STEP_NS`]
//! against the monotonic clock since the last measurement (a step of the
//! process's clock, whether the kernel's clock stepped under it or a shim
//! changed its shift; both clocks are slewed alike, so nothing else moves
//! them apart). What is left is a change of the offset the process clock
//! does not show (the kernel's clock stepped while a shim holds the
//! process's still), which the estimate follows within [`RECALIBRATE`].
//! Until then, both directions stay safe:
//!
//! * The estimate runs ahead of the kernel's clock (the kernel stepped
//!   back): waits look longer than they were, but the caller caps every
//!   wait at the monotonic time since the socket was last seen empty, a
//!   true bound whatever the wall clocks do, so a request is only dropped
//!   as stale if the queue really was backed up for longer than the limit.
//! * The estimate runs behind (the kernel stepped forward): waits look
//!   shorter, at worst zero, so some requests that really waited too long
//!   are answered for up to [`RECALIBRATE`]. That costs CPU, not
//!   correctness (their timestamps are read as usual), and is what a step
//!   of the kernel's clock between receive and answer did before.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::sys;

/// Longest time an offset is used before it is measured again. Five
/// system calls a second per worker, whatever the load.
pub const RECALIBRATE: Duration = Duration::from_millis(200);

/// How far the process clock may drift from the monotonic one between
/// measurements before it counts as a step. Slewing moves both alike, so
/// this only has to clear the jitter of the two reads.
pub const STEP_NS: u64 = 1_000_000;

/// The two wall clocks: a seam so the tests can step them.
pub trait WallClocks {
    /// The process's view of the time, ns since the Unix epoch (the
    /// ordinary, possibly shimmed, path).
    fn process_ns(&self) -> u64;
    /// The kernel's `CLOCK_REALTIME`, ns, by a direct system call.
    fn kernel_ns(&self) -> Option<u64>;
}

/// The clocks of this process.
pub struct SystemClocks;

impl WallClocks for SystemClocks {
    fn process_ns(&self) -> u64 {
        process_now_ns()
    }

    fn kernel_ns(&self) -> Option<u64> {
        sys::kernel_realtime_ns()
    }
}

/// The process's view of the time, ns since the Unix epoch (0 before it).
pub fn process_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// One worker's estimate of the kernel's clock from its own.
#[derive(Debug, Default)]
pub struct KernelTime {
    /// Kernel's clock minus the process's, ns, at the last measurement
    /// (0 if the kernel's could not be read: the process clock as is).
    offset_ns: i64,
    /// Monotonic and process-clock readings at the last measurement.
    measured: Option<(Instant, u64)>,
}

impl KernelTime {
    pub fn new() -> Self {
        Self::default()
    }

    /// The kernel's clock now, ns, given the process clock (`process_ns`)
    /// and the monotonic clock (`mono`) read together just before.
    pub fn now_ns(&mut self, process_ns: u64, mono: Instant, clocks: &impl WallClocks) -> u64 {
        if self.due(process_ns, mono) {
            self.measure(process_ns, mono, clocks);
        }
        process_ns.saturating_add_signed(self.offset_ns)
    }

    fn due(&self, process_ns: u64, mono: Instant) -> bool {
        let Some((at, at_process)) = self.measured else {
            return true;
        };
        let elapsed = mono.saturating_duration_since(at);
        let expected = at_process.saturating_add(elapsed.as_nanos() as u64);
        elapsed >= RECALIBRATE || process_ns.abs_diff(expected) > STEP_NS
    }

    fn measure(&mut self, process_ns: u64, mono: Instant, clocks: &impl WallClocks) {
        self.measured = Some((mono, process_ns));
        self.offset_ns = match clocks.kernel_ns() {
            Some(kernel) => {
                // Against the middle of the process-clock readings either
                // side of the system call, so a preemption across it errs
                // by half of it, not all.
                let after = clocks.process_ns().max(process_ns);
                let mid = process_ns + (after - process_ns) / 2;
                (i128::from(kernel) - i128::from(mid))
                    .clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
            }
            None => 0,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Clocks that say what a test sets, counting the direct reads.
    struct Fake {
        process: Cell<u64>,
        kernel: Cell<Option<u64>>,
        reads: Cell<u32>,
    }

    impl Fake {
        fn new(process: u64, kernel: u64) -> Self {
            Self {
                process: Cell::new(process),
                kernel: Cell::new(Some(kernel)),
                reads: Cell::new(0),
            }
        }
    }

    impl WallClocks for Fake {
        fn process_ns(&self) -> u64 {
            self.process.get()
        }
        fn kernel_ns(&self) -> Option<u64> {
            self.reads.set(self.reads.get() + 1);
            self.kernel.get()
        }
    }

    const HOUR: u64 = 3_600_000_000_000;
    const MS: u64 = 1_000_000;

    #[test]
    fn the_kernel_clock_is_read_once_per_period_not_once_per_batch() {
        let t0 = Instant::now();
        // The process an hour ahead of the kernel (a shim).
        let c = Fake::new(10 * HOUR + HOUR, 10 * HOUR);
        let mut k = KernelTime::new();
        assert_eq!(k.now_ns(c.process.get(), t0, &c), 10 * HOUR);
        for i in 1..1000u64 {
            // A batch every 100 µs for 100 ms, both clocks advancing.
            let at = Duration::from_micros(100 * i);
            c.process.set(11 * HOUR + at.as_nanos() as u64);
            c.kernel.set(Some(10 * HOUR + at.as_nanos() as u64));
            assert_eq!(
                k.now_ns(c.process.get(), t0 + at, &c),
                10 * HOUR + at.as_nanos() as u64
            );
        }
        assert_eq!(c.reads.get(), 1);
        // Past the period: measured again.
        let at = RECALIBRATE + Duration::from_millis(1);
        c.process.set(11 * HOUR + at.as_nanos() as u64);
        k.now_ns(c.process.get(), t0 + at, &c);
        assert_eq!(c.reads.get(), 2);
    }

    #[test]
    fn a_step_of_the_process_clock_either_way_is_measured_at_once() {
        let t0 = Instant::now();
        let c = Fake::new(10 * HOUR, 10 * HOUR);
        let mut k = KernelTime::new();
        k.now_ns(c.process.get(), t0, &c);
        // 10 ms later the shim moves the process clock an hour forward,
        // then two hours back; the kernel's clock runs on undisturbed.
        for (i, process) in [11 * HOUR, 9 * HOUR].into_iter().enumerate() {
            let at = 10 * MS * (i as u64 + 1);
            c.process.set(process + at);
            c.kernel.set(Some(10 * HOUR + at));
            let mono = t0 + Duration::from_nanos(at);
            assert_eq!(k.now_ns(c.process.get(), mono, &c), 10 * HOUR + at);
            assert_eq!(c.reads.get(), i as u32 + 2);
        }
        // Slewing-sized drift is not a step.
        let at = 30 * MS;
        c.process.set(9 * HOUR + at + MS / 2);
        k.now_ns(c.process.get(), t0 + Duration::from_nanos(at), &c);
        assert_eq!(c.reads.get(), 3);
    }

    #[test]
    fn an_unreadable_kernel_clock_means_the_process_clock_and_a_retry_later() {
        let t0 = Instant::now();
        let c = Fake::new(10 * HOUR, 10 * HOUR);
        c.kernel.set(None);
        let mut k = KernelTime::new();
        c.process.set(11 * HOUR);
        assert_eq!(k.now_ns(c.process.get(), t0, &c), 11 * HOUR);
        let soon = t0 + Duration::from_millis(1);
        c.process.set(11 * HOUR + MS);
        k.now_ns(c.process.get(), soon, &c);
        assert_eq!(c.reads.get(), 1, "retried on the next batch");
        c.kernel.set(Some(10 * HOUR));
        let later = t0 + RECALIBRATE;
        c.process.set(11 * HOUR + RECALIBRATE.as_nanos() as u64);
        assert_eq!(k.now_ns(c.process.get(), later, &c), 10 * HOUR);
    }

    #[test]
    fn the_offset_is_taken_against_the_middle_of_the_process_readings() {
        // The process clock read 0 before the system call and 2 ms after
        // (preempted across it); the kernel said 1 ms: no offset.
        let c = Fake::new(10 * HOUR + 2 * MS, 10 * HOUR + MS);
        let mut k = KernelTime::new();
        assert_eq!(k.now_ns(10 * HOUR, Instant::now(), &c), 10 * HOUR);
    }
}
