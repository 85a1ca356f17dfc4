//! The measurement sequence of RFC 10049: several servers at random,
//! asked twice in the same order, every nonce chained from the previous
//! response, then the causal-order check over every pair of answers.

use gnomon_protocol::{Measurement, Report};

use crate::consensus::{agree, Agreement, Assumption, Electorate, Vouch};
use crate::entropy::below;
use crate::error::QueryError;
use crate::query::{Answer, Client};
use crate::server::{Server, Versions};

/// How many servers to ask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// This many chosen at random (all of them if the list is shorter).
    Random(usize),
    /// Every server, in random order.
    All,
}

/// The shape of a sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Which servers.
    pub selection: Selection,
    /// Passes over them (two in the RFC: a lie by the last server of the
    /// first pass is caught by the first of the second).
    pub passes: usize,
    /// The assumption to judge the answers under; `None`: the default for
    /// the servers given ([`Electorate::assume`]). A caller that asks only
    /// part of its list passes the whole list's.
    pub assumption: Option<Assumption>,
}

impl Default for Plan {
    fn default() -> Self {
        Plan {
            selection: Selection::Random(3),
            passes: 2,
            assumption: None,
        }
    }
}

/// One query of the sequence.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Index of the server in the list given to [`Client::measure`].
    pub server: usize,
    /// 0-based pass.
    pub pass: usize,
    /// The answer, or why there was none.
    pub result: Result<Answer, QueryError>,
    /// Index of the answer in [`Sequence::chain`], when it was recorded.
    pub exchange: Option<usize>,
}

/// What a sequence found.
#[derive(Clone, Debug)]
pub struct Sequence {
    /// Servers asked, in order (indices into the list).
    pub order: Vec<usize>,
    /// Every query, in the order made.
    pub entries: Vec<Entry>,
    /// The chain of verified exchanges.
    pub chain: Measurement,
    /// Pairs of entries (i, j), i answered before j, whose answers cannot
    /// both be true: MIDP_i − RADI_i > MIDP_j + RADI_j.
    pub contradictions: Vec<(usize, usize)>,
    /// The quorum rule over the answers (one vote per server: identities
    /// sharing a key, address or operator are one).
    pub agreement: Agreement,
}

impl Sequence {
    /// The servers the quorum rule calls liars: those flagged by
    /// [`crate::consensus::agree`]. A contradiction in the chain alone
    /// accuses nobody in particular: it proves that one of its two signers
    /// lied ([`Sequence::contradicting_servers`]).
    pub fn suspects(&self) -> Vec<usize> {
        let mut out: Vec<usize> = self.agreement.flagged.iter().map(|f| f.0).collect();
        out.dedup();
        out
    }

    /// The pairs of servers (earlier answer first) whose answers cannot
    /// both be true: one of each pair lied. Each pair once.
    pub fn contradicting_servers(&self) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = self
            .contradictions
            .iter()
            .map(|&(i, j)| (self.entries[i].server, self.entries[j].server))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether a server lied: a contradiction in the chain, or a server
    /// flagged by the quorum rule.
    pub fn malfeasance(&self) -> bool {
        !self.contradictions.is_empty() || !self.agreement.flagged.is_empty()
    }

    /// The report to send: only when the chain itself proves a
    /// contradiction, and only verified exchanges, so a signature or parse
    /// failure is never reported.
    pub fn report(&self) -> Option<Report> {
        (!self.contradictions.is_empty()).then(|| self.chain.report())
    }

    /// The answers that verified.
    pub fn answers(&self) -> impl Iterator<Item = (&Entry, &Answer)> {
        self.entries
            .iter()
            .filter_map(|e| e.result.as_ref().ok().map(|a| (e, a)))
    }
}

impl Client {
    /// Run the measurement sequence over `servers`. A server that answers
    /// in the first pass is asked the version it answered in the second.
    pub fn measure(&mut self, servers: &[Server], plan: &Plan) -> Result<Sequence, QueryError> {
        self.run(servers, plan, Measurement::new())
    }

    /// Run the measurement sequence for a device that cannot ask itself
    /// (a relayed proof): the chain starts from the device's value D
    /// instead of a random nonce ([`Measurement::bound`]), so every answer
    /// is provably signed after D existed. The bundle for the device is
    /// `sequence.chain.proof()`; it is worth sending only when the
    /// sequence's own checks pass, since the device applies the same rule.
    /// D must be 1 to 64 bytes.
    pub fn measure_bound(
        &mut self,
        servers: &[Server],
        plan: &Plan,
        device: &[u8],
    ) -> Result<Sequence, QueryError> {
        let chain = Measurement::bound(device)
            .map_err(|e| QueryError::Local(format!("device value: {e:?}")))?;
        self.run(servers, plan, chain)
    }

    fn run(
        &mut self,
        servers: &[Server],
        plan: &Plan,
        mut chain: Measurement,
    ) -> Result<Sequence, QueryError> {
        let order = self.choose(servers.len(), plan.selection)?;
        // One wall-clock reading for the whole sequence (see `clock`).
        let anchor = self.anchor();
        let mut remembered: Vec<Option<Versions>> = vec![None; servers.len()];
        let mut entries = Vec::new();
        for pass in 0..plan.passes {
            for &s in &order {
                let mut server = servers[s].clone();
                if let Some(v) = remembered[s] {
                    server.versions = v;
                }
                let result = self.chained(&server, &mut chain, anchor);
                if let Ok(a) = &result {
                    remembered[s] = Some(Versions::Offer(a.offer));
                }
                if let Err(e) = &result {
                    if e.is_local() {
                        return Err(e.clone());
                    }
                }
                let exchange = result.is_ok().then(|| chain.exchanges().len() - 1);
                entries.push(Entry {
                    server: s,
                    pass,
                    result,
                    exchange,
                });
            }
        }
        let by_exchange: Vec<usize> = entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.exchange.is_some())
            .map(|(i, _)| i)
            .collect();
        let contradictions = chain
            .contradictions()
            .into_iter()
            .map(|(a, b)| (by_exchange[a], by_exchange[b]))
            .collect();
        let vouches: Vec<Vouch> = entries
            .iter()
            .filter_map(|e| {
                let a = e.result.as_ref().ok()?;
                let (low_us, high_us) = a.offset_interval_us();
                Some(Vouch {
                    server: e.server,
                    low_us,
                    high_us,
                })
            })
            .collect();
        let electorate = Electorate::of(servers);
        let assumption = plan.assumption.unwrap_or_else(|| electorate.assume(None));
        let agreement = agree(&vouches, &electorate, assumption);
        Ok(Sequence {
            order,
            entries,
            chain,
            contradictions,
            agreement,
        })
    }

    /// A random order of `n` servers, cut to the selection.
    fn choose(&mut self, n: usize, selection: Selection) -> Result<Vec<usize>, QueryError> {
        let mut order: Vec<usize> = (0..n).collect();
        // Fisher–Yates with unbiased draws.
        for i in (1..n).rev() {
            let j = below(self.entropy(), i + 1).map_err(|e| QueryError::Local(e.to_string()))?;
            order.swap(i, j);
        }
        if let Selection::Random(k) = selection {
            order.truncate(k);
        }
        Ok(order)
    }
}
