//! `gnomon watch`: probe every server of a list on a schedule and serve
//! the status page, `/metrics` and `/api/servers` (crates/watch).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use gnomon_client::{reports_url, PostPolicy};
use gnomon_watch::history::History;
use gnomon_watch::probe::{self, Settings};
use gnomon_watch::sink::{KeySet, Sink};
use gnomon_watch::state::Latest;
use gnomon_watch::store::{describe, opening};
use gnomon_watch::web::{self, App};
use gnomon_watch::Store;
use serde_json::json;

use super::client_out::{usage, Exit};
use super::logging::LogArgs;
use super::outcome::{signal_name, Outcome};
use super::watch_config::{
    self as cfg, FileLayers, SinkLayer, SinkSettings, WatchLayer, WatchSettings,
};
use crate::words;

/// Arguments. Every setting is also a key of the `[watch]` table of
/// --config and a GNOMON_WATCH_* variable (deploy/gnomon-watch.toml); the
/// log's are every service's (--log-format, --log-level, GNOMON_LOG_*).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A TOML file with a [watch] table (flags and GNOMON_WATCH_* win over
    /// it); its [report-server] table sets the limits of --sink.
    #[arg(long, env = "GNOMON_WATCH_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// The server list (RFC 10049 server-list JSON; examples/servers.json).
    #[arg(long, value_name = "LIST.json", env = "GNOMON_WATCH_SERVERS")]
    servers: Option<PathBuf>,
    /// Address of the web page, /metrics and /api/servers.
    #[arg(long, value_name = "ADDR", env = "GNOMON_WATCH_LISTEN", value_parser = cfg::parse_listen)]
    listen: Option<SocketAddr>,
    /// Where history is kept: sqlite:PATH (created on first start) or
    /// postgres://… (given up on after 10 s without a connection); without
    /// it, a week of rounds in memory.
    #[arg(long, value_name = "URL", env = "GNOMON_WATCH_DATABASE", value_parser = cfg::parse_database)]
    database: Option<String>,
    /// Time between rounds (±10 % jitter), 1s..=1d [default: 5m].
    #[arg(long, value_name = "DURATION", value_parser = cfg::parse_interval, env = "GNOMON_WATCH_INTERVAL")]
    interval: Option<Duration>,
    /// Servers probed at once, 1..=256 [default: 8].
    #[arg(long, value_name = "N", value_parser = cfg::parse_concurrency, env = "GNOMON_WATCH_CONCURRENCY")]
    concurrency: Option<u16>,
    /// First wait for an answer (retries wait 1.5× longer), 100ms..=10s
    /// [default: 1s].
    #[arg(long, value_name = "DURATION", value_parser = cfg::parse_timeout, env = "GNOMON_WATCH_TIMEOUT")]
    timeout: Option<Duration>,
    /// Requests sent together to test batched Merkle paths, 2..=64
    /// [default: 12].
    #[arg(long, value_name = "N", value_parser = cfg::parse_burst, env = "GNOMON_WATCH_BURST")]
    burst: Option<u16>,
    /// How many of the listed servers may lie: a consensus needs twice this
    /// plus one answering, and a server is flagged only outside it [default:
    /// auto, max(1, (n − 1)/3) of the n listed].
    #[arg(long, value_name = "F|auto", value_parser = gnomon_sync::config::parse_max_liars, env = "GNOMON_WATCH_MAX_LIARS")]
    max_liars: Option<gnomon_sync::config::MaxLiars>,
    /// POST each malfeasance report (once per server, when it becomes
    /// flagged) to the list's `reports` URL: --report alone is on (on,
    /// off, true, false, yes, no) [default: false].
    #[arg(long, env = "GNOMON_WATCH_REPORT", value_name = "on|off", num_args = 0..=1,
          default_missing_value = "on", value_parser = words::switch,
          hide_possible_values = true)]
    report: Option<bool>,
    /// Run the report sink in this process: POST /reports, the audit list
    /// at GET /reports; this monitor's own reports are stored there too.
    /// Needs --database. --sink alone is on [default: false].
    #[arg(long, env = "GNOMON_WATCH_SINK", value_name = "on|off", num_args = 0..=1,
          default_missing_value = "on", value_parser = words::switch,
          hide_possible_values = true)]
    sink: Option<bool>,
    /// Testing only: accept a plain-HTTP `reports` URL on 127.0.0.1, ::1 or
    /// localhost. Real lists must use HTTPS.
    #[arg(long, hide = true)]
    allow_loopback_http_reports: bool,
    /// A certificate (delegation) with less than this left is a warning,
    /// 0s..=30d [default: 1h].
    #[arg(long, value_name = "DURATION", value_parser = cfg::parse_expiry_warning, env = "GNOMON_WATCH_EXPIRY_WARNING")]
    expiry_warning: Option<Duration>,
    /// A radius wider than this is a warning (the server vouches for too
    /// little to be of use), 1ms..=1d [default: 10s].
    #[arg(long, value_name = "DURATION", value_parser = cfg::parse_warn_radius, env = "GNOMON_WATCH_WARN_RADIUS")]
    warn_radius: Option<Duration>,
    /// Print the effective settings as [watch] and [report-server] tables
    /// and exit.
    #[arg(long)]
    print_config: bool,
    #[command(flatten)]
    log: LogArgs,
    /// Log JSON objects on stderr (as --log-format json) and, when watch
    /// ends, print one JSON object on stdout: what it did before a signal
    /// stopped it, or why it could not start, with `exit_code`.
    #[arg(long)]
    json: bool,
}

impl Args {
    fn layer(&self) -> WatchLayer {
        WatchLayer {
            servers: self.servers.clone(),
            listen: self.listen,
            database: self.database.clone(),
            interval: self.interval,
            concurrency: self.concurrency,
            timeout: self.timeout,
            burst: self.burst,
            max_liars: self.max_liars,
            report: self.report,
            expiry_warning: self.expiry_warning,
            warn_radius: self.warn_radius,
            sink: self.sink,
        }
    }
}

pub(crate) fn run(args: Args) -> ExitCode {
    let file = match FileLayers::load(args.config.as_deref()) {
        Ok(f) => f,
        Err(e) => return usage("watch", e),
    };
    let settings = match WatchSettings::resolve(&file.watch, &args.layer()) {
        Ok(s) => s,
        Err(e) => return usage("watch", e),
    };
    let sink_settings = SinkSettings::resolve(&file.sink, &SinkLayer::default());
    if args.print_config {
        print!("{settings}\n{sink_settings}");
        return Exit::Ok.into();
    }
    let raw = match std::fs::read(&settings.servers) {
        Ok(r) => r,
        Err(e) => {
            return usage(
                "watch",
                format!(
                    "cannot read the server list {}: {}",
                    settings.servers.display(),
                    words::io(&e)
                ),
            )
        }
    };
    let loaded = match gnomon_sync::list::parse(raw, &settings.servers.display().to_string()) {
        Ok(l) => l,
        Err(e) => return usage("watch", e),
    };
    // resolve() refuses `sink` without a database.
    // The sink keeps reports about the watched servers (and those of
    // [report-server] accept-keys, if any).
    let sink_config = if settings.sink {
        let watched = KeySet::new(loaded.servers.iter().map(|s| &s.public_key));
        match sink_settings.sink_config(Some(watched)) {
            Ok(c) => Some(c),
            Err(e) => return usage("watch", e),
        }
    } else {
        None
    };
    // From here on watch is a service: what it says is a log line.
    super::logging::init(&args.log.config(args.json));
    let end = Outcome { json: args.json };
    // Registered before the first line is logged and before anything that
    // may wait (the database above all): a signal stops watch at any point
    // of its start, and one sent on seeing the first line finds it handled.
    let stop = Arc::new(AtomicBool::new(false));
    let signal = Arc::new(AtomicUsize::new(0));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let registered = signal_hook::flag::register_usize(sig, signal.clone(), sig as usize)
            .and_then(|_| signal_hook::flag::register(sig, stop.clone()));
        if let Err(e) = registered {
            let why = format!("cannot handle signal {sig}: {}", words::io(&e));
            return end.failed("signals", &why, crate::exit::SOFTWARE);
        }
    }
    let stopped_by = || signal_name(signal.load(Ordering::Relaxed));
    let report_url = reports_url(&loaded.raw, &loaded.list, args.allow_loopback_http_reports);
    for n in &loaded.notes {
        tracing::info!("{n}");
    }
    let limits = web::view::Limits {
        expiry_warning: settings.expiry_warning,
        warn_radius: settings.warn_radius,
    };
    let mut probing = Settings {
        interval: settings.interval,
        concurrency: usize::from(settings.concurrency),
        timeout: settings.timeout,
        burst: usize::from(settings.burst),
        report_to: None,
        sink: None,
        max_liars: settings.max_liars,
        limits,
    };
    if settings.report {
        match report_url {
            Some(url) => {
                let policy = PostPolicy {
                    allow_loopback_http: args.allow_loopback_http_reports,
                    ..PostPolicy::default()
                };
                probing.report_to = Some((url, policy));
            }
            None => tracing::warn!(
                "--report given, but {}",
                gnomon_client::no_reports_url(&loaded.raw)
            ),
        }
    }
    let latest = Arc::new(RwLock::new(Latest::default()));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            let why = format!("cannot start the runtime: {}", words::io(&e));
            return end.failed("runtime", &why, crate::exit::SOFTWARE);
        }
    };
    let listener = match runtime.block_on(tokio::net::TcpListener::bind(settings.listen)) {
        Ok(l) => l,
        Err(e) => return end.listen_failed(settings.listen, &e),
    };
    let store = match &settings.database {
        Some(url) => {
            let what = describe(url);
            tracing::info!("{}", opening(url));
            let opened = runtime.block_on(async {
                tokio::select! {
                    opened = Store::open(url) => Some(opened),
                    () = until(&stop) => None,
                }
            });
            match opened {
                Some(Ok(s)) => Some(s),
                Some(Err(e)) => return end.store_failed(&e),
                None => {
                    tracing::info!("stopped by {} before {what} was open", stopped_by());
                    return end.stopped(json!({
                        "stopped_by": stopped_by(),
                        "while": "opening the database",
                        "database": what,
                    }));
                }
            }
        }
        None => None,
    };
    let sink = store
        .clone()
        .zip(sink_config)
        .map(|(s, config)| Sink::new(s, config));
    if let Some(s) = &sink {
        s.spawn_retention(runtime.handle());
    }
    probing.sink = sink.clone().map(|s| (s, runtime.handle().clone()));
    let history = store
        .clone()
        .map(|s| History::new(s, runtime.handle().clone()));
    let local = listener.local_addr().unwrap_or(settings.listen);
    let servers = loaded.servers.len();
    tracing::info!(
        "{servers} server{} every {:?}{}; listening on http://{local}/",
        if servers == 1 { "" } else { "s" },
        settings.interval,
        if sink.is_some() {
            "; the report sink at /reports"
        } else {
            ""
        }
    );
    let prober = {
        let (latest, stop) = (latest.clone(), stop.clone());
        let servers = loaded.servers;
        std::thread::Builder::new()
            .name("gnomon-probe".into())
            .spawn(move || probe::run(servers, probing, latest, history, stop))
    };
    let prober = match prober {
        Ok(p) => p,
        Err(e) => {
            let why = format!("cannot start the prober: {}", words::io(&e));
            return end.failed("runtime", &why, crate::exit::SOFTWARE);
        }
    };
    let app = App::new(latest.clone(), limits, store.clone(), sink);
    let served = runtime.block_on(web::serve(listener, app, until(&stop)));
    stop.store(true, Ordering::Relaxed);
    // No probe starts after `stop`; those running end within their
    // deadlines (a few times --timeout), and the round is not recorded.
    let prober_failed = prober.join().is_err();
    // Closing the pool lets SQLite checkpoint its log into the file.
    if let Some(s) = store {
        runtime.block_on(s.close());
    }
    runtime.shutdown_timeout(Duration::from_millis(200));
    let rounds = latest.read().map_or(0, |l| l.rounds);
    if prober_failed {
        return end.failed("prober", "the prober failed", crate::exit::SOFTWARE);
    }
    match served {
        Ok(()) => {
            tracing::info!("stopped by {} after {rounds} round(s)", stopped_by());
            end.stopped(json!({
                "stopped_by": stopped_by(),
                "listen": format!("http://{local}/"),
                "servers": servers,
                "rounds": rounds,
            }))
        }
        Err(e) => {
            let why = format!("serving http://{local}/ failed: {}", words::io(&e));
            end.failed("serve", &why, crate::exit::SOFTWARE)
        }
    }
}

/// Resolves once `stop` is set (by SIGTERM or SIGINT).
async fn until(stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
