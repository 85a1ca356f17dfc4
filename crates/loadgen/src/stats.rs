//! Per-socket counters, merged into the run's report at the end.

use gnomon_protocol::VerifyError;

use crate::histogram::Histogram;

/// Names of the verification failures, in counter order.
pub(crate) const REASONS: [&str; 20] = [
    "request",
    "framing",
    "message",
    "unknown-version",
    "not-offered",
    "legacy-version-one",
    "version-placement",
    "type",
    "vers",
    "downgrade",
    "delegation-signature",
    "response-signature",
    "nonce-mismatch",
    "nonce-missing",
    "path",
    "root",
    "time",
    "outside-delegation",
    "zero-radius",
    "other",
];

fn reason(e: VerifyError) -> usize {
    match e {
        VerifyError::Request(_) => 0,
        VerifyError::Framing(_) => 1,
        VerifyError::Message(_) => 2,
        VerifyError::UnknownVersion(_) => 3,
        VerifyError::NotOffered(_) => 4,
        VerifyError::LegacyVersionOne => 5,
        VerifyError::VersionPlacement => 6,
        VerifyError::Type => 7,
        VerifyError::Vers => 8,
        VerifyError::Downgrade { .. } => 9,
        VerifyError::DelegationSignature => 10,
        VerifyError::ResponseSignature => 11,
        VerifyError::NonceMismatch => 12,
        VerifyError::NonceMissing => 13,
        VerifyError::Path(_) => 14,
        VerifyError::Root => 15,
        VerifyError::Time => 16,
        VerifyError::OutsideDelegation => 17,
        VerifyError::ZeroRadius => 18,
        _ => 19,
    }
}

/// What one socket saw.
pub(crate) struct WorkerStats {
    pub(crate) sent: u64,
    pub(crate) answered: u64,
    pub(crate) verified: u64,
    pub(crate) valid: u64,
    pub(crate) invalid: u64,
    pub(crate) invalid_reasons: [u64; REASONS.len()],
    pub(crate) lost: u64,
    /// TCP: requests the server closed the connection on unanswered.
    pub(crate) closed: u64,
    /// TCP: connections refused.
    pub(crate) refused: u64,
    pub(crate) late: u64,
    pub(crate) duplicate: u64,
    pub(crate) unmatched: u64,
    pub(crate) throttled: u64,
    pub(crate) send_errors: u64,
    pub(crate) recv_errors: u64,
    pub(crate) send_phase_ns: u64,
    pub(crate) hist: Histogram,
    /// CPU time of the worker thread.
    pub(crate) cpu: std::time::Duration,
}

impl WorkerStats {
    pub(crate) fn new() -> WorkerStats {
        WorkerStats {
            sent: 0,
            answered: 0,
            verified: 0,
            valid: 0,
            invalid: 0,
            invalid_reasons: [0; REASONS.len()],
            lost: 0,
            closed: 0,
            refused: 0,
            late: 0,
            duplicate: 0,
            unmatched: 0,
            throttled: 0,
            send_errors: 0,
            recv_errors: 0,
            send_phase_ns: 0,
            hist: Histogram::new(),
            cpu: std::time::Duration::ZERO,
        }
    }

    pub(crate) fn invalid(&mut self, e: VerifyError) {
        self.invalid += 1;
        self.invalid_reasons[reason(e)] += 1;
    }

    pub(crate) fn merge(&mut self, o: &WorkerStats) {
        self.sent += o.sent;
        self.answered += o.answered;
        self.verified += o.verified;
        self.valid += o.valid;
        self.invalid += o.invalid;
        for (a, b) in self.invalid_reasons.iter_mut().zip(o.invalid_reasons) {
            *a += b;
        }
        self.lost += o.lost;
        self.closed += o.closed;
        self.refused += o.refused;
        self.late += o.late;
        self.duplicate += o.duplicate;
        self.unmatched += o.unmatched;
        self.throttled += o.throttled;
        self.send_errors += o.send_errors;
        self.recv_errors += o.recv_errors;
        self.send_phase_ns = self.send_phase_ns.max(o.send_phase_ns);
        self.hist.merge(&o.hist);
        self.cpu += o.cpu;
    }
}
