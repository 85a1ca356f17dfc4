//! Nonce chaining and the causal-order check (RFC 10049's nonce chaining; RFC 10049's malfeasance report; the
//! measurement sequence of RFC 10049).
//!
//! ```text
//!  rand₀ ─▶ nonce₀ ─▶ request₀ ─▶ response₀
//!                                     │
//!  rand₁ ───────────── H(response₀ ‖ rand₁) ─▶ nonce₁ ─▶ request₁ ─▶ response₁ ─▶ …
//! ```
//!
//! Each link commits the next request to everything received before it, so
//! a report of the chain proves the order the responses arrived in. A chain
//! may cross versions: a link uses the rule of the request being built, never
//! that of the response it hashes.
//!
//! Nothing here draws random bytes: `rand` is always an argument.

use alloc::vec::Vec;

use crate::error::WireError;
pub use crate::link::{causal_violations, chain_nonce, ChainError, Exchange, MAX_NONCE_LEN};
use crate::profile::Profile;
use crate::proof::{check_device_value, Proof, ProofFormError};
use crate::report::Report;
use crate::scheme::{LongTermKey, PublicKey};
use crate::verify::{verify_response, SentRequest, Verified, VerifyError};

/// Why [`Measurement::record`] refused an exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordError {
    /// The request does not parse.
    Request(WireError),
    /// The request offers no version we have a profile for.
    UnknownProfile,
    /// The rand is not as long as the request's nonce.
    RandLength,
    /// The request's nonce is not the one this chain gives for `rand`.
    Nonce,
    /// The response failed verification.
    Verify(VerifyError),
}

/// A measurement sequence (the measurement sequence of RFC 10049): requests chained one to the next,
/// each exchange recorded once its response verifies.
///
/// The client draws a rand, asks [`Measurement::next_nonce`] for the nonce
/// of the request it builds (in the format of its offer's primary profile),
/// sends it, and hands the request, response and rand to
/// [`Measurement::record`]. An exchange that fails verification is not
/// recorded; the next request chains from the last recorded response.
#[derive(Clone, Debug, Default)]
pub struct Measurement {
    exchanges: Vec<Exchange>,
    /// The device value the chain starts from, if bound (a relayed proof).
    device: Option<Vec<u8>>,
}

impl Measurement {
    /// An empty sequence.
    pub fn new() -> Measurement {
        Measurement::default()
    }

    /// An empty sequence bound to a device's value D (a relayed proof, see
    /// [`crate::proof`]): the first nonce is `chain_nonce(profile, D, rand)`,
    /// D standing where a previous response would, so every request is
    /// provably made after D existed. The first exchange keeps its rand,
    /// which the device needs to check that. D is 16 to 64 bytes
    /// ([`crate::proof::check_device_value`]): a shorter one could be
    /// guessed, and its chain run before the device made it.
    pub fn bound(device: &[u8]) -> Result<Measurement, ProofFormError> {
        if check_device_value(device).is_err() {
            return Err(ProofFormError::DeviceLength(device.len()));
        }
        Ok(Measurement {
            exchanges: Vec::new(),
            device: Some(device.to_vec()),
        })
    }

    /// The device value this chain is bound to, if any.
    pub fn device(&self) -> Option<&[u8]> {
        self.device.as_deref()
    }

    /// The recorded exchanges, in the order received.
    pub fn exchanges(&self) -> &[Exchange] {
        &self.exchanges
    }

    /// The nonce for the next request, built in `profile`'s format. `rand`
    /// must be `profile.nonce_len` bytes; the first nonce is `rand` itself,
    /// or chained from D when the sequence is [`Measurement::bound`].
    pub fn next_nonce(
        &self,
        profile: &Profile,
        rand: &[u8],
        out: &mut [u8],
    ) -> Result<usize, ChainError> {
        let n = profile.nonce_len;
        if rand.len() != n {
            return Err(ChainError::RandLength { need: n });
        }
        let previous = match self.exchanges.last() {
            Some(prev) => Some(&prev.response[..]),
            None => self.device.as_deref(),
        };
        match previous {
            Some(previous) => chain_nonce(profile, previous, rand, out),
            None => {
                let out = out.get_mut(..n).ok_or(ChainError::NoRoom { need: n })?;
                out.copy_from_slice(rand);
                Ok(n)
            }
        }
    }

    /// Check that `request` carries the nonce this chain gives for `rand`,
    /// verify `response` against it and `public_key`, and record the
    /// exchange.
    pub fn record<'k>(
        &mut self,
        request: &[u8],
        response: &[u8],
        rand: &[u8],
        public_key: impl Into<PublicKey<'k>>,
    ) -> Result<&Exchange, RecordError> {
        let public_key = public_key.into();
        let sent = SentRequest::parse(request).map_err(RecordError::Request)?;
        let profile = sent.primary().ok_or(RecordError::UnknownProfile)?;
        let mut expect = [0u8; MAX_NONCE_LEN];
        let n = self
            .next_nonce(profile, rand, &mut expect)
            .map_err(|_| RecordError::RandLength)?;
        if sent.nonce != &expect[..n] {
            return Err(RecordError::Nonce);
        }
        let verified =
            verify_response(request, response, public_key).map_err(RecordError::Verify)?;
        let chained = !self.exchanges.is_empty() || self.device.is_some();
        let rand = chained.then(|| rand.to_vec());
        self.exchanges.push(Exchange {
            request: request.to_vec(),
            response: response.to_vec(),
            rand,
            public_key: LongTermKey::from(public_key),
            verified,
        });
        Ok(&self.exchanges[self.exchanges.len() - 1])
    }

    /// Pairs of recorded responses that contradict each other.
    pub fn contradictions(&self) -> Vec<(usize, usize)> {
        let verified: Vec<Verified> = self.exchanges.iter().map(|e| e.verified).collect();
        causal_violations(&verified)
    }

    /// The malfeasance report of this sequence.
    pub fn report(&self) -> Report {
        Report::from_exchanges(&self.exchanges)
    }

    /// The proof bundle of a bound sequence, for the device to verify.
    /// `None` when the sequence is not bound; an error when it does not fit
    /// a bundle (no exchange, or more than [`crate::proof::MAX_PROOF_ENTRIES`]).
    pub fn proof(&self) -> Option<Result<Proof, ProofFormError>> {
        let device = self.device.clone()?;
        Some(Proof::new(device, self.report()))
    }
}
