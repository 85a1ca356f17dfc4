//! `gnomon_consensus`, called from Rust as C calls it: issue 21's cases,
//! issue 33's (the drop attack: a list of five, only the two liars'
//! answers delivered), one vote per distinct key, the assumption, the
//! quorum, every argument check; the same verdicts as
//! `gnomon_client::consensus::agree` (the rule `gnomon sync`, `gnomon
//! query --servers` and the Python package use) on thousands of random
//! answer sets and assumptions; and no allocation at all.
//!
//! Here the call as C makes it and its outcome, shared; the tests by what
//! they try: `liars` (the issues' cases and the assumption), `votes` (one
//! vote per distinct key, and the quorum), `edges` (extreme numbers and
//! every argument check), `same_as_client` (against `agree`) and
//! `no_alloc`.

use std::ffi::CStr;

use gnomon::*;

use GnomonVerdict::*;

mod edges;
mod liars;
mod no_alloc;
mod same_as_client;
mod votes;

const S: i64 = 1_000_000;
const HOUR: i64 = 3600 * S;
const AUTO: usize = GNOMON_MAX_LIARS_AUTO;

/// The answers of one call: (key, low µs, high µs).
type Answers<'a> = [(&'a [u8; 32], i64, i64)];

struct Outcome {
    code: GnomonError,
    result: GnomonConsensusResult,
    verdicts: Vec<GnomonVerdict>,
}

impl Outcome {
    fn message(&self) -> String {
        // SAFETY: libgnomon NUL-terminates every message.
        unsafe { CStr::from_ptr(self.result.message.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    fn interval(&self) -> (i64, i64) {
        assert!(self.result.has_consensus, "{}", self.message());
        (self.result.low_us, self.result.high_us)
    }

    /// (listed, max_liars, needed): the assumption the result states.
    fn assumption(&self) -> (usize, usize, usize) {
        let r = &self.result;
        (r.listed, r.max_liars, r.needed)
    }

    /// (voting, agreeing, outside, self-contradicting) keys.
    fn keys(&self) -> (usize, usize, usize, usize) {
        let r = &self.result;
        (
            r.voting_keys,
            r.agreeing_keys,
            r.outside_keys,
            r.contradicting_keys,
        )
    }
}

fn vouches(answers: &Answers<'_>) -> Vec<GnomonVouch> {
    answers
        .iter()
        .map(|&(key, low_us, high_us)| GnomonVouch {
            public_key: key.as_ptr(),
            low_us,
            high_us,
        })
        .collect()
}

fn empty_result() -> GnomonConsensusResult {
    GnomonConsensusResult {
        code: GnomonError::GnomonOk,
        has_consensus: true,
        quorum_met: true,
        low_us: 7,
        high_us: 7,
        midpoint_us: 7,
        radius_us: 7,
        voting_keys: 7,
        agreeing_keys: 7,
        outside_keys: 7,
        contradicting_keys: 7,
        regions: 7,
        listed: 7,
        max_liars: 7,
        needed: 7,
        message: [0; GNOMON_MESSAGE_LEN],
    }
}

/// What the caller assumes and requires: `listed` distinct servers, at
/// most `max_liars` of them lying, `quorum` agreeing.
#[derive(Clone, Copy, Debug)]
struct Ask {
    listed: usize,
    max_liars: usize,
    quorum: usize,
}

/// Every answer's key listed, the default assumption.
fn listed(listed: usize, quorum: usize) -> Ask {
    Ask {
        listed,
        max_liars: AUTO,
        quorum,
    }
}

fn call(vouches: &[GnomonVouch], ask: Ask) -> Outcome {
    let mut result = empty_result();
    // Each slot starts as a value the call must overwrite or leave alone.
    let mut verdicts = vec![GnomonVerdictNoConsensus; vouches.len()];
    // SAFETY: `vouches` holds valid key pointers; `verdicts` as long.
    let code = unsafe {
        gnomon_consensus(
            vouches.as_ptr(),
            vouches.len(),
            ask.listed,
            ask.max_liars,
            ask.quorum,
            verdicts.as_mut_ptr(),
            &mut result,
        )
    };
    assert_eq!(result.code, code, "the result carries the code returned");
    Outcome {
        code,
        result,
        verdicts,
    }
}

fn consensus(answers: &Answers<'_>, ask: Ask) -> Outcome {
    let o = call(&vouches(answers), ask);
    assert_eq!(o.code, GnomonError::GnomonOk, "{}", o.message());
    o
}

fn key(n: u8) -> [u8; 32] {
    [n; 32]
}
