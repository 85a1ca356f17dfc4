//! One round: the client's measurement sequence over the servers asked,
//! then the consensus over those not excluded for lying.
//!
//! A server excluded in an earlier round is still asked (its answers are
//! in the chain, where a new lie is proven), but it does not vote: a liar
//! cannot dilute the majority, and it rejoins once its interval overlaps
//! the consensus again.

use std::time::Instant;

use gnomon_client::consensus::agree;
use gnomon_client::Agreement;
use gnomon_client::{Client, Consensus, Flag, Plan, QueryError, Selection, Sequence, Server};
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
    /// The consensus of the servers not excluded (before the quorum).
    pub consensus: Option<Consensus>,
    /// Whether at least the quorum agrees.
    pub quorum_met: bool,
    /// Voting servers outside the consensus, and why.
    pub outside: Vec<(usize, Flag)>,
    /// Excluded servers that still disagree.
    pub still_out: Vec<usize>,
    /// Excluded servers whose answers agree again.
    pub rejoined: Vec<usize>,
    /// Local clock (as measured against) when the round ended, Unix µs.
    pub local_end_us: i128,
    /// When the round ended, monotonic.
    pub ended: Instant,
    /// The report, when the chain proves a contradiction.
    pub report: Option<Report>,
    /// The whole chain, in the report format.
    pub chain: Report,
    /// The sequence as the client returned it (server numbers are
    /// positions in `asked`).
    pub sequence: Sequence,
}

impl Round {
    /// The consensus as the decisions take it.
    pub fn evidence(&self) -> Option<Evidence> {
        self.consensus.as_ref().map(|c| Evidence {
            low_us: c.low_us,
            high_us: c.high_us,
            agreeing: c.agreeing.len(),
        })
    }

    /// The local clock at `instant`, as this round measured it.
    pub fn local_at(&self, instant: Instant) -> i128 {
        self.local_end_us + instant.saturating_duration_since(self.ended).as_micros() as i128
    }
}

/// Ask `ask` (indices into `servers`) twice over, chained; `excluded`
/// says who does not vote.
pub fn run(
    config: gnomon_client::Config,
    servers: &[Server],
    ask: &[usize],
    excluded: &dyn Fn(usize) -> bool,
    quorum: usize,
) -> Result<Round, QueryError> {
    let subset: Vec<Server> = ask.iter().map(|&i| servers[i].clone()).collect();
    let recorder = Recorder::default();
    let mut client = Client::new(config).with_clock(recorder.clone());
    let plan = Plan {
        selection: Selection::All,
        passes: 2,
    };
    let sequence = client.measure(&subset, &plan)?;
    let ended = Instant::now();
    let local_end_us = recorder.local_at(ended);

    // Per server (list index): the intersection of its answers.
    let mut intervals: Vec<(usize, i128, i128)> = Vec::new();
    for (e, a) in sequence.answers() {
        let (lo, hi) = a.offset_interval_us();
        intervals.push((ask[e.server], lo, hi));
    }
    let Vote {
        agreement,
        still_out,
        rejoined,
    } = vote(&intervals, excluded, quorum);
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
    Ok(Round {
        asked: ask.to_vec(),
        unreachable,
        quorum_met,
        consensus: agreement.consensus,
        outside: agreement.flagged,
        still_out,
        rejoined,
        local_end_us,
        ended,
        report: sequence.report(),
        chain: sequence.chain.report(),
        sequence,
    })
}

/// The consensus over answers, and what it means for excluded servers.
#[derive(Debug)]
struct Vote {
    /// Flagged: voting servers only.
    agreement: Agreement,
    still_out: Vec<usize>,
    rejoined: Vec<usize>,
}

fn meets(a: &Agreement, quorum: usize) -> bool {
    a.consensus
        .as_ref()
        .is_some_and(|c| c.agreeing.len() >= quorum)
}

/// `intervals`: (server, low, high) per answer. Excluded servers do not
/// vote, so a liar cannot dilute the majority. But when the voters alone
/// reach no quorum and everyone together does, everyone's consensus is
/// taken: a majority of liars once, then gone, must not leave the honest
/// servers it outvoted excluded for good.
fn vote(
    intervals: &[(usize, i128, i128)],
    excluded: &dyn Fn(usize) -> bool,
    quorum: usize,
) -> Vote {
    let voting: Vec<(usize, i128, i128)> = intervals
        .iter()
        .copied()
        .filter(|s| !excluded(s.0))
        .collect();
    let mut agreement = agree(&voting);
    if !meets(&agreement, quorum) && voting.len() < intervals.len() {
        let everyone = agree(intervals);
        if meets(&everyone, quorum) {
            agreement = everyone;
        }
    }
    agreement.flagged.retain(|f| !excluded(f.0));
    let mut still_out = Vec::new();
    let mut rejoined = Vec::new();
    let mut seen: Vec<usize> = Vec::new();
    for &(i, _, _) in intervals.iter().filter(|s| excluded(s.0)) {
        if seen.contains(&i) {
            continue;
        }
        seen.push(i);
        let mine = intervals.iter().filter(|s| s.0 == i);
        let lo = mine.clone().map(|s| s.1).max().unwrap_or(0);
        let hi = mine.map(|s| s.2).min().unwrap_or(0);
        let agrees = lo <= hi
            && agreement
                .consensus
                .as_ref()
                .is_some_and(|c| lo <= c.high_us && c.low_us <= hi);
        if agrees {
            rejoined.push(i);
        } else {
            still_out.push(i);
        }
    }
    Vote {
        agreement,
        still_out,
        rejoined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i128 = 3_600_000_000;

    #[test]
    fn an_excluded_liar_does_not_vote_and_rejoins_when_it_agrees() {
        // 0 and 1 honest, 2 excluded and still an hour off: with 2 voting
        // and quorum 2 the consensus is theirs; 2 stays out.
        let liar = |i: usize| i == 2;
        let v = vote(&[(0, -5, 5), (1, -4, 6), (2, H - 5, H + 5)], &liar, 2);
        let c = v.agreement.consensus.unwrap();
        assert_eq!((c.low_us, c.high_us, c.answering), (-4, 5, 2));
        assert_eq!((v.still_out, v.rejoined), (vec![2], vec![]));
        assert!(
            v.agreement.flagged.is_empty(),
            "named as excluded, not twice"
        );
        // Honest again: it rejoins.
        let v = vote(&[(0, -5, 5), (1, -4, 6), (2, -1, 1)], &liar, 2);
        assert_eq!((v.still_out, v.rejoined), (vec![], vec![2]));
    }

    #[test]
    fn honest_servers_outvoted_once_are_not_excluded_for_good() {
        // 1 and 2 were excluded by a liar majority that has since gone
        // silent: 0 alone cannot make the quorum, everyone together can.
        let outvoted = |i: usize| i == 1 || i == 2;
        let v = vote(&[(0, -5, 5), (1, -4, 6), (2, -6, 4)], &outvoted, 2);
        let c = v.agreement.consensus.unwrap();
        assert_eq!((c.low_us, c.high_us), (-4, 4));
        assert_eq!(v.rejoined, [1, 2]);
        // A voter majority that holds the quorum is not overridden.
        let v = vote(
            &[
                (0, -5, 5),
                (1, -4, 6),
                (2, H, H + 5),
                (3, H, H + 5),
                (4, H, H + 5),
            ],
            &|i| i >= 2,
            2,
        );
        assert_eq!(v.agreement.consensus.unwrap().agreeing, [0, 1]);
        assert_eq!(v.still_out, [2, 3, 4]);
    }
}
