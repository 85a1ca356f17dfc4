//! The latest state of every server, what the web layer reads: one
//! [`Status`] per server, replaced whole after each round, and failure
//! counters that only grow. History lives in the store when there is one;
//! without one, a bounded ring per server keeps the recent rounds.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, RwLock};

use serde::Serialize;

/// Rounds kept per server without a store: a week at the default 5 min.
pub const HISTORY_POINTS: usize = 2016;

/// One version family offered on its own (see `gnomon_client::discovery`).
#[derive(Clone, Debug, Serialize)]
pub struct Family {
    /// The family's primary profile (the request format).
    pub offered: String,
    /// The version the server answered in, when it did.
    pub answered: Option<String>,
    /// Why not, when it did not.
    pub error: Option<String>,
}

/// The burst of concurrent requests that makes a server build multi-leaf
/// trees.
#[derive(Clone, Debug, Serialize)]
pub struct Batch {
    /// Requests sent together.
    pub sent: usize,
    /// Responses received.
    pub answered: usize,
    /// Responses whose PATH (and everything else) verified.
    pub verified: usize,
    /// Deepest PATH seen: the batch held at least 2^depth requests.
    pub max_depth: u8,
    /// Tree orientations the paths verified in (`hash-first`,
    /// `node-first`).
    pub orientations: Vec<String>,
    /// The first verification failure, when any.
    pub error: Option<String>,
}

/// One server after one round.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Status {
    /// Its name in the list.
    pub name: String,
    /// Its first UDP (else TCP) address, as text.
    pub address: String,
    /// When the probe started, Unix µs.
    pub checked_at_us: i64,
    /// A verified answer came back.
    pub up: bool,
    /// Why not, as a metric label (`silent`, `refused`, `invalid`,
    /// `resolve`, `local`).
    pub failure: Option<String>,
    /// Why not, in words.
    pub error: Option<String>,
    /// The version answered (its profile name).
    pub version: Option<String>,
    /// Every version answered over all families.
    pub versions_answered: Vec<String>,
    /// Each family offered alone.
    pub families: Vec<Family>,
    /// Answered over UDP (None: not asked, as for a version that is never
    /// served over UDP).
    pub udp: Option<bool>,
    /// Answered over TCP (None: the version defines no TCP, or the list
    /// gives no TCP address).
    pub tcp: Option<bool>,
    /// Round trip of the answer, µs.
    pub rtt_us: Option<u64>,
    /// RADI, µs.
    pub radius_us: Option<u64>,
    /// Server minus local clock, µs.
    pub offset_local_us: Option<i64>,
    /// Server minus the consensus of the others, µs.
    pub offset_consensus_us: Option<i64>,
    /// The delegation's window, Unix µs.
    pub cert_mint_us: Option<u64>,
    /// End of the window.
    pub cert_maxt_us: Option<u64>,
    /// Days until MAXT.
    pub days_to_expiry: Option<f64>,
    /// Signatures held only with legacy context strings.
    pub legacy_context: bool,
    /// Request bytes sent.
    pub request_len: Option<usize>,
    /// Response bytes received (more than the request over UDP:
    /// amplification; over TCP the handshake proves the source, and an
    /// ML-DSA-44 answer is always larger).
    pub response_len: Option<usize>,
    /// The burst.
    pub batch: Option<Batch>,
    /// Outside the consensus (why), when a consensus exists.
    pub flagged: Option<String>,
    /// A malfeasance report proving the lie (RFC 10049 malfeasance-report JSON).
    pub report: Option<String>,
    /// The last request, for the decoded view.
    #[serde(skip)]
    pub raw_request: Option<Vec<u8>>,
    /// The last response.
    #[serde(skip)]
    pub raw_response: Option<Vec<u8>>,
    /// The long-term key, to check the signatures in the decoded view.
    #[serde(skip)]
    pub public_key: Vec<u8>,
}

/// One point of a server's history.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Point {
    /// Unix µs.
    pub at_us: i64,
    /// Answered.
    pub up: bool,
    /// Round trip, µs.
    pub rtt_us: Option<u64>,
    /// Offset from the consensus (else the local clock), µs.
    pub offset_us: Option<i64>,
    /// The answer's radius, µs: how far the true time may be from the
    /// offset, by the server's own word.
    pub radius_us: Option<u64>,
}

/// What a round concluded over all servers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The consensus: (low, high) offsets from the local clock, µs.
    pub consensus: Option<(i64, i64)>,
    /// Why the servers disagree, when the offsets the rule accepts fall
    /// in more than one stretch.
    pub disagreement: Option<String>,
    /// The assumption the round ran under, and who answered ("assumes at
    /// most 1 of the 5 listed servers lies; …").
    pub assumption: String,
    /// Why there was no consensus, when there was none.
    pub why_none: Option<String>,
}

/// Everything the web layer shows.
#[derive(Debug, Default)]
pub struct Latest {
    /// Rounds completed.
    pub rounds: u64,
    /// When the last round ended, Unix µs.
    pub last_round_us: Option<i64>,
    /// The consensus of the last round: (low, high) offsets from the local
    /// clock, µs.
    pub consensus: Option<(i64, i64)>,
    /// Why the servers disagreed in the last round (the consensus spans
    /// more than one stretch), if they did.
    pub disagreement: Option<String>,
    /// The assumption the last round ran under.
    pub assumption: String,
    /// Why the last round had no consensus, when it had none.
    pub why_none: Option<String>,
    /// Per server, in list order.
    pub servers: Vec<Status>,
    /// Failures by (server, reason), over all rounds.
    pub failures: BTreeMap<(String, String), u64>,
    /// Recent points per server (used when there is no store).
    pub history: BTreeMap<String, VecDeque<Point>>,
}

/// The shared state: written by the prober, read by the web layer.
pub type Shared = Arc<RwLock<Latest>>;

impl Latest {
    /// Take in a round's results.
    pub fn apply(&mut self, servers: Vec<Status>, verdict: Verdict, now_us: i64) {
        for s in &servers {
            for reason in failure_reasons(s) {
                *self
                    .failures
                    .entry((s.name.clone(), reason.to_string()))
                    .or_default() += 1;
            }
            let h = self.history.entry(s.name.clone()).or_default();
            if h.len() == HISTORY_POINTS {
                h.pop_front();
            }
            h.push_back(Point {
                at_us: s.checked_at_us,
                up: s.up,
                rtt_us: s.rtt_us,
                offset_us: s.offset_consensus_us.or(s.offset_local_us),
                radius_us: s.radius_us,
            });
        }
        self.servers = servers;
        self.consensus = verdict.consensus;
        self.disagreement = verdict.disagreement;
        self.assumption = verdict.assumption;
        self.why_none = verdict.why_none;
        self.rounds += 1;
        self.last_round_us = Some(now_us);
    }

    /// A server by name.
    pub fn server(&self, name: &str) -> Option<&Status> {
        self.servers.iter().find(|s| s.name == name)
    }
}

/// The reasons a round counts as a failure for `s`, as metric labels.
pub fn failure_reasons(s: &Status) -> Vec<&'static str> {
    let mut out = Vec::new();
    if let Some(f) = &s.failure {
        out.push(match f.as_str() {
            "silent" => "silent",
            "refused" => "refused",
            "invalid" => "invalid",
            "resolve" => "resolve",
            _ => "local",
        });
    }
    if s.tcp == Some(false) {
        out.push("tcp");
    }
    if s.batch.as_ref().is_some_and(|b| b.error.is_some()) {
        out.push("batch_path");
    }
    if s.flagged.is_some() {
        out.push("outside_consensus");
    }
    if amplifies(s) {
        out.push("amplification");
    }
    out
}

/// Whether the answer was a datagram larger than its request: what lets a
/// forged source turn the server into an amplifier. Only the main answer's
/// sizes are kept, and it came over UDP exactly when UDP answered.
pub fn amplifies(s: &Status) -> bool {
    s.udp == Some(true) && matches!((s.request_len, s.response_len), (Some(q), Some(r)) if r > q)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sized(udp: Option<bool>, tcp: Option<bool>, request: usize, response: usize) -> Status {
        Status {
            udp,
            tcp,
            request_len: Some(request),
            response_len: Some(response),
            ..Status::default()
        }
    }

    #[test]
    fn only_a_datagram_larger_than_its_request_amplifies() {
        let udp = sized(Some(true), None, 1024, 1100);
        assert!(amplifies(&udp));
        assert_eq!(failure_reasons(&udp), ["amplification"]);
        // The same sizes over TCP (UDP silent), or a TCP-only version's
        // 6.4 KB answer (UDP not asked): the handshake proved the source.
        for s in [
            sized(Some(false), Some(true), 1024, 1100),
            sized(None, Some(true), 1024, 6408),
        ] {
            assert!(!amplifies(&s), "{s:?}");
            assert!(!failure_reasons(&s).contains(&"amplification"));
        }
        assert!(!amplifies(&sized(Some(true), None, 1024, 1024)));
    }
}
