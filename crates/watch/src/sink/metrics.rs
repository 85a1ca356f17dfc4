//! The sink's counters and their Prometheus text.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a POST was refused; each is a `reason` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reject {
    /// 429: the prefix sent too many.
    RateLimited,
    /// 415: not `application/roughtime-malfeasance+json`.
    ContentType,
    /// 413: larger than the cap.
    TooLarge,
    /// 400: the body could not be read (cut short, timed out).
    Read,
    /// 400: not a report (JSON, fields, base64).
    Malformed,
    /// 422: the pre-draft-12 form, which cannot be verified.
    Unverifiable,
    /// 422: a signature or chain link fails.
    Invalid,
    /// 422: valid, but no pair contradicts: it proves nothing.
    NoContradiction,
    /// 503: the database failed.
    Store,
}

const REASONS: [Reject; 9] = [
    Reject::RateLimited,
    Reject::ContentType,
    Reject::TooLarge,
    Reject::Read,
    Reject::Malformed,
    Reject::Unverifiable,
    Reject::Invalid,
    Reject::NoContradiction,
    Reject::Store,
];

impl Reject {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Reject::RateLimited => "rate_limited",
            Reject::ContentType => "content_type",
            Reject::TooLarge => "too_large",
            Reject::Read => "read",
            Reject::Malformed => "malformed",
            Reject::Unverifiable => "unverifiable",
            Reject::Invalid => "invalid",
            Reject::NoContradiction => "no_contradiction",
            Reject::Store => "store",
        }
    }

    pub(crate) fn status(self) -> u16 {
        match self {
            Reject::RateLimited => 429,
            Reject::ContentType => 415,
            Reject::TooLarge => 413,
            Reject::Read | Reject::Malformed => 400,
            Reject::Unverifiable | Reject::Invalid | Reject::NoContradiction => 422,
            Reject::Store => 503,
        }
    }
}

/// What the sink did, since start.
#[derive(Debug, Default)]
pub struct Counters {
    accepted: AtomicU64,
    duplicate: AtomicU64,
    rejected: [AtomicU64; REASONS.len()],
    /// The listener's connection table, when the sink has a listener of
    /// its own (`gnomon report-server`).
    pub(crate) connections:
        std::sync::OnceLock<std::sync::Arc<gnomon_metrics_http::slots::ConnTable>>,
}

impl Counters {
    pub(crate) fn accepted(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn duplicate(&self) {
        self.duplicate.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn rejected(&self, why: Reject) {
        let i = REASONS.iter().position(|r| *r == why).unwrap_or(0);
        self.rejected[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Prometheus text exposition; `stored` is the reports table's size.
    pub(crate) fn render(&self, stored: Option<i64>) -> String {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP gnomon_reports_accepted_total Reports verified and stored.\n\
             # TYPE gnomon_reports_accepted_total counter\n\
             gnomon_reports_accepted_total {}",
            g(&self.accepted)
        );
        let _ = writeln!(
            out,
            "# HELP gnomon_reports_duplicate_total Reports already stored (replays); nothing written.\n\
             # TYPE gnomon_reports_duplicate_total counter\n\
             gnomon_reports_duplicate_total {}",
            g(&self.duplicate)
        );
        out.push_str(
            "# HELP gnomon_reports_rejected_total Report POSTs refused, by reason.\n\
             # TYPE gnomon_reports_rejected_total counter\n",
        );
        for (r, c) in REASONS.iter().zip(&self.rejected) {
            let _ = writeln!(
                out,
                "gnomon_reports_rejected_total{{reason=\"{}\"}} {}",
                r.label(),
                g(c)
            );
        }
        if let Some(t) = self.connections.get() {
            out += &crate::http::render_connections("gnomon_report_sink", "the report sink", t);
        }
        if let Some(n) = stored {
            let _ = writeln!(
                out,
                "# HELP gnomon_reports_stored Reports in the database.\n\
                 # TYPE gnomon_reports_stored gauge\n\
                 gnomon_reports_stored {n}"
            );
        }
        out
    }
}
