//! `gnomon serve`: run the server until SIGINT or SIGTERM; SIGHUP reloads
//! the configuration and keys (`reload.rs`).

mod reload;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use gnomon_protocol::{Acceptor, KeyPair, LongTermKey, ResponderOptions};
use gnomon_server::config::{Config, IdentitySource, LogConfig, LogFormat, LogLevel};
use gnomon_server::engine::ClockReader;
use gnomon_server::keys::{random_seed, KeySource};
use gnomon_server::offline::OfflineStore;
use gnomon_server::stats::{Drop, WorkerStats};
use gnomon_server::tcp::TcpConfig;
use gnomon_server::worker::{VersLists, WorkerConfig};
use gnomon_server::xdp::XdpConfig;
use gnomon_server::{activation, keyfile, metrics};
use gnomon_server::{Engine, EngineConfig};
use tracing_subscriber::filter::LevelFilter;

use super::service::Service;

/// `println!` that ignores a closed stdout: a server must not die because
/// whoever started it stopped reading.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// `eprintln!` that ignores a closed stderr.
macro_rules! err {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    config: super::config::ConfigArgs,
    /// Time between summary log lines (0: none): 30s, 5m; a bare number is
    /// seconds.
    #[arg(long, env = "GNOMON_SUMMARY_INTERVAL", value_name = "DURATION", default_value = "60s", value_parser = super::client_out::parse_duration)]
    summary_interval: Duration,
}

use crate::exit::{OS_ERROR, SOFTWARE, USAGE};
/// Warn this long before the last offline delegation runs out.
const HORIZON_WARNING_US: u64 = 24 * 3600 * 1_000_000;

/// The identities to serve, or why not and the exit status for it.
fn key_sources(config: &Config) -> Result<Vec<KeySource>, (String, u8)> {
    if config.ephemeral_key() {
        let seed = random_seed().map_err(|e| {
            (
                format!("cannot read random bytes from the OS: {e}"),
                OS_ERROR,
            )
        })?;
        tracing::warn!("ephemeral long-term key, made for this run only; not for production");
        return Ok(vec![KeyPair::from_seed(&seed).into()]);
    }
    let mut sources = Vec::new();
    for identity in &config.identities {
        let source = match identity {
            IdentitySource::KeyFile(path) => keyfile::load(path)
                .map(KeySource::LongTerm)
                .map_err(|e| e.to_string()),
            IdentitySource::OfflineDir(dir, pin) => {
                OfflineStore::load(dir, pin.as_ref().map(|k| k.bytes()))
                    .map(|store| {
                        if let Some(host) = store.host() {
                            tracing::info!(
                                "offline delegations in {} were made for host {host}",
                                dir.display()
                            );
                        }
                        KeySource::Offline(store)
                    })
                    .map_err(|e| e.to_string())
            }
        };
        sources.push(source.map_err(|e| (e, USAGE))?);
    }
    Ok(sources)
}

fn engine_config(config: &Config) -> EngineConfig {
    let profiles = config.profiles();
    let vers = profiles.versions();
    let tcp = &config.tcp;
    EngineConfig {
        listen: config.listen.addrs().to_vec(),
        workers: usize::from(config.workers.get()),
        recv_buffer: Some(config.recv_buffer.get() as usize),
        worker: WorkerConfig {
            max_batch: usize::from(config.batch_size.get()),
            max_queue_delay_us: config.max_queue_delay.get().as_micros() as u64,
            acceptor: Acceptor {
                profiles,
                min_size: usize::from(config.min_request_size.get()),
            },
            options: ResponderOptions {
                batch_disputed: config.batch_disputed,
                google_nonce: config.google_nonce,
            },
            vers: VersLists::new(&vers),
            grease_per_million: (config.grease.get() * 1e6).round() as u32,
            fail_after: injected_fault(),
            batch_wait_us: config.batch_wait.get().as_micros() as u64,
            limit: config.limit.worker(),
        },
        key_validity: config.online_key.validity(),
        key_rotation: config.online_key.rotate_every(),
        key_rotation_jitter_percent: config.online_key.jitter_percent(),
        radius_floor_us: u64::from(config.clock.radius_floor.micros()),
        unsynchronized_radius_us: config.clock.unsynchronized.radius_us(),
        tcp: tcp.enable.then(|| TcpConfig {
            enabled: true,
            max_connections: tcp.max_connections.get() as usize,
            idle_timeout: tcp.idle_timeout.get(),
            read_timeout: tcp.read_timeout.get(),
            write_timeout: tcp.write_timeout.get(),
            max_frame: tcp.max_frame.get() as usize,
            max_lifetime: tcp.max_lifetime.get(),
            max_requests: tcp.max_requests.get(),
            max_per_source: tcp.max_per_source.get() as usize,
            max_per_network: tcp.max_per_network.get() as usize,
            source_prefix_v4: tcp.source_prefix_v4.get(),
            source_prefix_v6: tcp.source_prefix_v6.get(),
        }),
        xdp: config.xdp.clone().map(|interface| XdpConfig {
            interface,
            mode: None,
        }),
    }
}

/// Changes the least severe level logged: a reload applies `log.level`.
type LevelHandle = tracing_subscriber::reload::Handle<LevelFilter, tracing_subscriber::Registry>;

fn level_filter(level: LogLevel) -> LevelFilter {
    match level {
        LogLevel::Error => LevelFilter::ERROR,
        LogLevel::Warn => LevelFilter::WARN,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Debug => LevelFilter::DEBUG,
        LogLevel::Trace => LevelFilter::TRACE,
    }
}

/// Structured logs on stderr: text for people, JSON for collectors. The
/// level sits in a reloadable layer (callsites cache their interest, so
/// it costs nothing per event until it changes).
fn init_logging(log: &LogConfig) -> LevelHandle {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let (filter, handle) = tracing_subscriber::reload::Layer::new(level_filter(log.level));
    let lines = tracing_subscriber::fmt::layer()
        .with_target(false)
        .with_writer(std::io::stderr);
    let registry = tracing_subscriber::registry().with(filter);
    let _ = match log.format {
        LogFormat::Text => registry
            .with(lines.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())))
            .try_init(),
        LogFormat::Json => registry.with(lines.json()).try_init(),
    };
    handle
}

pub(crate) fn run(args: Args) -> ExitCode {
    // First, while this is the only thread: taking them clears LISTEN_*
    // from the environment.
    let passed = gnomon_server::sys::passed::take_passed();
    let config = match args.config.load() {
        Ok(c) => c,
        Err(e) => {
            err!("gnomon serve: {e}");
            return ExitCode::from(USAGE);
        }
    };
    let log_level = init_logging(&config.log);
    let passed = match passed
        .map_err(|e| format!("socket activation: {e}"))
        .and_then(|p| activation::classify(p, config.tcp.enable).map_err(|e| e.to_string()))
    {
        Ok(p) => p,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::from(USAGE);
        }
    };
    let activated = passed.is_some();
    // Before any key is read: a core file or a same-user ptrace must never
    // see a seed.
    if let Err(e) = gnomon_server::sys::set_non_dumpable() {
        tracing::error!("cannot make the process non-dumpable (prctl PR_SET_DUMPABLE): {e}");
        return ExitCode::from(OS_ERROR);
    }
    let sources = match key_sources(&config) {
        Ok(s) => s,
        Err((why, code)) => {
            tracing::error!("{why}");
            return ExitCode::from(code);
        }
    };
    let publics: Vec<LongTermKey> = sources.iter().map(|s| s.public().clone()).collect();
    let public = publics[0].clone();
    let engine_config = engine_config(&config);
    let workers = engine_config.workers;
    let engine = match Engine::start_on(engine_config, sources, clock_reader(), passed) {
        Ok(e) => e,
        Err(e) if activated => {
            tracing::error!("cannot start on the sockets passed by the service manager: {e}");
            return ExitCode::from(OS_ERROR);
        }
        Err(e) => {
            tracing::error!("cannot start on {:?}: {e}", config.listen.addrs());
            return ExitCode::from(OS_ERROR);
        }
    };
    let stop = engine.stop_flag();
    let hangup = Arc::new(AtomicBool::new(false));
    for (sig, flag) in [
        (signal_hook::consts::SIGINT, &stop),
        (signal_hook::consts::SIGTERM, &stop),
        (signal_hook::consts::SIGHUP, &hangup),
    ] {
        if let Err(e) = signal_hook::flag::register(sig, flag.clone()) {
            tracing::error!("cannot handle signal {sig}: {e}");
            return ExitCode::from(OS_ERROR);
        }
    }
    let mut running = reload::Running {
        started: config.clone(),
        applied: config.clone(),
        publics,
        log_level,
    };
    let metrics = match config.metrics {
        Some(addr) => match metrics::spawn(addr, stop.clone(), engine.snapshot_source()) {
            Ok((bound, handle)) => {
                tracing::info!("metrics on http://{bound}/metrics and /health");
                Some(handle)
            }
            Err(e) => {
                tracing::error!("cannot serve metrics on {addr}: {e}");
                return ExitCode::from(OS_ERROR);
            }
        },
        None => None,
    };
    // Only once every port is bound: a key printed by a server that then
    // fails to start would be a key nobody can ever use.
    out!(
        "public key (base64): {}",
        base64::engine::general_purpose::STANDARD.encode(public.bytes())
    );
    out!("public key (hex):    {}", hex::encode(public.bytes()));
    let mut clock_report = ClockReport::read(&engine);
    clock_report.log_changes_from(&ClockReport::FINE);
    let how = if activated {
        " (socket passed by the service manager)"
    } else {
        ""
    };
    for addr in &engine.local {
        tracing::info!("listening on udp {addr} with {workers} workers{how}");
    }
    for addr in engine.tcp_local() {
        tracing::info!("listening on tcp {addr}{how}");
    }
    if let Some(x) = engine.xdp_info() {
        tracing::info!(
            "serving udp on {} through AF_XDP: {} queue(s), program {} ({}), sockets {}",
            x.interface,
            x.queues,
            x.mode,
            if x.mode == "native" {
                "in the driver"
            } else {
                "generic: after the kernel made a socket buffer"
            },
            if x.zero_copy {
                "zero-copy"
            } else {
                "in copy mode"
            }
        );
    }
    if activated && config.tcp.enable && engine.tcp_local().is_empty() {
        tracing::info!("no TCP socket was passed: TCP is not served");
    }
    let mut service = Service::ready(&engine, config.profiles().iter().count());
    let mut last_summary = Instant::now();
    let mut last_horizon_warning: Option<Instant> = None;
    let mut previous = WorkerStats::default();
    while !stop.load(Ordering::Relaxed) {
        std::thread::park_timeout(Duration::from_millis(50));
        if hangup.swap(false, Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
            service.reloading();
            reload::reload(&args, &mut running, &engine);
            service.reloaded(&engine, running.applied.profiles().iter().count());
        }
        let report = ClockReport::read(&engine);
        report.log_changes_from(&clock_report);
        clock_report = report;
        let now_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        let left = engine.key_horizon_us().saturating_sub(now_us);
        if left < HORIZON_WARNING_US
            && last_horizon_warning.is_none_or(|t| t.elapsed().as_secs() >= 3600)
        {
            tracing::warn!(
                "the last offline delegation expires in {} s; run `gnomon delegate` and copy the files over",
                left / 1_000_000
            );
            last_horizon_warning = Some(Instant::now());
        }
        if !args.summary_interval.is_zero() && last_summary.elapsed() >= args.summary_interval {
            let now = engine.stats();
            tracing::info!("{}", summary(&previous, &now, last_summary.elapsed()));
            previous = now;
            last_summary = Instant::now();
        }
        service.tick(&engine);
    }
    let failed = engine.failed();
    service.stopping(failed);
    let result = engine.shutdown();
    if let Some(m) = metrics {
        let _ = m.join();
    }
    match result {
        Ok(total) => {
            tracing::info!(
                "stopped; {}",
                summary(&WorkerStats::default(), &total, Duration::ZERO)
            );
            if failed {
                ExitCode::from(SOFTWARE)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            tracing::error!("a worker failed: {e}");
            ExitCode::from(SOFTWARE)
        }
    }
}

/// What the operator was last told about the clock, so that each change
/// is logged once rather than on every poll.
#[derive(Clone, Copy, PartialEq, Eq)]
struct ClockReport {
    /// errno of the last failed adjtimex, 0 when it worked.
    read_error: i32,
    synchronized: bool,
    answering: bool,
    can_sign: bool,
    radius_s: u64,
}

impl ClockReport {
    /// The state nothing needs to be said about.
    const FINE: ClockReport = ClockReport {
        read_error: 0,
        synchronized: true,
        answering: true,
        can_sign: true,
        radius_s: 0,
    };

    fn read(engine: &Engine) -> ClockReport {
        let c = &engine.clock;
        ClockReport {
            read_error: c.read_error.load(Ordering::Relaxed),
            synchronized: c.synchronized.load(Ordering::Relaxed),
            answering: c.answering.load(Ordering::Relaxed),
            can_sign: engine.can_sign(),
            radius_s: c.radius_us.load(Ordering::Relaxed) / 1_000_000,
        }
    }

    fn policy(&self) -> String {
        if self.answering {
            format!("answering with a radius of {} s", self.radius_s)
        } else {
            "not answering until it is (clock.unsynchronized = \"refuse\")".to_string()
        }
    }

    fn log_changes_from(&self, before: &ClockReport) {
        if self.read_error != before.read_error {
            if self.read_error != 0 {
                tracing::warn!(
                    "cannot read the kernel's clock state (adjtimex: {}; systemd's \
                     ProtectClock=yes does this); treating the clock as unsynchronized, {}",
                    std::io::Error::from_raw_os_error(self.read_error),
                    self.policy()
                );
            } else {
                tracing::info!("the kernel's clock state can be read again");
            }
        } else if self.read_error == 0 && self.synchronized != before.synchronized {
            if self.synchronized {
                tracing::info!("the kernel says the system clock is synchronized");
            } else {
                tracing::warn!(
                    "the kernel says the system clock is not synchronized; {}",
                    self.policy()
                );
            }
        } else if self.answering && !before.answering {
            tracing::info!("answering again");
        }
        if self.can_sign != before.can_sign {
            if self.can_sign {
                tracing::info!("signing again: a delegation covers the current time");
            } else {
                tracing::warn!(
                    "no delegation covers the current time (clock step, or the offline \
                     delegations ran out); not answering until one does"
                );
            }
        }
    }
}

/// Debug builds only: `GNOMON_TEST_WORKER_FAULT=N` makes every UDP worker
/// fail after N datagrams, so a test can watch a real process take itself
/// down; `GNOMON_TEST_RECEIVE_ERRORS=N` makes the next N receives fail, so a
/// test can watch it survive; `GNOMON_TEST_WORKER_STALL=N` makes one worker
/// stop looping after N datagrams (not even compiled into release), so a
/// test can watch the watchdog pings stop. Release builds read none.
fn injected_fault() -> Option<u64> {
    if !cfg!(debug_assertions) {
        return None;
    }
    if let Some(n) = std::env::var("GNOMON_TEST_RECEIVE_ERRORS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        // The next N receives fail (ENOBUFS): the workers must count them,
        // back off, and go on serving.
        gnomon_server::failure::inject_receive_errors(n);
    }
    #[cfg(debug_assertions)]
    if let Some(n) = std::env::var("GNOMON_TEST_WORKER_STALL")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        // One worker stops going round its loop after N datagrams: the
        // watchdog pings must stop.
        gnomon_server::failure::inject_stall_after(n);
    }
    std::env::var("GNOMON_TEST_WORKER_FAULT").ok()?.parse().ok()
}

/// How the kernel's clock state is read: `adjtimex`. Debug builds only:
/// `GNOMON_TEST_CLOCK_UNREADABLE=1` makes every read fail with EPERM, as
/// systemd's ProtectClock=yes does, so a test can watch a real process
/// under it. Release builds never read it.
fn clock_reader() -> ClockReader {
    if cfg!(debug_assertions) && std::env::var_os("GNOMON_TEST_CLOCK_UNREADABLE").is_some() {
        const EPERM: i32 = 1;
        return Arc::new(|| Err(std::io::Error::from_raw_os_error(EPERM)));
    }
    Arc::new(gnomon_server::sys::kernel_clock)
}

/// One line: what happened since the last summary.
fn summary(before: &WorkerStats, now: &WorkerStats, over: Duration) -> String {
    let responses = now.total_responses() - before.total_responses();
    let received = now.received - before.received;
    let drops: u64 = now.drops.iter().sum::<u64>() - before.drops.iter().sum::<u64>();
    let mut line = format!("received {received}, answered {responses}, dropped {drops}");
    if !over.is_zero() {
        line += &format!(" ({:.0}/s)", responses as f64 / over.as_secs_f64());
    }
    for d in Drop::ALL {
        let n = now.drops[d as usize] - before.drops[d as usize];
        if n > 0 {
            line += &format!(", {} {n}", d.label());
        }
    }
    line + &format!(", signatures {}", now.signatures - before.signatures)
}
