//! Inline SVG plots of a server's history, drawn on the server: the page
//! needs no script to show them. Only numbers we computed go into the SVG.

use std::fmt::Write as _;

use crate::state::Point;

const W: f64 = 720.0;
const H: f64 = 140.0;
const LEFT: f64 = 84.0;
const BOTTOM: f64 = 18.0;

/// A line plot of `value` (µs) over time, down rounds marked red along
/// the bottom. `non_negative` keeps the axis from going below zero (round
/// trips).
pub fn line(
    points: &[Point],
    title: &str,
    non_negative: bool,
    value: impl Fn(&Point) -> Option<f64>,
) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" role="img" viewBox="0 0 {W} {H}" width="{W}" height="{H}" class="plot"><title>{title}</title>"#,
        title = html_text(title)
    );
    let _ = write!(
        s,
        r##"<rect x="{LEFT}" y="0" width="{}" height="{}" fill="#fafafa" stroke="#999"/>"##,
        W - LEFT,
        H - BOTTOM
    );
    let values: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| Some((p.at_us as f64, value(p)?)))
        .collect();
    let (t0, t1) = match (points.first(), points.last()) {
        (Some(a), Some(b)) => (a.at_us as f64, (b.at_us as f64).max(a.at_us as f64 + 1.0)),
        _ => (0.0, 1.0),
    };
    let x = |t: f64| LEFT + (t - t0) / (t1 - t0) * (W - LEFT - 4.0) + 2.0;
    if values.is_empty() {
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" font-size="12">no data</text>"#,
            LEFT + 10.0,
            H / 2.0
        );
    } else {
        let lo = values.iter().map(|v| v.1).fold(f64::INFINITY, f64::min);
        let hi = values.iter().map(|v| v.1).fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi) = if hi - lo < 1e-9 {
            (lo - 1.0, hi + 1.0)
        } else {
            let pad = (hi - lo) * 0.1;
            (lo - pad, hi + pad)
        };
        let lo = if non_negative { lo.max(0.0) } else { lo };
        let y = |v: f64| (H - BOTTOM - 4.0) - (v - lo) / (hi - lo) * (H - BOTTOM - 8.0) + 2.0;
        let _ = write!(
            s,
            r#"<text x="{x}" y="12" font-size="11" text-anchor="end">{}</text><text x="{x}" y="{}" font-size="11" text-anchor="end">{}</text>"#,
            duration(hi),
            H - BOTTOM - 2.0,
            duration(lo),
            x = LEFT - 4.0,
        );
        let path: Vec<String> = values
            .iter()
            .map(|&(t, v)| format!("{:.1},{:.1}", x(t), y(v)))
            .collect();
        let _ = write!(
            s,
            r##"<polyline fill="none" stroke="#1f5fa8" stroke-width="1.5" points="{}"/>"##,
            path.join(" ")
        );
        for &(t, v) in values.iter().rev().take(1) {
            let _ = write!(
                s,
                r##"<circle cx="{:.1}" cy="{:.1}" r="3" fill="#1f5fa8"/>"##,
                x(t),
                y(v)
            );
        }
    }
    for p in points.iter().filter(|p| !p.up) {
        let _ = write!(
            s,
            r##"<rect x="{:.1}" y="{}" width="3" height="6" fill="#b00020"><title>down</title></rect>"##,
            x(p.at_us as f64) - 1.5,
            H - BOTTOM - 6.0
        );
    }
    if let (Some(a), Some(b)) = (points.first(), points.last()) {
        let _ = write!(
            s,
            r#"<text x="{LEFT}" y="{y}" font-size="11">{}</text><text x="{W}" y="{y}" font-size="11" text-anchor="end">{}</text>"#,
            clock(a.at_us),
            clock(b.at_us),
            y = H - 4.0,
        );
    }
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" font-size="11" text-anchor="middle">{} rounds; red marks: no valid answer</text></svg>"#,
        (LEFT + W) / 2.0,
        H - 4.0,
        points.len()
    );
    s
}

/// µs as a short label: µs, ms or s, whichever reads best.
pub fn duration(us: f64) -> String {
    let a = us.abs();
    if a >= 10e6 {
        format!("{:.1} s", us / 1e6)
    } else if a >= 100e3 {
        format!("{:.0} ms", us / 1e3)
    } else if a >= 1e3 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{us:.0} µs")
    }
}

/// Unix µs as the UTC date and time to the second.
fn clock(us: i64) -> String {
    let t = gnomon_client::format_utc(us.max(0) as u64);
    // 2026-11-24T07:20:08.729958Z → 2026-11-24 07:20:08 UTC
    match t.split_once('.') {
        Some((head, _)) => format!("{} UTC", head.replace('T', " ")),
        None => t,
    }
}

/// Text for inside an SVG element: the few characters XML reserves.
fn html_text(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
