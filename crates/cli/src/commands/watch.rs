//! `gnomon watch`: probe every server of a list on a schedule and serve
//! the status page, `/metrics` and `/api/servers` (crates/watch).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use gnomon_client::{reports_url, PostPolicy};
use gnomon_watch::history::History;
use gnomon_watch::probe::{self, Settings};
use gnomon_watch::state::Latest;
use gnomon_watch::web::{self, App};
use gnomon_watch::Store;

use super::client_out::{parse_duration, usage, Exit};

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The server list (RFC 10049 §6.5 JSON).
    #[arg(long, value_name = "LIST.json", env = "GNOMON_WATCH_SERVERS")]
    servers: PathBuf,
    /// Address of the web page, /metrics and /api/servers.
    #[arg(long, value_name = "ADDR", env = "GNOMON_WATCH_LISTEN")]
    listen: SocketAddr,
    /// Where history is kept: sqlite:PATH (created on first start) or
    /// postgres://…; without it, a week of rounds in memory.
    #[arg(long, value_name = "URL", env = "GNOMON_WATCH_DATABASE")]
    database: Option<String>,
    /// Time between rounds (±10 % jitter), 1s to 24h.
    #[arg(long, default_value = "5m", value_parser = interval, env = "GNOMON_WATCH_INTERVAL")]
    interval: Duration,
    /// Servers probed at once, 1 to 256.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256), env = "GNOMON_WATCH_CONCURRENCY")]
    concurrency: u16,
    /// First wait for an answer (retries wait 1.5× longer), 100ms to 10s.
    #[arg(long, default_value = "1s", value_parser = timeout, env = "GNOMON_WATCH_TIMEOUT")]
    timeout: Duration,
    /// Requests sent together to test batched Merkle paths, 2 to 64.
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u16).range(2..=64), env = "GNOMON_WATCH_BURST")]
    burst: u16,
    /// POST each malfeasance report (once per server, when it becomes
    /// flagged) to the list's `reports` URL.
    #[arg(long, env = "GNOMON_WATCH_REPORT")]
    report: bool,
    /// Testing only: accept a plain-HTTP `reports` URL on 127.0.0.1, ::1 or
    /// localhost. Real lists must use HTTPS.
    #[arg(long, hide = true)]
    allow_loopback_http_reports: bool,
    /// A certificate (delegation) with less than this left is a warning.
    #[arg(long, default_value = "1h", value_parser = expiry, env = "GNOMON_WATCH_EXPIRY_WARNING")]
    expiry_warning: Duration,
}

fn ranged(s: &str, lo: Duration, hi: Duration, what: &str) -> Result<Duration, String> {
    let d = if let Some(h) = s.trim().strip_suffix('h') {
        parse_duration(h)? * 3600
    } else {
        parse_duration(s)?
    };
    if d < lo || d > hi {
        return Err(format!("{what} must be from {lo:?} to {hi:?}"));
    }
    Ok(d)
}

fn interval(s: &str) -> Result<Duration, String> {
    ranged(
        s,
        Duration::from_secs(1),
        Duration::from_secs(86_400),
        "--interval",
    )
}

fn timeout(s: &str) -> Result<Duration, String> {
    ranged(
        s,
        Duration::from_millis(100),
        Duration::from_secs(10),
        "--timeout",
    )
}

fn expiry(s: &str) -> Result<Duration, String> {
    ranged(
        s,
        Duration::ZERO,
        Duration::from_secs(30 * 86_400),
        "--expiry-warning",
    )
}

pub(crate) fn run(args: Args) -> ExitCode {
    let raw = match std::fs::read(&args.servers) {
        Ok(r) => r,
        Err(e) => return usage("watch", format!("{}: {e}", args.servers.display())),
    };
    let loaded = match gnomon_sync::list::parse(raw, &args.servers.display().to_string()) {
        Ok(l) => l,
        Err(e) => return usage("watch", e),
    };
    let report_url = reports_url(&loaded.raw, &loaded.list, args.allow_loopback_http_reports);
    for n in &loaded.notes {
        eprintln!("gnomon watch: {n}");
    }
    let settings = Settings {
        interval: args.interval,
        concurrency: usize::from(args.concurrency),
        timeout: args.timeout,
        burst: usize::from(args.burst),
        report_to: None,
    };
    let mut settings = settings;
    if args.report {
        match report_url {
            Some(url) => {
                let policy = PostPolicy {
                    allow_loopback_http: args.allow_loopback_http_reports,
                    ..PostPolicy::default()
                };
                settings.report_to = Some((url, policy));
            }
            None => {
                eprintln!("gnomon watch: --report given, but the list has no HTTPS `reports` URL")
            }
        }
    }
    let latest = Arc::new(RwLock::new(Latest::default()));
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(sig, stop.clone()) {
            eprintln!("gnomon watch: cannot handle signal {sig}: {e}");
            return Exit::Local.into();
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gnomon watch: cannot start the runtime: {e}");
            return Exit::Local.into();
        }
    };
    let listener = match runtime.block_on(tokio::net::TcpListener::bind(args.listen)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("gnomon watch: cannot listen on {}: {e}", args.listen);
            return Exit::Local.into();
        }
    };
    let store = match &args.database {
        Some(url) => match runtime.block_on(Store::open(url)) {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("gnomon watch: {e}");
                return Exit::Local.into();
            }
        },
        None => None,
    };
    let history = store
        .clone()
        .map(|s| History::new(s, runtime.handle().clone()));
    let local = listener.local_addr().unwrap_or(args.listen);
    eprintln!(
        "gnomon watch: {} servers every {:?}; listening on http://{local}/",
        loaded.servers.len(),
        args.interval
    );
    let prober = {
        let (latest, stop) = (latest.clone(), stop.clone());
        let servers = loaded.servers;
        std::thread::Builder::new()
            .name("gnomon-probe".into())
            .spawn(move || probe::run(servers, settings, latest, history, stop))
    };
    let prober = match prober {
        Ok(p) => p,
        Err(e) => {
            eprintln!("gnomon watch: cannot start the prober: {e}");
            return Exit::Local.into();
        }
    };
    let app = App::new(latest, args.expiry_warning, store);
    let shutdown = {
        let stop = stop.clone();
        async move {
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let served = runtime.block_on(web::serve(listener, app, shutdown));
    stop.store(true, Ordering::Relaxed);
    // A round in progress ends within its probes' deadlines; the process
    // does not wait for it.
    drop(prober);
    runtime.shutdown_timeout(Duration::from_millis(200));
    match served {
        Ok(()) => Exit::Ok.into(),
        Err(e) => {
            eprintln!("gnomon watch: {e}");
            Exit::Local.into()
        }
    }
}
