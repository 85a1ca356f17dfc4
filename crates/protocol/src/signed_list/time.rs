//! RFC 3339 UTC times with a `Z` and whole seconds, the only form lists carry.

use alloc::string::{String, ToString};
use core::fmt;

/// `2026-12-02T14:00:00Z` for a Unix time in seconds. Years outside
/// 0000–9999 are clamped to those ends, which no list reaches.
pub fn format_utc(unix: i64) -> String {
    Utc(unix).to_string()
}

/// A Unix time in seconds that displays as [`format_utc`] writes it,
/// without allocating (libgnomon's messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Utc(pub i64);

impl fmt::Display for Utc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MIN: i64 = -62_167_219_200; // 0000-01-01T00:00:00Z
        const MAX: i64 = 253_402_300_799; // 9999-12-31T23:59:59Z
        let unix = self.0.clamp(MIN, MAX);
        let days = unix.div_euclid(86_400);
        let secs = unix.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        )
    }
}

/// The Unix time of `YYYY-MM-DDTHH:MM:SSZ`; `None` for any other form
/// (fractions, offsets, lower-case letters, impossible dates, leap seconds).
pub fn parse_utc(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<i64> {
        b[from..to].iter().try_fold(0i64, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
        })
    };
    let (y, m, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hh, mm, ss) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) || hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    Some(days_from_civil(y, m, d) * 86_400 + hh * 3600 + mm * 60 + ss)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (eras of 400 years).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_times_both_ways() {
        for (s, t) in [
            ("1970-01-01T00:00:00Z", 0),
            ("2026-12-02T14:00:00Z", 1_796_220_000),
            ("2000-02-29T23:59:59Z", 951_868_799),
            ("1969-12-31T23:59:59Z", -1),
        ] {
            assert_eq!(parse_utc(s), Some(t), "{s}");
            assert_eq!(format_utc(t), s);
        }
    }

    #[test]
    fn other_forms_are_refused() {
        for s in [
            "2026-12-02T14:00:00",
            "2026-12-02T14:00:00.5Z",
            "2026-12-02T14:00:00+00:00",
            "2026-12-02t14:00:00Z",
            "2026-02-29T14:00:00Z",
            "2026-13-01T14:00:00Z",
            "2026-12-02T24:00:00Z",
            "2026-12-31T23:59:60Z",
            "2026-12-0２T14:00:00Z",
            "+026-12-02T14:00:00Z",
        ] {
            assert_eq!(parse_utc(s), None, "{s}");
        }
    }

    proptest::proptest! {
        #[test]
        fn format_then_parse_is_identity(t in -62_167_219_200i64..=253_402_300_799) {
            proptest::prop_assert_eq!(parse_utc(&format_utc(t)), Some(t));
        }
    }
}
