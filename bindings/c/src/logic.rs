//! The library's logic on Rust slices: building requests, verifying
//! responses, chained nonces, the chain check and the quorum rule. No
//! pointers, no allocation, no `std`; the FFI shim (`ffi.rs`) turns C
//! arguments into the slices these functions take.
#![forbid(unsafe_code)]

use core::fmt::{self, Write as _};

use base64::Engine as _;
use gnomon_protocol::chain::MAX_NONCE_LEN;
use gnomon_protocol::quorum::{self, Assumption, NoConsensus, Span};
use gnomon_protocol::request::{srv_for, DEFAULT_REQUEST_SIZE};
use gnomon_protocol::scheme::{PublicKey, Scheme, MAX_PUBLIC};
use gnomon_protocol::verify::SentRequest;
use gnomon_protocol::{
    chain_nonce, verify_response, Offer, Profile, Verified, VerifyError, Version,
};

use crate::error::{of_verify, GnomonError};

/// Size of every request libgnomon builds: 1024 bytes, which every known
/// server accepts and which leaves room for any response (a server never
/// answers with more than it was sent).
pub const REQUEST_SIZE: usize = DEFAULT_REQUEST_SIZE;
/// Longest input accepted: no Roughtime message is longer than a UDP
/// datagram.
pub const MAX_INPUT: usize = 65536;
/// Most exchanges one chain check takes.
pub const MAX_CHAIN: usize = 1024;
/// Bytes of the message field, NUL included: room for the longest
/// sentence libgnomon writes (tests/messages.rs holds each to it); only
/// text the caller supplied, such as a host name, can make one longer.
pub const MESSAGE_LEN: usize = 256;

/// What ends a message that had to be cut.
pub const ELLIPSIS: &str = "\u{2026}";

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

/// The code's sentence without its NUL.
pub fn text(code: GnomonError) -> &'static str {
    code.text().trim_end_matches('\0')
}

/// Write `args` into `out` as a NUL-terminated string. One too long for
/// the buffer ends in [`ELLIPSIS`], after a whole word where one ends
/// close enough to the cut, and never inside a character.
pub fn write_message(out: &mut [u8; MESSAGE_LEN], args: fmt::Arguments<'_>) {
    struct Cut<'b> {
        buf: &'b mut [u8; MESSAGE_LEN],
        len: usize,
        cut: bool,
    }
    impl fmt::Write for Cut<'_> {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            for c in s.chars() {
                let mut utf8 = [0u8; 4];
                let bytes = c.encode_utf8(&mut utf8).as_bytes();
                // Keep one byte for the NUL.
                if self.len + bytes.len() >= MESSAGE_LEN {
                    self.cut = true;
                    return Err(fmt::Error);
                }
                self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
                self.len += bytes.len();
            }
            Ok(())
        }
    }
    out.fill(0);
    let mut cut = Cut {
        buf: out,
        len: 0,
        cut: false,
    };
    // A cut message is still a message.
    let _ = cut.write_fmt(args);
    if cut.cut {
        let len = cut.len;
        end_with_ellipsis(out, len);
    }
}

/// Further back than this, a word boundary would lose more of the message
/// than a word cut in two does.
const LONGEST_WORD: usize = 32;

/// Shorten the `len` bytes of text in `buf` to make room for the ellipsis
/// and the NUL, and append the ellipsis.
fn end_with_ellipsis(buf: &mut [u8; MESSAGE_LEN], len: usize) {
    let room = MESSAGE_LEN - 1 - ELLIPSIS.len();
    let mut end = len.min(room);
    // buf[end] starts a character (or is past the text): no UTF-8
    // sequence is split.
    while end > 0 && buf[end] & 0xc0 == 0x80 {
        end -= 1;
    }
    // Unless the cut already falls between two words, go back to the last
    // space: half a word can read as another word.
    if end < len && buf[end] != b' ' {
        if let Some(space) = buf[..end].iter().rposition(|&b| b == b' ') {
            if end - space <= LONGEST_WORD {
                end = space;
            }
        }
    }
    while end > 0 && matches!(buf[end - 1], b' ' | b',' | b';' | b':' | b'(') {
        end -= 1;
    }
    buf[end..end + ELLIPSIS.len()].copy_from_slice(ELLIPSIS.as_bytes());
    buf[end + ELLIPSIS.len()..].fill(0);
}

/// Most answers one `consensus` call takes. What it keeps per distinct
/// key lives on the stack (no allocation), so this bounds the stack it
/// uses: about 8 KB on a 64-bit machine, 6 KB on a 32-bit one.
pub const MAX_ANSWERS: usize = 256;

/// `max_liars` for "the default for the list": at most
/// `max(1, ⌊(listed − 1)/3⌋)` of the listed servers lie
/// ([`Assumption::for_list`], what `gnomon sync` assumes).
pub const MAX_LIARS_AUTO: usize = usize::MAX;

/// One answer, as the caller gives it: the server's long-term key and the
/// offsets (server − local, µs) it vouches for.
#[derive(Clone, Copy, Debug)]
pub struct Answer<'a> {
    /// The server's long-term public key, of either length: votes count
    /// per distinct key.
    pub key: &'a [u8],
    /// Smallest offset.
    pub low_us: i64,
    /// Largest offset.
    pub high_us: i64,
}

/// What the rule says of one answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Its key's interval meets the consensus.
    Agrees,
    /// Its key's interval misses the consensus: under the assumption, it lies.
    Outside,
    /// Its key's answers do not overlap each other: it lied, proven.
    SelfContradiction,
    /// There is no consensus to meet or miss.
    NoConsensus,
}

/// The rule's result over a set of answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tally {
    /// The assumption the caller's list was judged under: at most
    /// `liars` of its `voters` (the `listed` servers) lie.
    pub assumption: Assumption,
    /// The hull of every offset held by `m − f` of the `m` voting keys,
    /// when `m ≥ 2f + 1` (`f` less the keys that proved themselves
    /// liars).
    pub hull: Option<Span>,
    /// Why there is no hull.
    pub none: Option<NoConsensus>,
    /// Distinct keys that vote (answered and did not contradict themselves).
    pub voting_keys: usize,
    /// Voting keys whose interval meets the hull.
    pub agreeing_keys: usize,
    /// Voting keys whose interval misses it.
    pub outside_keys: usize,
    /// Keys whose own answers do not overlap (they do not vote, and count
    /// against `f`).
    pub contradicting_keys: usize,
    /// Separate stretches held by `m − f` voting keys; more than one: the
    /// servers disagree.
    pub regions: usize,
    /// At least the quorum of distinct keys agrees on a consensus.
    pub quorum_met: bool,
}

/// The distinct keys met so far and the intersection of each one's
/// answers. An intersection with `low > high` is empty: that key
/// contradicted itself (intersecting more keeps it empty).
struct Keys<'a> {
    keys: [&'a [u8]; MAX_ANSWERS],
    spans: [(i64, i64); MAX_ANSWERS],
    len: usize,
}

impl<'a> Keys<'a> {
    fn find(&self, key: &[u8]) -> Option<usize> {
        self.keys[..self.len].iter().position(|k| *k == key)
    }

    /// The interval of key `i`, `None` when it contradicted itself.
    fn span(&self, i: usize) -> Option<Span> {
        let (low, high) = self.spans[i];
        Span::new(low.into(), high.into())
    }

    /// The intervals of the keys that vote.
    fn voting(&self) -> impl Iterator<Item = Span> + Clone + '_ {
        (0..self.len).filter_map(|i| self.span(i))
    }
}

/// The quorum rule of `gnomon_client::consensus::agree` (and so of
/// `gnomon sync` and `gnomon query --servers`) without allocation, one
/// voter per distinct key: answers merged per key (their intersection; an
/// empty one is a key that contradicted itself, does not vote and is one
/// of the `f`), then `gnomon_protocol::quorum` over the keys that vote,
/// under "at most `max_liars` of the `listed` servers lie"
/// ([`MAX_LIARS_AUTO`]: [`Assumption::for_list`]). `listed` is every
/// distinct server of the caller's list, answered or not: an attacker on
/// the path picks who answers, so the rule never counts the answers as
/// the electorate. `answer(i)` gives answer `i` (or why its arguments are
/// unusable); `verdict(i, v)` is told the verdict of each answer, and only
/// once every answer was read and found usable. A failure names the
/// answer in `message`; success states the assumption there, or why there
/// is no consensus.
pub fn consensus<'a>(
    count: usize,
    mut answer: impl FnMut(usize) -> Result<Answer<'a>, GnomonError>,
    listed: usize,
    max_liars: usize,
    quorum: usize,
    mut verdict: impl FnMut(usize, Verdict),
    message: &mut [u8; MESSAGE_LEN],
) -> Result<Tally, GnomonError> {
    if count == 0 {
        return Err(GnomonError::GnomonErrEmpty);
    }
    if count > MAX_ANSWERS {
        write_message(
            message,
            format_args!("{count} answers; at most {MAX_ANSWERS} are taken"),
        );
        return Err(GnomonError::GnomonErrTooLong);
    }
    if quorum == 0 {
        write_message(
            message,
            format_args!("a quorum of 0: at least one distinct key must agree"),
        );
        return Err(GnomonError::GnomonErrArgument);
    }
    if listed == 0 {
        write_message(
            message,
            format_args!(
                "listed is 0: pass how many distinct servers your list has, \
                 answered or not"
            ),
        );
        return Err(GnomonError::GnomonErrArgument);
    }
    let some_key = match answer(0) {
        Ok(a) => a.key,
        Err(e) => return Err(unusable(message, 0, e)),
    };
    let mut keys = Keys {
        keys: [some_key; MAX_ANSWERS],
        spans: [(0, 0); MAX_ANSWERS],
        len: 0,
    };
    for i in 0..count {
        let a = answer(i).map_err(|e| unusable(message, i, e))?;
        if a.low_us > a.high_us {
            write_message(
                message,
                format_args!(
                    "answer {i}: low_us {} is above high_us {}",
                    a.low_us, a.high_us
                ),
            );
            return Err(GnomonError::GnomonErrArgument);
        }
        match keys.find(a.key) {
            Some(k) => {
                let (low, high) = &mut keys.spans[k];
                *low = (*low).max(a.low_us);
                *high = (*high).min(a.high_us);
            }
            None => {
                keys.keys[keys.len] = a.key;
                keys.spans[keys.len] = (a.low_us, a.high_us);
                keys.len += 1;
            }
        }
    }
    if keys.len > listed {
        write_message(
            message,
            format_args!(
                "the answers carry {} distinct keys, more than the {listed} listed: \
                 listed counts every distinct server of your list, answered or not",
                keys.len
            ),
        );
        return Err(GnomonError::GnomonErrArgument);
    }
    let assumption = if max_liars == MAX_LIARS_AUTO {
        Assumption::for_list(listed)
    } else {
        Assumption::new(listed, max_liars)
    };
    let contradicting_keys = (0..keys.len).filter(|&k| keys.span(k).is_none()).count();
    let rule = assumption.after_proven(contradicting_keys);
    let decided = quorum::consensus(keys.voting(), rule);
    let hull = decided.ok();
    let regions = quorum::regions(keys.voting(), rule);
    let judge = |k: usize| match (keys.span(k), hull) {
        (None, _) => Verdict::SelfContradiction,
        (Some(_), None) => Verdict::NoConsensus,
        (Some(s), Some(h)) if quorum::outside(h, s) => Verdict::Outside,
        (Some(_), Some(_)) => Verdict::Agrees,
    };
    let of = |v| (0..keys.len).filter(|&k| judge(k) == v).count();
    let agreeing_keys = of(Verdict::Agrees);
    let tally = Tally {
        assumption,
        hull,
        none: decided.err(),
        voting_keys: keys.voting().count(),
        agreeing_keys,
        outside_keys: of(Verdict::Outside),
        contradicting_keys,
        regions,
        quorum_met: hull.is_some() && agreeing_keys >= quorum,
    };
    for i in 0..count {
        let a = answer(i).map_err(|e| unusable(message, i, e))?;
        // Every key was recorded by the first pass.
        let k = keys.find(a.key).ok_or(GnomonError::GnomonErrInternal)?;
        verdict(i, judge(k));
    }
    describe(&tally, quorum, message);
    Ok(tally)
}

fn unusable(message: &mut [u8; MESSAGE_LEN], i: usize, e: GnomonError) -> GnomonError {
    write_message(message, format_args!("answer {i}: {}", text(e)));
    e
}

/// "assumes at most f of the n listed servers lie; m answered, 2f + 1
/// needed": `gnomon_client::describe_assumption`'s sentence.
struct Assumes(Assumption, usize);

impl fmt::Display for Assumes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Assumes(a, answered) = *self;
        let verb = if a.liars == 1 { "lies" } else { "lie" };
        write!(
            f,
            "assumes at most {} of the {} listed servers {verb}; {answered} answered, {} needed",
            a.liars,
            a.voters,
            a.needed()
        )
    }
}

/// The sentence of a computed consensus: the assumption when there is a
/// consensus, the quorum agrees and the servers do not disagree;
/// otherwise which of those is not so (and the assumption), or why there
/// is no consensus.
fn describe(t: &Tally, quorum: usize, message: &mut [u8; MESSAGE_LEN]) {
    let a = t.assumption;
    let assumes = Assumes(a, t.voting_keys);
    let proven = t.contradicting_keys;
    let rule = a.after_proven(proven);
    let Some(hull) = t.hull else {
        return match t.none {
            Some(NoConsensus::TooFew { answered, .. }) if !a.satisfiable() => write_message(
                message,
                format_args!(
                    "no consensus: a list of {} server(s) cannot outvote {} liar(s), which \
                     needs {} answering; list more servers, or pass a lower max_liars (0 \
                     trusts every one); {answered} answered",
                    a.voters,
                    a.liars,
                    a.needed()
                ),
            ),
            Some(NoConsensus::TooFew { answered, needed }) => write_message(
                message,
                format_args!(
                    "no consensus: too few answered, {answered} of the {} listed servers \
                     ({needed} needed to outvote {} liar(s)): the silent ones may have been \
                     silenced on purpose{}",
                    a.voters,
                    rule.liars,
                    Proven(proven)
                ),
            ),
            Some(NoConsensus::NoCommonOffset { answered, cover }) => write_message(
                message,
                format_args!(
                    "no consensus: no offset is held by {cover} of the {answered} keys that \
                     answered, so more than {} of the {} listed servers lie{}",
                    a.liars,
                    a.voters,
                    Proven(proven)
                ),
            ),
            // A hull or a reason: the rule gives one of the two.
            None => write_message(message, format_args!("no consensus; {assumes}")),
        };
    };
    if !t.quorum_met {
        write_message(
            message,
            format_args!(
                "{} distinct key(s) agree, fewer than the quorum of {quorum}; {assumes}",
                t.agreeing_keys
            ),
        );
    } else if t.regions > 1 {
        // A consensus needs 2f + 1 voting keys: no underflow.
        let cover = t.voting_keys.saturating_sub(rule.liars);
        write_message(
            message,
            format_args!(
                "the servers disagree: {cover} of the {} keys hold {} separate stretches; \
                 the consensus spans them (±{} s); {assumes}",
                t.voting_keys,
                t.regions,
                Seconds(hull.radius())
            ),
        );
    } else {
        write_message(message, format_args!("{assumes}"));
    }
}

/// "; k key(s) contradicted themselves" when some did (they are among
/// the liars the assumption allows).
struct Proven(usize);

impl fmt::Display for Proven {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => Ok(()),
            k => write!(f, "; {k} key(s) contradicted themselves"),
        }
    }
}

/// Microseconds written as seconds with three decimals.
struct Seconds(i128);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let ms = self.0.unsigned_abs() / 1000;
        write!(f, "{sign}{}.{:03}", ms / 1000, ms % 1000)
    }
}
