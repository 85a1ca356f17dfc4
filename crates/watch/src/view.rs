//! What a status means: one cell per check, each with a state
//! (`ok`, `warn`, `fail`, `none`) and words, and one state per server. The
//! page, the JSON and the tests read the same cells.

use std::time::Duration;

use serde::Serialize;

use crate::state::Status;

/// The check columns, in page order.
pub const COLUMNS: [&str; 9] = [
    "reachable",
    "versions",
    "signature",
    "certificate",
    "radius",
    "offset",
    "batch",
    "agreement",
    "size",
];

/// One check of one server.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Cell {
    /// The column.
    pub check: &'static str,
    /// `ok`, `warn`, `fail` or `none` (not measured).
    pub state: &'static str,
    /// What was seen, in words (the page shows it beside the colour).
    pub text: String,
}

/// What turns a check from OK to WARN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A certificate with less than this left.
    pub expiry_warning: Duration,
    /// A radius wider than this: the server vouches for so little that a
    /// client learns almost nothing from it.
    pub warn_radius: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            expiry_warning: Duration::from_secs(3600),
            warn_radius: Duration::from_secs(10),
        }
    }
}

fn cell(check: &'static str, state: &'static str, text: impl Into<String>) -> Cell {
    Cell {
        check,
        state,
        text: text.into(),
    }
}

/// An offset with its sign, in ms (s past 10 s).
pub fn signed_ms(us: i64) -> String {
    let s = duration(us as f64);
    if us >= 0 {
        format!("+{s}")
    } else {
        s
    }
}

/// Every cell of `s`, in [`COLUMNS`] order, warnings by `limits`.
pub fn cells(s: &Status, limits: &Limits) -> Vec<Cell> {
    let expiry_warning = limits.expiry_warning;
    let none = |c: &'static str| cell(c, "none", "");
    let mut out = Vec::with_capacity(COLUMNS.len());
    out.push(match (s.up, s.failure.as_deref()) {
        (true, _) => {
            let t = |b: Option<bool>| match b {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "n/a",
            };
            let text = format!("UDP {} · TCP {}", t(s.udp), t(s.tcp));
            let state = if s.udp == Some(false) || s.tcp == Some(false) {
                "warn"
            } else {
                "ok"
            };
            cell("reachable", state, text)
        }
        (false, Some("invalid")) => cell("reachable", "warn", "answers, nothing valid"),
        (false, Some("refused")) => cell("reachable", "fail", "refused (port closed)"),
        (false, Some("resolve")) => cell("reachable", "fail", "name does not resolve"),
        (false, _) => cell("reachable", "fail", "no answer"),
    });
    out.push(if s.versions_answered.is_empty() {
        cell("versions", if s.up { "warn" } else { "none" }, "none")
    } else {
        cell("versions", "ok", s.versions_answered.join(", "))
    });
    out.push(match (s.up, s.failure.as_deref()) {
        (true, _) if s.legacy_context => cell("signature", "warn", "valid (legacy context)"),
        (true, _) => cell("signature", "ok", "valid"),
        (false, Some("invalid")) => cell(
            "signature",
            "fail",
            format!("INVALID: {}", s.error.as_deref().unwrap_or("")),
        ),
        _ => none("signature"),
    });
    out.push(match s.days_to_expiry {
        _ if !s.up => none("certificate"),
        None => cell("certificate", "ok", "no end"),
        Some(d) if d * 86_400.0 < expiry_warning.as_secs_f64() => cell(
            "certificate",
            "warn",
            format!("EXPIRES in {:.0} min", (d * 1440.0).max(0.0)),
        ),
        Some(d) if d < 2.0 => cell("certificate", "ok", format!("{:.1} h left", d * 24.0)),
        Some(d) => cell("certificate", "ok", format!("{d:.1} days left")),
    });
    out.push(match s.radius_us {
        Some(r) if u128::from(r) > limits.warn_radius.as_micros() => cell(
            "radius",
            "warn",
            format!(
                "WIDE: ± {} (over {})",
                duration(r as f64),
                duration(limits.warn_radius.as_micros() as f64)
            ),
        ),
        Some(r) => cell("radius", "ok", format!("± {}", duration(r as f64))),
        None => none("radius"),
    });
    out.push(match (s.offset_consensus_us, s.offset_local_us) {
        (Some(c), Some(l)) => cell(
            "offset",
            if s.flagged.is_some() { "fail" } else { "ok" },
            format!("{} (local {})", signed_ms(c), signed_ms(l)),
        ),
        (None, Some(l)) => cell("offset", "ok", format!("local {}", signed_ms(l))),
        _ => none("offset"),
    });
    out.push(match &s.batch {
        Some(b) if b.error.is_none() => cell(
            "batch",
            "ok",
            format!(
                "{}/{} paths ok, tree depth up to {}, {}",
                b.verified,
                b.sent,
                b.max_depth,
                b.orientations.join("/")
            ),
        ),
        Some(b) => cell(
            "batch",
            "fail",
            format!(
                "{}/{} paths ok: {}",
                b.verified,
                b.sent,
                b.error.as_deref().unwrap_or("")
            ),
        ),
        None => none("batch"),
    });
    out.push(match (&s.flagged, s.offset_consensus_us) {
        (Some(why), _) => cell(
            "agreement",
            "fail",
            format!(
                "LIES: {why}{}",
                if s.report.is_some() {
                    "; report made"
                } else {
                    ""
                }
            ),
        ),
        (None, Some(_)) => cell("agreement", "ok", "agrees"),
        (None, None) if s.up => cell("agreement", "warn", "no consensus"),
        _ => none("agreement"),
    });
    out.push(match (s.request_len, s.response_len) {
        (Some(q), Some(r)) if crate::state::amplifies(s) => {
            cell("size", "fail", format!("AMPLIFIES: {r} B for {q} B"))
        }
        (Some(q), Some(r)) if s.udp == Some(true) => cell("size", "ok", format!("{r} B for {q} B")),
        (Some(q), Some(r)) => cell("size", "ok", format!("{r} B for {q} B over TCP")),
        _ => none("size"),
    });
    out
}

/// One word for the server: `lying`, `invalid`, `down`, `warning` or
/// `ok`.
pub fn overall(s: &Status, cells: &[Cell]) -> &'static str {
    if s.flagged.is_some() {
        "lying"
    } else if s.failure.as_deref() == Some("invalid") {
        "invalid"
    } else if !s.up {
        "down"
    } else if cells.iter().any(|c| c.state == "warn" || c.state == "fail") {
        "warning"
    } else {
        "ok"
    }
}

/// µs as a short label: µs, ms or s, whichever reads best.
pub fn duration(us: f64) -> String {
    let a = us.abs();
    if a >= 10e6 {
        format!("{:.1} s", us / 1e6)
    } else if a >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if a >= 100e3 {
        format!("{:.0} ms", us / 1e3)
    } else if a >= 1e3 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{us:.0} µs")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn radius_cell(radius_us: u64, limits: &Limits) -> Cell {
        let s = Status {
            up: true,
            radius_us: Some(radius_us),
            ..Status::default()
        };
        cells(&s, limits)
            .into_iter()
            .find(|c| c.check == "radius")
            .unwrap()
    }

    #[test]
    fn a_radius_over_the_limit_is_a_warning_and_at_it_is_not() {
        let limits = Limits {
            warn_radius: Duration::from_secs(10),
            ..Limits::default()
        };
        let wide = radius_cell(61_000_000, &limits);
        assert_eq!(wide.state, "warn");
        assert_eq!(wide.text, "WIDE: ± 61.0 s (over 10.0 s)");
        assert_eq!(radius_cell(10_000_000, &limits).state, "ok");
        assert_eq!(radius_cell(3_000_000, &limits).text, "± 3.00 s");
        // The same server under a wider limit is fine.
        let loose = Limits {
            warn_radius: Duration::from_secs(120),
            ..Limits::default()
        };
        assert_eq!(radius_cell(61_000_000, &loose).state, "ok");
    }
}
