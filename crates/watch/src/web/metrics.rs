//! `/metrics`: the latest round in Prometheus text format.

use std::fmt::Write as _;

use crate::state::Latest;

/// A label value as the text format wants it: backslash, double quote and
/// newline escaped. Server names come from the list and may hold anything.
fn label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The exposition. Writing to a String cannot fail, so results are
/// dropped.
pub fn render(latest: &Latest) -> String {
    let mut o = String::new();
    let gauge = |o: &mut String, name: &str, help: &str, values: Vec<(String, f64)>| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (labels, v) in values {
            let _ = writeln!(o, "{name}{{{labels}}} {v}");
        }
    };
    let per = |f: &dyn Fn(&crate::state::Status) -> Option<f64>| -> Vec<(String, f64)> {
        latest
            .servers
            .iter()
            .filter_map(|s| Some((format!("server=\"{}\"", label(&s.name)), f(s)?)))
            .collect()
    };
    gauge(
        &mut o,
        "gnomon_watch_up",
        "1 when the server's last answer verified",
        per(&|s| Some(if s.up { 1.0 } else { 0.0 })),
    );
    gauge(
        &mut o,
        "gnomon_watch_rtt_seconds",
        "Round trip of the last answer",
        per(&|s| s.rtt_us.map(|v| v as f64 / 1e6)),
    );
    gauge(
        &mut o,
        "gnomon_watch_offset_seconds",
        "Server clock minus the consensus of the others",
        per(&|s| s.offset_consensus_us.map(|v| v as f64 / 1e6)),
    );
    gauge(
        &mut o,
        "gnomon_watch_local_offset_seconds",
        "Server clock minus the monitor's clock",
        per(&|s| s.offset_local_us.map(|v| v as f64 / 1e6)),
    );
    gauge(
        &mut o,
        "gnomon_watch_radius_seconds",
        "RADI of the last answer",
        per(&|s| s.radius_us.map(|v| v as f64 / 1e6)),
    );
    gauge(
        &mut o,
        "gnomon_watch_certificate_expiry_days",
        "Days until the answering delegation's MAXT",
        per(&|s| s.days_to_expiry),
    );
    gauge(
        &mut o,
        "gnomon_watch_outside_consensus",
        "1 when the server's interval excludes the consensus",
        per(&|s| s.up.then_some(if s.flagged.is_some() { 1.0 } else { 0.0 })),
    );
    gauge(
        &mut o,
        "gnomon_watch_batch_paths_verified_ratio",
        "Share of a burst of concurrent requests whose PATH verified",
        per(&|s| {
            s.batch
                .as_ref()
                .map(|b| b.verified as f64 / b.sent.max(1) as f64)
        }),
    );
    gauge(
        &mut o,
        "gnomon_watch_request_bytes",
        "Size of the last request sent",
        per(&|s| s.request_len.map(|v| v as f64)),
    );
    gauge(
        &mut o,
        "gnomon_watch_response_bytes",
        "Size of the last response (larger than the request: amplification)",
        per(&|s| s.response_len.map(|v| v as f64)),
    );
    let mut reachable = Vec::new();
    for s in &latest.servers {
        for (t, v) in [("udp", s.udp), ("tcp", s.tcp)] {
            if let Some(v) = v {
                let labels = format!("server=\"{}\",transport=\"{t}\"", label(&s.name));
                reachable.push((labels, if v { 1.0 } else { 0.0 }));
            }
        }
    }
    gauge(
        &mut o,
        "gnomon_watch_reachable",
        "1 when the server answered over the transport in the last round (absent: not asked)",
        reachable,
    );
    let orientations: Vec<(String, f64)> = latest
        .servers
        .iter()
        .flat_map(|s| {
            let seen = s.batch.iter().flat_map(|b| b.orientations.iter());
            seen.map(move |t| {
                let labels = format!("server=\"{}\",orientation=\"{}\"", label(&s.name), label(t));
                (labels, 1.0)
            })
        })
        .collect();
    gauge(
        &mut o,
        "gnomon_watch_batch_tree_orientation",
        "1 for each Merkle tree orientation the burst's paths verified in",
        orientations,
    );
    let versions: Vec<(String, f64)> = latest
        .servers
        .iter()
        .flat_map(|s| {
            s.versions_answered.iter().map(move |v| {
                (
                    format!("server=\"{}\",version=\"{}\"", label(&s.name), label(v)),
                    1.0,
                )
            })
        })
        .collect();
    gauge(
        &mut o,
        "gnomon_watch_version_answered",
        "1 for each version the server answered in the last round",
        versions,
    );
    let _ = writeln!(
        o,
        "# HELP gnomon_watch_failures_total Rounds in which a check failed, by reason\n\
         # TYPE gnomon_watch_failures_total counter"
    );
    for ((server, reason), n) in &latest.failures {
        let _ = writeln!(
            o,
            "gnomon_watch_failures_total{{server=\"{}\",reason=\"{}\"}} {n}",
            label(server),
            label(reason)
        );
    }
    let _ = writeln!(
        o,
        "# HELP gnomon_watch_rounds_total Probe rounds completed\n\
         # TYPE gnomon_watch_rounds_total counter\ngnomon_watch_rounds_total {}",
        latest.rounds
    );
    o
}

/// The page's own listener: connections it refused or evicted.
pub fn http(connections: &gnomon_metrics_http::slots::ConnTable) -> String {
    crate::http::render_connections("gnomon_watch_http", "the monitor's pages", connections)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_cannot_break_a_line() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
