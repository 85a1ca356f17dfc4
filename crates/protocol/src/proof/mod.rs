//! Relayed proofs: proven time for a device that cannot reach a server.
//!
//! ```text
//!  device ── D (16..=64 bytes) ──▶ relay ── chain bound to D ──▶ servers
//!    ▲                              │
//!    └──────── bundle (binary) ◀────┘   verify_proof(bundle, D, pinned keys, elapsed)
//!                                          ▶ Proven { earliest_us, latest_us }
//! ```
//!
//! The device makes a value D and hands it to a relay. The relay runs a
//! measurement sequence whose first nonce is `chain_nonce(profile₀, D,
//! rand₀)`: D takes the place of "the previous response" in the RFC's
//! chaining rule, so every request of the chain was built after D existed.
//! The bundle carries D and the chain; the device checks, offline and with
//! no allocation, that the chain starts at its own D, that every signature
//! and link holds, and that the quorum rule ([`crate::quorum`], the rule
//! `gnomon sync` trusts) accepts the answers.
//!
//! **The interval.** Let T₀ be when the device made D and `elapsed` an upper
//! bound (drift included) on the time its own clock says has passed since.
//! An honest answer i was signed at some tᵢ with T₀ ≤ tᵢ ≤ now, and tᵢ ∈
//! [MIDPᵢ − RADIᵢ, MIDPᵢ + RADIᵢ]. Hence now ∈ [MIDPᵢ − RADIᵢ, MIDPᵢ +
//! RADIᵢ + elapsed]. A pinned voter's answers are intersected (empty: it
//! contradicts itself), and the proven interval is the quorum rule's over
//! the voters in the bundle. With two keys and nobody assumed to lie that
//! is the intersection: no earlier than the latest lower bound, no later
//! than the earliest upper bound plus `elapsed`.
//!
//! **Assumption.** At most `f` of the `n` pinned voters lie
//! ([`ProofPolicy::max_liars`], fewer than half by default), and `elapsed`
//! is not less than the time that really passed. Then the proven interval
//! holds the true now, whatever the relay left out: a bundle must carry
//! `2f + 1` pinned voters (see [`crate::quorum`] and docs/PROOF.md).
//!
//! **The relay is untrusted.** It holds no key, so it cannot forge an answer;
//! what it can do, and what that does to the device:
//! - *delay*: hold the bundle, or ask the servers late. The device's
//!   `elapsed` grows by the delay and so does the interval's upper end: the
//!   interval widens by the delay, never moves away from the truth. A
//!   policy radius limit turns a long delay into [`ProofError::TooWide`].
//! - *drop*: leave out answers. Only whole tails can go (a gap breaks a
//!   link, the head breaks the binding); fewer voters answer, and below
//!   `2f + 1` that is [`ProofError::TooFewKeys`]: the relay, which picks
//!   the bundle's keys, cannot make the liars a majority of them count.
//!   A dropped bundle is no proof.
//! - *replay*: hand over a bundle made for another D (an older request of
//!   this device, or another device's). The chain does not start at this D:
//!   [`ProofError::WrongNonce`], or [`ProofError::Binding`] when the bundle
//!   claims the right D over a chain that starts elsewhere.
//! - *forge*: change any signed byte, swap or transplant answers, pad with
//!   answers from unpinned keys: a signature, request, link or key error.
//!
//! Servers can lie; the quorum rule bounds what `f` of them can do, and a
//! liar that shows is reported ([`ProofError::Liar`],
//! [`ProofError::Contradiction`]) with the others' interval still given.

mod binary;
mod json;
mod verify;

use core::fmt;

pub use binary::{EntryView, ProofView};
pub use json::{Proof, ProofFormError, DEVICE_NONCE_KEY};
pub use verify::{verify_proof, verify_proof_grouped, ProofWorkspace};

use crate::quorum::Assumption;
use crate::request::DEFAULT_REQUEST_SIZE;
use crate::verify::VerifyError;

/// First bytes of a binary bundle.
pub const PROOF_MAGIC: [u8; 4] = *b"RTPF";

/// The binary format this crate writes and reads.
pub const PROOF_FORMAT_VERSION: u8 = 1;

/// Most entries a bundle holds: the RFC's sequence asks a handful of servers
/// twice, and the bound keeps the device's workspace fixed.
pub const MAX_PROOF_ENTRIES: usize = 16;

/// Longest device value D.
pub const MAX_DEVICE_VALUE: usize = 64;

/// Shortest device value D: 16 bytes, room for the 128 bits the relay
/// cannot predict that make a proof fresh. A relay that can guess D
/// (a short one, a counter, a clock reading) can run the chain for it in
/// advance and hand over a bundle signed before the device made D, which
/// the interval does not allow for (docs/PROOF.md, "The binding").
pub const MIN_DEVICE_NONCE: usize = 16;

/// Whether `device` has a device value's length, [`MIN_DEVICE_NONCE`] to
/// [`MAX_DEVICE_VALUE`] bytes; else [`ProofError::DeviceValueLength`].
/// For the value a device is about to pass to a relay or to
/// [`verify_proof`]; the bundle's own D is held to the same range by
/// [`ProofView::parse`] and [`Proof::new`] (so the JSON form and the
/// relay's measurement sequence bound to D too).
pub fn check_device_value(device: &[u8]) -> Result<(), ProofError> {
    if (MIN_DEVICE_NONCE..=MAX_DEVICE_VALUE).contains(&device.len()) {
        Ok(())
    } else {
        Err(ProofError::DeviceValueLength(device.len()))
    }
}

/// Longest request a bundle may carry: the size every profile's request is
/// built at (the UDP size; the client sends the same size over TCP), so the
/// device's workspace needs no more.
pub const MAX_PROOF_REQUEST: usize = DEFAULT_REQUEST_SIZE;

/// What the device requires of the answers.
///
/// **The assumption is about the pinned servers.** The relay chooses every
/// answer that arrives: it can leave out any server it likes, and it may
/// collude with the liars. So the rule never counts the keys in the bundle
/// as the electorate: of the `n` distinct pinned keys (voters) at most
/// `f = max_liars` lie, the default being "fewer than half",
/// `⌊(n − 1)/2⌋`. A bundle proves an interval only when it carries `2f + 1`
/// distinct pinned voters, and the interval is the hull of the times held
/// by `m − f` of the `m` it carries ([`crate::quorum`]): whatever the
/// relay left out, it holds the true now. With the default and `n` pinned,
/// that is every key (odd `n`) or all but one (even `n`); pin fewer keys, or
/// assume fewer liars, for a bundle that may lack more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProofPolicy {
    /// How many of the pinned servers may lie; `None`: fewer than half of
    /// them ([`crate::quorum::Assumption::for_proof`]).
    pub max_liars: Option<usize>,
    /// Distinct pinned voters whose intervals must meet the proven
    /// interval (beyond the `m − f` the rule already needs).
    pub quorum: usize,
    /// Widest proven interval accepted (half its width, µs); `elapsed`
    /// widens it too, so this also bounds how long a relay may delay.
    pub max_radius_us: Option<u64>,
}

impl ProofPolicy {
    /// The assumption for `pinned` distinct pinned voters.
    pub fn assumption(&self, pinned: usize) -> Assumption {
        match self.max_liars {
            Some(f) => Assumption::new(pinned, f),
            None => Assumption::for_proof(pinned),
        }
    }
}

impl Default for ProofPolicy {
    fn default() -> Self {
        ProofPolicy {
            max_liars: None,
            quorum: 1,
            max_radius_us: Some(10_000_000),
        }
    }
}

/// The interval a bundle proves for the device's present.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proven {
    /// Earliest possible now, Unix µs.
    pub earliest_us: i128,
    /// Latest possible now, Unix µs.
    pub latest_us: i128,
    /// Distinct voters whose intervals meet the proven interval.
    pub agreeing_keys: usize,
    /// Distinct voters that answered (one that contradicts itself
    /// excluded).
    pub answering_keys: usize,
    /// The assumption it was proven under (of the pinned voters).
    pub assumption: Assumption,
}

impl Proven {
    /// Half the width, µs.
    pub fn radius_us(&self) -> i128 {
        (self.latest_us - self.earliest_us) / 2
    }

    /// The middle, Unix µs.
    pub fn midpoint_us(&self) -> i128 {
        self.earliest_us + (self.latest_us - self.earliest_us) / 2
    }
}

/// Entries of a bundle, by index (at most [`MAX_PROOF_ENTRIES`]): a set
/// that needs no allocation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EntrySet(pub u16);

impl EntrySet {
    /// Whether entry `i` is in the set.
    pub fn contains(self, i: usize) -> bool {
        i < 16 && self.0 & (1 << i) != 0
    }

    /// How many entries.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Whether there are none.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The entry indices, ascending.
    pub fn iter(self) -> impl Iterator<Item = usize> {
        (0..16).filter(move |&i| self.contains(i))
    }

    pub(crate) fn insert(&mut self, i: usize) {
        if i < 16 {
            self.0 |= 1 << i;
        }
    }
}

/// Why a bundle proves nothing (or proves a lie). Indices are entry
/// indices in the bundle, 0-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProofError {
    /// A length runs past the end of the bundle.
    Truncated,
    /// The bundle's structure is wrong (what is wrong).
    Malformed(&'static str),
    /// The format version is not one this verifier reads.
    UnknownFormat(u8),
    /// The device value D is shorter than [`MIN_DEVICE_NONCE`] or longer
    /// than [`MAX_DEVICE_VALUE`] (its length): in the bundle, or the value
    /// the device passed ([`check_device_value`]).
    DeviceValueLength(usize),
    /// The bundle was made for another device value: replayed, or another
    /// device's.
    WrongNonce,
    /// The first request's nonce is not bound to the device value.
    Binding,
    /// Entry i's key is not pinned: answers from other keys are refused,
    /// so a relay cannot pad a bundle.
    UnknownKey(usize),
    /// Entry i's delegation or response signature does not verify.
    Signature(usize),
    /// Entry i's response answers another request (a swapped or
    /// transplanted answer: nonce, Merkle path or root).
    NotForRequest(usize),
    /// Entry i's response fails verification otherwise.
    Response(usize, VerifyError),
    /// Entry i's request is not chained from entry i−1's response.
    Link(usize),
    /// Two answers that cannot both be true (the earlier one's lower bound
    /// is past the later one's upper bound): one of their signers lied.
    Contradiction {
        /// The entry answered first.
        earlier: usize,
        /// The entry answered after it.
        later: usize,
        /// The majority's interval, when it meets the policy.
        majority: Option<Proven>,
    },
    /// Keys whose answers miss the majority hull or contradict each other:
    /// under the assumption they lie.
    Liar {
        /// Every entry signed by such a key.
        liars: EntrySet,
        /// The majority's interval, when it meets the policy.
        majority: Option<Proven>,
    },
    /// The bundle carries fewer than `2f + 1` distinct pinned voters (a
    /// relay that dropped answers, or servers that did not answer it):
    /// what is left may be the liars.
    TooFewKeys {
        /// Distinct voters in the bundle (that did not contradict
        /// themselves).
        present: usize,
        /// `2f + 1`.
        needed: usize,
        /// The assumption: at most `liars` of `voters` pinned lie.
        assumption: Assumption,
    },
    /// No time is held by `m − f` of the voters in the bundle (more than
    /// `f` lie), or fewer agree than the policy's quorum.
    NoQuorum {
        /// Voters that agree.
        agreeing: usize,
        /// Voters that must.
        needed: usize,
    },
    /// The proven interval is wider than the policy allows.
    TooWide {
        /// Its radius, µs.
        radius_us: u64,
    },
}

impl ProofError {
    /// Whether the bundle proves that a server lied (the CLI's exit 3).
    pub fn is_malfeasance(&self) -> bool {
        matches!(
            self,
            ProofError::Contradiction { .. } | ProofError::Liar { .. }
        )
    }
}

impl fmt::Display for ProofError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProofError::Truncated => write!(f, "the bundle is truncated"),
            ProofError::Malformed(what) => write!(f, "malformed bundle: {what}"),
            ProofError::UnknownFormat(v) => write!(f, "unknown bundle format version {v}"),
            ProofError::DeviceValueLength(n) => write!(
                f,
                "the device value is {n} bytes; it must be {MIN_DEVICE_NONCE} to \
                 {MAX_DEVICE_VALUE}, at least 128 bits of it unpredictable to the relay"
            ),
            ProofError::WrongNonce => write!(f, "the bundle was made for another device value"),
            ProofError::Binding => write!(f, "the chain does not start at the device value"),
            ProofError::UnknownKey(i) => write!(f, "entry {i}: the key is not pinned"),
            ProofError::Signature(i) => write!(f, "entry {i}: a signature does not verify"),
            ProofError::NotForRequest(i) => {
                write!(f, "entry {i}: the response answers another request")
            }
            ProofError::Response(i, e) => write!(f, "entry {i}: {e:?}"),
            ProofError::Link(i) => write!(
                f,
                "entry {i}: not chained from entry {}",
                i.saturating_sub(1)
            ),
            ProofError::Contradiction { earlier, later, .. } => write!(
                f,
                "entries {earlier} and {later} contradict each other: a server lied"
            ),
            ProofError::Liar { liars, .. } => {
                write!(f, "entries outside the majority (a server lied):")?;
                for i in liars.iter() {
                    write!(f, " {i}")?;
                }
                Ok(())
            }
            ProofError::TooFewKeys {
                present,
                needed,
                assumption,
            } => {
                write!(
                    f,
                    "the bundle carries {present} distinct pinned servers, {needed} needed: \
                     assuming at most {} of the {} pinned lie, a smaller set may be the liars",
                    assumption.liars, assumption.voters
                )
            }
            ProofError::NoQuorum { agreeing, needed } => {
                write!(f, "{agreeing} keys agree, {needed} needed")
            }
            ProofError::TooWide { radius_us } => {
                write!(f, "the proven interval is too wide (radius {radius_us} µs)")
            }
        }
    }
}
