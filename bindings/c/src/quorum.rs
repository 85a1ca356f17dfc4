//! The quorum rule on Rust slices, without allocation: answers merged per
//! distinct key, then `gnomon_protocol::quorum` over the keys that vote,
//! and the sentence that states the assumption (or why there is no
//! consensus). What a `gnomon_consensus` call decides; the C shim
//! (`any_key/consensus.rs`) turns its arguments into the answers read
//! here.
#![forbid(unsafe_code)]

use core::fmt;

use gnomon_protocol::quorum::{self, Assumption, NoConsensus, Span};

use crate::error::GnomonError;
use crate::message::{text, write_message, MESSAGE_LEN};

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
