//! What watch says about each server: one line when its state changes
//! (`ok`, `warning`, `down`, `invalid`, `lying`, the words of the page and
//! `/api/servers`), naming the server, the state before and after and why,
//! as chrony and ntpd-rs log a source that changes. A server that stays in
//! one state is not mentioned again, however many rounds it stays.

use std::collections::HashMap;

use crate::state::Status;
use crate::view::{cells, overall, Cell, Limits};

/// One server's change of state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Its name in the list.
    pub server: String,
    /// The state before; `None` in the first round that saw it.
    pub from: Option<&'static str>,
    /// The state now.
    pub to: &'static str,
    /// Why it is in that state, in words.
    pub why: String,
}

impl Change {
    /// The line, as the log carries it.
    pub fn line(&self) -> String {
        match self.from {
            Some(from) => format!(
                "server {:?}: {from} → {}: {}",
                self.server, self.to, self.why
            ),
            None => format!("server {:?}: {}: {}", self.server, self.to, self.why),
        }
    }

    /// Logs it: a server that became fine is news, one that did not is a
    /// warning. The fields let a collector of JSON lines read the change
    /// without parsing the sentence.
    pub fn log(&self) {
        // `from` is left out of the first line about a server.
        let (from, line) = (self.from, self.line());
        if self.to == "ok" {
            tracing::info!(server = %self.server, from, to = self.to, "{line}");
        } else {
            tracing::warn!(server = %self.server, from, to = self.to, "{line}");
        }
    }
}

/// Each server's last state, to tell a change from a repetition.
#[derive(Debug, Default)]
pub struct States {
    limits: Limits,
    last: HashMap<String, &'static str>,
}

impl States {
    /// No server seen yet; states judged by `limits`, as the page does.
    pub fn new(limits: Limits) -> States {
        States {
            limits,
            last: HashMap::new(),
        }
    }

    /// The changes a round's `statuses` make, in list order.
    pub fn update(&mut self, statuses: &[Status]) -> Vec<Change> {
        let mut out = Vec::new();
        for s in statuses {
            let cells = cells(s, &self.limits);
            let to = overall(s, &cells);
            let from = self.last.insert(s.name.clone(), to);
            if from == Some(to) {
                continue;
            }
            out.push(Change {
                server: s.name.clone(),
                from,
                to,
                why: why(s, &cells, to),
            });
        }
        out
    }
}

/// The words of check `check`.
fn text<'a>(cells: &'a [Cell], check: &str) -> &'a str {
    cells
        .iter()
        .find(|c| c.check == check)
        .map_or("", |c| c.text.as_str())
}

/// Why `s` is in state `to`: the failure for one that is down or invalid,
/// the lie for a liar, the checks that warn, or what it answered.
fn why(s: &Status, cells: &[Cell], to: &str) -> String {
    match to {
        "lying" => format!(
            "{}; offset {}",
            s.flagged.as_deref().unwrap_or("outside the consensus"),
            text(cells, "offset")
        ),
        "down" | "invalid" => s
            .error
            .clone()
            .unwrap_or_else(|| text(cells, "reachable").to_string()),
        "warning" => cells
            .iter()
            .filter(|c| c.state == "warn" || c.state == "fail")
            .map(|c| format!("{}: {}", c.check, c.text))
            .collect::<Vec<_>>()
            .join("; "),
        _ => format!(
            "answers in {}, radius {}, offset {}",
            s.version.as_deref().unwrap_or("?"),
            text(cells, "radius"),
            text(cells, "offset")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(name: &str) -> Status {
        Status {
            name: name.into(),
            up: true,
            version: Some("rfc".into()),
            udp: Some(true),
            versions_answered: vec!["rfc".into()],
            radius_us: Some(1_000_000),
            offset_consensus_us: Some(200),
            offset_local_us: Some(300),
            ..Status::default()
        }
    }

    fn down(name: &str) -> Status {
        Status {
            name: name.into(),
            failure: Some("silent".into()),
            error: Some("no answer from 192.0.2.1:2002".into()),
            ..Status::default()
        }
    }

    #[test]
    fn each_change_is_said_once_with_both_states_and_why() {
        let mut states = States::new(Limits::default());
        let first = states.update(&[up("a"), down("b")]);
        assert_eq!(first.len(), 2);
        assert_eq!((first[0].from, first[0].to), (None, "ok"));
        assert_eq!(
            first[1].line(),
            "server \"b\": down: no answer from 192.0.2.1:2002"
        );
        // Nothing changed: nothing said.
        assert!(states.update(&[up("a"), down("b")]).is_empty());
        let mut liar = up("a");
        liar.flagged = Some("its interval misses the consensus".into());
        let changed = states.update(&[liar, up("b")]);
        assert_eq!(changed.len(), 2);
        assert_eq!((changed[0].from, changed[0].to), (Some("ok"), "lying"));
        assert!(
            changed[0]
                .line()
                .starts_with("server \"a\": ok → lying: its interval misses the consensus"),
            "{}",
            changed[0].line()
        );
        assert_eq!((changed[1].from, changed[1].to), (Some("down"), "ok"));
        assert!(
            changed[1].why.contains("answers in rfc"),
            "{}",
            changed[1].why
        );
    }
}
