//! The service's signed lists: each monitor's list fetched at start and on
//! the list-refresh schedule (on a thread of its own, taken at the next
//! round), kept until its own expiry when a fetch fails or is refused, and
//! the k-of-n merge of the lists in force installed as the server list.
//!
//! ```text
//!  Service::new ──Signed::start──▶ restore (state dir) ─▶ fetch now ─▶ merged list
//!  Service::round ──poll──▶ finished fetch? ─▶ Monitors::apply ─▶ save, count, log
//!                     ├──▶ due? ─▶ thread: signed::fetch
//!                     └──▶ merge at the judged time ─▶ a new list, or none (and why)
//! ```
//!
//! Time is judged ([`judged_now`]) by the later of the local clock and the
//! last proven lower bound on the true time: the floor at start, then each
//! consensus the quorum agreed on, carried forward on the monotonic clock.

use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gnomon_protocol::signed_list::{Merged, Pins};
use gnomon_protocol::ServerList;

use crate::config::Settings;
use crate::counts::SignedLists;
use crate::jitter::{jittered, unit_random};
use crate::list;
use crate::refresh::Fetcher;
use crate::signed::store::{self, Status};
use crate::signed::{self, judged_now, Fetch, Monitors};
use crate::sink::Log;
use crate::state::Store;

/// The signed lists of a service with `servers-key`.
pub(super) struct Signed {
    monitors: Monitors,
    fetcher: Fetcher,
    urls: Vec<String>,
    every: Duration,
    /// How soon to fetch again when a monitor gave nothing new, or too
    /// few lists are in force: the round interval.
    retry: Duration,
    jitter: u8,
    next: Instant,
    pending: Option<Receiver<(Fetch, i64)>>,
    counts: Arc<SignedLists>,
    /// A lower bound on the true time, Unix µs, proven at that instant
    /// (the floor at start, then each consensus).
    proven: Option<(i128, Instant)>,
    /// The shortfall last said, so that it is said when it changes.
    said: Option<String>,
    /// The status last written, less its time: written again only when
    /// something else changed (each write is fsynced, every round).
    written: Option<Status>,
}

impl Signed {
    /// Restore what the state directory kept, fetch every URL once, and
    /// the list the merge gives. `floor_us` is the proven floor.
    pub(super) fn start(
        settings: &Settings,
        pins: Pins,
        store: &Store,
        trusted: bool,
        floor_us: Option<i64>,
        counts: Arc<SignedLists>,
        log: &Log,
    ) -> Result<(Signed, list::Loaded), String> {
        let fetcher = Fetcher::signed(settings.list_ca.as_deref(), settings.list_timeout)
            .map_err(|e| format!("list-ca: {e}"))?;
        let mut monitors = Monitors::new(pins);
        for n in store::restore(store, &mut monitors, trusted) {
            log(&format!("note: {n}"));
        }
        let mut s = Signed {
            monitors,
            fetcher,
            urls: settings.servers_url.clone(),
            every: settings.list_refresh,
            retry: settings.interval,
            jitter: settings.jitter,
            next: Instant::now(),
            pending: None,
            counts,
            proven: floor_us.map(|f| (i128::from(f), Instant::now())),
            said: None,
            written: None,
        };
        let now = s.judged();
        let f = signed::fetch(
            &s.fetcher,
            &s.urls,
            s.monitors.pins(),
            s.monitors.seen(),
            now,
        );
        s.take(&f, now, store, log);
        let merged = s.monitors.merged(now);
        let l = loaded(&merged);
        s.say_shortfall(now, log);
        Ok((s, l))
    }

    /// The time lists are judged at now, Unix seconds.
    pub(super) fn judged(&self) -> i64 {
        judged_now(local_unix(), self.proven_unix())
    }

    fn proven_unix(&self) -> Option<i64> {
        self.proven.map(|(us, at)| {
            let us = us + at.elapsed().as_micros() as i128;
            (us.div_euclid(1_000_000)) as i64
        })
    }

    /// What judged the time: the words status prints.
    fn judged_by(&self) -> &'static str {
        match self.proven_unix() {
            Some(p) if p > local_unix() => {
                "the last consensus or the floor (the local clock is behind the proven time)"
            }
            _ => "the local clock",
        }
    }

    /// A consensus the quorum agreed on: the true time was at least
    /// `low_us` (Unix µs) at `at`.
    pub(super) fn proven_at_least(&mut self, low_us: i128, at: Instant) {
        // The bound held before, carried forward to `at`, may be the
        // stronger one: a bound never goes down.
        let carried = self
            .proven
            .map(|(us, then)| us + at.saturating_duration_since(then).as_micros() as i128);
        self.proven = Some((carried.map_or(low_us, |c| c.max(low_us)), at));
    }

    /// Fetch again at the next poll (SIGHUP).
    pub(super) fn due_now(&mut self) {
        self.next = Instant::now();
    }

    /// A fetch made at `now`: counted, each URL's outcome logged, the
    /// monitors' lists replaced and saved, the next fetch scheduled.
    fn take(&mut self, f: &Fetch, now: i64, store: &Store, log: &Log) {
        for l in &f.lists {
            match &l.outcome {
                Ok(a) => {
                    self.counts.accepted();
                    log(&format!(
                        "signed list {}: {} server(s), {}",
                        l.url,
                        ServerList::parse(&a.document).map_or(0, |s| s.servers.len()),
                        signed::fetch::describe_accepted(self.monitors.pins(), a)
                    ));
                }
                Err(why) => {
                    self.counts.bump(why.label());
                    log(&format!("warning: signed list {}: {why}", l.url));
                }
            }
        }
        let replaced = self.monitors.apply(f, now);
        for i in replaced {
            if let Some(kept) = &self.monitors.slots()[i].kept {
                if let Err(e) = store::save_list(store, &self.monitors, kept) {
                    log(&format!(
                        "warning: cannot keep the list of {} in the state directory: {e}; after a \
                         restart it is fetched again, and an older one is refused only once a \
                         newer is seen",
                        signed::key_name(&self.monitors.pins().keys()[i])
                    ));
                }
            }
        }
        for (i, slot) in self.monitors.slots().iter().enumerate() {
            if let (Some(why), Some(k)) = (&slot.failure, &slot.kept) {
                if now < k.list.header.expires_unix {
                    log(&format!(
                        "note: keeping the list of {} (sequence {}) until it expires at {}: {why}",
                        signed::key_name(&self.monitors.pins().keys()[i]),
                        k.list.header.sequence,
                        gnomon_protocol::signed_list::format_utc(k.list.header.expires_unix)
                    ));
                }
            }
        }
        self.schedule(now);
    }

    /// The next fetch: every list-refresh ± jitter; sooner (the round
    /// interval) while a monitor gave nothing new or too few lists are in
    /// force; and by half the time left before the first list in force
    /// expires, so that a monitor publishing on time is never missed.
    fn schedule(&mut self, now: i64) {
        let merged = self.monitors.merged(now);
        let degraded = self.monitors.slots().iter().any(|s| s.failure.is_some())
            || self.monitors.shortfall(now).is_some();
        let mut wait = if degraded {
            self.retry.min(self.every)
        } else {
            self.every
        };
        if let Some(e) = merged.expires_unix {
            let half = Duration::from_secs(((e - now).max(0) as u64) / 2);
            wait = wait.min(half.max(self.retry.min(self.every)));
        }
        self.next = Instant::now() + jittered(wait, self.jitter, unit_random());
    }

    /// Take a finished fetch and start the next when due; then the merge
    /// at the judged time. `Some` when the list it gives differs from
    /// `current` (the raw bytes of the list in use).
    pub(super) fn poll(
        &mut self,
        current: &[u8],
        store: &Store,
        log: &Log,
    ) -> Option<list::Loaded> {
        if let Some(rx) = &self.pending {
            match rx.try_recv() {
                Ok((f, at)) => {
                    self.pending = None;
                    self.take(&f, at, store, log);
                }
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => self.pending = None,
            }
        }
        let now = self.judged();
        if self.pending.is_none() && Instant::now() >= self.next {
            self.spawn(now);
        }
        self.say_shortfall(now, log);
        let merged = self.monitors.merged(now);
        (merged.document != current).then(|| loaded(&merged))
    }

    fn spawn(&mut self, now: i64) {
        // Until the thread is done, the next due time is no sooner than the
        // retry: a hung download is not started again at every round.
        self.next = Instant::now() + self.retry.min(self.every);
        let (tx, rx) = mpsc::channel();
        let (fetcher, urls) = (self.fetcher.clone(), self.urls.clone());
        let (pins, seen) = (self.monitors.pins().clone(), self.monitors.seen().clone());
        let spawned = std::thread::Builder::new()
            .name("gnomon-signed".into())
            .spawn(move || {
                let f = signed::fetch(&fetcher, &urls, &pins, &seen, now);
                let _ = tx.send((f, now));
            });
        if spawned.is_ok() {
            self.pending = Some(rx);
        }
    }

    /// Say why the lists give no server, once each time it changes, and
    /// when they give servers again.
    fn say_shortfall(&mut self, now: i64, log: &Log) {
        let why = self.monitors.shortfall(now);
        if why == self.said {
            return;
        }
        match &why {
            Some(w) => log(&format!("warning: {w}")),
            None => log(&format!(
                "signed lists: {} of {} monitors' lists in force (servers-threshold {})",
                self.monitors.in_force(now).len(),
                self.monitors.pins().keys().len(),
                self.monitors.pins().threshold()
            )),
        }
        self.said = why;
    }

    /// Why no server comes from the lists now, if none does.
    pub(super) fn shortfall(&self) -> Option<String> {
        self.monitors.shortfall(self.judged())
    }

    /// The status now, as `--status` would read it.
    pub(super) fn status(&self) -> Status {
        Status::of(
            &self.monitors,
            self.judged(),
            self.judged_by(),
            &self.counts,
        )
    }

    /// What `--status` reads: written to the state directory. And what
    /// `/metrics` shows.
    pub(super) fn report(&mut self, store: &Store, log: &Log) -> Status {
        let status = self.status();
        let timeless = Status {
            written_unix: 0,
            ..status.clone()
        };
        if self.written.as_ref() != Some(&timeless) {
            match store::write_status(store, &status) {
                Ok(()) => self.written = Some(timeless),
                Err(e) => log(&format!(
                    "note: cannot write the signed lists' status ({e}); --status shows it stale"
                )),
            }
        }
        status
    }
}

/// The merged list as the service's list: parsed as from a file, or, when
/// it names no server, an empty list (the rounds then ask nobody).
fn loaded(merged: &Merged) -> list::Loaded {
    let what = "the merged signed lists";
    match list::parse(merged.document.clone(), what) {
        Ok(mut l) => {
            for o in &merged.left_out {
                l.notes.push(format!(
                    "{what}: {} is not used: listed by {} of the pinned monitors, fewer than \
                     servers-threshold {}",
                    o.name, o.listed_by, o.needed
                ));
            }
            l
        }
        Err(_) => list::Loaded {
            raw: merged.document.clone(),
            list: ServerList::parse(&merged.document).unwrap_or(ServerList {
                servers: Vec::new(),
                sources: Vec::new(),
                reports: None,
                ignored_urls: Vec::new(),
            }),
            servers: Vec::new(),
            notes: Vec::new(),
        },
    }
}

fn local_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests;
