//! The result of a load run, as text for people and JSON for scripts.

use std::fmt::Write as _;
use std::net::SocketAddr;

use serde_json::{json, Value};

use crate::config::{Mode, Transport};
use crate::histogram::Histogram;
use crate::stats::{WorkerStats, REASONS};

/// Latency from send to receive of answered requests, in µs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest.
    pub max_us: f64,
}

/// What a load run saw. `answered + lost + closed == sent`; `valid +
/// invalid == verified`; `late`, `duplicate` and `unmatched` are responses
/// that match no request in time (late ones are also counted lost).
#[derive(Clone, Debug)]
pub struct Report {
    /// Address loaded.
    pub target: SocketAddr,
    /// Datagrams or connections.
    pub transport: Transport,
    /// Profile name requested.
    pub version: &'static str,
    /// Pacing.
    pub mode: Mode,
    /// Sender sockets.
    pub workers: usize,
    /// In-flight bound per socket.
    pub window: usize,
    /// Fraction of answered responses verified.
    pub verify_fraction: f64,
    /// Request size in bytes.
    pub request_size: usize,
    /// Whether any reply counted as an answer (no matching, no verification).
    pub any_reply: bool,
    /// Time spent sending, seconds.
    pub send_secs: f64,
    /// Whole run including the wait for the last responses, seconds.
    pub elapsed_secs: f64,
    /// Requests sent.
    pub sent: u64,
    /// Requests answered within the timeout.
    pub answered: u64,
    /// Answered responses that were verified.
    pub verified: u64,
    /// Verified and valid.
    pub valid: u64,
    /// Verified and invalid.
    pub invalid: u64,
    /// Invalid responses by reason (only reasons seen).
    pub invalid_reasons: Vec<(&'static str, u64)>,
    /// Requests never answered within the timeout.
    pub lost: u64,
    /// TCP: requests left unanswered because the server closed the
    /// connection first, as a server does at its per-connection request
    /// cap (`tcp.max-requests`) or lifetime. The server's policy, not a
    /// loss: they are not counted in `lost`.
    pub closed: u64,
    /// TCP: connections the target refused (nothing listens there).
    pub refused: u64,
    /// Responses that arrived after their request timed out.
    pub late: u64,
    /// Second responses to an answered request.
    pub duplicate: u64,
    /// Datagrams that answer no request of ours (garbage, truncated, foreign).
    pub unmatched: u64,
    /// Sends due at the requested rate but skipped: the window was full or
    /// the generator fell behind.
    pub throttled: u64,
    /// Failed send calls.
    pub send_errors: u64,
    /// Failed receive calls (ICMP errors such as port unreachable).
    pub recv_errors: u64,
    /// Latency of answered requests; `None` if nothing was answered.
    pub latency: Option<Latency>,
    /// CPU time of the generator's sender threads, seconds.
    pub cpu_secs: f64,
}

/// Everything a report is made from besides the counters.
pub(crate) struct RunInfo {
    pub(crate) target: SocketAddr,
    pub(crate) transport: Transport,
    pub(crate) version: &'static str,
    pub(crate) mode: Mode,
    pub(crate) workers: usize,
    pub(crate) window: usize,
    pub(crate) verify_fraction: f64,
    pub(crate) request_size: usize,
    pub(crate) any_reply: bool,
    pub(crate) elapsed_secs: f64,
    pub(crate) cpu_secs: f64,
}

impl Report {
    pub(crate) fn new(info: RunInfo, st: &WorkerStats) -> Report {
        Report {
            target: info.target,
            transport: info.transport,
            version: info.version,
            mode: info.mode,
            workers: info.workers,
            window: info.window,
            verify_fraction: info.verify_fraction,
            request_size: info.request_size,
            any_reply: info.any_reply,
            send_secs: st.send_phase_ns as f64 / 1e9,
            elapsed_secs: info.elapsed_secs,
            sent: st.sent,
            answered: st.answered,
            verified: st.verified,
            valid: st.valid,
            invalid: st.invalid,
            invalid_reasons: REASONS
                .iter()
                .zip(st.invalid_reasons)
                .filter(|(_, n)| *n > 0)
                .map(|(r, n)| (*r, n))
                .collect(),
            lost: st.lost,
            closed: st.closed,
            refused: st.refused,
            late: st.late,
            duplicate: st.duplicate,
            unmatched: st.unmatched,
            throttled: st.throttled,
            send_errors: st.send_errors,
            recv_errors: st.recv_errors,
            latency: latency(&st.hist),
            cpu_secs: info.cpu_secs,
        }
    }

    /// Share of sent requests not answered in time, in percent.
    pub fn loss_pct(&self) -> f64 {
        if self.sent == 0 {
            return 0.0;
        }
        100.0 * self.lost as f64 / self.sent as f64
    }

    /// Requests sent per second of the sending phase.
    pub fn send_rate(&self) -> f64 {
        per_sec(self.sent, self.send_secs)
    }

    /// Responses answered per second of the sending phase.
    pub fn answer_rate(&self) -> f64 {
        per_sec(self.answered, self.send_secs)
    }

    /// The report as one JSON object.
    pub fn to_json(&self) -> Value {
        let (mode, rate) = match self.mode {
            Mode::Max => ("max", Value::Null),
            Mode::Rate(r) => ("rate", json!(r)),
        };
        let reasons: serde_json::Map<String, Value> = self
            .invalid_reasons
            .iter()
            .map(|(r, n)| ((*r).to_owned(), json!(n)))
            .collect();
        let latency = self.latency.map_or(Value::Null, |l| {
            json!({
                "p50": l.p50_us, "p90": l.p90_us, "p99": l.p99_us,
                "p99_9": l.p999_us, "max": l.max_us,
            })
        });
        json!({
            "target": self.target.to_string(),
            "transport": self.transport.name(),
            "version": self.version,
            "mode": mode,
            "rate": rate,
            "workers": self.workers,
            "window": self.window,
            "request_size": self.request_size,
            "verify_fraction": self.verify_fraction,
            "any_reply": self.any_reply,
            "send_secs": self.send_secs,
            "elapsed_secs": self.elapsed_secs,
            "sent": self.sent,
            "answered": self.answered,
            "verified": self.verified,
            "valid": self.valid,
            "invalid": self.invalid,
            "invalid_reasons": reasons,
            "lost": self.lost,
            "loss_pct": self.loss_pct(),
            "closed": self.closed,
            "refused": self.refused,
            "late": self.late,
            "duplicate": self.duplicate,
            "unmatched": self.unmatched,
            "throttled": self.throttled,
            "send_errors": self.send_errors,
            "recv_errors": self.recv_errors,
            "send_rate": self.send_rate(),
            "answer_rate": self.answer_rate(),
            "latency_us": latency,
            "cpu_secs": self.cpu_secs,
        })
    }

    /// The report as a few aligned lines.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let pacing = match self.mode {
            Mode::Max => format!("max, window {}", self.window),
            Mode::Rate(r) => format!("rate {r}/s"),
        };
        let sockets = match self.transport {
            Transport::Udp => "sockets",
            Transport::Tcp => "TCP connections",
        };
        let _ = writeln!(
            s,
            "{} {}, {} B requests, {} {sockets}, {pacing}, {:.2} s",
            self.target, self.version, self.request_size, self.workers, self.send_secs
        );
        let _ = writeln!(
            s,
            "  sent      {:>12}  {:>10.0}/s",
            self.sent,
            self.send_rate()
        );
        let _ = writeln!(
            s,
            "  answered  {:>12}  {:>10.0}/s",
            self.answered,
            self.answer_rate()
        );
        if self.any_reply {
            let _ = writeln!(s, "  valid     (any reply counts; nothing verified)");
        } else {
            let _ = writeln!(
                s,
                "  valid     {:>12}  of {} verified ({} of answered)",
                self.valid, self.verified, self.verify_fraction
            );
        }
        let _ = write!(s, "  invalid   {:>12}", self.invalid);
        for (r, n) in &self.invalid_reasons {
            let _ = write!(s, "  {r}: {n}");
        }
        let _ = writeln!(s);
        let _ = writeln!(s, "  lost      {:>12}  {:.3} %", self.lost, self.loss_pct());
        if self.transport == Transport::Tcp {
            let _ = writeln!(
                s,
                "  closed    {:>12}  unanswered when the server closed the connection \
                 (its tcp.max-requests or lifetime); not lost",
                self.closed
            );
        }
        let _ = writeln!(
            s,
            "  late {}, duplicate {}, unmatched {}, throttled {}, send errors {}, receive errors {}",
            self.late,
            self.duplicate,
            self.unmatched,
            self.throttled,
            self.send_errors,
            self.recv_errors
        );
        match self.latency {
            Some(l) => {
                let _ = writeln!(
                    s,
                    "  latency µs  p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
                    l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.max_us
                );
            }
            None => {
                let _ = writeln!(s, "  latency µs  (no responses)");
            }
        }
        let _ = writeln!(s, "  generator CPU {:.2} s", self.cpu_secs);
        s
    }
}

fn per_sec(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

fn latency(h: &Histogram) -> Option<Latency> {
    let us = |q: f64| h.quantile(q).map(|ns| ns as f64 / 1e3);
    Some(Latency {
        p50_us: us(0.5)?,
        p90_us: us(0.9)?,
        p99_us: us(0.99)?,
        p999_us: us(0.999)?,
        max_us: h.max() as f64 / 1e3,
    })
}
