//! One round: the client's measurement sequence over the servers asked,
//! then the consensus over those not excluded for lying.
//!
//! A server excluded in an earlier round is still asked (its answers are
//! in the chain, where a new lie is proven), but it does not vote: a liar
//! cannot dilute the majority, and it rejoins once its interval overlaps
//! the consensus again.

use std::time::Instant;

use gnomon_client::consensus::agree;
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
    let voting: Vec<(usize, i128, i128)> = intervals
        .iter()
        .copied()
        .filter(|s| !excluded(s.0))
        .collect();
    let agreement = agree(&voting);
    let mut still_out = Vec::new();
    let mut rejoined = Vec::new();
    for &i in ask.iter().filter(|&&i| excluded(i)) {
        let mine: Vec<&(usize, i128, i128)> = intervals.iter().filter(|s| s.0 == i).collect();
        if mine.is_empty() {
            continue;
        }
        let lo = mine.iter().map(|s| s.1).max().unwrap_or(0);
        let hi = mine.iter().map(|s| s.2).min().unwrap_or(0);
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
    let quorum_met = agreement
        .consensus
        .as_ref()
        .is_some_and(|c| c.agreeing.len() >= quorum);
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
