//! The library's logic on Rust slices: building requests, verifying
//! responses, chained nonces, keys from text and the chain check (the
//! quorum rule is `quorum.rs`, the message buffer `message.rs`). No
//! pointers, no allocation, no `std`; the C shim (`any_key.rs`, `ffi.rs`)
//! turns C arguments into the slices these functions take.
#![forbid(unsafe_code)]

use base64::Engine as _;
use gnomon_protocol::chain::MAX_NONCE_LEN;
use gnomon_protocol::request::{srv_for, DEFAULT_REQUEST_SIZE};
use gnomon_protocol::scheme::{PublicKey, Scheme, MAX_PUBLIC};
use gnomon_protocol::verify::SentRequest;
use gnomon_protocol::{
    chain_nonce, verify_response, Offer, Profile, Verified, VerifyError, Version,
};

use crate::error::{of_verify, GnomonError};
// Where the messages were written before they had a module of their own
// (tests/messages.rs reads them here).
pub use crate::message::{text, write_message, ELLIPSIS, MESSAGE_LEN};

/// Size of every request libgnomon builds: 1024 bytes, which every known
/// server accepts and which leaves room for any response (a server never
/// answers with more than it was sent).
pub const REQUEST_SIZE: usize = DEFAULT_REQUEST_SIZE;
/// Longest input accepted: no Roughtime message is longer than a UDP
/// datagram.
pub const MAX_INPUT: usize = 65536;
/// Most exchanges one chain check takes.
pub const MAX_CHAIN: usize = 1024;

/// The profile a C caller means by a version number: the wire value
/// (1 for RFC 10049, 0x80000000 + n for draft n, 0x8000000c for drafts
/// 12–19 whose newest row is taken) or Google's 0xb2d98825.
pub fn profile_for(version: u32) -> Result<&'static Profile, GnomonError> {
    if version == Version::GOOGLE.0 {
        return Ok(Profile::google());
    }
    Profile::for_wire(Version(version), true).ok_or(GnomonError::GnomonErrUnknownVersion)
}

/// Nonce length of `version`'s requests.
pub fn nonce_len(version: u32) -> Result<usize, GnomonError> {
    Ok(profile_for(version)?.nonce_len)
}

/// Longest key text `parse_key_any` takes: an ML-DSA-44 key is 1752
/// characters of base64 or 2624 hex digits, with room for whitespace.
pub const MAX_KEY_TEXT: usize = 4096;

/// A long-term public key of some scheme, told by its length (32:
/// Ed25519, 1312: ML-DSA-44); `GnomonErrKey` for any other length.
pub fn public_key(bytes: &[u8]) -> Result<PublicKey<'_>, GnomonError> {
    PublicKey::from_bytes(bytes).ok_or(GnomonError::GnomonErrKey)
}

/// Build a `REQUEST_SIZE`-byte request for `version` into `out`; with a
/// key, SRV names it where the version defines SRV (SRV hashes the whole
/// key, whatever its scheme).
pub fn build(
    version: u32,
    nonce: &[u8],
    key: Option<PublicKey<'_>>,
    out: &mut [u8],
) -> Result<usize, GnomonError> {
    let profile = profile_for(version)?;
    if nonce.len() != profile.nonce_len {
        return Err(GnomonError::GnomonErrNonceLength);
    }
    if out.len() < REQUEST_SIZE {
        return Err(GnomonError::GnomonErrBufferTooSmall);
    }
    let srv = key.map(|k| srv_for(k.bytes()));
    Offer::single(profile)
        .build(nonce, srv.as_ref(), REQUEST_SIZE, out)
        // Lengths were checked above; a build error here is a bug.
        .map_err(|_| GnomonError::GnomonErrInternal)
}

/// The nonce of the next request of a chain, built in `version`'s format:
/// derived from the previous response as received and a fresh `rand` as
/// long as the nonce.
pub fn next_nonce(
    version: u32,
    previous_response: &[u8],
    rand: &[u8],
    out: &mut [u8],
) -> Result<usize, GnomonError> {
    let profile = profile_for(version)?;
    if rand.len() != profile.nonce_len {
        return Err(GnomonError::GnomonErrNonceLength);
    }
    chain_nonce(profile, previous_response, rand, out)
        .map_err(|_| GnomonError::GnomonErrBufferTooSmall)
}

/// A verified response, or the code and a sentence saying why not.
pub fn verify(
    request: &[u8],
    response: &[u8],
    key: PublicKey<'_>,
    message: &mut [u8; MESSAGE_LEN],
) -> Result<Verified, GnomonError> {
    verify_response(request, response, key).map_err(|e| verify_failure(&e, None, message))
}

/// The code of a verification failure, with its sentence (naming the
/// exchange of a chain, if given) in `message`.
pub fn verify_failure(
    e: &VerifyError,
    exchange: Option<usize>,
    message: &mut [u8; MESSAGE_LEN],
) -> GnomonError {
    let code = of_verify(e);
    match exchange {
        Some(i) => write_message(
            message,
            format_args!("exchange {i}: {} ({e:?})", text(code)),
        ),
        None => write_message(message, format_args!("{} ({e:?})", text(code))),
    }
    code
}

/// An Ed25519 long-term public key in base64 (padded or not) or 64 hex
/// digits; any other key, ML-DSA-44's included, is `GnomonErrKey`.
pub fn parse_key(text: &[u8]) -> Result<[u8; 32], GnomonError> {
    let mut buf = [0u8; MAX_PUBLIC];
    let n = parse_key_any(text, &mut buf)?;
    buf[..n].try_into().map_err(|_| GnomonError::GnomonErrKey)
}

/// A long-term public key of any scheme in base64 (padded or not) or hex,
/// decoded into `out`; its length (32 or 1312). Hex is tried first: 64
/// hex digits are also valid base64, of 48 bytes.
pub fn parse_key_any(text: &[u8], out: &mut [u8; MAX_PUBLIC]) -> Result<usize, GnomonError> {
    let text = text.trim_ascii();
    let is_key_len = |n: usize| Scheme::by_public_len(n).is_some();
    let hex_len = text.len() / 2;
    if text.len().is_multiple_of(2) && is_key_len(hex_len) && text.iter().all(u8::is_ascii_hexdigit)
    {
        for (k, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
            *k = (hex(pair[0]) << 4) | hex(pair[1]);
        }
        return Ok(hex_len);
    }
    // Room for one byte too many, so a longer key is seen as too long.
    let mut buf = [0u8; MAX_PUBLIC + 1];
    let engines = [
        base64::engine::general_purpose::STANDARD,
        base64::engine::general_purpose::STANDARD_NO_PAD,
    ];
    for engine in engines {
        if let Ok(n) = engine.decode_slice(text, &mut buf) {
            if is_key_len(n) {
                out[..n].copy_from_slice(&buf[..n]);
                return Ok(n);
            }
        }
    }
    Err(GnomonError::GnomonErrKey)
}

fn hex(d: u8) -> u8 {
    match d {
        b'0'..=b'9' => d - b'0',
        b'a'..=b'f' => d - b'a' + 10,
        _ => d - b'A' + 10,
    }
}

/// One exchange of a chain, as the caller recorded it.
#[derive(Clone, Copy, Debug)]
pub struct Link<'a> {
    /// The request as sent.
    pub request: &'a [u8],
    /// The response as received.
    pub response: &'a [u8],
    /// The rand the request's nonce was chained with (ignored for the first).
    pub rand: &'a [u8],
    /// The server's long-term public key.
    pub key: PublicKey<'a>,
}

/// Where a chain check stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainFailure {
    /// Why.
    pub code: GnomonError,
    /// The exchange that failed (the later one of a contradicting pair).
    pub index: usize,
    /// For a contradiction, the earlier exchange; otherwise `index`.
    pub other: usize,
}

/// Check a measurement sequence (the measurement sequence of RFC 10049): every response verifies
/// against its request and key, every request after the first carries the
/// nonce chained from the previous response and its rand, and no earlier
/// response's earliest time is after a later one's latest. `link(i)` gives
/// exchange `i` (or the code of why its arguments are unusable). Stops at
/// the first failure, in order of exchanges.
pub fn check_chain<'a>(
    count: usize,
    mut link: impl FnMut(usize) -> Result<Link<'a>, GnomonError>,
    message: &mut [u8; MESSAGE_LEN],
) -> Result<(), ChainFailure> {
    let fail = |code, index, other| ChainFailure { code, index, other };
    if count == 0 {
        return Err(fail(GnomonError::GnomonErrEmpty, 0, 0));
    }
    if count > MAX_CHAIN {
        return Err(fail(GnomonError::GnomonErrTooLong, 0, 0));
    }
    let mut previous: Option<&'a [u8]> = None;
    // The latest "earliest time" seen so far, and whose it was: a later
    // response whose latest time is before it contradicts that one.
    let mut max_earliest: Option<(i128, usize)> = None;
    for i in 0..count {
        let l = link(i).map_err(|code| fail(code, i, i))?;
        let sent = SentRequest::parse(l.request).map_err(|e| {
            write_message(message, format_args!("exchange {i}: request: {e:?}"));
            fail(GnomonError::GnomonErrRequest, i, i)
        })?;
        if let Some(prev) = previous {
            let profile = sent
                .primary()
                .ok_or(fail(GnomonError::GnomonErrVersion, i, i))?;
            if l.rand.len() != profile.nonce_len {
                write_message(
                    message,
                    format_args!(
                        "exchange {i}: rand is {} bytes, {} needs {}",
                        l.rand.len(),
                        profile.name,
                        profile.nonce_len
                    ),
                );
                return Err(fail(GnomonError::GnomonErrNonceLength, i, i));
            }
            let mut expect = [0u8; MAX_NONCE_LEN];
            let n = chain_nonce(profile, prev, l.rand, &mut expect)
                .map_err(|_| fail(GnomonError::GnomonErrInternal, i, i))?;
            if sent.nonce != &expect[..n] {
                write_message(
                    message,
                    format_args!(
                        "exchange {i}: the nonce is not chained from exchange {}",
                        i - 1
                    ),
                );
                return Err(fail(GnomonError::GnomonErrChainNonce, i, i));
            }
        }
        let v = verify_response(l.request, l.response, l.key)
            .map_err(|e| fail(verify_failure(&e, Some(i), message), i, i))?;
        if let Some((earliest, j)) = max_earliest {
            if earliest > v.latest_us() {
                write_message(
                    message,
                    format_args!(
                        "exchange {j} says the time was at least {earliest} µs, \
                         exchange {i} (received later) at most {} µs",
                        v.latest_us()
                    ),
                );
                return Err(fail(GnomonError::GnomonErrCausality, i, j));
            }
        }
        if max_earliest.is_none_or(|(e, _)| v.earliest_us() > e) {
            max_earliest = Some((v.earliest_us(), i));
        }
        previous = Some(l.response);
    }
    Ok(())
}
