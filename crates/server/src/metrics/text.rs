//! The Prometheus text (format 0.0.4) of a [`Snapshot`]: every series,
//! its help and type, the histograms' cumulative buckets, and keys as
//! labels ([`key_label`]).

use std::fmt::Write as _;

use gnomon_protocol::PROFILES;

use super::{KeyInfo, Snapshot};
use crate::key::key_label;
use crate::stats::{Close, Drop, TcpStats, BATCH_BUCKETS, DELAY_BOUNDS_US};

/// The AF_XDP path's series: present only when it runs, so a dashboard
/// can tell a server on sockets alone from one whose XDP path is idle.
fn render_xdp(o: &mut String, s: &Snapshot) {
    let Some(x) = &s.xdp else { return };
    let st = &s.stats;
    let _ = writeln!(
        o,
        "# HELP gnomon_xdp_attached The XDP program is attached: its interface, where it runs, \
         whether the sockets are zero-copy and how many queues are served.\n# TYPE gnomon_xdp_attached gauge"
    );
    // Interface names are checked when configured: no quote or backslash.
    let _ = writeln!(
        o,
        "gnomon_xdp_attached{{interface=\"{}\",mode=\"{}\",zero_copy=\"{}\",queues=\"{}\"}} 1",
        x.interface, x.mode, x.zero_copy, x.queues
    );
    for (name, help, v) in [
        (
            "xdp_frames_received_total",
            "Frames the AF_XDP workers took from their receive rings.",
            st.xdp_received,
        ),
        (
            "xdp_frames_sent_total",
            "Replies the AF_XDP workers put on their send rings.",
            st.xdp_sent,
        ),
        (
            "xdp_fill_ring_empty_total",
            "Times the kernel found no frame to receive into (from the kernel).",
            st.xdp_fill_empty,
        ),
    ] {
        let _ = writeln!(
            o,
            "# HELP gnomon_{name} {help}\n# TYPE gnomon_{name} counter\ngnomon_{name} {v}"
        );
    }
    let _ = writeln!(
        o,
        "# HELP gnomon_xdp_kernel_dropped_total Frames the kernel dropped before the AF_XDP workers saw them.\n\
         # TYPE gnomon_xdp_kernel_dropped_total counter\n\
         gnomon_xdp_kernel_dropped_total{{reason=\"receive_ring_full\"}} {}\n\
         gnomon_xdp_kernel_dropped_total{{reason=\"other\"}} {}",
        st.xdp_ring_full, st.xdp_kernel_dropped
    );
    let _ = writeln!(
        o,
        "# HELP gnomon_xdp_passed_total UDP frames for a served port the program left to the kernel \
         rather than answer, by why: the kernel judges them as it would without XDP (most it drops).\n\
         # TYPE gnomon_xdp_passed_total counter"
    );
    for (p, n) in crate::xdp::program::Passed::ALL.iter().zip(x.gate.passed()) {
        let _ = writeln!(o, "gnomon_xdp_passed_total{{reason=\"{}\"}} {n}", p.label());
    }
    let _ = writeln!(
        o,
        "# HELP gnomon_xdp_local_addresses The host's addresses the program takes frames for \
         (a wildcard listen answers these).\n# TYPE gnomon_xdp_local_addresses gauge\n\
         gnomon_xdp_local_addresses {}",
        x.gate.local_addresses()
    );
}

fn render_keys(o: &mut String, keys: &[KeyInfo]) {
    let _ = writeln!(
        o,
        "# HELP gnomon_online_key_info The online key signing for each long-term key, \
         and the host its delegations were made for.\n# TYPE gnomon_online_key_info gauge"
    );
    for k in keys {
        // Host names are restricted to [A-Za-z0-9._-] when loaded, and
        // base64 holds no quote or backslash: no escaping is needed.
        let _ = writeln!(
            o,
            "gnomon_online_key_info{{long_term_key=\"{}\",online_key=\"{}\",host=\"{}\"}} 1",
            key_label(&k.long_term),
            key_label(&k.online),
            k.host.as_deref().unwrap_or("")
        );
    }
}

/// Prometheus text format 0.0.4.
pub fn render(s: &Snapshot) -> String {
    let mut o = String::with_capacity(8192);
    let st = &s.stats;
    let counter = |name: &str, help: &str, o: &mut String| {
        let _ = writeln!(
            o,
            "# HELP gnomon_{name} {help}\n# TYPE gnomon_{name} counter"
        );
    };
    counter("requests_received_total", "Datagrams received.", &mut o);
    let _ = writeln!(o, "gnomon_requests_received_total {}", st.received);
    counter(
        "responses_total",
        "Responses sent, by protocol version.",
        &mut o,
    );
    for p in PROFILES.iter() {
        let _ = writeln!(
            o,
            "gnomon_responses_total{{version=\"{}\"}} {}",
            p.name,
            st.responses[usize::from(p.id.0)]
        );
    }
    counter("dropped_total", "Requests not answered, by reason.", &mut o);
    for d in Drop::ALL {
        let _ = writeln!(
            o,
            "gnomon_dropped_total{{reason=\"{}\"}} {}",
            d.label(),
            st.drops[d as usize]
        );
    }
    counter(
        "kernel_receive_overflow_total",
        "Datagrams the kernel dropped: socket buffer full.",
        &mut o,
    );
    let _ = writeln!(
        o,
        "gnomon_kernel_receive_overflow_total {}",
        st.kernel_overflow
    );
    counter(
        "receive_error_backoffs_total",
        "Pauses after receive errors in a row (bounded back-off).",
        &mut o,
    );
    let _ = writeln!(
        o,
        "gnomon_receive_error_backoffs_total {}",
        st.error_backoffs
    );
    render_xdp(&mut o, s);
    counter(
        "signatures_total",
        "SREP signatures made (one per batch).",
        &mut o,
    );
    let _ = writeln!(o, "gnomon_signatures_total {}", st.signatures);
    counter(
        "greased_total",
        "Responses sent with a deliberately broken signature (RFC 10049 §7).",
        &mut o,
    );
    let _ = writeln!(o, "gnomon_greased_total {}", st.greased);
    counter(
        "stage_seconds_total",
        "Time spent per stage of the request path (syscalls include waiting for requests).",
        &mut o,
    );
    for (stage, ns) in [
        ("syscalls", st.ns_syscalls),
        ("batch_wait", st.ns_batch_wait),
        ("parse", st.ns_parse),
        ("respond", st.ns_respond),
    ] {
        let _ = writeln!(
            o,
            "gnomon_stage_seconds_total{{stage=\"{stage}\"}} {:.9}",
            ns as f64 / 1e9
        );
    }
    histogram(
        &mut o,
        "batch_size",
        "Datagrams per receive batch.",
        (0..BATCH_BUCKETS).map(|k| {
            if k + 1 == BATCH_BUCKETS {
                f64::INFINITY
            } else {
                (1u64 << k) as f64
            }
        }),
        &st.batch_sizes,
        // Every received datagram was in exactly one batch.
        st.received as f64,
    );
    histogram(
        &mut o,
        "queue_delay_seconds",
        "Time requests waited in the socket before being read.",
        DELAY_BOUNDS_US.iter().map(|b| {
            if *b == u64::MAX {
                f64::INFINITY
            } else {
                *b as f64 / 1e6
            }
        }),
        &st.queue_delay,
        st.queue_delay_us_total as f64 / 1e6,
    );
    let gauges: [(&str, &str, f64); 6] = [
        (
            "certificate_expiry_timestamp_seconds",
            "When the current delegation expires.",
            s.cert_expiry_s as f64,
        ),
        (
            "radius_seconds",
            "Radius advertised now.",
            s.radius_us as f64 / 1e6,
        ),
        (
            "clock_synchronized",
            "1 when the kernel says the clock is synchronized.",
            f64::from(u8::from(s.clock_synchronized)),
        ),
        (
            "clock_state_readable",
            "0 when the kernel's clock state cannot be read (adjtimex fails).",
            f64::from(u8::from(s.clock_readable)),
        ),
        (
            "can_sign",
            "1 when the current delegations cover the current time.",
            f64::from(u8::from(s.can_sign)),
        ),
        (
            "answering",
            "1 when the server answers requests.",
            f64::from(u8::from(s.answering)),
        ),
    ];
    for (name, help, v) in gauges {
        let _ = writeln!(
            o,
            "# HELP gnomon_{name} {help}\n# TYPE gnomon_{name} gauge\ngnomon_{name} {v}"
        );
    }
    render_keys(&mut o, &s.keys);
    render_reloads(&mut o, &s.reloads);
    if let Some(t) = &s.tcp {
        render_tcp(&mut o, t);
    }
    o
}

fn render_reloads(o: &mut String, r: &crate::reload::ReloadCounts) {
    let _ = writeln!(o, "# HELP gnomon_reloads_total Configuration reloads (SIGHUP), by result; a failed one leaves the running configuration in place.\n# TYPE gnomon_reloads_total counter");
    let _ = writeln!(
        o,
        "gnomon_reloads_total{{result=\"success\"}} {}",
        r.succeeded
    );
    let _ = writeln!(o, "gnomon_reloads_total{{result=\"failure\"}} {}", r.failed);
    let _ = writeln!(o, "# HELP gnomon_reload_refusals_total Reloads refused, by reason: config (the file did not load), no_keys (it names no key while a configured one is served), keys (a key file or delegation directory did not load), apply (no epoch could be minted).\n# TYPE gnomon_reload_refusals_total counter");
    for why in crate::reload::Refusal::ALL {
        let _ = writeln!(
            o,
            "gnomon_reload_refusals_total{{reason=\"{}\"}} {}",
            why.label(),
            r.refused[why as usize]
        );
    }
    let gauges = [
        (
            "reload_last_success_timestamp_seconds",
            "When the configuration last loaded: at start, then at each successful reload.",
            r.last_success_s,
        ),
        (
            "reload_last_successful",
            "0 when the last reload failed: what runs is not what the files say.",
            u64::from(r.last_ok),
        ),
        (
            "offline_delegations",
            "Offline delegations held, over every offline-dir.",
            r.offline_delegations,
        ),
    ];
    for (name, help, v) in gauges {
        let _ = writeln!(
            o,
            "# HELP gnomon_{name} {help}\n# TYPE gnomon_{name} gauge\ngnomon_{name} {v}"
        );
    }
    let _ = writeln!(o, "# HELP gnomon_offline_files_total Delegation files read by the periodic rescan, by result.\n# TYPE gnomon_offline_files_total counter");
    let _ = writeln!(
        o,
        "gnomon_offline_files_total{{result=\"loaded\"}} {}",
        r.offline_taken
    );
    let _ = writeln!(
        o,
        "gnomon_offline_files_total{{result=\"rejected\"}} {}",
        r.offline_rejected
    );
}

fn render_tcp(o: &mut String, t: &TcpStats) {
    let _ = writeln!(o, "# HELP gnomon_tcp_connections_total TCP connections by what happened to them at accept.\n# TYPE gnomon_tcp_connections_total counter");
    for (event, n) in [
        ("accepted", t.accepted),
        ("refused", t.refused),
        ("refused_per_source", t.refused_per_source),
        ("refused_per_network", t.refused_per_network),
        ("evicted", t.evicted),
        ("accept_error", t.accept_errors),
    ] {
        let _ = writeln!(o, "gnomon_tcp_connections_total{{event=\"{event}\"}} {n}");
    }
    let _ = writeln!(o, "# HELP gnomon_tcp_open_connections TCP connections open now.\n# TYPE gnomon_tcp_open_connections gauge\ngnomon_tcp_open_connections {}", t.open);
    let _ = writeln!(o, "# HELP gnomon_tcp_busy_connections TCP connections with a request started and not yet answered (the others are idle, and the idlest is closed for a newcomer at the cap).\n# TYPE gnomon_tcp_busy_connections gauge\ngnomon_tcp_busy_connections {}", t.busy);
    let _ = writeln!(o, "# HELP gnomon_tcp_closed_total TCP connections closed, by reason.\n# TYPE gnomon_tcp_closed_total counter");
    for c in Close::ALL {
        let _ = writeln!(
            o,
            "gnomon_tcp_closed_total{{reason=\"{}\"}} {}",
            c.label(),
            t.closed[c as usize]
        );
    }
    let _ = writeln!(o, "# HELP gnomon_tcp_responses_total Responses sent over TCP, by protocol version.\n# TYPE gnomon_tcp_responses_total counter");
    for p in PROFILES.iter() {
        let _ = writeln!(
            o,
            "gnomon_tcp_responses_total{{version=\"{}\"}} {}",
            p.name,
            t.responses[usize::from(p.id.0)]
        );
    }
    let _ = writeln!(o, "# HELP gnomon_tcp_dropped_total TCP requests not answered, by reason.\n# TYPE gnomon_tcp_dropped_total counter");
    for d in Drop::ALL {
        let _ = writeln!(
            o,
            "gnomon_tcp_dropped_total{{reason=\"{}\"}} {}",
            d.label(),
            t.drops[d as usize]
        );
    }
    let _ = writeln!(
        o,
        "gnomon_tcp_dropped_total{{reason=\"udp_only_version\"}} {}",
        t.udp_only
    );
    for (name, help, v) in [
        (
            "tcp_requests_total",
            "Framed requests received over TCP.",
            t.requests,
        ),
        (
            "tcp_signatures_total",
            "SREP signatures made for TCP responses.",
            t.signatures,
        ),
        (
            "tcp_greased_total",
            "TCP responses sent with a deliberately broken signature.",
            t.greased,
        ),
    ] {
        let _ = writeln!(
            o,
            "# HELP gnomon_{name} {help}\n# TYPE gnomon_{name} counter\ngnomon_{name} {v}"
        );
    }
}

fn histogram(
    o: &mut String,
    name: &str,
    help: &str,
    bounds: impl Iterator<Item = f64>,
    counts: &[u64],
    sum: f64,
) {
    let _ = writeln!(
        o,
        "# HELP gnomon_{name} {help}\n# TYPE gnomon_{name} histogram"
    );
    let mut cumulative = 0;
    for (le, c) in bounds.zip(counts) {
        cumulative += c;
        let le = if le.is_infinite() {
            "+Inf".to_string()
        } else {
            format!("{le}")
        };
        let _ = writeln!(o, "gnomon_{name}_bucket{{le=\"{le}\"}} {cumulative}");
    }
    let _ = writeln!(o, "gnomon_{name}_sum {sum}");
    let _ = writeln!(o, "gnomon_{name}_count {cumulative}");
}

#[cfg(test)]
mod tests {
    use gnomon_protocol::LongTermKey;

    use super::*;

    #[test]
    fn renders_counters_histograms_and_gauges() {
        let mut s = Snapshot {
            answering: true,
            cert_expiry_s: 200,
            now_s: 100,
            radius_us: 3_000_000,
            keys: vec![
                KeyInfo {
                    long_term: [0; 32].into(),
                    online: [0xff; 32].into(),
                    host: Some("ams-1".into()),
                },
                KeyInfo {
                    long_term: LongTermKey::from_bytes(&[7; 1312]).unwrap(),
                    online: LongTermKey::from_bytes(&[8; 1312]).unwrap(),
                    host: None,
                },
            ],
            ..Default::default()
        };
        s.stats.received = 6;
        s.stats.responses[14] = 5;
        s.stats.drop(Drop::Stale);
        s.stats.batch(3);
        s.stats.batch(3);
        s.stats.delay(1_500);
        s.stats.delay(500);
        let text = render(&s);
        assert!(text.contains("gnomon_requests_received_total 6"));
        assert!(
            text.contains("gnomon_queue_delay_seconds_sum 0.002\n"),
            "{text}"
        );
        assert!(text.contains("gnomon_greased_total 0"));
        assert!(text.contains("gnomon_responses_total{version=\"rfc-10049\"} 5"));
        assert!(text.contains("gnomon_dropped_total{reason=\"stale\"} 1"));
        assert!(text.contains("gnomon_batch_size_bucket{le=\"4\"} 2"));
        assert!(text.contains("gnomon_batch_size_bucket{le=\"+Inf\"} 2"));
        assert!(text.contains("gnomon_batch_size_sum 6\n"), "{text}");
        assert!(text.contains("gnomon_stage_seconds_total{stage=\"batch_wait\"} 0.000000000"));
        assert!(text.contains("gnomon_radius_seconds 3"));
        assert!(text.contains("gnomon_certificate_expiry_timestamp_seconds 200"));
        assert!(
            text.contains(&format!(
                "gnomon_online_key_info{{long_term_key=\"{}=\",online_key=\"{}=\",host=\"ams-1\"}} 1",
                "A".repeat(43),
                "/".repeat(42) + "8"
            )),
            "{text}"
        );
        // An ML-DSA-44 key is labelled by a short fingerprint, its SRV's
        // first 8 bytes, not by 1752 characters of base64.
        let srv_hex = |b: u8| -> String {
            LongTermKey::from_bytes(&[b; 1312]).unwrap().srv()[..8]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        };
        let line = format!(
            "gnomon_online_key_info{{long_term_key=\"ml-dsa-44:{}\",online_key=\"ml-dsa-44:{}\",host=\"\"}} 1\n",
            srv_hex(7),
            srv_hex(8)
        );
        assert!(text.contains(&line), "{text}");
        assert!(text.lines().all(|l| l.len() < 400), "{text}");
    }
}
