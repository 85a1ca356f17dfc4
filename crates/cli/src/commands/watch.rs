//! `gnomon watch`: probe every server of a list on a schedule and serve
//! the status page, `/metrics` and `/api/servers` (crates/watch).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use gnomon_client::{reports_url, PostPolicy};
use gnomon_sync::list::Loaded;
use gnomon_watch::history::History;
use gnomon_watch::probe::{self, Settings};
use gnomon_watch::publish::{Config, Publisher};
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

mod input;
mod key;

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
    /// Publish a signed server list at /servers.json (signature at
    /// /servers.json.sig, what `ssh-keygen -Y verify -n
    /// roughtime-server-list` checks) after every round, signed with this
    /// unencrypted OpenSSH ed25519 private key (ssh-keygen -t ed25519 -N
    /// ''). Or --pkcs11-module for a key in a token.
    #[arg(long, value_name = "FILE", env = "GNOMON_WATCH_PUBLISH_KEY")]
    publish_key: Option<PathBuf>,
    /// How long each published list is good for (clients refuse it after),
    /// 1m..=30d, longer than --interval [default: 1d].
    #[arg(long, value_name = "DURATION", value_parser = cfg::parse_publish_expiry, env = "GNOMON_WATCH_PUBLISH_EXPIRY")]
    publish_expiry: Option<Duration>,
    /// The monitor's identity in the published list (and the name clients
    /// give in allowed_signers); without it, the host name.
    #[arg(long, value_name = "NAME", value_parser = cfg::parse_publish_name, env = "GNOMON_WATCH_PUBLISH_NAME")]
    publish_name: Option<String>,
    /// The public URL of /servers.json, written in the list's `sources`.
    #[arg(long, value_name = "URL", value_parser = cfg::parse_publish_url, env = "GNOMON_WATCH_PUBLISH_URL")]
    publish_url: Option<String>,
    /// What availability and round-trip times in the published list are
    /// computed over, 1m..=30d [default: 1d].
    #[arg(long, value_name = "DURATION", value_parser = cfg::parse_publish_window, env = "GNOMON_WATCH_PUBLISH_WINDOW")]
    publish_window: Option<Duration>,
    /// The publishing key in a PKCS#11 token: the vendor's module (as
    /// /usr/lib/softhsm/libsofthsm2.so). Needs --pkcs11-token and
    /// --pkcs11-key; the PIN comes from --pkcs11-pin-file or
    /// GNOMON_PKCS11_PIN.
    #[arg(long, value_name = "LIB", env = "GNOMON_WATCH_PKCS11_MODULE")]
    pkcs11_module: Option<PathBuf>,
    /// The token's label.
    #[arg(long, value_name = "LABEL", env = "GNOMON_WATCH_PKCS11_TOKEN")]
    pkcs11_token: Option<String>,
    /// The key pair's label inside the token.
    #[arg(long, value_name = "LABEL", env = "GNOMON_WATCH_PKCS11_KEY")]
    pkcs11_key: Option<String>,
    /// A file holding the token's user PIN (mode 0600 or 0400, owned by
    /// the user watch runs as).
    #[arg(long, value_name = "FILE", env = "GNOMON_WATCH_PKCS11_PIN_FILE")]
    pkcs11_pin_file: Option<PathBuf>,
    /// A monitor's signed server list to watch instead of --servers (a
    /// monitor of monitors); its signature is at URL.sig. Repeat it for
    /// each monitor. Needs --servers-key.
    #[arg(long, value_name = "URL", env = "GNOMON_WATCH_SERVERS_URL")]
    servers_url: Vec<String>,
    /// A monitor key whose lists are believed: `ssh-ed25519 AAAA…
    /// [comment]` or a .pub file holding it. Repeat it for each monitor.
    #[arg(long, value_name = "KEY", env = "GNOMON_WATCH_SERVERS_KEY")]
    servers_key: Vec<String>,
    /// How many of the --servers-key monitors must list a server for it to
    /// be watched, 1..=64 [default: 1].
    #[arg(long, value_name = "K", value_parser = cfg::parse_threshold, env = "GNOMON_WATCH_SERVERS_THRESHOLD")]
    servers_threshold: Option<u16>,
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
            publish: cfg::PublishLayer {
                publish_key: self.publish_key.clone(),
                publish_expiry: self.publish_expiry,
                publish_name: self.publish_name.clone(),
                publish_url: self.publish_url.clone(),
                publish_window: self.publish_window,
                pkcs11_module: self.pkcs11_module.clone(),
                pkcs11_token: self.pkcs11_token.clone(),
                pkcs11_key: self.pkcs11_key.clone(),
                pkcs11_pin_file: self.pkcs11_pin_file.clone(),
                servers_url: (!self.servers_url.is_empty()).then(|| self.servers_url.clone()),
                servers_key: (!self.servers_key.is_empty()).then(|| self.servers_key.clone()),
                servers_threshold: self.servers_threshold,
            },
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
    let (loaded, source) = match load_list(&settings) {
        Ok(l) => l,
        Err((code, why)) if code == crate::exit::USAGE => return usage("watch", why),
        Err((code, why)) => {
            eprintln!("gnomon watch: {why}");
            if args.json {
                words::print_error("servers", &why, code);
            }
            return ExitCode::from(code);
        }
    };
    // The key is read (and the token logged into) before watch becomes a
    // service: a key that cannot sign is said at once, with what to do.
    let publish_key = if let Some(path) = &settings.publish.key {
        Some(key::load_file(path))
    } else {
        settings.publish.token.as_ref().map(key::load_token)
    };
    let publish_key = match publish_key.transpose() {
        Ok(k) => k,
        Err((code, why)) => {
            eprintln!("gnomon watch: {why}");
            if args.json {
                words::print_error("publish_key", &why, code);
            }
            return ExitCode::from(code);
        }
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
        publish: None,
        list_reports: list_reports(&loaded.raw),
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
    let local = listener.local_addr().unwrap_or(settings.listen);
    let publisher = publish_key.map(|(key, comment)| {
        let p = &settings.publish;
        let url = p.url.clone();
        let config = Config {
            monitor: p.name.clone().unwrap_or_else(host_name),
            comment,
            expiry: p.expiry,
            window: p.window,
            // Report links point where the list is served from.
            reports_base: sink.as_ref().map(|_| match &url {
                Some(u) => u
                    .strip_suffix("/servers.json")
                    .unwrap_or(u.as_str())
                    .to_string(),
                None => format!("http://{local}"),
            }),
            url,
        };
        let publisher = Publisher::new(config, Box::new(key));
        tracing::info!(
            "publishing the server list at http://{local}/servers.json, signed by {}",
            publisher.key().fingerprint()
        );
        publisher
    });
    probing.publish = publisher.clone();
    let history = store
        .clone()
        .map(|s| History::new(s, runtime.handle().clone()));
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
            .spawn(move || {
                let source = source.map(|s| Box::new(s) as Box<dyn probe::Refresh>);
                probe::run_from(servers, probing, latest, history, stop, source)
            })
    };
    let prober = match prober {
        Ok(p) => p,
        Err(e) => {
            let why = format!("cannot start the prober: {}", words::io(&e));
            return end.failed("runtime", &why, crate::exit::SOFTWARE);
        }
    };
    let app = App::new(latest.clone(), limits, store.clone(), sink, publisher);
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

/// The input list's `reports` URL, copied into the published list.
fn list_reports(raw: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(raw).ok()?;
    v.get("reports")?.as_str().map(str::to_string)
}

/// This machine's name: the published list's monitor identity unless
/// --publish-name gives one.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "gnomon-watch".to_string())
}

/// The list to start from: the --servers file, or the pinned monitors'
/// signed lists merged (and the source that refreshes them each round).
/// A file that cannot be read or parsed is a usage error; monitors of
/// which fewer than the threshold give a list now are unavailable.
fn load_list(
    settings: &WatchSettings,
) -> Result<(Loaded, Option<input::SignedInput>), (u8, String)> {
    let usage = |why: String| (crate::exit::USAGE, why);
    let Some(path) = &settings.servers else {
        let p = &settings.publish;
        let mut source =
            input::SignedInput::new(&p.servers_url, &p.servers_key, p.servers_threshold)
                .map_err(usage)?;
        let loaded = source.load().map_err(|why| {
            (
                crate::exit::UNAVAILABLE,
                format!(
                    "the pinned monitors give no list to watch: {why}; check that their \
                     servers-url answer and that servers-key holds their keys"
                ),
            )
        })?;
        return Ok((loaded, Some(source)));
    };
    let raw = std::fs::read(path).map_err(|e| {
        usage(format!(
            "cannot read the server list {}: {}",
            path.display(),
            words::io(&e)
        ))
    })?;
    let loaded = gnomon_sync::list::parse(raw, &path.display().to_string()).map_err(usage)?;
    Ok((loaded, None))
}
