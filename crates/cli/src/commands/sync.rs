//! `gnomon sync`: the arguments, the output and the signals. What sync
//! decides is in gnomon-sync (crates/sync). Here: the arguments, the
//! service's start and its loop; a one-shot round (`--once`, `--check`,
//! `--set-clock`) is `once`, the state directory read or its floor
//! removed without a round is `state_dir`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use gnomon_client::Electorate;
use gnomon_sync::chrony::ChronySock;
use gnomon_sync::config::{self as cfg, Layer, Settings};
use gnomon_sync::{Control, Log, Service};

use super::sync_exit::{Exit, EXIT_CODES};

mod once;
mod state_dir;
use once::once;
use state_dir::{clear_floor, status};

/// Arguments. Every setting is also a key of the `[sync]` table of
/// --config and a GNOMON_SYNC_* variable (deploy/gnomon-sync.toml).
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub(crate) struct Args {
    /// A TOML file with a [sync] table (flags and GNOMON_SYNC_* win over it).
    #[arg(long, env = "GNOMON_SYNC_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// The server list (RFC 10049 server-list JSON; examples/servers.json).
    #[arg(long, env = "GNOMON_SYNC_SERVERS", value_name = "LIST.json")]
    servers: Option<PathBuf>,
    /// Where the floor, the last chain, the list cache and reports live
    /// [default: /var/lib/gnomon].
    #[arg(long, env = "GNOMON_SYNC_STATE_DIR", value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Time between rounds, 1s..=1d [default: 10m].
    #[arg(long, env = "GNOMON_SYNC_INTERVAL", value_name = "DURATION", value_parser = cfg::parse_interval)]
    interval: Option<Duration>,
    /// Jitter of the interval, percent, 0..=50 [default: 10].
    #[arg(long, env = "GNOMON_SYNC_JITTER", value_name = "PERCENT", value_parser = cfg::parse_jitter)]
    jitter: Option<u8>,
    /// Servers asked per round, at least [default: 3].
    #[arg(long, env = "GNOMON_SYNC_MIN_SERVERS", value_name = "N", value_parser = cfg::parse_count)]
    min_servers: Option<usize>,
    /// Servers that must agree with the consensus (beyond what --max-liars
    /// needs) [default: 2].
    #[arg(long, env = "GNOMON_SYNC_QUORUM", value_name = "K", value_parser = cfg::parse_count)]
    quorum: Option<usize>,
    /// How many of the listed servers may lie: a consensus needs twice this
    /// plus one distinct servers answering, so silencing honest ones leaves no
    /// consensus rather than the liars' (servers sharing a key, address or
    /// operator count once) [default: auto, max(1, (n − 1)/3) of the n
    /// listed].
    #[arg(long, env = "GNOMON_SYNC_MAX_LIARS", value_name = "F|auto", value_parser = cfg::parse_max_liars)]
    max_liars: Option<cfg::MaxLiars>,
    /// Never set the clock from a consensus wider (radius) than this
    /// [default: 10s].
    #[arg(long, env = "GNOMON_SYNC_MAX_RADIUS", value_name = "DURATION", value_parser = cfg::parse_max_radius)]
    max_radius: Option<Duration>,
    /// --check: tolerance around the consensus interval [default: 0s].
    #[arg(long, env = "GNOMON_SYNC_MAX_OFFSET", value_name = "DURATION", value_parser = cfg::parse_max_offset)]
    max_offset: Option<Duration>,
    /// First UDP wait per query; each retry waits 1.5 times longer
    /// [default: 1s].
    #[arg(long, env = "GNOMON_SYNC_TIMEOUT", value_name = "DURATION", value_parser = cfg::parse_timeout)]
    timeout: Option<Duration>,
    /// UDP attempts per query [default: 3].
    #[arg(long, env = "GNOMON_SYNC_RETRIES", value_name = "N", value_parser = cfg::parse_retries)]
    retries: Option<u32>,
    /// POST malfeasance reports when a URL is known: true or false
    /// [default: true].
    // The values are in the help text: clap_mangen's list of possible
    // values renders as paragraph macros `mandoc -T lint` warns about.
    #[arg(long, env = "GNOMON_SYNC_REPORT", value_name = "BOOL", num_args = 0..=1,
          default_missing_value = "true", value_parser = clap::value_parser!(bool),
          hide_possible_values = true)]
    report: Option<bool>,
    /// Where to POST reports (https); default: the list's `reports`.
    #[arg(long, env = "GNOMON_SYNC_REPORT_URL", value_name = "URL", value_parser = cfg::parse_report_url)]
    report_url: Option<String>,
    /// Send every consensus to chrony's `refclock SOCK` at this path
    /// (--print-chrony-conf prints the chrony.conf lines).
    #[arg(long, env = "GNOMON_SYNC_CHRONY_SOCK", value_name = "PATH", value_parser = cfg::parse_chrony_sock)]
    chrony_sock: Option<PathBuf>,
    /// The radius chrony is told: the refclock's `delay` is twice this, and
    /// a wider consensus is never sent, 1ms..=1h [default: 3s].
    #[arg(long, env = "GNOMON_SYNC_CHRONY_MAX_RADIUS", value_name = "DURATION", value_parser = cfg::parse_chrony_max_radius)]
    chrony_max_radius: Option<Duration>,
    /// Where to refresh the server list from (https only); default: the
    /// list's own `sources`.
    #[arg(long, env = "GNOMON_SYNC_SERVERS_URL", value_name = "URL", value_parser = cfg::parse_servers_url)]
    servers_url: Option<String>,
    /// Time between list refreshes, 1s..=30d, ± --jitter [default: 1d].
    #[arg(long, env = "GNOMON_SYNC_LIST_REFRESH", value_name = "DURATION", value_parser = cfg::parse_list_refresh)]
    list_refresh: Option<Duration>,
    /// Longest one list download may take, connect to last byte,
    /// 1s..=5m [default: 30s].
    #[arg(long, env = "GNOMON_SYNC_LIST_TIMEOUT", value_name = "DURATION", value_parser = cfg::parse_list_timeout)]
    list_timeout: Option<Duration>,
    /// PEM file of the CA certificates trusted for list downloads, instead
    /// of Mozilla's roots (a private list server).
    #[arg(long, env = "GNOMON_SYNC_LIST_CA", value_name = "FILE")]
    list_ca: Option<PathBuf>,
    /// Serve Prometheus text on http://ADDR/metrics.
    #[arg(long, env = "GNOMON_SYNC_METRICS", value_name = "ADDR", value_parser = cfg::parse_metrics)]
    metrics: Option<std::net::SocketAddr>,
    /// Answer local programs (`gnomon now`) on this Unix socket with the
    /// proven time now; `off` for none [default: /run/gnomon/now.sock].
    #[arg(long, env = "GNOMON_SYNC_NOW_SOCKET", value_name = "PATH", value_parser = cfg::parse_now_socket)]
    now_socket: Option<cfg::NowSocket>,
    /// The now socket's group (a name or number) [default: the service's].
    #[arg(long, env = "GNOMON_SYNC_NOW_SOCKET_GROUP", value_name = "GROUP", value_parser = cfg::parse_group)]
    now_socket_group: Option<String>,
    /// Who may ask on the now socket: 0600, 0660 (the group) or 0666
    /// (every local user) [default: 0660].
    #[arg(long, env = "GNOMON_SYNC_NOW_SOCKET_MODE", value_name = "MODE", value_parser = cfg::parse_socket_mode)]
    now_socket_mode: Option<u32>,
    /// The bound on the rate error of the oscillator (CLOCK_MONOTONIC_RAW,
    /// which NTP does not slew), ppm, 1..=100000, that widens the proven
    /// interval as time passes [default: 100].
    #[arg(long, env = "GNOMON_SYNC_NOW_DRIFT_PPM", value_name = "PPM", value_parser = cfg::parse_drift_ppm)]
    now_drift_ppm: Option<u32>,
    /// Measure once and exit.
    #[arg(long)]
    once: bool,
    /// With --once: step the clock to the consensus when the local clock
    /// is outside it (quorum, --max-radius and the floor permitting).
    #[arg(long, requires = "once", conflicts_with = "check")]
    set_clock: bool,
    /// With --set-clock: print the step, make none.
    #[arg(long, requires = "set_clock")]
    dry_run: bool,
    /// Measure once; exit 0 when the local clock is inside the consensus
    /// interval (± --max-offset), 4 when outside.
    #[arg(long)]
    check: bool,
    /// Print the last state saved in --state-dir and exit.
    #[arg(long, conflicts_with_all = ["once", "check"])]
    status: bool,
    /// Remove the proven floor from the state in --state-dir, say what was
    /// removed, and exit; a running service drops it at its next round,
    /// or at once on SIGHUP.
    #[arg(long, conflicts_with_all = ["once", "check", "status"])]
    clear_floor: bool,
    /// Print the effective settings as a [sync] table and exit.
    #[arg(long)]
    print_config: bool,
    /// Print the chrony.conf lines for these settings (the refclock SOCK
    /// line and maxdistance) and exit.
    #[arg(long, conflicts_with = "print_config")]
    print_chrony_conf: bool,
    /// --once, --check, --status: one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Testing only: accept a plain-HTTP `reports` URL on loopback.
    #[arg(long, hide = true)]
    allow_loopback_http_reports: bool,
}

impl Args {
    fn layer(&self) -> Layer {
        Layer {
            servers: self.servers.clone(),
            state_dir: self.state_dir.clone(),
            interval: self.interval,
            jitter: self.jitter,
            min_servers: self.min_servers,
            quorum: self.quorum,
            max_liars: self.max_liars,
            max_radius: self.max_radius,
            max_offset: self.max_offset,
            timeout: self.timeout,
            retries: self.retries,
            report: self.report,
            report_url: self.report_url.clone(),
            chrony_sock: self.chrony_sock.clone(),
            chrony_max_radius: self.chrony_max_radius,
            servers_url: self.servers_url.clone(),
            list_refresh: self.list_refresh,
            list_timeout: self.list_timeout,
            list_ca: self.list_ca.clone(),
            metrics: self.metrics,
            now_socket: self.now_socket.clone(),
            now_socket_group: self.now_socket_group.clone(),
            now_socket_mode: self.now_socket_mode,
            now_drift_ppm: self.now_drift_ppm,
        }
    }
}

pub(crate) fn run(args: Args) -> ExitCode {
    let file = match &args.config {
        Some(p) => match Layer::from_file(p) {
            Ok(l) => l,
            Err(e) => return usage(e),
        },
        None => Layer::default(),
    };
    let settings = Settings::resolve(&file, &args.layer());
    if args.print_config {
        print!("{settings}");
        return Exit::Ok.into();
    }
    if args.print_chrony_conf {
        return match gnomon_sync::chrony::conf(&settings) {
            Ok(lines) => {
                print!("{lines}");
                Exit::Ok.into()
            }
            Err(e) => usage(format!("--print-chrony-conf: {e}")),
        };
    }
    if args.status {
        return status(&settings, args.json);
    }
    if args.clear_floor {
        return clear_floor(&settings, args.json);
    }
    let log: Log = Arc::new(|line: &str| {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "gnomon sync: {line}");
    });
    let chrony = settings
        .chrony_sock
        .clone()
        .map(|p| (p, settings.chrony_max_radius));
    let metrics_addr = settings.metrics;
    let mut service = match Service::new(settings, log.clone(), args.allow_loopback_http_reports) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    // Sinks, for every mode: a --once round feeds chrony too.
    if let Some((path, max_radius)) = chrony {
        let sock = ChronySock::new(path, max_radius, log.clone());
        service.metrics().set_chrony(sock.counters());
        service.add_sink(Box::new(sock));
    }
    if args.once || args.check {
        // The summary goes to stdout with the verdict, not twice.
        service.quiet_rounds();
        return once(&mut service, &args);
    }
    // The endpoint lives as long as the process: it stops with it.
    if let Some(addr) = metrics_addr {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        match gnomon_sync::metrics::serve(addr, service.metrics(), stop) {
            Ok((bound, _)) => log(&format!("metrics on http://{bound}/metrics")),
            Err(e) => {
                eprintln!("gnomon sync: cannot listen on --metrics {addr}: {e}");
                return ExitCode::from(crate::exit::OS_ERROR);
            }
        }
    }
    start_now_socket(&service, &log);
    serve_loop(service, &log)
}

/// The now socket, when one is configured. Sync's job is the clock: a
/// socket that cannot be made is said once and the rounds go on (at the
/// default path it is a note: /run/gnomon exists where the unit made it).
fn start_now_socket(service: &Service, log: &Log) {
    let s = service.settings();
    let Some(path) = s.now_socket.clone() else {
        return;
    };
    let what = if path.as_os_str() == cfg::DEFAULT_NOW_SOCKET {
        "note"
    } else {
        "warning"
    };
    let gid = match s.now_socket_group.as_deref().map(cfg::group_id).transpose() {
        Ok(g) => g,
        Err(e) => {
            log(&format!(
                "{what}: now socket {}: {e}; `gnomon now` gets no answer",
                path.display()
            ));
            return;
        }
    };
    let access = gnomon_sync::now_socket::Access {
        gid,
        mode: s.now_socket_mode,
    };
    let started = gnomon_sync::now_socket::spawn(
        &path,
        &access,
        service.board(),
        s.now_drift_ppm,
        service.metrics().now.clone(),
        log.clone(),
    );
    match started {
        Ok(()) => log(&format!(
            "now socket on {} (mode {:04o}, drift bound {} ppm)",
            path.display(),
            s.now_socket_mode,
            s.now_drift_ppm
        )),
        Err(e) => log(&format!(
            "{what}: now socket {}: {e}; `gnomon now` gets no answer",
            path.display()
        )),
    }
}

fn usage(msg: impl std::fmt::Display) -> ExitCode {
    super::client_out::usage("sync", msg)
}

/// The service: rounds until SIGTERM or SIGINT; SIGHUP re-reads the list.
fn serve_loop(mut service: Service, log: &Log) -> ExitCode {
    let (tx, rx) = mpsc::channel();
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = match signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP]) {
        Ok(s) => s,
        Err(e) => {
            log(&format!("cannot handle signals: {e}"));
            return Exit::Local.into();
        }
    };
    let watch = log.clone();
    let spawned = std::thread::Builder::new()
        .name("gnomon-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if sig == SIGHUP {
                    let _ = tx.send(Control::Reload);
                    continue;
                }
                let _ = tx.send(Control::Stop);
                // A round in progress may wait seconds on silent servers;
                // everything it saves is written atomically, so stopping
                // in the middle loses that round and nothing else.
                std::thread::sleep(STOP_GRACE);
                watch("stopped in the middle of a round");
                std::process::exit(0);
            }
        });
    if let Err(e) = spawned {
        log(&format!("cannot start the signal thread: {e}"));
        return Exit::Local.into();
    }
    let s = service.settings();
    let assumption = Electorate::of(service.servers()).assume(s.max_liars);
    log(&format!(
        "started: {} server(s), every {} ± {}%, quorum {}, state in {}",
        service.servers().len(),
        humanize(s.interval),
        s.jitter,
        s.quorum,
        s.state_dir.display()
    ));
    // Said once, at the start: a list too short for its assumption gives
    // no consensus in any round, and the operator should hear why now.
    log(&format!(
        "assumes at most {} of the {} listed servers {}: {} must answer{}",
        assumption.liars,
        assumption.voters,
        if assumption.liars == 1 { "lies" } else { "lie" },
        assumption.needed(),
        if assumption.satisfiable() {
            String::new()
        } else {
            " (more than the list has: no round can reach a consensus; list more servers or \
             lower max-liars)"
                .to_string()
        }
    ));
    service.run(&rx);
    log("stopped");
    Exit::Ok.into()
}

/// How long a stop waits for the round in progress.
const STOP_GRACE: Duration = Duration::from_secs(2);

fn humanize(d: Duration) -> String {
    format!("{:.0} s", d.as_secs_f64())
}
