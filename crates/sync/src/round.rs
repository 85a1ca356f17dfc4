//! One round: the client's measurement sequence over the servers asked,
//! then the quorum rule over every voter that answered, under the whole
//! list's assumption (at most f of its n voters lie): servers left out of
//! the round, backing off or silenced, count as silent, never as absent
//! from the list.
//!
//! Servers marked as lying in an earlier round still vote. Taking a vote
//! away on the strength of history would make the consensus rest on every
//! earlier round's assumption too, and a round in which liars once held a
//! majority would keep honest servers out for good. A liar that is still
//! voting can at worst widen the consensus, which the radius limits then
//! refuse; it can never move it while fewer than half of the keys lie.
//! The marks only decide what is reported again and what `--status`
//! shows; a marked server is cleared once its interval meets the
//! consensus again.

use std::time::Instant;

use gnomon_client::{
    Agreement, Assumption, Client, Consensus, Flag, Plan, QueryError, Selection, Sequence, Server,
};
use gnomon_protocol::Report;

use crate::clock::Recorder;
use crate::decision::Evidence;

/// What a round found. Server numbers are indices into the list.
#[derive(Clone, Debug)]
pub struct Round {
    /// Servers asked.
    pub asked: Vec<usize>,
    /// Servers with no verified answer, and the last reason.
    pub unreachable: Vec<(usize, String)>,
    /// The consensus of every voter that answered (before the quorum).
    pub consensus: Option<Consensus>,
    /// The assumption it ran under, and how many voters answered.
    pub assumption: Assumption,
    /// Distinct voters that answered (and did not contradict themselves).
    pub answered: usize,
    /// Why there is no consensus, in words; `None` when there is one.
    pub why_none: Option<String>,
    /// Whether at least the quorum (distinct keys) agrees.
    pub quorum_met: bool,
    /// Whether the consensus is wider than `max-radius`: then it is not
    /// used for the clock (no step, no sample for chrony), whatever the
    /// quorum; the floor, a lower bound only, still rises.
    pub wide: bool,
    /// Servers not marked before that the rule flags now, and why.
    pub outside: Vec<(usize, Flag)>,
    /// Servers marked before that the rule flags again.
    pub still_out: Vec<usize>,
    /// Servers marked before whose answers meet the consensus again.
    pub rejoined: Vec<usize>,
    /// Why the servers disagree, when the offsets the rule accepts fall
    /// in more than one stretch.
    pub disagreement: Option<String>,
    /// Servers that are one voter (a shared key, address or operator).
    pub grouped: Vec<Vec<usize>>,
    /// Why each group is one voter.
    pub grouped_because: Vec<String>,
    /// Local clock (as measured against) when the round ended, Unix µs.
    pub local_end_us: i128,
    /// When the round ended, monotonic.
    pub ended: Instant,
    /// When the round ended, CLOCK_BOOTTIME ns (read right after `ended`:
    /// the now socket's anchor counts from it how late it was pinned,
    /// crate::now).
    pub ended_boot_ns: i128,
    /// The report, when the chain proves a contradiction.
    pub report: Option<Report>,
    /// The whole chain, in the report format.
    pub chain: Report,
    /// The sequence as the client returned it (server numbers are
    /// positions in `asked`).
    pub sequence: Sequence,
}

impl Round {
    /// The consensus when the clock may follow it: the quorum agrees and
    /// it is no wider than `max-radius`.
    pub fn usable(&self) -> Option<&Consensus> {
        self.consensus
            .as_ref()
            .filter(|_| self.quorum_met && !self.wide)
    }

    /// The consensus as the decisions take it.
    pub fn evidence(&self) -> Option<Evidence> {
        self.consensus.as_ref().map(|c| Evidence {
            low_us: c.low_us,
            high_us: c.high_us,
            agreeing: c.agreeing_voters,
        })
    }

    /// The local clock at `instant`, as this round measured it.
    pub fn local_at(&self, instant: Instant) -> i128 {
        self.local_end_us + instant.saturating_duration_since(self.ended).as_micros() as i128
    }
}

/// What a round is judged by.
#[derive(Clone, Copy, Debug)]
pub struct Bar {
    /// The whole list's assumption.
    pub assumption: Assumption,
    /// Distinct voters that must agree.
    pub quorum: usize,
    /// The widest consensus that may steer the clock, µs.
    pub max_radius_us: i128,
}

/// Ask `ask` (indices into `servers`) twice over, chained; `marked` says
/// who was flagged in an earlier round.
pub fn run(
    config: gnomon_client::Config,
    servers: &[Server],
    ask: &[usize],
    marked: &dyn Fn(usize) -> bool,
    bar: Bar,
) -> Result<Round, QueryError> {
    let Bar {
        assumption,
        quorum,
        max_radius_us,
    } = bar;
    let subset: Vec<Server> = ask.iter().map(|&i| servers[i].clone()).collect();
    let recorder = Recorder::default();
    let mut client = Client::new(config).with_clock(recorder.clone());
    let plan = Plan {
        selection: Selection::All,
        passes: 2,
        assumption: Some(assumption),
    };
    let sequence = client.measure(&subset, &plan)?;
    let ended = Instant::now();
    let ended_boot_ns = crate::now::boot_ns();
    let local_end_us = recorder.local_at(ended);

    // The sequence's own agreement, with ids as list indices.
    let agreement = relabel(&sequence.agreement, ask);
    let Vote {
        agreement,
        still_out,
        rejoined,
    } = vote(agreement, marked);
    let mut unreachable = Vec::new();
    for (pos, &i) in ask.iter().enumerate() {
        let mine: Vec<_> = sequence
            .entries
            .iter()
            .filter(|e| e.server == pos)
            .collect();
        if mine.iter().all(|e| e.result.is_err()) {
            let why = mine
                .iter()
                .rev()
                .find_map(|e| e.result.as_ref().err().map(|e| e.to_string()))
                .unwrap_or_else(|| "not asked".into());
            unreachable.push((i, why));
        }
    }
    let quorum_met = meets(&agreement, quorum);
    let wide = agreement
        .consensus
        .as_ref()
        .is_some_and(|c| c.radius_us() > max_radius_us);
    Ok(Round {
        asked: ask.to_vec(),
        unreachable,
        quorum_met,
        wide,
        disagreement: agreement.disagreement(),
        why_none: agreement.why_none(),
        grouped: agreement.grouped.clone(),
        grouped_because: agreement.grouped_because.clone(),
        assumption: agreement.assumption,
        answered: agreement.answered,
        consensus: agreement.consensus,
        outside: agreement.flagged,
        still_out,
        rejoined,
        local_end_us,
        ended,
        ended_boot_ns,
        report: sequence.report(),
        chain: sequence.chain.report(),
        sequence,
    })
}

/// `a` with every server id `p` (a position in `ask`) replaced by `ask[p]`.
fn relabel(a: &Agreement, ask: &[usize]) -> Agreement {
    let map = |ids: &[usize]| -> Vec<usize> {
        let mut v: Vec<usize> = ids.iter().map(|&p| ask[p]).collect();
        v.sort_unstable();
        v
    };
    let mut flagged: Vec<(usize, Flag)> = a.flagged.iter().map(|&(p, f)| (ask[p], f)).collect();
    flagged.sort_unstable();
    Agreement {
        consensus: a.consensus.as_ref().map(|c| Consensus {
            agreeing: map(&c.agreeing),
            ..c.clone()
        }),
        flagged,
        grouped: a.grouped.iter().map(|g| map(g)).collect(),
        ..a.clone()
    }
}

/// The consensus over answers, and what it means for marked servers.
#[derive(Debug)]
struct Vote {
    /// Flagged: servers not marked before only.
    agreement: Agreement,
    still_out: Vec<usize>,
    rejoined: Vec<usize>,
}

/// Whether the consensus may be used: at least `quorum` distinct voters
/// agree.
fn meets(a: &Agreement, quorum: usize) -> bool {
    a.consensus
        .as_ref()
        .is_some_and(|c| c.agreeing_voters >= quorum)
}

/// Split the flagged servers into new ones and those marked before; a
/// marked server the rule does not flag meets the consensus again (or
/// there is none to miss, and it stays marked).
fn vote(mut agreement: Agreement, marked: &dyn Fn(usize) -> bool) -> Vote {
    let still_out: Vec<usize> = agreement
        .flagged
        .iter()
        .filter(|f| marked(f.0))
        .map(|f| f.0)
        .collect();
    let rejoined: Vec<usize> = agreement
        .consensus
        .as_ref()
        .map(|c| c.agreeing.iter().copied().filter(|&i| marked(i)).collect())
        .unwrap_or_default();
    agreement.flagged.retain(|f| !marked(f.0));
    Vote {
        agreement,
        still_out,
        rejoined,
    }
}

/// The answers of a round as the rule takes them, for tests: (list
/// index, key, low, high), each key its own address, under `liars`.
#[cfg(test)]
fn agree_at(answers: &[(usize, &[u8], i128, i128)], liars: usize) -> Agreement {
    use gnomon_client::{agree, Electorate, Identity, Vouch};
    let n = answers.iter().map(|a| a.0 + 1).max().unwrap_or(0);
    let ids: Vec<Identity> = (0..n)
        .map(|i| Identity {
            key: answers
                .iter()
                .find(|a| a.0 == i)
                .map_or(vec![i as u8], |a| a.1.to_vec()),
            addresses: vec![format!("h:{i}")],
            operator: None,
        })
        .collect();
    let e = Electorate::new(&ids);
    let v: Vec<Vouch> = answers
        .iter()
        .map(|&(server, _, low_us, high_us)| Vouch {
            server,
            low_us,
            high_us,
        })
        .collect();
    agree(&v, &e, e.assume(Some(liars)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i128 = 3_600_000_000;

    #[test]
    fn a_marked_liar_votes_is_named_again_and_is_cleared_when_it_agrees() {
        let liar = |i: usize| i == 2;
        let a = agree_at(
            &[(0, b"a", -5, 5), (1, b"b", -4, 6), (2, b"c", H - 5, H + 5)],
            1,
        );
        let v = vote(a, &liar);
        let c = v.agreement.consensus.unwrap();
        assert_eq!((c.low_us, c.high_us, c.answering), (-4, 5, 3));
        assert_eq!((v.still_out, v.rejoined), (vec![2], vec![]));
        assert!(v.agreement.flagged.is_empty(), "named as marked, not twice");
        let a = agree_at(&[(0, b"a", -5, 5), (1, b"b", -4, 6), (2, b"c", -1, 1)], 1);
        let v = vote(a, &liar);
        assert_eq!((v.still_out, v.rejoined), (vec![], vec![2]));
    }

    #[test]
    fn honest_servers_marked_by_a_past_liar_majority_outvote_the_liars_now() {
        // 1 and 2 were marked in a round that liars held; now 3 and 4 lie
        // and 0, 1, 2 are honest: the marks take no vote away.
        let marked = |i: usize| i == 1 || i == 2;
        let a = agree_at(
            &[
                (0, b"a", -5, 5),
                (1, b"b", -4, 6),
                (2, b"c", -6, 4),
                (3, b"d", H, H + 5),
                (4, b"e", H, H + 5),
            ],
            2,
        );
        let v = vote(a, &marked);
        let c = v.agreement.consensus.as_ref().unwrap();
        assert_eq!((c.low_us, c.high_us), (-4, 4));
        assert_eq!(v.rejoined, [1, 2]);
        assert_eq!(
            v.agreement.flagged,
            [(3, Flag::OutsideConsensus), (4, Flag::OutsideConsensus)]
        );
        assert!(meets(&v.agreement, 3) && !meets(&v.agreement, 4));
    }

    #[test]
    fn relabel_maps_positions_to_list_indices() {
        let a = agree_at(
            &[
                (0, b"a", -5, 5),
                (1, b"a", -4, 6),
                (2, b"c", H, H + 1),
                (3, b"d", -1, 1),
            ],
            1,
        );
        let r = relabel(&a, &[7, 3, 9, 1]);
        assert_eq!(r.consensus.unwrap().agreeing, [1, 3, 7]);
        assert_eq!(r.flagged, [(9, Flag::OutsideConsensus)]);
        assert_eq!(r.grouped, [vec![3, 7]]);
    }
}
