//! `gnomon serve`: run the server until SIGINT or SIGTERM; SIGHUP reloads
//! the configuration and keys (`reload.rs`). What it says: the identities
//! and sockets (`announce.rs`), the clock (`clock.rs`), the counts per
//! transport (`summary.rs`), and why it could not start (`failure.rs`).
//! Under `--json` the log is JSON and stdout carries one object, printed
//! when the server ends.

mod announce;
mod clock;
mod failure;
mod reload;
mod summary;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gnomon_protocol::{Acceptor, KeyPair, LongTermKey, ResponderOptions};
use gnomon_server::config::{Config, IdentitySource, LogConfig, LogFormat};
use gnomon_server::engine::ClockReader;
use gnomon_server::keys::{random_seed, KeySource};
use gnomon_server::offline::OfflineStore;
use gnomon_server::tcp::TcpConfig;
use gnomon_server::worker::{VersLists, WorkerConfig};
use gnomon_server::xdp::XdpConfig;
use gnomon_server::{activation, keyfile, metrics};
use gnomon_server::{Engine, EngineConfig};
use serde_json::json;
// reload.rs applies `log.level` through these.
use super::logging::{level_filter, LevelHandle};
use super::service::Service;
use crate::words;
use announce::Served;
use clock::ClockReport;
use failure::Failure;
use summary::Totals;

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
    /// Log JSON objects on stderr (as --log-format json), print no public
    /// key lines, and when the server ends print one JSON object on
    /// stdout: the keys served and the counts, or the error, with
    /// `exit_code`.
    #[arg(long)]
    json: bool,
}

use crate::exit::{OS_ERROR, SOFTWARE, USAGE};
/// Warn this long before the last offline delegation runs out.
const HORIZON_WARNING_US: u64 = 24 * 3600 * 1_000_000;

/// The configuration as `args` give it: the file, the GNOMON_* variables,
/// the flags; `--json` makes the log JSON whatever the file says (so a
/// reload does not see `log.format` change).
fn load(args: &Args) -> Result<Config, gnomon_server::config::ConfigError> {
    let mut config = args.config.load()?;
    if args.json {
        config.log.format = LogFormat::Json;
    }
    Ok(config)
}

/// The identities to serve, or why not.
fn key_sources(config: &Config) -> Result<Vec<KeySource>, Failure> {
    if config.ephemeral_key() {
        let seed = random_seed().map_err(|e| {
            Failure::new(
                "random",
                format!(
                    "cannot read random bytes from the OS (getrandom) for the ephemeral key: {}",
                    words::io(&e)
                ),
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
                .map_err(|e| failure::key_file(&e)),
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
                    .map_err(|e| failure::offline_dir(&e))
            }
        };
        sources.push(source.map_err(|e| Failure::new("keys", e, USAGE))?);
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

pub(crate) fn run(args: Args) -> ExitCode {
    // First, while this is the only thread: taking them clears LISTEN_*
    // from the environment.
    let passed = gnomon_server::sys::passed::take_passed();
    let config = match load(&args) {
        Ok(c) => c,
        Err(e) => {
            // The log is not set up yet: under --json it is set up for
            // this one line, so that stderr stays JSON; else said plainly.
            let f = failure::config(&e);
            if args.json {
                let _ = super::logging::init(&LogConfig {
                    format: LogFormat::Json,
                    ..LogConfig::default()
                });
                tracing::error!("{}", f.message);
            } else {
                err!("gnomon serve: {}", f.message);
            }
            return finish(&args, Err(f));
        }
    };
    let log_level = super::logging::init(&config.log);
    let outcome = serve(&args, &config, passed, log_level);
    if let Err(f) = &outcome {
        tracing::error!("{}", f.message);
    }
    finish(&args, outcome)
}

/// How a server that started ended: its exit code and, for `--json`, what
/// it served and counted, and the error that stopped it if one did.
struct Stopped {
    code: u8,
    served: serde_json::Value,
    totals: serde_json::Value,
    error: Option<Failure>,
}

/// The exit status, and under `--json` the one object on stdout.
fn finish(args: &Args, outcome: Result<Stopped, Failure>) -> ExitCode {
    let code = match &outcome {
        Ok(s) => s.code,
        Err(f) => f.code,
    };
    if args.json {
        match outcome {
            Ok(s) => {
                let mut object = json!({
                    "stopped": true,
                    "identities": s.served,
                    "totals": s.totals,
                });
                if let Some(f) = s.error {
                    object["error"] = json!({ "kind": f.kind, "message": f.message });
                }
                words::print_outcome(object, code);
            }
            Err(f) => words::print_error(f.kind, &f.message, code),
        }
    }
    ExitCode::from(code)
}

/// Start the engine, serve until a signal or a failed worker, stop.
fn serve(
    args: &Args,
    config: &Config,
    passed: std::io::Result<Vec<gnomon_server::sys::passed::PassedFd>>,
    log_level: LevelHandle,
) -> Result<Stopped, Failure> {
    let passed = passed
        .map_err(|e| format!("socket activation: {}", words::io(&e)))
        .and_then(|p| {
            activation::classify(p, config.tcp.enable)
                .map_err(|e| words::strip_os_error(&e.to_string()))
        })
        .map_err(|e| Failure::new("socket-activation", e, USAGE))?;
    let activated = passed.is_some();
    // Before any key is read: a core file or a same-user ptrace must never
    // see a seed.
    gnomon_server::sys::set_non_dumpable().map_err(|e| {
        Failure::new(
            "non-dumpable",
            format!(
                "cannot make the process non-dumpable (prctl PR_SET_DUMPABLE): {}",
                words::io(&e)
            ),
            OS_ERROR,
        )
    })?;
    let sources = key_sources(config)?;
    let publics: Vec<LongTermKey> = sources.iter().map(|s| s.public().clone()).collect();
    let engine_config = engine_config(config);
    let workers = engine_config.workers;
    let engine = Engine::start_on(engine_config, sources, clock_reader(), passed)
        .map_err(|e| failure::start(&e, config.listen.addrs(), activated))?;
    let stop = engine.stop_flag();
    let hangup = Arc::new(AtomicBool::new(false));
    for (sig, flag) in [
        (signal_hook::consts::SIGINT, &stop),
        (signal_hook::consts::SIGTERM, &stop),
        (signal_hook::consts::SIGHUP, &hangup),
    ] {
        if let Err(e) = signal_hook::flag::register(sig, flag.clone()) {
            return Err(Failure::new(
                "signals",
                format!("cannot handle signal {sig}: {}", words::io(&e)),
                OS_ERROR,
            ));
        }
    }
    let tcp_on = !engine.tcp_local().is_empty();
    let mut running = reload::Running {
        started: config.clone(),
        applied: config.clone(),
        served: Served::new(config, &publics, tcp_on),
        publics,
        log_level,
        tcp_on,
    };
    let metrics = match config.metrics {
        Some(addr) => match metrics::spawn(addr, stop.clone(), engine.snapshot_source()) {
            Ok((bound, handle)) => {
                tracing::info!("metrics on http://{bound}/metrics and /health");
                Some(handle)
            }
            Err(e) => return Err(failure::metrics(addr, &e)),
        },
        None => None,
    };
    // Only once every port is bound: a key printed by a server that then
    // fails to start would be a key nobody can ever use. Under --json
    // stdout is for the one object; the identity lines below carry them.
    if !args.json {
        running.served.print_public_keys();
    }
    let mut clock_report = ClockReport::read(&engine);
    clock_report.log_changes_from(&ClockReport::FINE);
    let how = if activated {
        " (socket passed by the service manager)"
    } else {
        ""
    };
    running.served.log(&engine, workers, how);
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
    if activated && config.tcp.enable && !tcp_on {
        tracing::info!("no TCP socket was passed: TCP is not served");
    }
    let xdp = engine.xdp_info().is_some();
    let mut service = Service::ready(&engine, running.served.status(&engine));
    let mut last_summary = Instant::now();
    let mut last_horizon_warning: Option<Instant> = None;
    let mut previous = Totals::default();
    while !stop.load(Ordering::Relaxed) {
        std::thread::park_timeout(Duration::from_millis(50));
        if hangup.swap(false, Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
            service.reloading();
            reload::reload(args, &mut running, &engine);
            service.reloaded(&engine, running.served.status(&engine));
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
            let now = Totals::read(&engine);
            tracing::info!("{}", now.line(&previous, last_summary.elapsed(), xdp));
            previous = now;
            last_summary = Instant::now();
        }
        service.tick(&engine);
    }
    let failed = engine.failed();
    service.stopping(failed);
    // Outlives the engine: the counts after every thread has stopped.
    let last_counts = engine.snapshot_source();
    let result = engine.shutdown();
    if let Some(m) = metrics {
        let _ = m.join();
    }
    let total = Totals::from_snapshot(&last_counts());
    let served = running.served.json();
    tracing::info!(
        "stopped; {}",
        total.line(&Totals::default(), Duration::ZERO, xdp)
    );
    let error = match result {
        Err(e) => Some(Failure::new(
            "worker",
            format!("a worker failed: {}", failure::said(&e)),
            SOFTWARE,
        )),
        Ok(_) if failed => Some(Failure::new("worker", "a worker failed", SOFTWARE)),
        Ok(_) => None,
    };
    if let Some(f) = &error {
        tracing::error!("{}", f.message);
    }
    Ok(Stopped {
        code: error.as_ref().map_or(0, |f| f.code),
        served,
        totals: total.json(),
        error,
    })
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
