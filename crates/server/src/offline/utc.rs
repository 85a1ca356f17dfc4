//! UTC calendar times as `YYYY-MM-DDTHH:MM:SSZ`, for delegation file names,
//! their comments and `gnomon delegate --start`: the form signed server
//! lists carry, so the calendar is the protocol crate's
//! ([`gnomon_protocol::signed_list::format_utc`]), here in Unix µs.

use gnomon_protocol::signed_list;

const MICROS: u64 = 1_000_000;

/// `YYYY-MM-DDTHH:MM:SSZ` for Unix µs (sub-second part dropped).
pub fn format_utc(unix_us: u64) -> String {
    signed_list::format_utc(i64::try_from(unix_us / MICROS).unwrap_or(i64::MAX))
}

/// The compact form used in file names: `YYYYMMDDTHHMMSSZ`.
pub(crate) fn compact_utc(unix_us: u64) -> String {
    format_utc(unix_us).replace(['-', ':'], "")
}

/// Unix µs of `YYYY-MM-DDTHH:MM:SSZ` (years 1970..=9999); `None` for any
/// other shape or an impossible date.
pub fn parse_utc(text: &str) -> Option<u64> {
    let secs = signed_list::parse_utc(text)?;
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
