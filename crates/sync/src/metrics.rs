//! `--metrics ADDR`: what the service did, in Prometheus text, served by
//! gnomon-metrics-http (the endpoint `gnomon serve` uses: one thread, a
//! connection cap, a deadline per connection), so a hostile scraper holds
//! only itself and never a round.
//!
//! ```text
//!  Service::round ──record_round──▶ SyncMetrics ◀──render── /metrics (own thread)
//!  report thread ──report()──────────▲    ▲ counts::Refreshes (list refresh thread)
//!                                         ├ counts::NowRequests (the now socket)
//!                                         ├ counts::ChronySamples (the SOCK sink)
//!  Service (signed lists) ──set_signed──▶ ┴ counts::SignedLists, SignedStatus
//! ```
//!
//! The offset and radius are those of the last round the quorum agreed on
//! (the consensus sync used); the server counts are the last round's,
//! whatever it found; `gnomon_sync_last_success_timestamp_seconds` says
//! how old the offset is.

use std::fmt::Write as _;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use gnomon_metrics_http::Reply;

use crate::counts::{
    ChronySamples, MonitorStatus, NowRequests, Refreshes, SignedLists, SignedStatus,
};
use crate::round::Round;

/// Round results, the `result` label of `gnomon_sync_rounds_total`.
const ROUND_RESULTS: [&str; 4] = ["consensus", "no_quorum", "no_consensus", "failed"];

#[derive(Default)]
struct Last {
    /// Consensus midpoint and radius, seconds, of the last good round.
    offset_s: Option<f64>,
    radius_s: Option<f64>,
    /// Local clock at the end of the last good round, Unix seconds.
    success_s: Option<f64>,
    /// The last round's servers.
    agreeing: usize,
    disagreeing: usize,
    unreachable: usize,
    quorum_met: bool,
    /// Servers in the list now.
    listed: usize,
    /// The last round's assumption: voters listed, liars assumed, voters
    /// that answered, and how many had to.
    voters: usize,
    liars: usize,
    answered: usize,
    needed: usize,
}

/// Everything `/metrics` shows; shared between the service and the
/// endpoint's thread.
#[derive(Default)]
pub struct SyncMetrics {
    last: Mutex<Last>,
    rounds: [AtomicU64; 4],
    reports_sent: AtomicU64,
    reports_failed: AtomicU64,
    floor_contradictions: AtomicU64,
    /// The list refresh's results.
    pub refresh: Arc<Refreshes>,
    chrony: Mutex<Option<Arc<ChronySamples>>>,
    /// The now socket's requests, by result.
    pub now: Arc<NowRequests>,
    /// The signed lists' fetches: accepted, refused, failed.
    pub signed: Arc<SignedLists>,
    signed_view: Mutex<Option<SignedStatus>>,
}

impl SyncMetrics {
    /// One round as the service saw it, with `listed` servers in the list
    /// (`round.unreachable` names every one not heard from, asked or not).
    pub fn record_round(&self, round: &Round, listed: usize) {
        let result = match (&round.consensus, round.quorum_met) {
            (Some(_), true) => 0,
            (Some(_), false) => 1,
            (None, _) => 2,
        };
        self.rounds[result].fetch_add(1, Ordering::Relaxed);
        let mut l = self.last.lock().unwrap_or_else(|p| p.into_inner());
        // Every listed server in one state: unreachable (servers backing
        // off included: the service lists them), agreeing (in the
        // consensus), or else disagreeing (outside it, excluded, or
        // answering in a round without one), so the three add up to the
        // list and a server never drops out of all of them.
        l.agreeing = round.consensus.as_ref().map_or(0, |c| c.agreeing.len());
        l.unreachable = round.unreachable.len();
        l.disagreeing = listed.saturating_sub(l.agreeing + l.unreachable);
        l.quorum_met = round.quorum_met;
        l.listed = listed;
        l.voters = round.assumption.voters;
        l.liars = round.assumption.liars;
        l.answered = round.answered;
        l.needed = round.assumption.needed();
        if let (true, Some(c)) = (round.quorum_met, &round.consensus) {
            l.offset_s = Some(c.midpoint_us() as f64 / 1e6);
            l.radius_s = Some(c.radius_us() as f64 / 1e6);
            l.success_s = Some(round.local_end_us as f64 / 1e6);
        }
    }

    /// A round that could not be run at all (no socket, no random bytes).
    pub fn round_failed(&self) {
        self.rounds[3].fetch_add(1, Ordering::Relaxed);
    }

    /// A malfeasance report delivered (`true`) or given up on.
    pub fn report(&self, delivered: bool) {
        let c = if delivered {
            &self.reports_sent
        } else {
            &self.reports_failed
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// A round whose consensus lies wholly below the proven floor.
    pub fn floor_contradiction(&self) {
        self.floor_contradictions.fetch_add(1, Ordering::Relaxed);
    }

    /// Each pinned monitor's list as the service judged it last.
    pub fn set_signed(&self, view: SignedStatus) {
        *self.signed_view.lock().unwrap_or_else(|p| p.into_inner()) = Some(view);
    }

    /// The chrony sink's counters.
    pub fn set_chrony(&self, counters: Arc<ChronySamples>) {
        *self.chrony.lock().unwrap_or_else(|p| p.into_inner()) = Some(counters);
    }

    /// Prometheus text.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let l = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let mut gauge = |name: &str, help: &str, v: Option<f64>| {
            if let Some(v) = v {
                let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
            }
        };
        gauge(
            "gnomon_sync_offset_seconds",
            "Consensus midpoint minus the local clock, of the last round the quorum agreed on.",
            l.offset_s,
        );
        gauge(
            "gnomon_sync_radius_seconds",
            "Half the width of that consensus interval.",
            l.radius_s,
        );
        gauge(
            "gnomon_sync_last_success_timestamp_seconds",
            "Local clock at the end of the last round the quorum agreed on, Unix seconds.",
            l.success_s,
        );
        gauge(
            "gnomon_sync_quorum_met",
            "1 when the last round's consensus had the quorum.",
            Some(f64::from(u8::from(l.quorum_met))),
        );
        gauge(
            "gnomon_sync_listed_servers",
            "Usable servers in the current list.",
            Some(l.listed as f64),
        );
        gauge(
            "gnomon_sync_voters",
            "Distinct servers (voters) in the list: entries sharing a key, address or operator count once.",
            Some(l.voters as f64),
        );
        gauge(
            "gnomon_sync_assumed_liars",
            "How many of the voters the last round assumed may lie (max-liars).",
            Some(l.liars as f64),
        );
        gauge(
            "gnomon_sync_answering_voters",
            "Distinct voters that answered in the last round; below gnomon_sync_needed_voters there is no consensus.",
            Some(l.answered as f64),
        );
        gauge(
            "gnomon_sync_needed_voters",
            "Voters that must answer for a consensus: 2 × assumed liars + 1.",
            Some(l.needed as f64),
        );
        let _ = writeln!(
            o,
            "# HELP gnomon_sync_servers The list's servers in the last round, by state (they add up to the list).\n# TYPE gnomon_sync_servers gauge"
        );
        for (state, n) in [
            ("agreeing", l.agreeing),
            ("disagreeing", l.disagreeing),
            ("unreachable", l.unreachable),
        ] {
            let _ = writeln!(o, "gnomon_sync_servers{{state=\"{state}\"}} {n}");
        }
        drop(l);
        counter(
            &mut o,
            "gnomon_sync_rounds_total",
            "Rounds, by result.",
            "result",
            ROUND_RESULTS
                .iter()
                .zip(&self.rounds)
                .map(|(r, c)| (*r, c.load(Ordering::Relaxed))),
        );
        counter(
            &mut o,
            "gnomon_sync_reports_total",
            "Malfeasance reports POSTed, by result.",
            "result",
            [
                ("sent", self.reports_sent.load(Ordering::Relaxed)),
                ("failed", self.reports_failed.load(Ordering::Relaxed)),
            ],
        );
        let _ = writeln!(
            o,
            "# HELP gnomon_sync_floor_contradictions_total Rounds whose consensus lies wholly below the proven floor (the round or the floor is wrong).\n# TYPE gnomon_sync_floor_contradictions_total counter\ngnomon_sync_floor_contradictions_total {}",
            self.floor_contradictions.load(Ordering::Relaxed)
        );
        counter(
            &mut o,
            "gnomon_sync_list_refreshes_total",
            "Server list downloads, by result (anything but ok kept the old list).",
            "result",
            self.refresh.get(),
        );
        counter(
            &mut o,
            "gnomon_sync_now_requests_total",
            "Requests on the now socket, by result (all but answered were dropped: evicted for a newcomer at a cap, busy, paced (a user past its pace of accepts), deadline, too_long, bad_request).",
            "result",
            self.now.get(),
        );
        if let Some(v) = &*self.signed_view.lock().unwrap_or_else(|p| p.into_inner()) {
            render_signed(&mut o, v, &self.signed);
        }
        if let Some(c) = &*self.chrony.lock().unwrap_or_else(|p| p.into_inner()) {
            counter(
                &mut o,
                "gnomon_sync_chrony_samples_total",
                "Samples for chrony's SOCK refclock, by result (too_wide: wider than chrony-max-radius, not sent).",
                "result",
                [
                    ("sent", c.sent()),
                    ("failed", c.failed()),
                    ("too_wide", c.too_wide()),
                ],
            );
        }
        o
    }
}

/// The signed lists: per pinned key (its fingerprint and comment as
/// labels) the standing, sequence, expiry and fetch time of its list; the
/// merged list's servers; refusals by reason and failures by class.
fn render_signed(o: &mut String, v: &SignedStatus, counts: &SignedLists) {
    let labels = |k: &MonitorStatus| {
        format!(
            "key=\"{}\",comment=\"{}\"",
            escape(&k.fingerprint),
            escape(&k.comment)
        )
    };
    let _ = writeln!(
        o,
        "# HELP gnomon_sync_signed_list_state Each pinned monitor's list: 1 for the state it is in (current; kept: in force though the last fetch failed or was refused; expired; none: never accepted).\n# TYPE gnomon_sync_signed_list_state gauge"
    );
    for k in &v.monitors {
        for state in ["current", "kept", "expired", "none"] {
            let _ = writeln!(
                o,
                "gnomon_sync_signed_list_state{{{},state=\"{state}\"}} {}",
                labels(k),
                u8::from(k.standing == state)
            );
        }
    }
    for (name, help, pick) in [
        (
            "gnomon_sync_signed_list_sequence",
            "The sequence of each pinned monitor's last accepted list.",
            (|k: &MonitorStatus| k.sequence.map(|s| s as f64)) as fn(&MonitorStatus) -> Option<f64>,
        ),
        (
            "gnomon_sync_signed_list_expiry_timestamp_seconds",
            "When each pinned monitor's last accepted list expires, Unix seconds.",
            |k| k.expires_unix.map(|t| t as f64),
        ),
        (
            "gnomon_sync_signed_list_fetched_timestamp_seconds",
            "When each pinned monitor's last accepted list was fetched, Unix seconds.",
            |k| k.fetched_unix.map(|t| t as f64),
        ),
    ] {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge");
        for k in &v.monitors {
            if let Some(x) = pick(k) {
                let _ = writeln!(o, "{name}{{{}}} {x}", labels(k));
            }
        }
    }
    for (name, help, x) in [
        (
            "gnomon_sync_signed_lists_in_force",
            "Pinned monitors' lists in force (not expired); below the threshold no server is used.",
            v.in_force,
        ),
        (
            "gnomon_sync_signed_lists_threshold",
            "servers-threshold: how many pinned monitors must list a server.",
            v.threshold,
        ),
        (
            "gnomon_sync_signed_list_servers",
            "Servers in the merged list (listed by at least the threshold of lists in force).",
            v.servers,
        ),
    ] {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {x}");
    }
    let _ = writeln!(
        o,
        "# HELP gnomon_sync_signed_lists_accepted_total Signed lists fetched and accepted.\n# TYPE gnomon_sync_signed_lists_accepted_total counter\ngnomon_sync_signed_lists_accepted_total {}",
        counts.accepted_total()
    );
    counter(
        o,
        "gnomon_sync_signed_list_refusals_total",
        "Signed lists refused, by reason (the last good list of that monitor is kept until its expiry).",
        "reason",
        counts.refusals(),
    );
    counter(
        o,
        "gnomon_sync_signed_list_fetch_failures_total",
        "Downloads of a signed list or its .sig that failed, by class.",
        "class",
        counts.failures(),
    );
}

/// A label value as Prometheus text escapes it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn counter<'a>(
    o: &mut String,
    name: &str,
    help: &str,
    label: &str,
    values: impl IntoIterator<Item = (&'a str, u64)>,
) {
    let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter");
    for (v, n) in values {
        let _ = writeln!(o, "{name}{{{label}=\"{v}\"}} {n}");
    }
}

/// Serve `metrics` on `http://addr/metrics` until `stop` is set.
pub fn serve(
    addr: SocketAddr,
    metrics: Arc<SyncMetrics>,
    stop: Arc<AtomicBool>,
) -> io::Result<(SocketAddr, JoinHandle<()>)> {
    gnomon_metrics_http::spawn(addr, "gnomon-sync-metrics", stop, move |path| match path {
        "/metrics" => Reply::metrics(metrics.render()),
        _ => Reply::text(404, "try /metrics\n"),
    })
}
