//! Inline SVG plots of a server's history, drawn on the server: the page
//! needs no script to show them. Only numbers we computed go into the SVG.
//!
//! The axes are there so that a reader can judge size: tick labels whose
//! unit and decimals follow the range (a 6 ms wiggle reads in ms, a 100 s
//! one in s), gridlines at every tick, a zero line, and on the offset plot
//! the answer's radius as a shaded band, so that a wiggle well inside the
//! server's own uncertainty looks like what it is.

use std::fmt::Write as _;

use crate::state::Point;
use crate::view::duration;

const W: f64 = 720.0;
const H: f64 = 184.0;
const LEFT: f64 = 84.0;
/// Room above the plot for the band's legend, clear of the data.
const TOP: f64 = 18.0;
const BOTTOM: f64 = 20.0;
/// The band stretches the axis only while the data stays readable: past
/// this many times the data's own span, it is clipped and said in words.
const BAND_STRETCH: f64 = 10.0;

/// The offset from the consensus (else from the local clock), with each
/// point's radius as a band around it.
pub fn offset(points: &[Point]) -> String {
    draw(
        points,
        "offset",
        false,
        |p| p.offset_us.map(|v| v as f64),
        Some(|p: &Point| p.radius_us.map(|v| v as f64)),
    )
}

/// The round-trip time.
pub fn rtt(points: &[Point]) -> String {
    draw(
        points,
        "round-trip time",
        true,
        |p| p.rtt_us.map(|v| v as f64),
        None::<fn(&Point) -> Option<f64>>,
    )
}

/// A line plot of `value` (µs) over time, down rounds marked red along
/// the bottom. `non_negative` keeps the axis from going below zero (round
/// trips); `band` is a ± spread drawn around each value.
fn draw(
    points: &[Point],
    title: &str,
    non_negative: bool,
    value: impl Fn(&Point) -> Option<f64>,
    band: Option<impl Fn(&Point) -> Option<f64>>,
) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" role="img" viewBox="0 0 {W} {H}" class="plot"><title>{title}</title>"#,
        title = html_text(title)
    );
    let bottom = H - BOTTOM;
    let _ = write!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="#fcfcfc" stroke="#999"/>"##,
        W - LEFT,
        bottom - TOP
    );
    // (time, value, spread)
    let values: Vec<(f64, f64, f64)> = points
        .iter()
        .filter_map(|p| {
            let spread = band.as_ref().and_then(|b| b(p)).unwrap_or(0.0);
            Some((p.at_us as f64, value(p)?, spread))
        })
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
        let (lo, hi, clipped) = range(&values, non_negative);
        let y = |v: f64| {
            let v = v.clamp(lo, hi);
            (bottom - 2.0) - (v - lo) / (hi - lo) * (bottom - TOP - 4.0)
        };
        for (v, label) in ticks(lo, hi) {
            let _ = write!(
                s,
                r##"<line x1="{LEFT}" x2="{W}" y1="{y:.1}" y2="{y:.1}" stroke="#e2e2e2"/><text x="{}" y="{:.1}" font-size="11" text-anchor="end">{label}</text>"##,
                LEFT - 4.0,
                y(v) + 4.0,
                y = y(v),
            );
        }
        if band.is_some() && values.iter().any(|v| v.2 > 0.0) {
            let upper = values.iter().map(|&(t, v, r)| (x(t), y(v + r)));
            let lower = values.iter().rev().map(|&(t, v, r)| (x(t), y(v - r)));
            let outline: Vec<String> = upper
                .chain(lower)
                .map(|(a, b)| format!("{a:.1},{b:.1}"))
                .collect();
            let widest = values.iter().map(|v| v.2).fold(0.0, f64::max);
            let _ = write!(
                s,
                r##"<polygon fill="#cfe3f7" fill-opacity="0.7" stroke="none" points="{}"><title>radius: up to ± {}</title></polygon>"##,
                outline.join(" "),
                duration(widest)
            );
            let note = if clipped {
                format!(
                    "shaded: radius ± {}, past the chart's edges",
                    duration(widest)
                )
            } else {
                format!("shaded: radius (up to ± {})", duration(widest))
            };
            let _ = write!(
                s,
                r##"<text x="{}" y="{}" font-size="11" text-anchor="end" fill="#1f4f80">{note}</text>"##,
                W,
                TOP - 5.0
            );
        }
        if lo < 0.0 && hi > 0.0 {
            let _ = write!(
                s,
                r##"<line x1="{LEFT}" x2="{W}" y1="{z:.1}" y2="{z:.1}" stroke="#555" stroke-dasharray="4 3"/>"##,
                z = y(0.0)
            );
        }
        let path: Vec<String> = values
            .iter()
            .map(|&(t, v, _)| format!("{:.1},{:.1}", x(t), y(v)))
            .collect();
        let _ = write!(
            s,
            r##"<polyline fill="none" stroke="#1f5fa8" stroke-width="1.5" points="{}"/>"##,
            path.join(" ")
        );
        if let Some(&(t, v, _)) = values.last() {
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
            bottom - 6.0
        );
    }
    if let (Some(a), Some(b)) = (points.first(), points.last()) {
        let _ = write!(
            s,
            r#"<text x="{LEFT}" y="{y}" font-size="11">{}</text><text x="{W}" y="{y}" font-size="11" text-anchor="end">{}</text>"#,
            clock(a.at_us),
            clock(b.at_us),
            y = H - 5.0,
        );
    }
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" font-size="11" text-anchor="middle">{} rounds; red marks: no valid answer</text></svg>"#,
        (LEFT + W) / 2.0,
        H - 5.0,
        points.len()
    );
    s
}

/// The axis's (low, high) for `values` (time, value, spread): the data
/// and zero, padded, and the bands too unless they would squash the data
/// flat (then the third member is true: the bands are clipped).
fn range(values: &[(f64, f64, f64)], non_negative: bool) -> (f64, f64, bool) {
    let lo = values.iter().map(|v| v.1).fold(0.0, f64::min);
    let hi = values.iter().map(|v| v.1).fold(0.0, f64::max);
    let span = (hi - lo).max(1.0);
    let band_lo = values.iter().map(|v| v.1 - v.2).fold(lo, f64::min);
    let band_hi = values.iter().map(|v| v.1 + v.2).fold(hi, f64::max);
    let clipped = band_hi - band_lo > BAND_STRETCH * span;
    let (lo, hi) = if clipped {
        (lo, hi)
    } else {
        (band_lo, band_hi)
    };
    let (lo, hi) = if hi - lo < 1.0 {
        (lo - 1.0, hi + 1.0)
    } else {
        let pad = (hi - lo) * 0.08;
        (lo - pad, hi + pad)
    };
    let lo = if non_negative { lo.max(0.0) } else { lo };
    (lo, hi, clipped)
}

/// Ticks for an axis from `lo` to `hi` (µs): a round step (1, 2 or 5 times
/// a power of ten) giving four to ten of them, each labelled in the unit
/// the larger end reads best in, with as many decimals as the step needs.
pub fn ticks(lo: f64, hi: f64) -> Vec<(f64, String)> {
    let span = hi - lo;
    if !span.is_finite() || span <= 0.0 {
        return Vec::new();
    }
    // The largest round step that still gives four ticks.
    let power = 10f64.powf(span.log10().floor());
    let step = (0..12)
        .map(|k| [5.0, 2.0, 1.0][k % 3] * power / 10f64.powi((k / 3) as i32))
        .find(|&s| span / s >= 4.0)
        .unwrap_or(power / 1e4);
    let top = lo.abs().max(hi.abs());
    let (unit, per) = if top >= 1e6 {
        ("s", 1e6)
    } else if top >= 1e3 {
        ("ms", 1e3)
    } else {
        ("µs", 1.0)
    };
    let decimals = (-((step / per).log10() + 1e-9).floor()).max(0.0) as usize;
    let mut out = Vec::new();
    let mut i = (lo / step).ceil();
    while i * step <= hi + step * 1e-9 {
        let v = i * step;
        // -0 prints as "-0": zero is zero.
        let shown = if v.abs() < step * 1e-6 { 0.0 } else { v / per };
        out.push((v, format!("{shown:.decimals$} {unit}")));
        i += 1.0;
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(lo: f64, hi: f64) -> Vec<String> {
        ticks(lo, hi).into_iter().map(|t| t.1).collect()
    }

    #[test]
    fn tick_labels_follow_the_range() {
        // A 6 ms wiggle reads in whole ms.
        assert_eq!(
            labels(4_500.0, 10_500.0),
            ["5 ms", "6 ms", "7 ms", "8 ms", "9 ms", "10 ms"].map(String::from)
        );
        // A narrower one near 3 ms needs decimals, still in ms.
        assert_eq!(
            labels(2_990.0, 3_210.0),
            ["3.00 ms", "3.05 ms", "3.10 ms", "3.15 ms", "3.20 ms"].map(String::from)
        );
        // ±61 s reads in whole s, through zero (never "-0").
        assert_eq!(
            labels(-61e6, 61e6),
            ["-60 s", "-40 s", "-20 s", "0 s", "20 s", "40 s", "60 s"].map(String::from)
        );
        // A 100 s range.
        assert_eq!(
            labels(0.0, 100e6),
            ["0 s", "20 s", "40 s", "60 s", "80 s", "100 s"].map(String::from)
        );
        // Below a millisecond: µs.
        assert_eq!(
            labels(-300.0, 300.0),
            ["-300 µs", "-200 µs", "-100 µs", "0 µs", "100 µs", "200 µs", "300 µs"]
                .map(String::from)
        );
        assert!(ticks(5.0, 5.0).is_empty());
    }

    fn point(i: i64, offset_us: i64, radius_us: u64) -> Point {
        Point {
            at_us: 1_700_000_000_000_000 + i * 60_000_000,
            up: true,
            rtt_us: Some(20_000),
            offset_us: Some(offset_us),
            radius_us: Some(radius_us),
        }
    }

    #[test]
    fn a_small_wiggle_inside_a_wide_radius_keeps_its_scale_and_says_so() {
        let points: Vec<Point> = (0..10)
            .map(|i| point(i, 3_000 + (i % 3) * 3_000, 61_000_000))
            .collect();
        let svg = offset(&points);
        // Ticks in ms for the 6 ms of data, not s for the radius.
        assert!(svg.contains(">4 ms</text>"), "{svg}");
        assert!(!svg.contains(" s</text>"), "{svg}");
        assert!(svg.contains("<polygon"), "no band: {svg}");
        assert!(
            svg.contains("radius ± 61.0 s, past the chart's edges"),
            "{svg}"
        );
    }

    #[test]
    fn a_narrow_radius_fits_on_the_axis_with_a_zero_line() {
        let points: Vec<Point> = (0..10)
            .map(|i| point(i, -2_000 + (i % 2) * 4_000, 5_000))
            .collect();
        let svg = offset(&points);
        assert!(svg.contains("shaded: radius (up to ± 5.00 ms)"), "{svg}");
        assert!(svg.contains("stroke-dasharray"), "no zero line: {svg}");
        // The axis reaches the band: past ±7 ms.
        assert!(
            svg.contains(">-6 ms</text>") && svg.contains(">6 ms</text>"),
            "{svg}"
        );
        // Round trips have no band and no line below zero.
        let rtt = rtt(&points);
        assert!(!rtt.contains("<polygon") && !rtt.contains("stroke-dasharray"));
        assert!(rtt.contains(">0 ms</text>"), "{rtt}");
    }
}
