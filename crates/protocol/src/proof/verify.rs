//! The device's verifier: no allocation, fixed workspace, each failure its
//! own [`ProofError`] (the steps are in docs/PROOF.md, in this order).

use super::binary::{EntryView, ProofView};
use super::{EntrySet, ProofError, ProofPolicy, Proven, MAX_PROOF_ENTRIES, MAX_PROOF_REQUEST};
use crate::link::{chain_nonce, MAX_NONCE_LEN};
use crate::profile::Profile;
use crate::quorum::{self, NoConsensus, Span};
use crate::scheme::PublicKey;
use crate::verify::{verify_response, SentRequest, VerifyError};

/// The memory `verify_proof` works in, provided by the caller so that a
/// device can place it (static, stack) and nothing is allocated. About
/// 2.5 KB on a 64-bit target (docs/PROOF.md); make one with
/// [`ProofWorkspace::new`] and reuse it.
#[derive(Clone, Debug)]
pub struct ProofWorkspace {
    request: [u8; MAX_PROOF_REQUEST],
    entries: [EntryState; MAX_PROOF_ENTRIES],
    keys: [KeyState; MAX_PROOF_ENTRIES],
}

/// What the verifier learnt of one entry.
#[derive(Clone, Copy, Debug)]
struct EntryState {
    earliest_us: i128,
    latest_us: i128,
}

/// One pinned voter (a server: pinned keys grouped as one) that answered.
#[derive(Clone, Copy, Debug)]
struct KeyState {
    /// Its voter number.
    pinned: usize,
    /// Its answers' intervals for now, intersected; `None` once they
    /// contradict each other.
    span: Option<Span>,
    entries: EntrySet,
}

impl ProofWorkspace {
    /// A fresh workspace.
    pub const fn new() -> ProofWorkspace {
        const E: EntryState = EntryState {
            earliest_us: 0,
            latest_us: 0,
        };
        const K: KeyState = KeyState {
            pinned: 0,
            span: None,
            entries: EntrySet(0),
        };
        ProofWorkspace {
            request: [0; MAX_PROOF_REQUEST],
            entries: [E; MAX_PROOF_ENTRIES],
            keys: [K; MAX_PROOF_ENTRIES],
        }
    }
}

impl Default for ProofWorkspace {
    fn default() -> Self {
        ProofWorkspace::new()
    }
}

/// Verify a binary bundle for the device value `device` against the pinned
/// long-term `keys`, `elapsed_us` (an upper bound, drift included) after the
/// device made `device`. Each distinct key is one voter. Allocates nothing.
pub fn verify_proof(
    bundle: &[u8],
    device: &[u8],
    keys: &[PublicKey<'_>],
    elapsed_us: u64,
    policy: &ProofPolicy,
    ws: &mut ProofWorkspace,
) -> Result<Proven, ProofError> {
    verify_proof_grouped(bundle, device, keys, &[], elapsed_us, policy, ws)
}

/// [`verify_proof`] where pinned keys `i` and `j` are one server (one
/// voter) when `voter_of[i] == voter_of[j]`: the identities of one machine
/// (two schemes on one port) or of one operator. Empty: each distinct key
/// is its own voter. A `voter_of` shorter than `keys` leaves the keys past
/// its end alone.
pub fn verify_proof_grouped(
    bundle: &[u8],
    device: &[u8],
    keys: &[PublicKey<'_>],
    voter_of: &[usize],
    elapsed_us: u64,
    policy: &ProofPolicy,
    ws: &mut ProofWorkspace,
) -> Result<Proven, ProofError> {
    let view = ProofView::parse(bundle)?;
    if view.device() != device {
        return Err(ProofError::WrongNonce);
    }
    let entries = view.entries();
    // Cheap checks first: the binding, every key and every link are lookups
    // and hashing, so a bundle broken anywhere in them costs no signature
    // check (ML-DSA-44 takes milliseconds on a small core). A link hashes
    // the previous response's raw bytes without trusting them: a forged
    // one that chains fails its own signature below.
    check_binding(&entries[0], device, &mut ws.request)?;
    for (i, e) in entries.iter().enumerate() {
        pinned_key(keys, e).ok_or(ProofError::UnknownKey(i))?;
    }
    for i in 1..entries.len() {
        check_link(&entries[i], entries[i - 1].response, i, &mut ws.request)?;
    }
    // Then the signatures, each request rebuilt again (the link checks
    // left the last one checked in the buffer).
    let mut n_keys = 0;
    for (i, e) in entries.iter().enumerate() {
        let pinned = pinned_key(keys, e).ok_or(ProofError::UnknownKey(i))?;
        let request = rebuild(e, &mut ws.request)?;
        let v = verify_response(request, e.response, keys[pinned]).map_err(|err| match err {
            VerifyError::DelegationSignature | VerifyError::ResponseSignature => {
                ProofError::Signature(i)
            }
            VerifyError::NonceMismatch | VerifyError::NonceMissing | VerifyError::Root => {
                ProofError::NotForRequest(i)
            }
            other => ProofError::Response(i, other),
        })?;
        let voter = voter(keys, voter_of, pinned);
        let key = match ws.keys[..n_keys].iter().position(|k| k.pinned == voter) {
            Some(k) => k,
            None => {
                ws.keys[n_keys] = KeyState {
                    pinned: voter,
                    span: Span::new(i128::MIN, i128::MAX),
                    entries: EntrySet(0),
                };
                n_keys += 1;
                n_keys - 1
            }
        };
        ws.entries[i] = EntryState {
            earliest_us: v.earliest_us(),
            latest_us: v.latest_us(),
        };
        let now = Span::new(v.earliest_us(), v.latest_us() + i128::from(elapsed_us));
        let k = &mut ws.keys[key];
        k.span = k.span.zip(now).and_then(|(a, b)| a.intersect(b));
        k.entries.insert(i);
    }
    let pinned = (0..keys.len())
        .filter(|&i| (0..i).all(|j| voter(keys, voter_of, j) != voter(keys, voter_of, i)))
        .count();
    decide(
        &ws.entries[..entries.len()],
        &ws.keys[..n_keys],
        policy.assumption(pinned),
        policy,
    )
}

/// The first pinned key that is entry `e`'s key.
fn pinned_key(keys: &[PublicKey<'_>], e: &EntryView<'_>) -> Option<usize> {
    keys.iter().position(|k| k.bytes() == e.key)
}

/// The voter of pinned key `i`: its group, or else the first pinned key
/// equal to it (a key pinned twice is one voter), numbered past every
/// group so the two kinds never meet.
fn voter(keys: &[PublicKey<'_>], voter_of: &[usize], i: usize) -> usize {
    match voter_of.get(i) {
        Some(&g) => g,
        None => {
            let first = keys
                .iter()
                .position(|k| k.bytes() == keys[i].bytes())
                .unwrap_or(i);
            match voter_of.get(first) {
                Some(&g) => g,
                None => usize::MAX - first,
            }
        }
    }
}

/// An entry's request, rebuilt into `buf` (the parser caps its length at
/// the workspace's, so the error cannot happen).
fn rebuild<'b>(e: &EntryView<'_>, buf: &'b mut [u8]) -> Result<&'b [u8], ProofError> {
    e.request_into(buf)
        .ok_or(ProofError::Malformed("request length"))
}

/// The request's nonce must be `chain_nonce(profile, previous, rand)`.
fn chained(e: &EntryView<'_>, previous: &[u8], buf: &mut [u8]) -> Option<bool> {
    let request = e.request_into(buf)?;
    let sent = SentRequest::parse(request).ok()?;
    let profile: &Profile = sent.primary()?;
    let mut expect = [0u8; MAX_NONCE_LEN];
    let n = chain_nonce(profile, previous, e.rand, &mut expect).ok()?;
    Some(sent.nonce == &expect[..n])
}

/// The first request was built from D (D as "the response before the
/// first").
fn check_binding(first: &EntryView<'_>, device: &[u8], buf: &mut [u8]) -> Result<(), ProofError> {
    match chained(first, device, buf) {
        Some(true) => Ok(()),
        _ => Err(ProofError::Binding),
    }
}

fn check_link(
    e: &EntryView<'_>,
    previous: &[u8],
    i: usize,
    buf: &mut [u8],
) -> Result<(), ProofError> {
    match chained(e, previous, buf) {
        Some(true) => Ok(()),
        _ => Err(ProofError::Link(i)),
    }
}

/// The causal check, then the quorum rule over the pinned voters, then
/// the policy.
fn decide(
    entries: &[EntryState],
    keys: &[KeyState],
    assumption: quorum::Assumption,
    policy: &ProofPolicy,
) -> Result<Proven, ProofError> {
    // A voter that contradicts itself does not vote (as in the client's
    // `agree`): it lies whatever the truth is, and is one of the f.
    let proven_liars = keys.iter().filter(|k| k.span.is_none()).count();
    let rule = assumption.after_proven(proven_liars);
    let spans = keys.iter().filter_map(|k| k.span);
    let hull = quorum::consensus(spans.clone(), rule);
    let mut liars = EntrySet(0);
    let mut agreeing_keys = 0;
    for k in keys {
        match (k.span, hull) {
            (None, _) => liars.0 |= k.entries.0,
            (Some(s), Ok(h)) if quorum::outside(h, s) => liars.0 |= k.entries.0,
            (Some(_), Ok(_)) => agreeing_keys += 1,
            (Some(_), Err(_)) => {}
        }
    }
    let answering_keys = spans.clone().count();
    let accepted = match hull {
        Err(NoConsensus::TooFew { answered, needed }) => Err(ProofError::TooFewKeys {
            present: answered,
            needed,
            assumption,
        }),
        Err(NoConsensus::NoCommonOffset { cover, .. }) => Err(ProofError::NoQuorum {
            agreeing: 0,
            needed: cover,
        }),
        Ok(h) => Ok(Proven {
            earliest_us: h.low,
            latest_us: h.high,
            agreeing_keys,
            answering_keys,
            assumption,
        }),
    };
    let accepted = accepted.and_then(|p| {
        if p.agreeing_keys < policy.quorum {
            return Err(ProofError::NoQuorum {
                agreeing: p.agreeing_keys,
                needed: policy.quorum,
            });
        }
        let radius_us = u64::try_from(p.radius_us()).unwrap_or(u64::MAX);
        match policy.max_radius_us {
            Some(max) if radius_us > max => Err(ProofError::TooWide { radius_us }),
            _ => Ok(p),
        }
    });
    // i answered before j: both honest means earliest_i ≤ t_i ≤ t_j ≤ latest_j.
    for (i, a) in entries.iter().enumerate() {
        for (j, b) in entries.iter().enumerate().skip(i + 1) {
            if a.earliest_us > b.latest_us {
                return Err(ProofError::Contradiction {
                    earlier: i,
                    later: j,
                    majority: accepted.ok(),
                });
            }
        }
    }
    if !liars.is_empty() {
        return Err(ProofError::Liar {
            liars,
            majority: accepted.ok(),
        });
    }
    accepted
}
