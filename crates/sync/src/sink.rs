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

/// Where log lines go (stderr in the CLI).
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;
