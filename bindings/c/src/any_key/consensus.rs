//! Whom to believe, from C: `gnomon_consensus_any_key`, and the body it
//! shares with the first API's `gnomon_consensus`. `quorum::consensus`
//! decides; this reads each answer's key as the rule asks for it, writes
//! the verdicts and fills `gnomon_consensus_result`.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

use crate::args::{array, c_message, guard, key, message_or_text, writable};
use crate::error::GnomonError;
use crate::message::MESSAGE_LEN;
use crate::quorum;
use crate::types::{GnomonConsensusResult, GnomonVerdict, GnomonVouchAnyKey};

/// `gnomon_consensus` over answers whose keys may be of either scheme
/// (each with its own `public_key_len`). Keys of different lengths are
/// always different keys: a machine with an Ed25519 and an ML-DSA-44
/// identity is two voters unless you merge them (docs/C.md, "Whom to
/// believe").
///
/// # Safety
/// `answers` is NULL or points to `count` aligned `gnomon_vouch_any_key`
/// values, each with a `public_key` that is NULL or points to
/// `public_key_len` readable bytes; `verdicts` is NULL or points to
/// `count` writable, aligned `gnomon_verdict` values; `result` to a
/// writable, aligned `gnomon_consensus_result`. None of them changes
/// during the call.
#[no_mangle]
pub unsafe extern "C" fn gnomon_consensus_any_key(
    answers: *const GnomonVouchAnyKey,
    count: usize,
    listed: usize,
    max_liars: usize,
    quorum: usize,
    verdicts: *mut GnomonVerdict,
    result: *mut GnomonConsensusResult,
) -> GnomonError {
    let read = |i: usize| {
        // SAFETY: i < count ≤ GNOMON_MAX_ANSWERS (consensus checks the
        // bound before asking for any answer, and never asks past it);
        // non-NULL and aligned (checked by `array` first), and `count`
        // readable values by the caller's promise.
        unsafe { answers.add(i).read() }
    };
    let rule = Rule {
        listed,
        max_liars,
        quorum,
    };
    // SAFETY: the caller's promises, passed on.
    unsafe { consensus_with(count, array(answers), rule, verdicts, result, read) }
}

/// The numbers a consensus is asked for: the assumption and the quorum.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rule {
    /// Distinct servers of the caller's list.
    pub listed: usize,
    /// How many may lie (`GNOMON_MAX_LIARS_AUTO`: the default).
    pub max_liars: usize,
    /// Distinct keys that must agree.
    pub quorum: usize,
}

/// The quorum rule over the answers `read(i)` gives, unless `array`
/// says the array is unusable; fills `*result` and the verdicts.
///
/// # Safety
/// `read` is called only after `array` was Ok, for i < count, and gives
/// answers whose keys satisfy `key`'s rules; `verdicts` and `result` as
/// `gnomon_consensus_any_key` says.
pub(crate) unsafe fn consensus_with(
    count: usize,
    array: Result<(), GnomonError>,
    rule: Rule,
    verdicts: *mut GnomonVerdict,
    result: *mut GnomonConsensusResult,
    read: impl Fn(usize) -> GnomonVouchAnyKey,
) -> GnomonError {
    if let Err(e) = writable(result) {
        return e;
    }
    let mut message = [0u8; MESSAGE_LEN];
    let mut tally = None;
    let code = guard(|| {
        if let Err(e) = array {
            return e;
        }
        if !verdicts.is_null() && !verdicts.is_aligned() {
            return GnomonError::GnomonErrArgument;
        }
        let answer = |i: usize| {
            let v = read(i);
            Ok(quorum::Answer {
                // SAFETY: NULL or public_key_len readable bytes by the
                // caller's promise, checked for NULL and length inside.
                key: unsafe { key(v.public_key, v.public_key_len) }?.bytes(),
                low_us: v.low_us,
                high_us: v.high_us,
            })
        };
        let verdict = |i: usize, v: quorum::Verdict| {
            if !verdicts.is_null() {
                // SAFETY: i < count; non-NULL, aligned (checked above) and
                // `count` writable values by the caller's promise.
                unsafe { verdicts.add(i).write(v.into()) };
            }
        };
        match quorum::consensus(
            count,
            answer,
            rule.listed,
            rule.max_liars,
            rule.quorum,
            verdict,
            &mut message,
        ) {
            Ok(t) => {
                tally = Some(t);
                GnomonError::GnomonOk
            }
            Err(e) => e,
        }
    });
    if code != GnomonError::GnomonOk {
        tally = None;
    }
    if code == GnomonError::GnomonErrInternal {
        message = [0; MESSAGE_LEN];
    }
    message_or_text(&mut message, code);
    let hull = tally.and_then(|t| t.hull);
    // A hull lies between two of the given int64 offsets, and so do its
    // middle and half its width.
    let narrow = |x: i128| x as i64;
    let assumption = tally.map(|t| t.assumption);
    let t = tally.unwrap_or(quorum::Tally {
        assumption: gnomon_protocol::quorum::Assumption::new(0, 0),
        hull: None,
        none: None,
        voting_keys: 0,
        agreeing_keys: 0,
        outside_keys: 0,
        contradicting_keys: 0,
        regions: 0,
        quorum_met: false,
    });
    let r = GnomonConsensusResult {
        code,
        has_consensus: hull.is_some(),
        quorum_met: t.quorum_met,
        low_us: hull.map_or(0, |h| narrow(h.low)),
        high_us: hull.map_or(0, |h| narrow(h.high)),
        midpoint_us: hull.map_or(0, |h| narrow(h.midpoint())),
        radius_us: hull.map_or(0, |h| narrow(h.radius())),
        voting_keys: t.voting_keys,
        agreeing_keys: t.agreeing_keys,
        outside_keys: t.outside_keys,
        contradicting_keys: t.contradicting_keys,
        regions: t.regions,
        listed: assumption.map_or(0, |a| a.voters),
        max_liars: assumption.map_or(0, |a| a.liars),
        needed: assumption.map_or(0, |a| a.needed()),
        message: c_message(&message),
    };
    // SAFETY: `result` checked by `writable` above.
    unsafe { result.write(r) };
    code
}
