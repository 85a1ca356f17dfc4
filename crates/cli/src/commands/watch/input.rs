//! A monitor of monitors: `gnomon watch --servers-url URL --servers-key
//! KEY [--servers-threshold K]` watches the servers that K of the pinned
//! monitors' signed lists agree on, instead of a local --servers file.
//!
//! ```text
//!  before each round: gnomon_sync::signed::fetch (URL and URL.sig, Pins::check)
//!     ─▶ Monitors::apply (each key's newest list kept until its own expiry)
//!     ─▶ Monitors::merged (k of n) ─▶ changed? ─▶ the servers probed from now on
//! ```
//!
//! A list refused (bad signature, another key, expired, replayed, reused)
//! or not downloaded leaves that monitor's last good list in force until
//! its expiry; with fewer than K in force no server is watched, and the
//! rounds say so (no consensus, nothing published). The sequences seen are
//! kept for this process only: a restart takes any list that verifies and
//! has not expired.

use std::time::Duration;

use gnomon_client::Server;
use gnomon_sync::list::Loaded;
use gnomon_sync::refresh::Fetcher;
use gnomon_sync::signed::{self, Monitors};
use gnomon_watch::probe::Refresh;

/// Each download, connect to last byte: a list server must not hold a
/// round back longer.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The pinned monitors and their last good lists.
pub(super) struct SignedInput {
    urls: Vec<String>,
    fetcher: Fetcher,
    monitors: Monitors,
    /// The merged document the servers probed now come from.
    current: Vec<u8>,
    /// What the last fetch said, so each change is logged once.
    said: Vec<String>,
}

fn unix_now() -> i64 {
    gnomon_watch::probe::now_us().div_euclid(1_000_000)
}

impl SignedInput {
    /// The pins of `keys` with `threshold`, fetching from `urls`.
    pub(super) fn new(
        urls: &[String],
        keys: &[String],
        threshold: u16,
    ) -> Result<SignedInput, String> {
        let pins = signed::pins(keys, usize::from(threshold))?
            .ok_or("servers-url needs servers-key: the monitors' keys")?;
        Ok(SignedInput {
            urls: urls.to_vec(),
            fetcher: Fetcher::signed(None, FETCH_TIMEOUT)?,
            monitors: Monitors::new(pins),
            current: Vec::new(),
            said: Vec::new(),
        })
    }

    /// Fetch every URL now and take what is accepted; the merged list when
    /// it holds servers, else why there is none.
    pub(super) fn load(&mut self) -> Result<Loaded, String> {
        let now = unix_now();
        let fetch = signed::fetch(
            &self.fetcher,
            &self.urls,
            self.monitors.pins(),
            self.monitors.seen(),
            now,
        );
        self.monitors.apply(&fetch, now);
        let lines = fetch.lines(self.monitors.pins());
        if lines != self.said {
            for l in &lines {
                tracing::info!("signed list {l}");
            }
            self.said = lines;
        }
        let merged = self.monitors.merged(now);
        if let Some(why) = self.monitors.shortfall(now) {
            self.current.clear();
            return Err(why);
        }
        let what = format!("the merged list of {}", self.urls.join(", "));
        let loaded = gnomon_sync::list::parse(merged.document.clone(), &what)?;
        for l in &merged.left_out {
            tracing::info!(
                "{:?} is listed by {} of the pinned monitors, {} needed: not watched",
                l.name,
                l.listed_by,
                l.needed
            );
        }
        self.current = merged.document;
        Ok(loaded)
    }
}

impl Refresh for SignedInput {
    fn refresh(&mut self) -> Option<(Vec<Server>, Option<String>)> {
        let before = self.current.clone();
        match self.load() {
            Ok(loaded) if loaded.raw == before => None,
            Ok(loaded) => {
                tracing::info!(
                    "the pinned monitors' lists changed: {} server(s) watched from now on",
                    loaded.servers.len()
                );
                let reports = super::list_reports(&loaded.raw);
                Some((loaded.servers, reports))
            }
            Err(why) if before.is_empty() => {
                // Said at the change; nothing to take away.
                let _ = why;
                None
            }
            Err(why) => {
                tracing::warn!("no server is watched until enough lists are in force: {why}");
                Some((Vec::new(), None))
            }
        }
    }
}
