//! The round's one line for the log (and `--once`): the consensus or why
//! there is none, who is out and who unreachable, who agrees again, who
//! is one server, who contradicts whom, the report, the assumption.

use std::path::PathBuf;

use gnomon_client::{describe_assumption, format_duration_us, format_utc, Flag, Server};

use super::Service;
use crate::round::Round;

impl Service {
    pub(super) fn summary(
        &self,
        round: &Round,
        outside: &[String],
        report: Option<&PathBuf>,
    ) -> String {
        let servers = &self.list.servers;
        let names = |v: &mut dyn Iterator<Item = usize>| {
            let v: Vec<String> = v.map(|i| servers[i].name.clone()).collect();
            if v.is_empty() {
                "none".into()
            } else {
                v.join(", ")
            }
        };
        let head = match (&round.consensus, round.quorum_met) {
            (Some(c), met) => format!(
                "consensus {} ±{:.3} s (offset {}); {} of {} answering servers agree{}",
                format_utc((round.local_end_us + c.midpoint_us()).max(0) as u64),
                c.radius_us() as f64 / 1e6,
                format_duration_us(c.midpoint_us()),
                c.agreeing_voters,
                c.answering,
                if !met {
                    format!(
                        ", fewer than the quorum ({}): NOT USED",
                        self.settings.quorum
                    )
                } else if round.wide {
                    format!(
                        ", wider than max-radius ({}): NOT USED",
                        crate::config::DurationText(self.settings.max_radius)
                    )
                } else {
                    String::new()
                }
            ),
            (None, _) => round
                .why_none
                .clone()
                .unwrap_or_else(|| "no consensus".into()),
        };
        let unreachable = unreachable_words(round, servers);
        let mut line = format!(
            "round {}: {head}; out: {}; unreachable: {}",
            self.round_no,
            if outside.is_empty() {
                "none".into()
            } else {
                outside.join(", ")
            },
            if unreachable.is_empty() {
                "none".into()
            } else {
                unreachable.join(", ")
            },
        );
        if !round.rejoined.is_empty() {
            line.push_str(&format!(
                "; agree again: {}",
                names(&mut round.rejoined.iter().copied())
            ));
        }
        if let Some(why) = &round.disagreement {
            line.push_str(&format!("; {why}"));
        }
        for (group, why) in round.grouped.iter().zip(&round.grouped_because) {
            line.push_str(&format!(
                "; {} are one server ({why}): one vote",
                names(&mut group.iter().copied())
            ));
        }
        for (a, b) in round.sequence.contradicting_servers() {
            line.push_str(&format!(
                "; {} and {} contradict each other: one of them lied",
                servers[round.asked[a]].name, servers[round.asked[b]].name
            ));
        }
        if let Some(p) = report {
            line.push_str(&format!("; report {}", p.display()));
        }
        line.push_str(&format!(
            "; {}",
            describe_assumption(round.assumption, round.answered)
        ));
        line
    }
}

/// The round's unreachable servers by name, with the reason for those not
/// asked ("backing off until round N"; the errors of those asked are long
/// and the same every round).
pub(super) fn unreachable_words(round: &Round, servers: &[Server]) -> Vec<String> {
    round
        .unreachable
        .iter()
        .map(|(i, why)| {
            if round.asked.contains(i) {
                servers[*i].name.clone()
            } else {
                format!("{} ({why})", servers[*i].name)
            }
        })
        .collect()
}

pub(super) fn flag_words(f: Flag) -> &'static str {
    match f {
        Flag::OutsideConsensus => "outside the consensus",
        Flag::SelfContradiction => "contradicts itself",
    }
}
