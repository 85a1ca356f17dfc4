//! Time encodings (each version's time encoding). Everything outside this module speaks
//! Unix microseconds; the profile says how a value is put on the wire.

/// Encoding of MIDP, MINT, MAXT and the unit of RADI (each version's time encoding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeEncoding {
    /// µs since the Unix epoch; RADI in µs.
    UnixMicros,
    /// MJD << 40 | µs since UTC midnight; RADI in µs.
    MjdMicros,
    /// s since the Unix epoch; RADI in s.
    UnixSeconds,
}

const MICROS: u64 = 1_000_000;
const DAY_MICROS: u64 = 86_400 * MICROS;
/// MJD of 1970-01-01.
const MJD_UNIX_EPOCH: u64 = 40_587;
/// MINT/MAXT all-ones means "no limit" in every encoding (roughenough vectors, pyroughtime).
pub const FOREVER: u64 = u64::MAX;

/// Encode Unix µs as an MJD-µs timestamp.
pub fn unix_us_to_mjd(us: u64) -> u64 {
    let day = us / DAY_MICROS + MJD_UNIX_EPOCH;
    (day << 40) | (us % DAY_MICROS)
}

/// Longest µs-of-day an MJD timestamp may carry: a day plus one positive
/// leap second, the 23:59:60 the drafts allowed (each version's time encoding).
pub const MAX_MJD_DAY_MICROS: u64 = DAY_MICROS + MICROS;

/// Decode an MJD-µs timestamp. On a leap-second day the µs-of-day field
/// may run into 23:59:60; it is simply added, so the leap second reads as
/// the next day's first second. Anything longer is not a time of day: the
/// 40-bit field could otherwise carry ≈ 12.7 days and push a time past a
/// delegation's end while its MJD word still looks inside. `None` for such
/// values and for days before the Unix epoch.
pub fn mjd_to_unix_us(v: u64) -> Option<u64> {
    let day = v >> 40;
    let us = v & ((1 << 40) - 1);
    if us >= MAX_MJD_DAY_MICROS {
        return None;
    }
    let days = day.checked_sub(MJD_UNIX_EPOCH)?;
    days.checked_mul(DAY_MICROS)?.checked_add(us)
}

impl TimeEncoding {
    /// Wire value of a point in time.
    pub fn encode(self, unix_us: u64) -> u64 {
        match self {
            TimeEncoding::UnixMicros => unix_us,
            TimeEncoding::MjdMicros => unix_us_to_mjd(unix_us),
            TimeEncoding::UnixSeconds => unix_us / MICROS,
        }
    }

    /// Unix µs of a wire value. The all-ones value stays all ones.
    pub fn decode(self, v: u64) -> Option<u64> {
        if v == FOREVER {
            return Some(FOREVER);
        }
        match self {
            TimeEncoding::UnixMicros => Some(v),
            TimeEncoding::MjdMicros => mjd_to_unix_us(v),
            TimeEncoding::UnixSeconds => v.checked_mul(MICROS),
        }
    }

    /// Encode a delegation start: rounded up, so the window never widens.
    pub fn encode_start(self, unix_us: u64) -> u64 {
        match self {
            TimeEncoding::UnixSeconds if unix_us != FOREVER => unix_us.div_ceil(MICROS),
            _ => self.encode(unix_us),
        }
    }

    /// Encode a delegation end (rounded down by integer division).
    pub fn encode_end(self, unix_us: u64) -> u64 {
        if unix_us == FOREVER {
            FOREVER
        } else {
            self.encode(unix_us)
        }
    }

    /// RADI wire value for a true time of `now_us` ± `radius_us`, given that
    /// MIDP is `encode(now_us)`: seconds-encodings round MIDP down, so the
    /// lost fraction is added before rounding up (an honest interval).
    pub fn encode_radius(self, now_us: u64, radius_us: u32, min: u32) -> u32 {
        let r = match self {
            TimeEncoding::UnixMicros | TimeEncoding::MjdMicros => radius_us,
            TimeEncoding::UnixSeconds => {
                let lost = now_us % MICROS;
                ((u64::from(radius_us) + lost).div_ceil(MICROS)) as u32
            }
        };
        r.max(min)
    }

    /// RADI wire value in µs.
    pub fn decode_radius(self, r: u32) -> u64 {
        match self {
            TimeEncoding::UnixSeconds => u64::from(r) * MICROS,
            _ => u64::from(r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mjd_round_trip() {
        // 2023-08-26 00:00:00 UTC = 1693008000 s, MJD 60182.
        let us = 1_693_008_000 * MICROS + 123;
        let v = unix_us_to_mjd(us);
        assert_eq!(v >> 40, 60_182);
        assert_eq!(v & ((1 << 40) - 1), 123);
        assert_eq!(mjd_to_unix_us(v), Some(us));
        assert_eq!(mjd_to_unix_us(40_000 << 40), None);
    }

    #[test]
    fn leap_second_day_is_accepted() {
        let v = (60_000u64 << 40) | (86_400 * MICROS + 500_000);
        let us = mjd_to_unix_us(v).unwrap();
        assert_eq!(us, (60_000 - 40_587 + 1) * DAY_MICROS + 500_000);
    }

    #[test]
    fn more_than_a_day_and_a_leap_second_is_no_time() {
        let day = 60_000u64 << 40;
        assert!(mjd_to_unix_us(day | (MAX_MJD_DAY_MICROS - 1)).is_some());
        assert_eq!(mjd_to_unix_us(day | MAX_MJD_DAY_MICROS), None);
        assert_eq!(mjd_to_unix_us(day | ((1 << 40) - 1)), None);
        assert_eq!(TimeEncoding::MjdMicros.decode(day | (2 * DAY_MICROS)), None);
    }

    #[test]
    fn seconds_radius_covers_the_truncated_fraction() {
        let enc = TimeEncoding::UnixSeconds;
        let now = 100 * MICROS + 900_000;
        assert_eq!(enc.encode(now), 100);
        // True interval [98.9, 102.9] s must lie inside 100 ± R: R = 3.
        assert_eq!(enc.encode_radius(now, 2_000_000, 1), 3);
        assert_eq!(enc.encode_radius(100 * MICROS, 2_000_000, 3), 3);
        assert_eq!(enc.encode_radius(100 * MICROS, 0, 1), 1);
        assert_eq!(TimeEncoding::UnixMicros.encode_radius(now, 7, 0), 7);
    }

    #[test]
    fn delegation_window_never_widens() {
        let enc = TimeEncoding::UnixSeconds;
        assert_eq!(enc.encode_start(1_500_000), 2);
        assert_eq!(enc.encode_end(2_500_000), 2);
        assert_eq!(enc.encode_end(FOREVER), FOREVER);
        assert_eq!(enc.decode(FOREVER), Some(FOREVER));
    }
}
