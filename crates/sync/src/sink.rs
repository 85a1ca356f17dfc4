//! Where a round goes besides the state: the sinks (chrony's SOCK
//! refclock is one) and the log. Plain interfaces that the service calls
//! and the parts it wires (chrony, the now socket) implement or hold; this
//! module imports nothing of theirs, so none of them reads the service.

use std::sync::Arc;

use gnomon_client::Server;

use crate::round::Round;

/// Where every round goes besides the log and the state: chrony's SOCK
/// refclock, metrics. Called after each round, in order; an error is
/// logged and the service goes on.
pub trait Sink: Send {
    /// A short name for the log.
    fn name(&self) -> &str;
    /// One round. `round.usable()` says whether its consensus may be
    /// used for the clock; `round.evidence()` and `round.local_at()` give
    /// the numbers.
    fn round(&mut self, round: &Round, servers: &[Server]) -> Result<(), String>;
}

/// Where log lines go (stderr in the CLI). A line says how severe it is
/// by its first word, `warning: …`, `error: …` or `note: …`, and a few
/// failures by their opening words (`round failed: …`, `cannot …`,
/// `report NOT delivered …`): [`log_level`] reads them, so a logger with
/// levels (the service's) gives each its level, and one without (a
/// one-shot round's stderr) prints the line as it is.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// How severe a log line is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineLevel {
    /// What happened, or a note.
    Info,
    /// Something the operator should look at; the service goes on.
    Warning,
    /// Something failed.
    Error,
}

/// A line's level and its text without the word that gave it (`warning:
/// x` is x at [`LineLevel::Warning`]).
pub fn log_level(line: &str) -> (LineLevel, &str) {
    for (word, level) in [
        ("warning: ", LineLevel::Warning),
        ("error: ", LineLevel::Error),
        ("note: ", LineLevel::Info),
    ] {
        if let Some(rest) = line.strip_prefix(word) {
            return (level, rest);
        }
    }
    let failed = ["round failed", "cannot ", "report NOT delivered"]
        .iter()
        .any(|w| line.starts_with(w));
    if failed {
        (LineLevel::Warning, line)
    } else {
        (LineLevel::Info, line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_says_its_level_by_its_first_words() {
        assert_eq!(
            log_level("warning: chrony: not sending"),
            (LineLevel::Warning, "chrony: not sending")
        );
        assert_eq!(log_level("note: cached"), (LineLevel::Info, "cached"));
        assert_eq!(log_level("error: gone"), (LineLevel::Error, "gone"));
        assert_eq!(
            log_level("round failed: no list"),
            (LineLevel::Warning, "round failed: no list")
        );
        assert_eq!(
            log_level("round 3: consensus"),
            (LineLevel::Info, "round 3: consensus")
        );
    }
}
