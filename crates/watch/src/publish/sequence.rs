//! The `observatory.sequence` of the next publication: clients refuse a
//! list whose sequence is not above the last one they saw from the same
//! key, so it must only grow — across restarts (the last is kept in the
//! store) and when the clock steps back (then it counts on from the last).

/// The sequence after `last` at `now_ms` (Unix ms): the time when the
/// clock is ahead of the last, else one more than the last.
pub fn next(now_ms: u64, last: u64) -> u64 {
    now_ms.max(last.saturating_add(1))
}

/// Unix ms of a Unix µs time (0 before the epoch).
pub fn ms_of_us(us: i64) -> u64 {
    u64::try_from(us / 1000).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_the_clock_while_the_clock_moves_on() {
        assert_eq!(next(1_733_148_000_123, 0), 1_733_148_000_123);
        assert_eq!(
            next(1_733_148_000_123, 1_733_148_000_000),
            1_733_148_000_123
        );
    }

    #[test]
    fn it_grows_when_the_clock_stands_still_or_steps_back() {
        let last = 1_733_148_000_123;
        assert_eq!(next(last, last), last + 1);
        // An hour back: still above the last, so no client refuses it.
        assert_eq!(next(last - 3_600_000, last), last + 1);
        let mut seq = 0;
        for now in [5, 5, 3, 9, 9, 1] {
            let n = next(now, seq);
            assert!(n > seq, "{n} after {seq}");
            seq = n;
        }
    }

    #[test]
    fn the_top_saturates_rather_than_wrapping_to_zero() {
        assert_eq!(next(0, u64::MAX), u64::MAX);
    }

    #[test]
    fn microseconds_become_milliseconds() {
        assert_eq!(ms_of_us(1_733_148_000_123_456), 1_733_148_000_123);
        assert_eq!(ms_of_us(-5), 0);
    }
}
