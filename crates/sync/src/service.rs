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

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_client::{
    describe_assumption, format_duration_us, format_utc, no_reports_url, post_report, reports_url,
    Backoff, Electorate, Flag, PostPolicy, QueryError, Server, TcpMode,
};

use crate::config::Settings;
use crate::decision::{below_floor, raise_floor};
use crate::jitter::{jittered, unit_random};
use crate::list;
use crate::metrics::SyncMetrics;
use crate::now::{Anchor, Board, Floor, KernelClock, Reading};
use crate::refresh::{self, Refresher};
use crate::round::{self, Round};
pub use crate::sink::{Log, Sink};
use crate::state::{self, floor, Excluded, LastRound, Loaded, State, Store};

/// What the process asks of a running service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Stop after the current round (SIGTERM, SIGINT).
    Stop,
    /// Read the server list again (SIGHUP).
    Reload,
}

/// Longest a server that does not answer is left out: 2^6 rounds.
const MAX_BACKOFF_SHIFT: u32 = 6;

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
        if settings.servers.is_none() && settings.servers_url.is_none() {
            return Err(NO_LIST.into());
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
        let fetcher = refresh::Fetcher::new(settings.list_ca.as_deref(), settings.list_timeout)
            .map_err(|e| format!("list-ca: {e}"))?;
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
        let (list, seed) = match (&settings.servers, &settings.servers_url) {
            (Some(path), url) => list::load(path, url.as_deref(), &store, trusted)?,
            // No file of the operator's: the last list fetched from this
            // URL, or one fetched now.
            (None, Some(url)) => match list::cached_from_url(&store, url, trusted) {
                Ok(l) => (l, None),
                Err(ignored) => {
                    if let Some(why) = ignored {
                        log(&format!("note: {why}"));
                    }
                    let a = refresh::attempt(&fetcher, std::slice::from_ref(url), settings.quorum);
                    let Some((_, l)) = a.fresh else {
                        let why: Vec<String> =
                            a.failed.iter().map(|(u, f)| format!("{u}: {f}")).collect();
                        return Err(format!("no server list: {}", why.join("; ")));
                    };
                    if let Err(e) = refresh::cache(&store, &l.raw, url, None, None, Some(url)) {
                        log(&format!("note: cannot cache the list: {e}"));
                    }
                    (l, None)
                }
            },
            (None, None) => return Err(NO_LIST.into()),
        };
        let metrics = Arc::new(SyncMetrics::default());
        let board = Board::new(board_floor(&state, None), Arc::new(KernelClock));
        let refresher =
            (settings.servers_url.is_some() || !list.list.sources.is_empty()).then(|| {
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
        if n < settings.quorum {
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

    /// What the now socket answers from (crate::now).
    pub fn board(&self) -> Arc<Board> {
        self.board.clone()
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
            self.settings.servers_url.as_deref(),
        ) {
            (self.log)(&format!("note: cannot cache the refreshed list: {e}"));
        }
        for n in &l.notes {
            (self.log)(&format!("note: {n}"));
        }
        self.backoff = vec![(0, 0); l.servers.len()];
        self.list = l;
    }

    /// Whom to ask this round: every server not backing off; when that is
    /// fewer than `min-servers`, those backing off too, soonest due first.
    fn choose(&self) -> Vec<usize> {
        let n = self.list.servers.len();
        let mut ask: Vec<usize> = (0..n)
            .filter(|&i| self.backoff[i].1 <= self.round_no)
            .collect();
        if ask.len() < self.settings.min_servers {
            let mut waiting: Vec<usize> = (0..n).filter(|i| !ask.contains(i)).collect();
            waiting.sort_by_key(|&i| self.backoff[i].1);
            let missing = self.settings.min_servers - ask.len();
            ask.extend(waiting.into_iter().take(missing));
            ask.sort_unstable();
        }
        ask
    }

    fn client_config(&self) -> gnomon_client::Config {
        gnomon_client::Config {
            backoff: Backoff {
                initial: self.settings.timeout,
                attempts: self.settings.retries,
                ..Backoff::QUERY
            },
            tcp: TcpMode::Fallback,
            ..gnomon_client::Config::default()
        }
    }

    fn excluded_key(&self, i: usize) -> bool {
        let key = B64.encode(self.list.servers[i].public_key.bytes());
        self.state.excluded.iter().any(|e| e.public_key == key)
    }

    /// One round: measure, decide, save, report, log, sinks.
    pub fn round(&mut self) -> Result<Outcome, QueryError> {
        self.poll_refresh();
        let ask = self.choose();
        let excluded: Vec<bool> = (0..self.list.servers.len())
            .map(|i| self.excluded_key(i))
            .collect();
        // The whole list's assumption, whoever is asked: a server backing
        // off is as silent as one an attacker drops.
        let bar = round::Bar {
            assumption: Electorate::of(&self.list.servers).assume(self.settings.max_liars),
            quorum: self.settings.quorum,
            max_radius_us: self.settings.max_radius.as_micros() as i128,
        };
        let mut round = round::run(
            self.client_config(),
            &self.list.servers,
            &ask,
            &|i| excluded[i],
            bar,
        )?;
        self.round_no += 1;
        let servers = self.list.servers.clone();
        let name = |i: usize| servers[i].name.clone();

        // Backoff for the silent, forgiveness for the rest.
        for &i in &ask {
            let b = &mut self.backoff[i];
            if round.unreachable.iter().any(|u| u.0 == i) {
                b.0 = b.0.saturating_add(1);
                b.1 = self.round_no + (1u64 << (b.0 - 1).min(MAX_BACKOFF_SHIFT)) - 1;
            } else {
                *b = (0, 0);
            }
        }
        // Those backing off were not asked, and are unreachable all the
        // same: the log, the state and the gauge keep showing them.
        for (i, &(_, due)) in self.backoff.iter().enumerate() {
            if !ask.contains(&i) {
                let why = format!("backing off until round {}", due + 1);
                round.unreachable.push((i, why));
            }
        }
        round.unreachable.sort_by_key(|u| u.0);
        // Liars out, the reformed back in.
        let now_us = round.local_end_us;
        for &(i, _) in &round.outside {
            let key = B64.encode(servers[i].public_key.bytes());
            if !self.state.excluded.iter().any(|e| e.public_key == key) {
                self.state.excluded.push(Excluded {
                    name: name(i),
                    public_key: key,
                    since_us: now_us as i64,
                });
            }
        }
        for &i in &round.rejoined {
            let key = B64.encode(servers[i].public_key.bytes());
            self.state.excluded.retain(|e| e.public_key != key);
        }

        // Held until the state is saved: a floor the operator cleared
        // meanwhile is taken here and not written back (state::floor).
        let lock = floor::guard(&self.store, &mut self.state, &*self.log);
        let floor_before_us = self.state.floor_us.map(i128::from);
        let mut warnings = Vec::new();
        // The floor and the anchor rest on one bar: a consensus that
        // exists and the quorum agrees on. However wide: a wide consensus
        // is a weaker bound, not a wrong one (max-radius only bounds what
        // may steer the clock).
        let proof = round.consensus.as_ref().filter(|_| round.quorum_met);
        let mut raised = false;
        if let Some(e) = proof.and(round.evidence()) {
            if below_floor(floor_before_us, &e, now_us) {
                self.metrics.floor_contradiction();
                let f = floor_before_us.unwrap_or_default();
                let utc = |us: i128| format_utc(us.max(0) as u64);
                warnings.push(format!(
                    "round {}: the consensus [{}, {}] lies wholly below the proven floor {}{}: \
                     the servers agree on a time this machine proved has passed, so the round or \
                     the floor is wrong; the now socket answers \"contradiction\" (if the floor \
                     is wrong: gnomon sync --clear-floor)",
                    self.round_no,
                    utc(now_us + e.low_us),
                    utc(now_us + e.high_us),
                    utc(f),
                    self.state
                        .floor_proven_at_us
                        .map_or(String::new(), |p| format!(
                            " (proven at {})",
                            utc(i128::from(p))
                        )),
                ));
            }
            let new = raise_floor(floor_before_us, &e, now_us);
            if floor_before_us != Some(new) {
                self.state.floor_us = Some(new as i64);
                self.state.floor_proven_at_us = Some(now_us as i64);
                raised = true;
            }
        }

        // A contradiction in the chain proves that one of its two signers
        // lied, not which: the report carries the whole chain and names
        // nobody. It is made when a pair in it involves no server marked
        // before (a marked liar contradicting again was reported when it
        // was caught).
        let fresh_lie = round
            .sequence
            .contradicting_servers()
            .iter()
            .any(|&(a, b)| !excluded[round.asked[a]] && !excluded[round.asked[b]]);
        let report_file = round.report.as_ref().filter(|_| fresh_lie).and_then(|r| {
            let body = r.to_json();
            let file = format!("{}/report-{}.json", state::REPORTS_DIR, now_us);
            match self.store.write(&file, body.as_bytes()) {
                Ok(p) => {
                    self.send_report(body);
                    Some(p)
                }
                Err(e) => {
                    warnings.push(format!("cannot write the report: {e}"));
                    self.send_report(body);
                    None
                }
            }
        });

        let outside: Vec<String> = round
            .outside
            .iter()
            .map(|&(i, f)| format!("{} ({})", name(i), flag_words(f)))
            .chain(
                round
                    .still_out
                    .iter()
                    .map(|&i| format!("{} (marked, still outside)", name(i))),
            )
            .collect();
        let c = round.consensus.as_ref();
        self.state.last = Some(LastRound {
            at_us: now_us as i64,
            ok: round.quorum_met,
            offset_low_us: c.map(|c| c.low_us as i64),
            offset_high_us: c.map(|c| c.high_us as i64),
            agreeing: c
                .map(|c| c.agreeing.iter().map(|&i| name(i)).collect())
                .unwrap_or_default(),
            outside: outside.clone(),
            unreachable: unreachable_words(&round, &servers),
            report: report_file.as_ref().map(|p| p.display().to_string()),
            assumption: Some(describe_assumption(round.assumption, round.answered)),
            no_consensus: round.why_none.clone(),
        });
        // The anchor: the consensus's interval for true time at the end
        // of the round (local_end_us is the local clock at `round.ended`,
        // as the client placed the answers), pinned to the clocks read now
        // (crate::now: the moment since the round's end widens it).
        let reading = self.board.read();
        let anchor = proof.map(|c| {
            Anchor::pin(
                reading,
                round.ended_boot_ns,
                (now_us + c.low_us, now_us + c.high_us),
                self.round_no,
                c.agreeing.iter().map(|&i| name(i)).collect(),
                describe_assumption(round.assumption, round.answered),
            )
        });
        self.board
            .update(anchor, board_floor(&self.state, raised.then_some(reading)));
        if let Err(e) = self.store.save(&self.state) {
            warnings.push(format!("cannot save the state: {e}"));
        }
        drop(lock);
        if let Err(e) = self
            .store
            .write(state::CHAIN_FILE, round.chain.to_json().as_bytes())
        {
            warnings.push(format!("cannot save the chain: {e}"));
        }

        // Before the line is logged: whoever reads the log and then
        // scrapes sees this round counted.
        self.metrics.record_round(&round, self.list.servers.len());
        let line = self.summary(&round, &outside, report_file.as_ref());
        if self.log_rounds {
            (self.log)(&line);
        }
        for w in warnings {
            (self.log)(&format!("warning: {w}"));
        }
        for sink in &mut self.sinks {
            if let Err(e) = sink.round(&round, &self.list.servers) {
                (self.log)(&format!("{}: {e}", sink.name()));
            }
        }
        Ok(Outcome {
            round,
            floor_before_us,
            report_file,
            line,
        })
    }

    fn summary(&self, round: &Round, outside: &[String], report: Option<&PathBuf>) -> String {
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

    /// POST on a thread of its own: the RFC's backoff takes minutes, and
    /// the rounds must not wait for it.
    fn send_report(&mut self, body: String) {
        if !self.settings.report {
            return;
        }
        let url = self
            .settings
            .report_url
            .clone()
            .or_else(|| reports_url(&self.list.raw, &self.list.list, self.loopback_reports));
        let Some(url) = url else {
            (self.log)(&format!(
                "a server lied; {}: the report is only kept",
                no_reports_url(&self.list.raw)
            ));
            return;
        };
        let policy = PostPolicy {
            allow_loopback_http: self.loopback_reports,
            ..PostPolicy::default()
        };
        let log = self.log.clone();
        let done = self.reports_done.0.clone();
        let metrics = self.metrics.clone();
        let spawned = std::thread::Builder::new()
            .name("gnomon-report".into())
            .spawn(move || {
                let posted = post_report(&url, &body, &policy);
                metrics.report(posted.is_ok());
                match posted {
                    Ok(p) => log(&format!(
                        "report posted to {url} (HTTP {}, attempt {})",
                        p.status, p.attempts
                    )),
                    Err(e) => log(&format!("report NOT delivered to {url}: {e}")),
                }
                let _ = done.send(());
            });
        match spawned {
            Ok(_) => self.reports_pending += 1,
            Err(e) => (self.log)(&format!("cannot start the report thread: {e}")),
        }
    }

    /// Wait up to `patience` for the reports being sent (before a one-shot
    /// run exits); says when some are left behind.
    pub fn wait_for_reports(&mut self, patience: Duration) {
        let until = Instant::now() + patience;
        while self.reports_pending > 0 {
            let left = until.saturating_duration_since(Instant::now());
            match self.reports_done.1.recv_timeout(left) {
                Ok(()) => self.reports_pending -= 1,
                Err(_) => {
                    (self.log)(&format!(
                        "{} report(s) still being sent; leaving them (they are kept in the state directory)",
                        self.reports_pending
                    ));
                    return;
                }
            }
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

/// The round's unreachable servers by name, with the reason for those not
/// asked ("backing off until round N"; the errors of those asked are long
/// and the same every round).
fn unreachable_words(round: &Round, servers: &[Server]) -> Vec<String> {
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

fn flag_words(f: Flag) -> &'static str {
    match f {
        Flag::OutsideConsensus => "outside the consensus",
        Flag::SelfContradiction => "contradicts itself",
    }
}
