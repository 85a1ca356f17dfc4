//! UTC calendar times as `YYYY-MM-DDTHH:MM:SSZ`, for delegation file names,
//! their comments and `gnomon delegate --start`.

const MICROS: u64 = 1_000_000;

/// Days since 1970-01-01 of a proleptic Gregorian date (year ≥ 1970).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    // Count years from March so that the leap day ends the year.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `YYYY-MM-DDTHH:MM:SSZ` for Unix µs (sub-second part dropped).
pub fn format_utc(unix_us: u64) -> String {
    let secs = unix_us / MICROS;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The compact form used in file names: `YYYYMMDDTHHMMSSZ`.
pub(crate) fn compact_utc(unix_us: u64) -> String {
    format_utc(unix_us).replace(['-', ':'], "")
}

/// Unix µs of `YYYY-MM-DDTHH:MM:SSZ` (years 1970..=9999); `None` for any
/// other shape or an impossible date.
pub fn parse_utc(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' {
        return None;
    }
    if b[16] != b':' || b[19] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = text.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if y < 1970 || !(1..=12).contains(&mo) || d < 1 || d > month_days[(mo - 1) as usize] {
        return None;
    }
    if h > 23 || mi > 59 || s > 59 {
        return None;
    }
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s;
    u64::try_from(secs).ok()?.checked_mul(MICROS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        // 2000-02-29 (a leap day in a century year divisible by 400).
        assert_eq!(format_utc(951_782_400 * MICROS), "2000-02-29T00:00:00Z");
        assert_eq!(
            format_utc(1_700_000_000 * MICROS + 999_999),
            "2023-11-14T22:13:20Z"
        );
        assert_eq!(
            parse_utc("2023-11-14T22:13:20Z"),
            Some(1_700_000_000 * MICROS)
        );
        assert_eq!(
            parse_utc("2100-03-01T00:00:00Z"),
            Some(4_107_542_400 * MICROS)
        );
        assert_eq!(compact_utc(0), "19700101T000000Z");
    }

    #[test]
    fn round_trip_over_many_days() {
        let mut t = 0u64;
        while t < 300 * 365 * 86_400 {
            let us = t * MICROS;
            assert_eq!(parse_utc(&format_utc(us)), Some(us), "{}", format_utc(us));
            t += 86_400 * 7 + 3_661;
        }
    }

    #[test]
    fn impossible_or_misshapen_dates_are_refused() {
        for bad in [
            "2023-02-29T00:00:00Z",
            "2100-02-29T00:00:00Z",
            "2023-13-01T00:00:00Z",
            "2023-00-01T00:00:00Z",
            "2023-01-32T00:00:00Z",
            "2023-01-01T24:00:00Z",
            "2023-01-01T00:60:00Z",
            "2023-01-01T00:00:60Z",
            "1969-12-31T23:59:59Z",
            "2023-01-01 00:00:00Z",
            "2023-01-01T00:00:00",
            "2023-01-01T00:00:00+00:00",
            "2023-1-01T00:00:00Z",
            "+023-01-01T00:00:00Z",
            "now",
        ] {
            assert_eq!(parse_utc(bad), None, "{bad}");
        }
        assert!(parse_utc("2024-02-29T12:00:00Z").is_some());
    }
}
