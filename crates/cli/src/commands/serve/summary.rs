//! What the server did, per transport: the summary line logged every
//! `--summary-interval` and once at the end, and the same counts in the
//! JSON object `--json` prints when it stops. UDP counts the datagrams the
//! workers read (from sockets, or from AF_XDP rings, said apart), TCP the
//! framed requests on its connections: a server answering only over TCP
//! (ML-DSA-44) shows its work there, not "received 0".

use std::time::Duration;

use gnomon_server::stats::{Drop, TcpStats, WorkerStats};
use gnomon_server::Engine;
use serde_json::json;

/// Every counter a summary reads, at one moment.
#[derive(Clone, Copy, Default)]
pub(super) struct Totals {
    udp: WorkerStats,
    /// `None` when TCP is not served.
    tcp: Option<TcpStats>,
}

impl Totals {
    pub(super) fn read(engine: &Engine) -> Totals {
        let s = engine.snapshot();
        Totals {
            udp: s.stats,
            tcp: s.tcp,
        }
    }

    /// From a snapshot taken after the engine stopped (its source outlives
    /// the engine, so the last connections are counted too).
    pub(super) fn from_snapshot(s: &gnomon_server::metrics::Snapshot) -> Totals {
        Totals {
            udp: s.stats,
            tcp: s.tcp,
        }
    }

    /// The counts since `before` (the start, for the line at the end).
    /// Saturating: a summary must never take a server down.
    fn since(&self, before: &Totals) -> Delta {
        let (a, b) = (&self.udp, &before.udp);
        let udp_drops: Vec<(Drop, u64)> = Drop::ALL
            .into_iter()
            .map(|d| (d, a.drops[d as usize].saturating_sub(b.drops[d as usize])))
            .filter(|&(_, n)| n > 0)
            .collect();
        let tcp = self.tcp.map(|t| {
            let p = before.tcp.unwrap_or_default();
            let mut drops: Vec<(&'static str, u64)> = Drop::ALL
                .into_iter()
                .map(|d| {
                    let n = t.drops[d as usize].saturating_sub(p.drops[d as usize]);
                    (d.label(), n)
                })
                .filter(|&(_, n)| n > 0)
                .collect();
            if t.udp_only > p.udp_only {
                drops.push(("udp_only", t.udp_only - p.udp_only));
            }
            let refused = |s: &TcpStats| s.refused + s.refused_per_source + s.refused_per_network;
            TcpDelta {
                connections: t.accepted.saturating_sub(p.accepted),
                refused: refused(&t).saturating_sub(refused(&p)),
                received: t.requests.saturating_sub(p.requests),
                answered: t.total_responses().saturating_sub(p.total_responses()),
                unsynchronized: t.drops[Drop::Unsynchronized as usize]
                    .saturating_sub(p.drops[Drop::Unsynchronized as usize]),
                signatures: t.signatures.saturating_sub(p.signatures),
                drops,
            }
        });
        Delta {
            udp_received: a.received.saturating_sub(b.received),
            xdp_received: a.xdp_received.saturating_sub(b.xdp_received),
            udp_answered: a.total_responses().saturating_sub(b.total_responses()),
            udp_signatures: a.signatures.saturating_sub(b.signatures),
            udp_drops,
            tcp,
        }
    }

    /// One line: what happened since `before`, over `over` (zero: no rate).
    pub(super) fn line(&self, before: &Totals, over: Duration, xdp: bool) -> String {
        self.since(before).line(over, xdp)
    }

    /// The counts since start, for `--json`.
    pub(super) fn json(&self) -> serde_json::Value {
        self.since(&Totals::default()).json()
    }
}

struct TcpDelta {
    connections: u64,
    refused: u64,
    received: u64,
    answered: u64,
    unsynchronized: u64,
    signatures: u64,
    drops: Vec<(&'static str, u64)>,
}

struct Delta {
    udp_received: u64,
    xdp_received: u64,
    udp_answered: u64,
    udp_signatures: u64,
    udp_drops: Vec<(Drop, u64)>,
    tcp: Option<TcpDelta>,
}

fn reasons(drops: impl Iterator<Item = (&'static str, u64)>) -> String {
    let list: Vec<String> = drops.map(|(label, n)| format!("{label} {n}")).collect();
    if list.is_empty() {
        String::new()
    } else {
        format!(" ({})", list.join(", "))
    }
}

impl Delta {
    fn answered(&self) -> u64 {
        self.udp_answered + self.tcp.as_ref().map_or(0, |t| t.answered)
    }

    fn signatures(&self) -> u64 {
        self.udp_signatures + self.tcp.as_ref().map_or(0, |t| t.signatures)
    }

    fn unsynchronized(&self) -> u64 {
        let udp = self
            .udp_drops
            .iter()
            .find(|(d, _)| *d == Drop::Unsynchronized)
            .map_or(0, |&(_, n)| n);
        udp + self.tcp.as_ref().map_or(0, |t| t.unsynchronized)
    }

    fn line(&self, over: Duration, xdp: bool) -> String {
        let udp_dropped: u64 = self.udp_drops.iter().map(|&(_, n)| n).sum();
        let mut line = format!("udp: received {}", self.udp_received);
        if xdp {
            line += &format!(" ({} through AF_XDP)", self.xdp_received);
        }
        line += &format!(
            ", answered {}, dropped {udp_dropped}{}",
            self.udp_answered,
            reasons(self.udp_drops.iter().map(|&(d, n)| (d.label(), n)))
        );
        if let Some(t) = &self.tcp {
            let dropped: u64 = t.drops.iter().map(|&(_, n)| n).sum();
            line += &format!(
                "; tcp: {} connections ({} refused), received {}, answered {}, dropped \
                 {dropped}{}",
                t.connections,
                t.refused,
                t.received,
                t.answered,
                reasons(t.drops.iter().copied())
            );
        }
        line += &format!(
            "; answered {} in all, signatures {}",
            self.answered(),
            self.signatures()
        );
        if !over.is_zero() {
            line += &format!(" ({:.0}/s)", self.answered() as f64 / over.as_secs_f64());
        }
        let refused = self.unsynchronized();
        if refused > 0 {
            line += &format!(
                "; {refused} dropped because the clock is unsynchronized: {}",
                super::clock::how_to_answer()
            );
        }
        line
    }

    fn json(&self) -> serde_json::Value {
        let udp_drops: serde_json::Map<String, serde_json::Value> = self
            .udp_drops
            .iter()
            .map(|&(d, n)| (d.label().to_owned(), n.into()))
            .collect();
        let mut out = json!({
            "udp": {
                "received": self.udp_received,
                "received_through_xdp": self.xdp_received,
                "answered": self.udp_answered,
                "dropped": self.udp_drops.iter().map(|&(_, n)| n).sum::<u64>(),
                "drops": udp_drops,
            },
            "answered": self.answered(),
            "signatures": self.signatures(),
        });
        if let Some(t) = &self.tcp {
            let drops: serde_json::Map<String, serde_json::Value> = t
                .drops
                .iter()
                .map(|&(label, n)| (label.to_owned(), n.into()))
                .collect();
            out["tcp"] = json!({
                "connections": t.connections,
                "refused": t.refused,
                "received": t.received,
                "answered": t.answered,
                "dropped": t.drops.iter().map(|&(_, n)| n).sum::<u64>(),
                "drops": drops,
            });
        }
        out
    }
}
