//! `gnomon_proven`, what a relayed proof proved or why not: the result
//! the verifier's answer becomes, with the code for each way a bundle
//! fails and the entries, liars and numbers the failure names.
#![forbid(unsafe_code)]

use gnomon_protocol::proof::{ProofError, Proven};
use gnomon_protocol::quorum::Assumption;

use crate::error::GnomonError;

/// No entry: `entry` and `other` of a `gnomon_proven` that names none.
pub const GNOMON_NO_ENTRY: i32 = -1;

/// What `gnomon_verify_proof` proved, or why not.
///
/// On `GNOMON_OK`, `has_interval` is true and the interval holds the
/// device's present. On `GNOMON_ERR_PROOF_CONTRADICTION` and
/// `GNOMON_ERR_PROOF_LIAR` (the bundle proves a server lied),
/// `has_interval` is true when the majority's interval still meets the
/// policy, and the interval is that one: the device may use it. On every
/// other failure `has_interval` is false and the times are 0.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GnomonProven {
    /// `GNOMON_OK`, or why not; the same value the call returned.
    pub code: GnomonError,
    /// Whether `earliest_unix_us` and `latest_unix_us` are an interval.
    pub has_interval: bool,
    /// The earliest the device's present can be, µs since the Unix epoch.
    pub earliest_unix_us: i64,
    /// The latest it can be.
    pub latest_unix_us: i64,
    /// Distinct pinned servers (voters) whose intervals meet the proven
    /// interval (with an interval).
    pub agreeing_keys: usize,
    /// Distinct pinned servers that answered (one contradicting itself
    /// excluded; with an interval). For `GNOMON_ERR_PROOF_TOO_FEW_KEYS`:
    /// the servers the bundle carries; for `GNOMON_ERR_PROOF_NO_QUORUM`:
    /// the servers agreeing.
    pub answering_keys: usize,
    /// For `GNOMON_ERR_PROOF_TOO_FEW_KEYS`: 2 × max_liars + 1, the servers
    /// the bundle had to carry; for `GNOMON_ERR_PROOF_NO_QUORUM`: how many
    /// had to agree; else 0.
    pub needed_keys: usize,
    /// The assumption the bundle was judged under: at most `max_liars`
    /// of the `pinned` servers lie (the policy's number, or
    /// `GNOMON_MAX_LIARS_AUTO` resolved). Set whenever the arguments were
    /// accepted, success or not; else 0.
    pub max_liars: usize,
    /// Distinct pinned servers (voters: keys grouped by `server`).
    pub pinned: usize,
    /// The entry (0-based) the failure names: the unknown key, the bad
    /// signature, the answer for another request, the broken link, the
    /// earlier of two contradicting answers; else `GNOMON_NO_ENTRY`.
    pub entry: i32,
    /// For `GNOMON_ERR_PROOF_CONTRADICTION`, the later of the two answers;
    /// else `GNOMON_NO_ENTRY`.
    pub other: i32,
    /// For `GNOMON_ERR_PROOF_LIAR`: bit i set for each entry i signed by a
    /// key that lies; else 0.
    pub liars: u32,
    /// For `GNOMON_ERR_PROOF_TOO_WIDE`: the radius, µs; else 0.
    pub radius_us: u64,
}

impl GnomonProven {
    pub(super) fn failed(code: GnomonError) -> GnomonProven {
        GnomonProven {
            code,
            has_interval: false,
            earliest_unix_us: 0,
            latest_unix_us: 0,
            agreeing_keys: 0,
            answering_keys: 0,
            needed_keys: 0,
            max_liars: 0,
            pinned: 0,
            entry: GNOMON_NO_ENTRY,
            other: GNOMON_NO_ENTRY,
            liars: 0,
            radius_us: 0,
        }
    }

    fn interval(mut self, p: &Proven) -> GnomonProven {
        // Unix µs fit i64 for ±292 000 years; a server's signed time is a
        // u64 of µs, and elapsed a u64: saturate rather than wrap.
        let narrow = |x: i128| i64::try_from(x).unwrap_or(if x < 0 { i64::MIN } else { i64::MAX });
        self.has_interval = true;
        self.earliest_unix_us = narrow(p.earliest_us);
        self.latest_unix_us = narrow(p.latest_us);
        self.agreeing_keys = p.agreeing_keys;
        self.answering_keys = p.answering_keys;
        self.assumed(p.assumption)
    }

    pub(super) fn assumed(mut self, a: Assumption) -> GnomonProven {
        self.max_liars = a.liars;
        self.pinned = a.voters;
        self
    }
}

/// Entry indices are below `GNOMON_MAX_PROOF_ENTRIES`.
fn index(i: usize) -> i32 {
    i32::try_from(i).unwrap_or(i32::MAX)
}

/// The code for each way a bundle fails.
pub fn of_proof(e: &ProofError) -> GnomonError {
    use GnomonError::*;
    match e {
        ProofError::Truncated => GnomonErrProofTruncated,
        // A bundle whose D is out of bounds (the device's own D is an
        // argument, refused before verifying).
        ProofError::Malformed(_)
        | ProofError::UnknownFormat(_)
        | ProofError::DeviceValueLength(_) => GnomonErrProofMalformed,
        ProofError::WrongNonce => GnomonErrProofWrongNonce,
        ProofError::Binding => GnomonErrProofBinding,
        ProofError::UnknownKey(_) => GnomonErrProofUnknownKey,
        ProofError::Signature(_) => GnomonErrProofSignature,
        ProofError::NotForRequest(_) => GnomonErrProofNotForRequest,
        ProofError::Response(..) => GnomonErrProofResponse,
        ProofError::Link(_) => GnomonErrProofLink,
        ProofError::Contradiction { .. } => GnomonErrProofContradiction,
        ProofError::Liar { .. } => GnomonErrProofLiar,
        ProofError::TooFewKeys { .. } => GnomonErrProofTooFewKeys,
        ProofError::NoQuorum { .. } => GnomonErrProofNoQuorum,
        ProofError::TooWide { .. } => GnomonErrProofTooWide,
        // A failure this build has no name for: the bundle is refused all
        // the same.
        _ => GnomonErrProofMalformed,
    }
}

/// The result for a verifier's answer.
pub fn proven(r: &Result<Proven, ProofError>) -> GnomonProven {
    let e = match r {
        Ok(p) => return GnomonProven::failed(GnomonError::GnomonOk).interval(p),
        Err(e) => e,
    };
    let out = GnomonProven::failed(of_proof(e));
    match *e {
        ProofError::UnknownKey(i)
        | ProofError::Signature(i)
        | ProofError::NotForRequest(i)
        | ProofError::Response(i, _)
        | ProofError::Link(i) => GnomonProven {
            entry: index(i),
            ..out
        },
        ProofError::Contradiction {
            earlier,
            later,
            majority,
        } => {
            let out = GnomonProven {
                entry: index(earlier),
                other: index(later),
                ..out
            };
            majority.map_or(out, |m| out.interval(&m))
        }
        ProofError::Liar { liars, majority } => {
            let out = GnomonProven {
                liars: u32::from(liars.0),
                ..out
            };
            majority.map_or(out, |m| out.interval(&m))
        }
        ProofError::TooFewKeys {
            present,
            needed,
            assumption,
        } => GnomonProven {
            answering_keys: present,
            needed_keys: needed,
            ..out
        }
        .assumed(assumption),
        ProofError::NoQuorum { agreeing, needed } => GnomonProven {
            answering_keys: agreeing,
            needed_keys: needed,
            ..out
        },
        ProofError::TooWide { radius_us } => GnomonProven { radius_us, ..out },
        _ => out,
    }
}
