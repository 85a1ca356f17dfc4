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
    /// 422: valid, but it accuses no key this sink is configured to keep
    /// reports about.
    Unwatched,
    /// 429: the sender prefix's reports fill its storage quota.
    SourceQuota,
    /// 507: the reports fill the sink's total storage quota.
    StorageFull,
    /// 503: the database failed.
    Store,
}

const REASONS: [Reject; 12] = [
    Reject::RateLimited,
    Reject::ContentType,
    Reject::TooLarge,
    Reject::Read,
    Reject::Malformed,
    Reject::Unverifiable,
    Reject::Invalid,
    Reject::NoContradiction,
    Reject::Unwatched,
    Reject::SourceQuota,
    Reject::StorageFull,
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
            Reject::Unwatched => "unwatched",
            Reject::SourceQuota => "source_quota",
            Reject::StorageFull => "storage_full",
            Reject::Store => "store",
        }
    }

    pub(crate) fn status(self) -> u16 {
        match self {
            Reject::RateLimited | Reject::SourceQuota => 429,
            Reject::StorageFull => 507,
            Reject::ContentType => 415,
            Reject::TooLarge => 413,
            Reject::Read | Reject::Malformed => 400,
            Reject::Unverifiable
            | Reject::Invalid
            | Reject::NoContradiction
            | Reject::Unwatched => 422,
            Reject::Store => 503,
        }
    }
}

/// What a sink did over its life: the line and the JSON object it ends
/// with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Reports verified and stored.
    pub accepted: u64,
    /// Reports already stored (replays).
    pub duplicate: u64,
    /// POSTs refused, for any reason.
    pub refused: u64,
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
    reports_verified: AtomicU64,
    signatures_checked: AtomicU64,
    verdicts_served: AtomicU64,
    expired: AtomicU64,
    expiry_failed: AtomicU64,
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

    /// The totals so far.
    pub fn summary(&self) -> Summary {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Summary {
            accepted: g(&self.accepted),
            duplicate: g(&self.duplicate),
            refused: self.rejected.iter().map(g).sum(),
        }
    }

    /// A report's signatures were checked: `entries` responses.
    pub(crate) fn verified(&self, entries: usize) {
        self.reports_verified.fetch_add(1, Ordering::Relaxed);
        self.signatures_checked
            .fetch_add(entries as u64, Ordering::Relaxed);
    }

    /// `/reports/ID/verify` answered from the stored check.
    pub(crate) fn verdict_served(&self) {
        self.verdicts_served.fetch_add(1, Ordering::Relaxed);
    }

    /// A retention sweep deleted `n` reports (or failed).
    pub(crate) fn swept(&self, n: Option<u64>) {
        match n {
            Some(n) => self.expired.fetch_add(n, Ordering::Relaxed),
            None => self.expiry_failed.fetch_add(1, Ordering::Relaxed),
        };
    }

    /// Prometheus text exposition; `stored` is the reports table's size,
    /// `evicted` the rate-limit table's evictions.
    pub(crate) fn render(&self, stored: Option<(i64, i64)>, evicted: u64) -> String {
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
        let _ = writeln!(
            out,
            "# HELP gnomon_report_verifications_total Reports whose signatures were checked (on arrival; a stored report is not checked again).\n\
             # TYPE gnomon_report_verifications_total counter\n\
             gnomon_report_verifications_total {}\n\
             # HELP gnomon_report_signature_checks_total Responses whose signatures were checked, over every report verified.\n\
             # TYPE gnomon_report_signature_checks_total counter\n\
             gnomon_report_signature_checks_total {}",
            g(&self.reports_verified),
            g(&self.signatures_checked)
        );
        let _ = writeln!(
            out,
            "# HELP gnomon_report_verdicts_served_total /reports/ID/verify answers served from the check stored on arrival.\n\
             # TYPE gnomon_report_verdicts_served_total counter\n\
             gnomon_report_verdicts_served_total {}",
            g(&self.verdicts_served)
        );
        let _ = writeln!(
            out,
            "# HELP gnomon_reports_expired_total Reports deleted by retention.\n\
             # TYPE gnomon_reports_expired_total counter\n\
             gnomon_reports_expired_total {}\n\
             # HELP gnomon_report_retention_failures_total Retention sweeps the database refused.\n\
             # TYPE gnomon_report_retention_failures_total counter\n\
             gnomon_report_retention_failures_total {}",
            g(&self.expired),
            g(&self.expiry_failed)
        );
        let _ = writeln!(
            out,
            "# HELP gnomon_report_rate_table_evictions_total Sender prefixes dropped from the full rate-limit table, least recently seen first.\n\
             # TYPE gnomon_report_rate_table_evictions_total counter\n\
             gnomon_report_rate_table_evictions_total {evicted}"
        );
        if let Some((n, bytes)) = stored {
            let _ = writeln!(
                out,
                "# HELP gnomon_reports_stored Reports in the database.\n\
                 # TYPE gnomon_reports_stored gauge\n\
                 gnomon_reports_stored {n}\n\
                 # HELP gnomon_reports_stored_bytes Bytes of reports in the database (what the quotas count).\n\
                 # TYPE gnomon_reports_stored_bytes gauge\n\
                 gnomon_reports_stored_bytes {bytes}"
            );
        }
        out
    }
}
