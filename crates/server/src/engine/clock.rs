//! The clock's word to the workers: the kernel's clock state, read
//! through a [`ClockReader`], becomes the radius to advertise and whether
//! to answer at all ([`radius_from_kernel`], under the configured floor and
//! unsynchronized policy), stored in the [`ClockState`] the workers load
//! per batch. The engine applies it at start, the key thread at each poll
//! and at once on a reload.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::EngineConfig;
use crate::settings::ClockState;
use crate::sys;

/// Reads the kernel's clock state; [`sys::kernel_clock`] in production,
/// anything a test likes otherwise.
pub type ClockReader = Arc<dyn Fn() -> io::Result<sys::KernelClock> + Send + Sync>;

/// Kernel clock error → advertised radius; `None` when refusing. `None`
/// for `k` means the state could not be read: nothing says the clock is
/// right, so it is treated as unsynchronized. The radius is never below
/// the kernel's own maximum error, whatever the policy says.
pub fn radius_from_kernel(
    k: Option<sys::KernelClock>,
    floor_us: u64,
    unsynchronized: Option<u64>,
) -> Option<u64> {
    let max_error_us = k.map_or(0, |k| k.max_error_us);
    if k.is_some_and(|k| k.synchronized) {
        Some(max_error_us.max(floor_us))
    } else {
        unsynchronized.map(|r| r.max(floor_us).max(max_error_us))
    }
}

/// Apply one reading of the kernel's clock state to what workers use.
pub(super) fn update_clock(
    clock: &ClockState,
    config: &EngineConfig,
    read: io::Result<sys::KernelClock>,
) {
    let k = match read {
        Ok(k) => {
            clock.read_error.store(0, Ordering::Relaxed);
            Some(k)
        }
        // adjtimex refused (systemd's ProtectClock=yes, seccomp): keep the
        // reason for the one log line the caller writes.
        Err(e) => {
            clock
                .read_error
                .store(e.raw_os_error().unwrap_or(-1), Ordering::Relaxed);
            None
        }
    };
    clock
        .synchronized
        .store(k.is_some_and(|k| k.synchronized), Ordering::Relaxed);
    let radius = radius_from_kernel(k, config.radius_floor_us, config.unsynchronized_radius_us);
    match radius {
        Some(r) => {
            clock.radius_us.store(r, Ordering::Relaxed);
            clock.answering.store(true, Ordering::Relaxed);
        }
        None => clock.answering.store(false, Ordering::Relaxed),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::settings::WorkerConfig;
    use crate::sys::KernelClock;

    const SYNCED: KernelClock = KernelClock {
        max_error_us: 500_000,
        synchronized: true,
    };

    #[test]
    fn radius_follows_the_kernel_and_the_policy() {
        assert_eq!(
            radius_from_kernel(Some(SYNCED), 3_000_000, None),
            Some(3_000_000)
        );
        let worse = KernelClock {
            max_error_us: 7_000_000,
            synchronized: true,
        };
        assert_eq!(
            radius_from_kernel(Some(worse), 3_000_000, None),
            Some(7_000_000)
        );
        let unsynced = KernelClock {
            max_error_us: 16_000_000,
            synchronized: false,
        };
        assert_eq!(radius_from_kernel(Some(unsynced), 3_000_000, None), None);
        assert_eq!(
            radius_from_kernel(Some(unsynced), 3_000_000, Some(60_000_000)),
            Some(60_000_000)
        );
    }

    #[test]
    fn unsynchronized_radius_is_never_below_the_kernels_max_error() {
        let drifting = KernelClock {
            max_error_us: 90_000_000,
            synchronized: false,
        };
        assert_eq!(
            radius_from_kernel(Some(drifting), 3_000_000, Some(60_000_000)),
            Some(90_000_000)
        );
    }

    #[test]
    fn an_unreadable_clock_is_unsynchronized() {
        // Refusing policy: no answers at all.
        assert_eq!(radius_from_kernel(None, 3_000_000, None), None);
        // Answering policy: its radius, not the synchronized floor.
        assert_eq!(
            radius_from_kernel(None, 3_000_000, Some(60_000_000)),
            Some(60_000_000)
        );
    }

    fn config(unsynchronized_radius_us: Option<u64>) -> EngineConfig {
        EngineConfig {
            listen: Vec::new(),
            workers: 1,
            recv_buffer: None,
            worker: WorkerConfig {
                max_batch: 1,
                max_queue_delay_us: 0,
                acceptor: gnomon_protocol::Acceptor {
                    profiles: gnomon_protocol::ProfileSet::ALL,
                    min_size: 1024,
                },
                options: Default::default(),
                vers: Default::default(),
                grease_per_million: 0,
                fail_after: None,
                batch_wait_us: 0,
                limit: Default::default(),
            },
            key_validity: Duration::from_secs(3600),
            key_rotation: Duration::from_secs(1800),
            key_rotation_jitter_percent: 0,
            radius_floor_us: 3_000_000,
            unsynchronized_radius_us,
            xdp: None,
            tcp: None,
        }
    }

    #[test]
    fn a_failed_read_stops_answering_under_refuse_and_recovers() {
        let clock = ClockState::new(3_000_000);
        let refuse = config(None);
        update_clock(
            &clock,
            &refuse,
            Err(io::Error::from_raw_os_error(libc::EPERM)),
        );
        assert!(!clock.answering.load(Ordering::Relaxed));
        assert!(!clock.synchronized.load(Ordering::Relaxed));
        assert_eq!(clock.read_error.load(Ordering::Relaxed), libc::EPERM);
        update_clock(&clock, &refuse, Ok(SYNCED));
        assert!(clock.answering.load(Ordering::Relaxed));
        assert!(clock.synchronized.load(Ordering::Relaxed));
        assert_eq!(clock.read_error.load(Ordering::Relaxed), 0);
        assert_eq!(clock.radius_us.load(Ordering::Relaxed), 3_000_000);
    }

    #[test]
    fn a_failed_read_answers_with_the_unsynchronized_radius() {
        let clock = ClockState::new(3_000_000);
        let answer = config(Some(60_000_000));
        update_clock(
            &clock,
            &answer,
            Err(io::Error::from_raw_os_error(libc::EPERM)),
        );
        assert!(clock.answering.load(Ordering::Relaxed));
        assert_eq!(clock.radius_us.load(Ordering::Relaxed), 60_000_000);
    }
}
