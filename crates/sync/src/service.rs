//! The service: rounds on a jittered interval, servers that lie excluded
//! until they agree again, servers that do not answer retried with
//! backoff, the floor and the chain saved after every round, reports
//! written and sent, and every round handed to the sinks (chrony's SOCK
//! refclock is one).
//!
//! ```text
//!  Control (Stop, Reload) ──▶ Service::run ──every interval ± jitter──▶ Service::round
//!                                                   │ round::run (client sequence + consensus)
//!                                                   ├─▶ state: floor, excluded, last round, chain
//!                                                   ├─▶ report file + POST (own thread)
//!                                                   ├─▶ one log line
//!                                                   └─▶ sinks
//! ```
//!
//! Here: the service, its start, reload and loop. `one_round` is the
//! round itself (whom to ask, what it leaves behind), `summary` its log
//! line, `reports` the POSTs of the reports it writes.

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gnomon_client::Server;

use crate::config::Settings;
use crate::jitter::{jittered, unit_random};
use crate::list;
use crate::metrics::SyncMetrics;
use crate::now::{Board, Floor, KernelClock, Reading};
use crate::refresh::{self, Refresher};
use crate::round::Round;
pub use crate::sink::{Log, Sink};
use crate::state::{self, floor, Loaded, State, Store};

mod one_round;
mod reports;
mod signed;
mod summary;

/// What the process asks of a running service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Stop after the current round (SIGTERM, SIGINT).
    Stop,
    /// Read the server list again (SIGHUP).
    Reload,
}

/// The running service.
pub struct Service {
    settings: Settings,
    store: Store,
    state: State,
    list: list::Loaded,
    /// Per list index: failures in a row and the first round to ask again.
    backoff: Vec<(u32, u64)>,
    round_no: u64,
    sinks: Vec<Box<dyn Sink>>,
    log: Log,
    loopback_reports: bool,
    /// Each report thread sends one message when it is done.
    reports_done: (Sender<()>, Receiver<()>),
    reports_pending: usize,
    /// Log the round's summary line (a one-shot run prints it itself).
    log_rounds: bool,
    /// The list refresh, when the list has `sources` or a URL is given.
    refresher: Option<Refresher>,
    /// What `--metrics` shows.
    metrics: Arc<SyncMetrics>,
    /// The operator's list file as last read: what a refreshed cache
    /// descends from.
    seed: Option<Vec<u8>>,
    /// What the now socket answers from.
    board: Arc<Board>,
    /// The monitors' signed lists, with `servers-key`: the list is their
    /// merge.
    signed: Option<signed::Signed>,
}

/// What one round did, for `--once`, `--check` and tests.
#[derive(Debug)]
pub struct Outcome {
    /// The round.
    pub round: Round,
    /// The floor before this round, Unix µs.
    pub floor_before_us: Option<i128>,
    /// The report file written.
    pub report_file: Option<PathBuf>,
    /// The summary line that was logged.
    pub line: String,
}

/// What a service without a server list is told.
const NO_LIST: &str =
    "no server list: give --servers LIST.json or --servers-url URL (or `servers` in [sync])";

impl Service {
    /// Open the state directory and load the state and the list. Warnings
    /// (state missing or corrupt, list from the cache) go to `log`; `Err`
    /// only when no list loads.
    pub fn new(settings: Settings, log: Log, loopback_reports: bool) -> Result<Service, String> {
        // A usage error must leave the machine as it was: no state
        // directory made for a service that cannot run.
        if settings.servers.is_none() && settings.servers_url.is_empty() {
            return Err(NO_LIST.into());
        }
        // The CLI checked them; a library caller gets the same refusals.
        settings.check(&crate::config::Layer::default())?;
        let pins = crate::signed::pins(&settings.servers_key, settings.servers_threshold)?;
        let fetcher = refresh::Fetcher::new(settings.list_ca.as_deref(), settings.list_timeout)
            .map_err(|e| format!("list-ca: {e}"))?;
        // Nor for a list that does not load: without the directory there
        // is no cache to fall back on, so the list is read (or, with only
        // a URL, downloaded) before the directory is made.
        let mut first_download = None;
        // Signed lists need no list to start: with none in force the
        // service runs, says why, and fetches again.
        if !settings.state_dir.is_dir() && pins.is_none() {
            let at = Store::at(&settings.state_dir);
            match &settings.servers {
                Some(path) => list::check_without_cache(path, &at)?,
                None => first_download = Some(download(&fetcher, &settings)?),
            }
        }
        let store = match Store::open(&settings.state_dir) {
            Ok(s) => s,
            Err(e) => {
                log(&format!(
                    "warning: cannot create the state directory {}: {e}; nothing will be saved",
                    settings.state_dir.display()
                ));
                Store::at(&settings.state_dir)
            }
        };
        // The list cache is believed only from a directory nobody else
        // can write (whoever can could forge its record too).
        let trusted = match store.trust() {
            Ok(()) => true,
            Err(why) => {
                log(&format!(
                    "warning: {why}: nothing saved in it is believed (no floor, no marks, no \
                     cached list; state is still written); make it owned by the user running \
                     gnomon sync and writable by nobody else (chmod go-w)"
                ));
                false
            }
        };
        // The floor and the marks too: whoever may write the directory
        // could plant a floor in the future (no step would ever be made)
        // or one in the past (the rollback guard gone).
        let state = match (trusted, store.load()) {
            (true, Loaded::Ok(s)) => *s,
            (_, Loaded::Warning(w)) => {
                log(&format!("warning: {w}"));
                State::default()
            }
            _ => State::default(),
        };
        let metrics = Arc::new(SyncMetrics::default());
        let mut signed = None;
        let (list, seed) = match (&settings.servers, pins) {
            (_, Some(pins)) => {
                let (s, l) = signed::Signed::start(
                    &settings,
                    pins,
                    &store,
                    trusted,
                    state.floor_us,
                    metrics.signed.clone(),
                    &log,
                )?;
                signed = Some(s);
                (l, None)
            }
            (Some(path), None) => list::load(path, &settings.servers_url, &store, trusted)?,
            // No file of the operator's: the last list fetched from these
            // URLs, or one fetched now.
            (None, None) => {
                let cached = match first_download {
                    Some(_) => Err(None),
                    None => list::cached_from_url(&store, &settings.servers_url, trusted),
                };
                match cached {
                    Ok(l) => (l, None),
                    Err(ignored) => {
                        if let Some(why) = ignored {
                            log(&format!("note: {why}"));
                        }
                        let (url, l) = match first_download.take() {
                            Some(d) => d,
                            None => download(&fetcher, &settings)?,
                        };
                        if let Err(e) = refresh::cache(&store, &l.raw, &url, None, None, Some(&url))
                        {
                            log(&format!("note: cannot cache the list: {e}"));
                        }
                        (l, None)
                    }
                }
            }
        };
        let board = Board::new(board_floor(&state, None), Arc::new(KernelClock));
        // Signed lists are fetched by their own schedule; a merged list's
        // `sources` are the monitors' and are not refreshed from.
        let plain = signed.is_none();
        let refresher = (plain
            && (!settings.servers_url.is_empty() || !list.list.sources.is_empty()))
        .then(|| {
            Refresher::new(
                fetcher,
                metrics.refresh.clone(),
                settings.servers_url.clone(),
                settings.list_refresh,
                settings.jitter,
            )
        });
        for n in &list.notes {
            log(&format!("note: {n}"));
        }
        let n = list.servers.len();
        if n == 0 && signed.is_some() {
            // Said by the signed lists (why none is in force).
        } else if n < settings.quorum {
            log(&format!(
                "warning: the list has {n} usable server(s), fewer than the quorum ({}): \
                 no consensus can be used",
                settings.quorum
            ));
        } else if n < settings.min_servers {
            log(&format!(
                "note: the list has {n} usable server(s), fewer than min-servers ({}); \
                 RFC 10049's measurement sequence asks for at least 3",
                settings.min_servers
            ));
        }
        if let Some(s) = signed.as_mut() {
            metrics.set_signed(s.report(&store, &log));
        }
        Ok(Service {
            settings,
            store,
            state,
            list,
            backoff: vec![(0, 0); n],
            round_no: 0,
            sinks: Vec::new(),
            log,
            loopback_reports,
            reports_done: mpsc::channel(),
            reports_pending: 0,
            log_rounds: true,
            refresher,
            metrics,
            seed,
            board: Arc::new(board),
            signed,
        })
    }

    /// Leave the round's summary line to the caller ([`Outcome::line`]).
    pub fn quiet_rounds(&mut self) {
        self.log_rounds = false;
    }

    /// Add a sink.
    pub fn add_sink(&mut self, sink: Box<dyn Sink>) {
        self.sinks.push(sink);
    }

    /// The state as loaded or last saved.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// The servers of the current list.
    pub fn servers(&self) -> &[Server] {
        &self.list.servers
    }

    /// The signed lists' status, with `servers-key`.
    pub fn signed_status(&self) -> Option<crate::signed::store::Status> {
        self.signed.as_ref().map(signed::Signed::status)
    }

    /// What the now socket answers from (crate::now).
    pub fn board(&self) -> Arc<Board> {
        self.board.clone()
    }

    /// Rounds run so far.
    pub fn rounds(&self) -> u64 {
        self.round_no
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Read the list again; a list that fails, or names fewer servers than
    /// the quorum, keeps the old one and says so.
    pub fn reload(&mut self) {
        // A floor the operator cleared is dropped now, not a round later.
        drop(floor::guard(&self.store, &mut self.state, &*self.log));
        self.board.update(None, board_floor(&self.state, None));
        if let Some(s) = self.signed.as_mut() {
            s.due_now();
            (self.log)("reload: the signed lists will be fetched again");
            return;
        }
        let Some(path) = self.settings.servers.clone() else {
            // No file: the list is the URL's; download it again now (the
            // answer is taken at the next round).
            if let Some(r) = self.refresher.as_mut() {
                r.due_now();
                (self.log)("reload: no list file; the list will be downloaded again");
            }
            return;
        };
        let fresh = state::read_bounded(&path)
            .map_err(|e| format!("{}: {e}", path.display()))
            .and_then(|raw| list::parse(raw, &path.display().to_string()));
        match fresh {
            Ok(l) if l.servers.len() < self.settings.quorum => (self.log)(&format!(
                "reload: {} names {} usable server(s), fewer than the quorum ({}); keeping the old list",
                path.display(),
                l.servers.len(),
                self.settings.quorum
            )),
            Ok(l) => {
                // Written, not compared: the directory's trust is not
                // asked again here.
                if let Err(e) = list::cache_file(&self.store, &path, &l.raw, false) {
                    (self.log)(&format!("note: cannot cache the list: {e}"));
                }
                self.seed = Some(l.raw.clone());
                (self.log)(&format!(
                    "reload: {} usable server(s) from {}",
                    l.servers.len(),
                    path.display()
                ));
                self.backoff = vec![(0, 0); l.servers.len()];
                self.list = l;
            }
            Err(e) => (self.log)(&format!("reload: {e}; keeping the old list")),
        }
    }

    /// Rounds until `Stop` (or the sender goes away).
    pub fn run(&mut self, control: &Receiver<Control>) {
        loop {
            if let Err(e) = self.round() {
                self.metrics.round_failed();
                (self.log)(&format!("round failed: {e}"));
            }
            let wait = self.next_wait();
            let until = Instant::now() + wait;
            loop {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                match control.recv_timeout(left) {
                    Ok(Control::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                    Ok(Control::Reload) => self.reload(),
                    Err(RecvTimeoutError::Timeout) => break,
                }
            }
        }
    }

    /// The interval ± jitter.
    fn next_wait(&self) -> Duration {
        jittered(self.settings.interval, self.settings.jitter, unit_random())
    }

    /// What `--metrics` shows.
    pub fn metrics(&self) -> Arc<SyncMetrics> {
        self.metrics.clone()
    }

    /// The signed lists: a finished fetch taken, the next started when
    /// due, and the merge at the judged time installed when it changed.
    fn poll_signed(&mut self) {
        let Some(s) = self.signed.as_mut() else {
            return;
        };
        if let Some(l) = s.poll(&self.list.raw, &self.store, &self.log) {
            for n in &l.notes {
                (self.log)(&format!("note: {n}"));
            }
            if !l.servers.is_empty() {
                (self.log)(&format!(
                    "signed lists: {} server(s) in the merged list",
                    l.servers.len()
                ));
            }
            self.backoff = vec![(0, 0); l.servers.len()];
            self.list = l;
        }
    }

    /// Take a finished refresh (installing a good list) and start the
    /// next one when due. Never waits for a download.
    fn poll_refresh(&mut self) {
        let quorum = self.settings.quorum;
        let Some(r) = self.refresher.as_mut() else {
            return;
        };
        let Some(attempt) = r.poll(&self.list.list.sources, quorum) else {
            return;
        };
        (self.log)(&r.account(&attempt));
        let Some((url, l)) = attempt.fresh else {
            return;
        };
        if l.raw == self.list.raw {
            return;
        }
        if let Err(e) = refresh::cache(
            &self.store,
            &l.raw,
            &url,
            self.settings.servers.as_deref(),
            self.seed.as_deref(),
            self.settings
                .servers_url
                .iter()
                .find(|u| **u == url)
                .map(String::as_str),
        ) {
            (self.log)(&format!("note: cannot cache the refreshed list: {e}"));
        }
        for n in &l.notes {
            (self.log)(&format!("note: {n}"));
        }
        self.backoff = vec![(0, 0); l.servers.len()];
        self.list = l;
    }
}

/// The list from the first of `servers-url` that gives one, and that URL,
/// at start, when no cache stands in for it.
fn download(
    fetcher: &refresh::Fetcher,
    settings: &Settings,
) -> Result<(String, list::Loaded), String> {
    let a = refresh::attempt(fetcher, &settings.servers_url, settings.quorum);
    match a.fresh {
        Some(fresh) => Ok(fresh),
        None => {
            let why: Vec<String> = a.failed.iter().map(|(u, f)| format!("{u}: {f}")).collect();
            Err(format!("no server list: {}", why.join("; ")))
        }
    }
}

/// The floor the now socket answers with, from `state`; `proven` is the
/// reading of the round that raised it, when this one did.
fn board_floor(state: &State, proven: Option<Reading>) -> Option<Floor> {
    state.floor_us.map(|us| Floor {
        us: i128::from(us),
        proven_at_us: state.floor_proven_at_us.map(i128::from),
        proven_reading: proven,
    })
}
