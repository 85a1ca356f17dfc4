//! The prober: every server of the list, every round, with bounded
//! concurrency; then the consensus over the answers and, when a server is
//! outside it, a measurement sequence whose chain proves the lie.
//!
//! ```text
//!  round ─▶ N threads take servers in turn ─▶ check::probe (discovery,
//!          TCP, each family, the burst) ─▶ consensus::agree over answers
//!        ─▶ flagged? Client::measure over those that answered ─▶ report
//!        ─▶ Latest::apply ─▶ wait interval ± jitter
//! ```
//!
//! Queries block (the client is synchronous), so probes run on plain
//! threads; the web layer only reads the shared state.

mod burst;
pub mod changes;
mod check;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gnomon_client::{
    agree, post_report, Answer, Client, Config, Electorate, Flag, Plan, PostPolicy, Selection,
    Server, Versions, Vouch,
};

pub use check::now_us;

use tokio::runtime::Handle;

use crate::history::History;
use crate::publish::Publisher;
use crate::sink::Sink;
use crate::state::{Shared, Status, Verdict};
use crate::view::Limits;

/// How the prober runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Time between rounds (from the end of one to the start of the next),
    /// before jitter.
    pub interval: Duration,
    /// Probes at once.
    pub concurrency: usize,
    /// First wait for an answer; retries wait 1.5× longer.
    pub timeout: Duration,
    /// Requests sent together to test batched paths.
    pub burst: usize,
    /// Where malfeasance reports are POSTed (the list's `reports` URL),
    /// and how.
    pub report_to: Option<(String, PostPolicy)>,
    /// The report sink running in this process (`gnomon watch --sink`),
    /// and the runtime its store is driven by: each report is checked and
    /// stored there as a POSTed one would be.
    pub sink: Option<(Sink, Handle)>,
    /// How many of the listed servers may lie (`--max-liars`); `None`:
    /// max(1, ⌊(n − 1)/3⌋) of the list.
    pub max_liars: Option<usize>,
    /// What makes a check a warning, for the state each server is said to
    /// change to (the page's).
    pub limits: Limits,
    /// The signed list published after each round
    /// (`--publish-key`), when on.
    pub publish: Option<Publisher>,
    /// The input list's `reports` URL, copied into the published list.
    pub list_reports: Option<String>,
}

/// Where the list comes from when it may change between rounds (signed
/// lists fetched from monitors: `--servers-url`).
pub trait Refresh: Send {
    /// Called before each round: the servers to probe from now on and
    /// their list's `reports` URL, when they changed.
    fn refresh(&mut self) -> Option<(Vec<Server>, Option<String>)>;
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            interval: Duration::from_secs(300),
            concurrency: 8,
            timeout: Duration::from_secs(1),
            burst: 12,
            report_to: None,
            sink: None,
            max_liars: None,
            limits: Limits::default(),
            publish: None,
            list_reports: None,
        }
    }
}

/// The wait before the next round: `interval` ± 10 %, from `r` (a uniform
/// draw). Spreads monitors started together; a pure function so its bounds
/// are tested.
pub fn jittered(interval: Duration, r: u32) -> Duration {
    let spread = interval / 10;
    let span = spread.as_nanos() * 2;
    let pick = if span == 0 {
        0
    } else {
        u128::from(r) * span / u128::from(u32::MAX)
    };
    (interval - spread) + Duration::from_nanos(pick.min(u128::from(u64::MAX)) as u64)
}

/// A probe's answer (for the consensus) and status.
type Probed = (Option<Answer>, Status);

/// One round over `servers`: every probe, the consensus, the flags and the
/// report. Returns the statuses in list order and the verdict. Once
/// `stop` is set no further probe starts (those running end within their
/// deadlines), and the round's results mean nothing.
pub fn round(servers: &[Server], settings: &Settings, stop: &AtomicBool) -> (Vec<Status>, Verdict) {
    let results: Vec<Mutex<Option<Probed>>> = servers.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..settings.concurrency.clamp(1, servers.len().max(1)) {
            scope.spawn(|| loop {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(server) = servers.get(i) else { break };
                let r = check::probe(server, settings);
                if let Ok(mut slot) = results[i].lock() {
                    *slot = Some(r);
                }
            });
        }
    });
    let mut answers: Vec<Option<Answer>> = Vec::with_capacity(servers.len());
    let mut statuses: Vec<Status> = Vec::with_capacity(servers.len());
    for (i, slot) in results.into_iter().enumerate() {
        let (a, s) = slot.into_inner().ok().flatten().unwrap_or_else(|| {
            (
                None,
                Status {
                    name: servers[i].name.clone(),
                    failure: Some("local".into()),
                    error: Some("the probe did not finish".into()),
                    ..Status::default()
                },
            )
        });
        answers.push(a);
        statuses.push(s);
    }
    let vouches: Vec<Vouch> = answers
        .iter()
        .enumerate()
        .filter_map(|(i, a)| {
            let (low_us, high_us) = a.as_ref()?.offset_interval_us();
            Some(Vouch {
                server: i,
                low_us,
                high_us,
            })
        })
        .collect();
    let electorate = Electorate::of(servers);
    let assumption = electorate.assume(settings.max_liars);
    let agreement = agree(&vouches, &electorate, assumption);
    let consensus = agreement
        .consensus
        .as_ref()
        .map(|c| (c.low_us as i64, c.high_us as i64));
    if let Some(c) = &agreement.consensus {
        for (i, a) in answers.iter().enumerate() {
            if let Some(a) = a {
                statuses[i].offset_consensus_us = Some((a.offset_us - c.midpoint_us()) as i64);
            }
        }
    }
    for &(i, flag) in &agreement.flagged {
        statuses[i].flagged = Some(
            match flag {
                Flag::OutsideConsensus => "its interval misses the consensus",
                Flag::SelfContradiction => "its own answers contradict each other",
            }
            .to_string(),
        );
    }
    if !agreement.flagged.is_empty() && !stop.load(Ordering::Relaxed) {
        prove(servers, &answers, &mut statuses, settings.max_liars);
    }
    let verdict = Verdict {
        consensus,
        disagreement: agreement.disagreement(),
        assumption: agreement.assumption_text(),
        why_none: agreement.why_none(),
    };
    (statuses, verdict)
}

/// Run the measurement sequence over the servers that answered (each in
/// the version it answered), twice in the same order with chained nonces:
/// a liar is then caught by the causal-order check, and the chain is the
/// report. The report goes to every server flagged both in the round and
/// by the majority rule over the sequence: a contradiction alone names
/// nobody.
fn prove(
    servers: &[Server],
    answers: &[Option<Answer>],
    statuses: &mut [Status],
    max_liars: Option<usize>,
) {
    let (ids, chosen): (Vec<usize>, Vec<Server>) = answers
        .iter()
        .enumerate()
        .filter_map(|(i, a)| {
            let a = a.as_ref()?;
            Some((
                i,
                Server {
                    versions: Versions::Offer(a.offer),
                    ..servers[i].clone()
                },
            ))
        })
        .unzip();
    // The whole list's assumption: the sequence asks only who answered.
    let plan = Plan {
        selection: Selection::All,
        passes: 2,
        assumption: Some(Electorate::of(servers).assume(max_liars)),
    };
    let Ok(seq) = Client::new(Config::default()).measure(&chosen, &plan) else {
        return;
    };
    let Some(report) = seq.report() else { return };
    let json = report.to_json();
    for s in seq.suspects() {
        if let Some(&i) = ids.get(s) {
            if statuses[i].flagged.is_some() {
                statuses[i].report = Some(json.clone());
            }
        }
    }
}

/// Probe `servers` round after round into `state` (and `history`, when
/// there is a store) until `stop` is set, logging each server's changes
/// of state.
pub fn run(
    servers: Vec<Server>,
    settings: Settings,
    state: Shared,
    history: Option<History>,
    stop: Arc<AtomicBool>,
) {
    run_from(servers, settings, state, history, stop, None);
}

/// [`run`], taking a new list from `source` before each round when it
/// gives one.
pub fn run_from(
    mut servers: Vec<Server>,
    mut settings: Settings,
    state: Shared,
    history: Option<History>,
    stop: Arc<AtomicBool>,
    mut source: Option<Box<dyn Refresh>>,
) {
    if let Some(h) = &history {
        if let Err(e) = h.register(&servers, now_us()) {
            tracing::warn!("cannot record the servers in the database: {e}");
        }
    }
    if let Some(p) = &settings.publish {
        p.restore(history.as_ref(), now_us());
    }
    // Servers flagged in the last round: a report is posted when a server
    // becomes flagged, not every round it stays so.
    let mut accused: Vec<String> = Vec::new();
    let mut states = changes::States::new(settings.limits);
    while !stop.load(Ordering::Relaxed) {
        if let Some((fresh, reports)) = source.as_mut().and_then(|s| s.refresh()) {
            if let Some(h) = &history {
                if let Err(e) = h.register(&fresh, now_us()) {
                    tracing::warn!("cannot record the servers in the database: {e}");
                }
            }
            servers = fresh;
            settings.list_reports = reports;
        }
        let (statuses, verdict) = round(&servers, &settings, &stop);
        if stop.load(Ordering::Relaxed) {
            // Cut short: servers not probed would count as failures.
            break;
        }
        for s in &statuses {
            let Some(report) = s.report.as_ref().filter(|_| !accused.contains(&s.name)) else {
                continue;
            };
            if let Some((url, policy)) = &settings.report_to {
                post(url.clone(), report.clone(), *policy, s.name.clone());
            }
            if let Some((sink, handle)) = &settings.sink {
                match handle.block_on(sink.submit(
                    report,
                    LOCAL_SENDER,
                    Some(s.public_key.as_slice()),
                )) {
                    Ok(stored) => tracing::info!(
                        "report on {:?} stored as /reports/{}.json",
                        s.name,
                        stored.id
                    ),
                    Err(e) => tracing::warn!("report on {:?} NOT stored: {e}", s.name),
                }
            }
        }
        accused = statuses
            .iter()
            .filter(|s| s.flagged.is_some())
            .map(|s| s.name.clone())
            .collect();
        for change in states.update(&statuses) {
            change.log();
        }
        // One line per failed round at most, never per server or packet.
        if let Some(Err(e)) = history.as_ref().map(|h| h.record(&statuses)) {
            tracing::warn!("cannot record the round: {e}");
        }
        if let Ok(mut latest) = state.write() {
            latest.apply(statuses, verdict, now_us());
        }
        // After the round is in `state`: the page shows the round whatever
        // the publication does.
        if let Some(p) = &settings.publish {
            let reports = settings.list_reports.as_deref();
            p.after_round(&servers, reports, &state, history.as_ref(), now_us());
        }
        let mut r = [0u8; 4];
        let r = getrandom::getrandom(&mut r).map_or(u32::MAX / 2, |()| u32::from_le_bytes(r));
        let until = Instant::now() + jittered(settings.interval, r);
        while !stop.load(Ordering::Relaxed) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
    }
}

/// The sender the store keeps for reports this process made.
pub const LOCAL_SENDER: &str = "local (this monitor)";

/// POST `report` on a thread of its own (the RFC's retries take minutes;
/// rounds go on), one line for the outcome.
fn post(url: String, report: String, policy: PostPolicy, server: String) {
    let spawned = std::thread::Builder::new()
        .name("gnomon-report".into())
        .spawn(move || match post_report(&url, &report, &policy) {
            Ok(p) => tracing::info!("report on {server:?} posted to {url} (HTTP {})", p.status),
            Err(e) => tracing::warn!("report on {server:?} NOT delivered: {url}: {e}"),
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot post a report: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_ten_percent() {
        let i = Duration::from_secs(300);
        assert_eq!(jittered(i, 0), Duration::from_secs(270));
        assert_eq!(jittered(i, u32::MAX), Duration::from_secs(330));
        let mid = jittered(i, u32::MAX / 2);
        assert!(mid > Duration::from_secs(299) && mid < Duration::from_secs(301));
        assert_eq!(jittered(Duration::ZERO, 7), Duration::ZERO);
    }
}
