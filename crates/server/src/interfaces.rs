//! The key thread's view of the host's interfaces: the directed-broadcast
//! table every worker filters sources with, and, when the AF_XDP path
//! runs, the program's table of local addresses and the interface's MAC.
//! Both are reread every second, and at once (within the key thread's
//! tenth-of-a-second poll) when the kernel announces a change.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sources::Broadcasts;
use crate::xdp::{AddressEvents, Gate};

/// How often the tables are reread without an announcement.
const REREAD_EVERY: Duration = Duration::from_secs(1);

/// What the key thread keeps current.
pub(crate) struct Interfaces {
    broadcasts: Arc<Broadcasts>,
    gate: Option<Arc<Gate>>,
    /// `None` when the subscription failed: the periodic reread remains.
    events: Option<AddressEvents>,
    read_at: Instant,
    /// The last reread's error, said once rather than every second.
    failing: Option<String>,
}

impl Interfaces {
    pub(crate) fn new(broadcasts: Arc<Broadcasts>, gate: Option<Arc<Gate>>) -> Interfaces {
        // Only the XDP table needs prompt news; the broadcast table is an
        // optimisation the kernel backs up (sources.rs).
        let events = gate.as_ref().and_then(|_| AddressEvents::subscribe().ok());
        Interfaces {
            broadcasts,
            gate,
            events,
            read_at: Instant::now(),
            failing: None,
        }
    }

    /// Reread the tables if a change was announced or a second has passed.
    pub(crate) fn tick(&mut self) {
        let announced = self.events.as_ref().is_some_and(AddressEvents::changed);
        if !announced && self.read_at.elapsed() < REREAD_EVERY {
            return;
        }
        let _ = self.broadcasts.refresh();
        if let Some(gate) = &self.gate {
            match gate.refresh() {
                Ok(()) if self.failing.take().is_some() => {
                    tracing::info!("xdp: the host's addresses are read again");
                }
                Ok(()) => {}
                Err(e) => {
                    let said = e.to_string();
                    if self.failing.as_deref() != Some(&said) {
                        tracing::warn!(
                            "xdp: cannot reread the host's addresses: {said}; the program keeps the last ones read"
                        );
                    }
                    self.failing = Some(said);
                }
            }
        }
        self.read_at = Instant::now();
    }
}
