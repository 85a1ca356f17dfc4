//! The key thread: the only writer of the key epoch, which also keeps the
//! radius, the interfaces and the delegation directories up to date and
//! applies reloads.
//!
//! ```text
//!  every 100 ms (parked on the monotonic clock; shutdown and reloads unpark it)
//!    ▶ reload requests (Engine::reload) ▶ mint from the new identities
//!      ── fails: the reply says why, nothing changes
//!      ▶ swap the epoch, keep the new settings, reply with the public keys
//!    ▶ the kernel's clock state ▶ radius and answering (clock.rs) ▶ ClockState
//!    ▶ interfaces: directed broadcasts, the XDP table's addresses
//!    ▶ every 5 s: rescan the delegation directories
//!    ▶ rotation due, another offline delegation, or now outside the epoch
//!      ▶ mint ▶ one store: a worker sees the old epoch or the new
//! ```

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::Arc;
use std::time::Duration;

use gnomon_protocol::LongTermKey;

use super::clock::{update_clock, ClockReader};
use super::{now_us, EngineConfig};
use crate::key::random_seed;
use crate::keys::{mint_epoch, offline_selection, KeySource, SharedKeys};
use crate::liveness::Beat;
use crate::reload::Reloads;
use crate::settings::ClockState;

/// Skew for clients slightly behind: a fresh delegation starts this long
/// before it is minted, µs.
pub(super) const SKEW_US: u64 = 60_000_000;

/// How often the key thread rescans the offline delegation directories.
const RESCAN_EVERY: Duration = Duration::from_secs(5);

/// The earliest time some identity runs out of delegations.
pub(super) fn horizon(sources: &[KeySource]) -> u64 {
    sources
        .iter()
        .map(KeySource::horizon_us)
        .min()
        .unwrap_or(u64::MAX)
}

/// What the key thread is asked to do on a reload.
pub(super) struct Request {
    /// The new settings (its key and clock parts are the key thread's).
    pub(super) config: EngineConfig,
    /// New identities, or `None` to keep the running ones.
    pub(super) sources: Option<Vec<KeySource>>,
    /// The public keys now served, or why nothing changed.
    pub(super) reply: SyncSender<io::Result<Vec<LongTermKey>>>,
}

/// Next rotation time: `period` from now, moved by up to ±`jitter_percent`
/// so servers (and restarts) do not rotate in step.
fn next_rotation(now: u64, period: Duration, jitter_percent: u8) -> u64 {
    let period = period.as_micros() as u64;
    let span = period / 100 * u64::from(jitter_percent);
    let roll = random_seed()
        .map(|s| u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]))
        .unwrap_or(0);
    let offset = if span == 0 { 0 } else { roll % (2 * span + 1) };
    now + period - span + offset
}

/// The key thread: rotates online keys before they expire, moves to the
/// next offline delegation when the current one ends, re-mints at once when
/// the clock has stepped out of the current delegation (either way),
/// refreshes the radius, rescans the delegation directories and applies
/// reloads. It is the only writer of the key epoch.
pub(super) struct Keeper {
    pub(super) keys: SharedKeys,
    pub(super) clock: Arc<ClockState>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) config: EngineConfig,
    pub(super) sources: Vec<KeySource>,
    pub(super) reader: ClockReader,
    pub(super) interfaces: crate::interfaces::Interfaces,
    pub(super) requests: mpsc::Receiver<Request>,
    pub(super) reloads: Arc<Reloads>,
    pub(super) horizon_us: Arc<AtomicU64>,
    /// Ticked once per poll, for the watchdog.
    pub(super) beat: Arc<Beat>,
}

impl Keeper {
    pub(super) fn run(mut self) {
        let mut next = next_rotation(
            now_us(),
            self.config.key_rotation,
            self.config.key_rotation_jitter_percent,
        );
        let mut selection = offline_selection(&self.sources, now_us());
        let mut scanned = std::time::Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            self.beat.tick();
            // The park is on the monotonic clock, so a step cannot stretch
            // it; shutdown and reloads unpark it.
            std::thread::park_timeout(Duration::from_millis(100));
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            while let Ok(request) = self.requests.try_recv() {
                if self.reload(request) {
                    selection = offline_selection(&self.sources, now_us());
                    next = next_rotation(
                        now_us(),
                        self.config.key_rotation,
                        self.config.key_rotation_jitter_percent,
                    );
                }
            }
            update_clock(&self.clock, &self.config, (self.reader)());
            // Interfaces come and go (DHCP, VPNs, containers): a new directed
            // broadcast is learnt within a second, a new or removed address
            // of the XDP table as soon as the kernel announces it.
            self.interfaces.tick();
            if scanned.elapsed() >= RESCAN_EVERY {
                self.rescan();
                scanned = std::time::Instant::now();
            }
            let now = now_us();
            let current = offline_selection(&self.sources, now);
            let stepped_out = !self.keys.load().covers(now);
            if now >= next || current != selection || stepped_out {
                // One store: a worker sees the old epoch or the new, both
                // valid. If no offline delegation covers now, keep the old
                // epoch: the responder refuses to sign outside its window
                // anyway, /health says so, and the next poll tries again.
                let validity = self.config.key_validity.as_micros() as u64;
                let (period, jitter) = (
                    self.config.key_rotation,
                    self.config.key_rotation_jitter_percent,
                );
                if let Ok(epoch) = mint_epoch(&self.sources, now, validity, SKEW_US) {
                    self.keys.store(Arc::new(epoch));
                    selection = current;
                    // A rotation deadline set before a step back could lie
                    // far in the new future: count the period from this mint.
                    next = next_rotation(now, period, jitter);
                } else if now >= next {
                    next = next_rotation(now, period, jitter);
                }
            }
        }
    }

    /// Apply a reload: mint an epoch from the new sources (or the running
    /// ones) under the new settings; on success swap it in and keep both,
    /// else keep everything. Returns whether it applied.
    fn reload(&mut self, request: Request) -> bool {
        let Request {
            config,
            sources,
            reply,
        } = request;
        let now = now_us();
        let validity = config.key_validity.as_micros() as u64;
        let minted = mint_epoch(
            sources.as_deref().unwrap_or(&self.sources),
            now,
            validity,
            SKEW_US,
        );
        let epoch = match minted {
            Ok(e) => e,
            Err(e) => {
                let _ = reply.send(Err(e));
                return false;
            }
        };
        let publics = epoch.identities.iter().map(|i| i.public.clone()).collect();
        self.keys.store(Arc::new(epoch));
        if let Some(s) = sources {
            self.sources = s;
        }
        self.config = config;
        // The radius policy applies now, not at the next poll.
        update_clock(&self.clock, &self.config, (self.reader)());
        self.horizon_us
            .store(horizon(&self.sources), Ordering::Relaxed);
        self.reloads.set_delegations(&self.sources);
        let _ = reply.send(Ok(publics));
        true
    }

    /// Read new and changed delegation files; the caller's selection check
    /// then switches to a new delegation if it is now the one to use.
    fn rescan(&mut self) {
        let (mut taken, mut rejected) = (0, 0);
        for source in &mut self.sources {
            let KeySource::Offline(store) = source else {
                continue;
            };
            let report = store.rescan();
            if let Some(e) = report.unreadable {
                tracing::warn!("offline delegations: {e}; keeping the ones loaded");
            }
            for e in &report.rejected {
                tracing::warn!("offline delegations: skipping a file: {e}");
            }
            for path in &report.taken {
                tracing::info!("offline delegations: loaded {}", path.display());
            }
            taken += report.taken.len();
            rejected += report.rejected.len();
        }
        if taken + rejected > 0 {
            self.reloads.rescanned(taken, rejected);
            self.reloads.set_delegations(&self.sources);
            self.horizon_us
                .store(horizon(&self.sources), Ordering::Relaxed);
        }
    }
}
