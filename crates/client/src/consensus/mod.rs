//! Whom to believe: the one place that decides it, for `query --servers`,
//! `sync`, `watch`, relays and the Python package (the C library runs the
//! same protocol-crate rule without allocation).
//!
//! ```text
//!  list ──Electorate──▶ voters (servers sharing a key, address or operator are one)
//!  answers (server, offset interval) ──per voter──▶ intersection
//!     │ empty: the voter contradicts itself (proven by its own signatures)
//!     ▼
//!  gnomon_protocol::quorum::consensus under the Assumption (at most f of the n listed lie)
//!     ▼
//!  Consensus (the hull) ─▶ flagged: voters whose interval misses it
//! ```
//!
//! **The assumption is about the list.** At most `f` of the `n` voters of
//! the list lie ([`Assumption`]; the default is `max(1, ⌊(n − 1)/3⌋)`).
//! An attacker on the path decides which answers arrive, so no rule may
//! count only those: there is a consensus only when `2f + 1` distinct
//! voters answered, and it is the hull of the offsets held by `m − f` of
//! the `m` that did. Under the assumption it holds the true offset
//! whatever was dropped, delayed or forged, and only liars are flagged
//! (the argument is in `gnomon_protocol::quorum`, docs/CLIENT.md "Whom to
//! believe").
//!
//! A voter whose own answers do not overlap has lied, whatever anyone else
//! says: it is flagged, does not vote, and counts against `f`.

mod electorate;

use gnomon_protocol::quorum::{self, NoConsensus, Span};

pub use electorate::{Bond, Electorate, Identity};
pub use gnomon_protocol::quorum::Assumption;

/// One answer: a server (its position in the list the [`Electorate`] was
/// made from) and the interval of offsets (server − local, µs) the answer
/// vouches for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vouch {
    /// The server's position in the list.
    pub server: usize,
    /// Smallest offset, µs.
    pub low_us: i128,
    /// Largest offset, µs.
    pub high_us: i128,
}

/// The interval the servers prove, under the assumption.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consensus {
    /// Smallest offset (server − local), µs.
    pub low_us: i128,
    /// Largest offset, µs.
    pub high_us: i128,
    /// Servers whose interval meets it (ids as given, sorted).
    pub agreeing: Vec<usize>,
    /// Distinct voters that voted (answered and did not contradict
    /// themselves).
    pub answering: usize,
    /// Distinct voters among `agreeing`.
    pub agreeing_voters: usize,
}

impl Consensus {
    /// The middle of the interval.
    pub fn midpoint_us(&self) -> i128 {
        self.span().midpoint()
    }

    /// Half the width.
    pub fn radius_us(&self) -> i128 {
        self.span().radius()
    }

    fn span(&self) -> Span {
        Span {
            low: self.low_us,
            high: self.high_us,
        }
    }
}

/// Why a server is flagged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Flag {
    /// Its interval misses the consensus: under the assumption, it lies.
    OutsideConsensus,
    /// Its own answers (or those of the identities it is grouped with) do
    /// not overlap each other: it lied, proven.
    SelfContradiction,
}

/// The result over a set of answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Agreement {
    /// The assumption the rule ran under.
    pub assumption: Assumption,
    /// Distinct voters that answered and did not contradict themselves.
    pub answered: usize,
    /// The consensus, when there is one.
    pub consensus: Option<Consensus>,
    /// Why there is none.
    pub none: Option<NoConsensus>,
    /// Flagged servers, by id, with the reason (every id of a flagged
    /// voter).
    pub flagged: Vec<(usize, Flag)>,
    /// The stretches of offsets held by `m − f` voters, in order. More than
    /// one: the servers disagree, and the consensus spans them.
    pub regions: Vec<(i128, i128)>,
    /// Servers that are one voter (a shared key, address or operator;
    /// each group sorted, two ids or more), whether or not they answered.
    pub grouped: Vec<Vec<usize>>,
    /// Why each group of `grouped` is one voter ("shared address").
    pub grouped_because: Vec<String>,
}

impl Agreement {
    /// The assumption and who answered, in one sentence: "assumes at most
    /// 1 of the 5 listed servers lies; 3 answered".
    pub fn assumption_text(&self) -> String {
        describe_assumption(self.assumption, self.answered)
    }

    /// Why there is no consensus, in words that name the fix; `None` when
    /// there is one.
    pub fn why_none(&self) -> Option<String> {
        let a = self.assumption;
        Some(match self.none? {
            NoConsensus::TooFew { answered, needed } if !a.satisfiable() => format!(
                "no consensus: a list of {} server(s) cannot outvote {} liar(s), which needs \
                 {needed} answering; list more servers, or say how many may lie with \
                 --max-liars (0 trusts every one); {answered} answered",
                a.voters, a.liars
            ),
            NoConsensus::TooFew { answered, needed } => format!(
                "no consensus: {answered} distinct server(s) answered, {needed} needed to \
                 outvote {} liar(s): the silent ones may have been silenced on purpose",
                a.liars
            ),
            NoConsensus::NoCommonOffset { answered, cover } => format!(
                "no consensus: no offset is vouched for by {cover} of the {answered} servers \
                 that answered, so more than {} of them lie",
                a.liars
            ),
        })
    }

    /// Why the servers disagree, in words, when the offsets the rule
    /// accepts fall in more than one stretch (liars can make a second one
    /// beside a wide honest interval); `None` when they do not.
    pub fn disagreement(&self) -> Option<String> {
        let c = self.consensus.as_ref()?;
        if self.regions.len() < 2 {
            return None;
        }
        let parts: Vec<String> = self
            .regions
            .iter()
            .map(|&(lo, hi)| format!("[{}, {}]", secs(lo), secs(hi)))
            .collect();
        Some(format!(
            "the servers disagree: {} of the {} that answered vouch for offsets in {} s; \
             the consensus spans them all (±{} s), so some may be lying but which cannot be \
             told",
            c.answering - self.assumption.liars.min(c.answering),
            c.answering,
            parts.join(" and "),
            secs(c.radius_us()),
        ))
    }
}

/// "assumes at most f of the n listed servers lies; m answered".
pub fn describe_assumption(a: Assumption, answered: usize) -> String {
    let verb = if a.liars == 1 { "lies" } else { "lie" };
    format!(
        "assumes at most {} of the {} listed servers {verb}; {answered} answered, {} needed",
        a.liars,
        a.voters,
        a.needed()
    )
}

fn secs(us: i128) -> String {
    format!("{:.3}", us as f64 / 1e6)
}

/// A voter and what it vouches for.
struct Voter {
    /// Ids of its servers that answered, in the order first seen.
    servers: Vec<usize>,
    /// The intersection of its answers; `None` once it contradicts itself.
    span: Option<Span>,
}

/// Apply the quorum rule to `answers` (any number per server, in any
/// order) of the servers of `electorate`, under `assumption`. An answer
/// whose interval is empty (low > high), or whose server is not in the
/// electorate, is a contradiction of its own voter (or ignored when there
/// is none).
pub fn agree(answers: &[Vouch], electorate: &Electorate, assumption: Assumption) -> Agreement {
    let mut voters: Vec<Option<Voter>> = (0..electorate.voters()).map(|_| None).collect();
    for a in answers {
        let Some(v) = electorate.voter_of(a.server) else {
            continue;
        };
        let span = Span::new(a.low_us, a.high_us);
        match &mut voters[v] {
            Some(voter) => {
                if !voter.servers.contains(&a.server) {
                    voter.servers.push(a.server);
                }
                voter.span = voter.span.zip(span).and_then(|(x, y)| x.intersect(y));
            }
            slot @ None => {
                *slot = Some(Voter {
                    servers: vec![a.server],
                    span,
                })
            }
        }
    }
    let voters: Vec<Voter> = voters.into_iter().flatten().collect();
    let proven = voters.iter().filter(|v| v.span.is_none()).count();
    let rule = assumption.after_proven(proven);
    let spans = voters.iter().filter_map(|v| v.span);
    let answered = spans.clone().count();
    let hull = quorum::consensus(spans.clone(), rule);
    let mut flagged = Vec::new();
    let mut agreeing = Vec::new();
    let mut agreeing_voters = 0;
    for v in &voters {
        let flag = match (v.span, hull) {
            (None, _) => Some(Flag::SelfContradiction),
            (Some(s), Ok(h)) if quorum::outside(h, s) => Some(Flag::OutsideConsensus),
            (Some(_), Ok(_)) => {
                agreeing.extend(&v.servers);
                agreeing_voters += 1;
                None
            }
            (Some(_), Err(_)) => None,
        };
        if let Some(f) = flag {
            flagged.extend(v.servers.iter().map(|&s| (s, f)));
        }
    }
    flagged.sort_unstable();
    agreeing.sort_unstable();
    Agreement {
        assumption,
        answered,
        consensus: hull.ok().map(|h| Consensus {
            low_us: h.low,
            high_us: h.high,
            agreeing,
            answering: answered,
            agreeing_voters,
        }),
        none: hull.err(),
        flagged,
        regions: regions(spans, rule),
        grouped_because: electorate
            .grouped()
            .iter()
            .map(|g| electorate.why_grouped(g))
            .collect(),
        grouped: electorate.grouped(),
    }
}

/// The maximal stretches of offsets held by `m − f` of `spans`.
fn regions<I>(spans: I, rule: Assumption) -> Vec<(i128, i128)>
where
    I: Iterator<Item = Span> + Clone,
{
    let Ok(need) = quorum::required_cover(spans.clone().count(), rule) else {
        return Vec::new();
    };
    // +1 where an interval starts, −1 just after it ends (offsets are
    // whole µs, so "just after" is high + 1).
    let mut steps: Vec<(i128, i32)> = spans
        .flat_map(|s| [(s.low, 1), (s.high.saturating_add(1), -1)])
        .collect();
    steps.sort_unstable();
    let (mut out, mut count, mut start) = (Vec::new(), 0i32, None);
    let mut i = 0;
    while i < steps.len() {
        let x = steps[i].0;
        while i < steps.len() && steps[i].0 == x {
            count += steps[i].1;
            i += 1;
        }
        let inside = count >= 0 && count as usize >= need;
        match (inside, start) {
            (true, None) => start = Some(x),
            (false, Some(s)) => {
                out.push((s, x - 1));
                start = None;
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests;
