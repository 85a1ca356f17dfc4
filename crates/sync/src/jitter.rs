//! The waits of the schedules, between rounds (the service) and between
//! list refreshes (refresh): an interval moved at random by up to a
//! percentage either way.

use std::time::Duration;

/// A random number in [0, 1] (0.5 when no random bytes are to be had).
pub(crate) fn unit_random() -> f64 {
    let mut b = [0u8; 4];
    if getrandom::getrandom(&mut b).is_ok() {
        f64::from(u32::from_le_bytes(b)) / f64::from(u32::MAX)
    } else {
        0.5
    }
}

/// `interval` moved by up to `percent` % either way, `r` in [0, 1] saying
/// where; never under a second.
pub(crate) fn jittered(interval: Duration, percent: u8, r: f64) -> Duration {
    let base = interval.as_secs_f64();
    let spread = base * f64::from(percent) / 100.0;
    Duration::from_secs_f64((base + spread * (2.0 * r.clamp(0.0, 1.0) - 1.0)).max(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_stays_within_the_jitter_and_a_second() {
        let ten = Duration::from_secs(600);
        assert_eq!(jittered(ten, 10, 0.0), Duration::from_secs(540));
        assert_eq!(jittered(ten, 10, 1.0), Duration::from_secs(660));
        assert_eq!(jittered(ten, 10, 0.5), ten);
        assert_eq!(jittered(ten, 0, 0.0), ten);
        assert_eq!(
            jittered(Duration::from_secs(1), 50, 0.0),
            Duration::from_secs(1)
        );
    }
}
