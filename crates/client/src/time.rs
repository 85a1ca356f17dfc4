//! Printing times: UTC from Unix µs without a date library.

/// Unix µs as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (proleptic Gregorian, UTC).
pub fn format_utc(unix_us: u64) -> String {
    let secs = unix_us / 1_000_000;
    let micros = unix_us % 1_000_000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// A signed µs quantity as seconds with six decimals and a sign: `+0.000123 s`.
pub fn format_duration_us(us: i128) -> String {
    let sign = if us < 0 { '-' } else { '+' };
    let a = us.unsigned_abs();
    format!("{sign}{}.{:06} s", a / 1_000_000, a % 1_000_000)
}

/// Days since 1970-01-01 to (year, month, day): Howard Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00.000000Z");
        // RFC 10049's publication day, and a leap day.
        assert_eq!(
            format_utc(1_791_158_400_123_456),
            "2026-10-05T00:00:00.123456Z"
        );
        assert_eq!(
            format_utc(951_782_400_000_000),
            "2000-02-29T00:00:00.000000Z"
        );
        assert_eq!(
            format_utc(4_102_444_799_999_999),
            "2099-12-31T23:59:59.999999Z"
        );
    }

    #[test]
    fn durations_keep_their_sign() {
        assert_eq!(format_duration_us(-1_500_000), "-1.500000 s");
        assert_eq!(format_duration_us(123), "+0.000123 s");
        assert_eq!(format_duration_us(3_600_000_000), "+3600.000000 s");
    }
}
