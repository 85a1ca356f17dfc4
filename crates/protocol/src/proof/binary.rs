//! The binary bundle, version 1 (docs/PROOF.md has it byte by byte):
//! a borrowed, length-checked view for the device and the writer for the
//! relay.
//!
//! ```text
//!  "RTPF" ver=1 n d D[d]  { keylen:2 key randlen:1 rand reqlen:2 stored:2 req[..stored] resplen:2 resp }×n
//! ```
//!
//! Every read is bounds-checked through [`Reader`], so no input panics: a
//! length past the end is [`ProofError::Truncated`], anything else wrong is
//! [`ProofError::Malformed`]. The request's zero tail (its padding, which
//! the RFC puts last) is not stored; [`EntryView::request_into`] puts it
//! back into the caller's buffer.

use alloc::vec::Vec;

use super::{
    ProofError, MAX_DEVICE_VALUE, MAX_PROOF_ENTRIES, MAX_PROOF_REQUEST, MIN_DEVICE_NONCE,
    PROOF_FORMAT_VERSION, PROOF_MAGIC,
};
use crate::link::MAX_NONCE_LEN;
use crate::scheme::PublicKey;

/// One entry of a bundle, borrowed from it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EntryView<'a> {
    /// The long-term public key (a length some scheme has).
    pub key: &'a [u8],
    /// The rand that chained this request (to D for the first entry).
    pub rand: &'a [u8],
    /// The request's length as sent.
    pub request_len: usize,
    /// The request's stored head; the rest, up to `request_len`, is zero.
    pub request_head: &'a [u8],
    /// The response as received.
    pub response: &'a [u8],
}

impl EntryView<'_> {
    /// Rebuild the request into `buf` and return it; `None` when `buf` is
    /// too short.
    pub fn request_into<'b>(&self, buf: &'b mut [u8]) -> Option<&'b [u8]> {
        let out = buf.get_mut(..self.request_len)?;
        let (head, tail) = out.split_at_mut(self.request_head.len());
        head.copy_from_slice(self.request_head);
        tail.fill(0);
        Some(out)
    }
}

/// A whole binary bundle, parsed and length-checked, borrowing its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProofView<'a> {
    device: &'a [u8],
    entries: [EntryView<'a>; MAX_PROOF_ENTRIES],
    len: usize,
}

impl<'a> ProofView<'a> {
    /// Check the structure of `bundle` (nothing cryptographic).
    pub fn parse(bundle: &'a [u8]) -> Result<ProofView<'a>, ProofError> {
        let mut r = Reader(bundle);
        if r.take(4)? != PROOF_MAGIC {
            return Err(ProofError::Malformed("magic"));
        }
        let version = r.u8()?;
        if version != PROOF_FORMAT_VERSION {
            return Err(ProofError::UnknownFormat(version));
        }
        let n = usize::from(r.u8()?);
        if n == 0 || n > MAX_PROOF_ENTRIES {
            return Err(ProofError::Malformed("entry count"));
        }
        // A short D is refused here, before any signature: a relay could
        // have prepared the bundle before the device made it.
        let d = usize::from(r.u8()?);
        if !(MIN_DEVICE_NONCE..=MAX_DEVICE_VALUE).contains(&d) {
            return Err(ProofError::DeviceValueLength(d));
        }
        let device = r.take(d)?;
        let mut entries = [EntryView::default(); MAX_PROOF_ENTRIES];
        for e in entries.iter_mut().take(n) {
            let key_len = usize::from(r.u16()?);
            let key = r.take(key_len)?;
            if PublicKey::from_bytes(key).is_none() {
                return Err(ProofError::Malformed("key length"));
            }
            let rand_len = usize::from(r.u8()?);
            let rand = r.take(rand_len)?;
            if rand.is_empty() || rand.len() > MAX_NONCE_LEN {
                return Err(ProofError::Malformed("rand length"));
            }
            let request_len = usize::from(r.u16()?);
            let stored = usize::from(r.u16()?);
            if request_len > MAX_PROOF_REQUEST {
                return Err(ProofError::Malformed("request length"));
            }
            if stored > request_len {
                return Err(ProofError::Malformed("stored length"));
            }
            let request_head = r.take(stored)?;
            // One encoding per request: the writer trims every zero.
            if request_head.last() == Some(&0) {
                return Err(ProofError::Malformed("stored request not trimmed"));
            }
            let response_len = usize::from(r.u16()?);
            let response = r.take(response_len)?;
            *e = EntryView {
                key,
                rand,
                request_len,
                request_head,
                response,
            };
        }
        if !r.0.is_empty() {
            return Err(ProofError::Malformed("trailing bytes"));
        }
        Ok(ProofView {
            device,
            entries,
            len: n,
        })
    }

    /// The device value D the bundle was made for.
    pub fn device(&self) -> &'a [u8] {
        self.device
    }

    /// The entries, in the order the responses arrived.
    pub fn entries(&self) -> &[EntryView<'a>] {
        &self.entries[..self.len]
    }
}

/// A bounds-checked cursor: every read that would pass the end is
/// `Truncated`, never a panic.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ProofError> {
        if n > self.0.len() {
            return Err(ProofError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, ProofError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, ProofError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
}

/// One entry as the writer takes it. Lengths are checked by the caller
/// ([`super::Proof::new`]), so the casts below cannot truncate.
pub(super) struct EntryOut<'a> {
    pub(super) key: &'a [u8],
    pub(super) rand: &'a [u8],
    pub(super) request: &'a [u8],
    pub(super) response: &'a [u8],
}

/// The bundle's bytes. Callers have checked every length against its field.
pub(super) fn write<'a>(
    device: &[u8],
    entries: impl ExactSizeIterator<Item = EntryOut<'a>>,
) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&PROOF_MAGIC);
    out.push(PROOF_FORMAT_VERSION);
    out.push(entries.len() as u8);
    out.push(device.len() as u8);
    out.extend_from_slice(device);
    for e in entries {
        out.extend_from_slice(&(e.key.len() as u16).to_le_bytes());
        out.extend_from_slice(e.key);
        out.push(e.rand.len() as u8);
        out.extend_from_slice(e.rand);
        let stored = e.request.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        out.extend_from_slice(&(e.request.len() as u16).to_le_bytes());
        out.extend_from_slice(&(stored as u16).to_le_bytes());
        out.extend_from_slice(&e.request[..stored]);
        out.extend_from_slice(&(e.response.len() as u16).to_le_bytes());
        out.extend_from_slice(e.response);
    }
    out
}
