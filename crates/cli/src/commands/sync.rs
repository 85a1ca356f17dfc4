//! `gnomon sync`: the arguments, the output and the signals. What sync
//! decides is in gnomon-sync (crates/sync). Here: the arguments and the
//! start; the service from its endpoints to its stop is `service_loop`, a
//! one-shot round (`--once`, `--check`, `--set-clock`) is `once`, the
//! state directory read or its floor removed without a round is
//! `state_dir`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Arg;
use gnomon_sync::chrony::ChronySock;
use gnomon_sync::config::{self as cfg, Layer, Settings};
use gnomon_sync::{Log, Service};

use super::client_out::{SWITCH_ON, SWITCH_VALUES};
use super::sync_exit::{Exit, EXIT_CODES};
use crate::words;

mod once;
mod service_loop;
mod state_dir;
use once::once;
use state_dir::{clear_floor, status};

/// Arguments. Every setting is also a key of the `[sync]` table of
/// --config and a GNOMON_SYNC_* variable (deploy/gnomon-sync.toml).
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES, mut_args = with_default)]
pub(crate) struct Args {
    /// A TOML file with a [sync] table (flags and GNOMON_SYNC_* win over it).
    #[arg(long, env = "GNOMON_SYNC_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// The server list (RFC 10049 server-list JSON; examples/servers.json).
    #[arg(long, env = "GNOMON_SYNC_SERVERS", value_name = "LIST.json")]
    servers: Option<PathBuf>,
    /// Where the floor, the last chain, the list cache and reports live.
    #[arg(long, env = "GNOMON_SYNC_STATE_DIR", value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Time between rounds, 1s..=1d.
    #[arg(long, env = "GNOMON_SYNC_INTERVAL", value_name = "DURATION", value_parser = cfg::parse_interval)]
    interval: Option<Duration>,
    /// Jitter of the interval, percent, 0..=50.
    #[arg(long, env = "GNOMON_SYNC_JITTER", value_name = "PERCENT", value_parser = cfg::parse_jitter)]
    jitter: Option<u8>,
    /// Servers asked per round, at least.
    #[arg(long, env = "GNOMON_SYNC_MIN_SERVERS", value_name = "N", value_parser = cfg::parse_count)]
    min_servers: Option<usize>,
    /// Servers that must agree with the consensus (beyond what --max-liars
    /// needs).
    #[arg(long, env = "GNOMON_SYNC_QUORUM", value_name = "K", value_parser = cfg::parse_count)]
    quorum: Option<usize>,
    /// How many of the listed servers may lie: a consensus needs twice this
    /// plus one distinct servers answering, so silencing honest ones leaves no
    /// consensus rather than the liars' (servers sharing a key, address or
    /// operator count once); auto is max(1, (n − 1)/3) of the n listed.
    #[arg(long, env = "GNOMON_SYNC_MAX_LIARS", value_name = "F|auto", value_parser = cfg::parse_max_liars)]
    max_liars: Option<cfg::MaxLiars>,
    /// Never set the clock from a consensus wider (radius) than this.
    #[arg(long, env = "GNOMON_SYNC_MAX_RADIUS", value_name = "DURATION", value_parser = cfg::parse_max_radius)]
    max_radius: Option<Duration>,
    /// --check: tolerance around the consensus interval.
    #[arg(long, env = "GNOMON_SYNC_MAX_OFFSET", value_name = "DURATION", value_parser = cfg::parse_max_offset)]
    max_offset: Option<Duration>,
    /// First UDP wait per query; each retry waits 1.5 times longer.
    #[arg(long, env = "GNOMON_SYNC_TIMEOUT", value_name = "DURATION", value_parser = cfg::parse_timeout)]
    timeout: Option<Duration>,
    /// UDP attempts per query.
    #[arg(long, env = "GNOMON_SYNC_RETRIES", value_name = "N", value_parser = cfg::parse_retries)]
    retries: Option<u32>,
    /// POST malfeasance reports when a URL is known: --report alone is
    /// on; --report=off sends none (on, off, true, false, yes, no).
    // The values are in the help text: clap_mangen's list of possible
    // values renders as paragraph macros `mandoc -T lint` warns about.
    #[arg(long, env = "GNOMON_SYNC_REPORT", value_name = SWITCH_VALUES, num_args = 0..=1,
          default_missing_value = SWITCH_ON, value_parser = words::switch,
          hide_possible_values = true)]
    report: Option<bool>,
    /// Where to POST reports (https).
    #[arg(long, env = "GNOMON_SYNC_REPORT_URL", value_name = "URL", value_parser = cfg::parse_report_url)]
    report_url: Option<String>,
    /// Send every consensus to chrony's `refclock SOCK` at this path
    /// (--print-chrony-conf prints the chrony.conf lines).
    #[arg(long, env = "GNOMON_SYNC_CHRONY_SOCK", value_name = "PATH", value_parser = cfg::parse_chrony_sock)]
    chrony_sock: Option<PathBuf>,
    /// The radius chrony is told: the refclock's `delay` is twice this, and
    /// a wider consensus is never sent, 1ms..=1h.
    #[arg(long, env = "GNOMON_SYNC_CHRONY_MAX_RADIUS", value_name = "DURATION", value_parser = cfg::parse_chrony_max_radius)]
    chrony_max_radius: Option<Duration>,
    /// Where to refresh the server list from (https; repeat it, or separate
    /// with commas, for fallbacks). With --servers-key: one monitor's signed
    /// list each, its signature at URL.sig, and plain http:// allowed (the
    /// signature gives integrity, its expiry and sequence freshness).
    #[arg(long, env = "GNOMON_SYNC_SERVERS_URL", value_name = "URL", value_delimiter = ',',
          value_parser = cfg::parse_servers_url)]
    servers_url: Vec<String>,
    /// A monitor key whose signed lists (--servers-url) are believed: the
    /// text `ssh-ed25519 AAAA… [comment]`, or a file holding that line (an
    /// OpenSSH .pub); repeat it, or separate with commas, for each monitor.
    /// No --servers file is needed then.
    #[arg(long, env = "GNOMON_SYNC_SERVERS_KEY", value_name = "KEY", value_delimiter = ',',
          value_parser = cfg::parse_servers_key)]
    servers_key: Vec<String>,
    /// How many of the --servers-key monitors must list a server, in lists
    /// in force, for it to be used (1..=the number of keys).
    #[arg(long, env = "GNOMON_SYNC_SERVERS_THRESHOLD", value_name = "K", value_parser = cfg::parse_threshold)]
    servers_threshold: Option<usize>,
    /// Time between list refreshes, 1s..=30d, ± --jitter.
    #[arg(long, env = "GNOMON_SYNC_LIST_REFRESH", value_name = "DURATION", value_parser = cfg::parse_list_refresh)]
    list_refresh: Option<Duration>,
    /// Longest one list download may take, connect to last byte,
    /// 1s..=5m.
    #[arg(long, env = "GNOMON_SYNC_LIST_TIMEOUT", value_name = "DURATION", value_parser = cfg::parse_list_timeout)]
    list_timeout: Option<Duration>,
    /// PEM file of the CA certificates trusted for list downloads (a
    /// private list server).
    #[arg(long, env = "GNOMON_SYNC_LIST_CA", value_name = "FILE")]
    list_ca: Option<PathBuf>,
    /// Serve Prometheus text on http://ADDR/metrics; `off` for none.
    #[arg(long, env = "GNOMON_SYNC_METRICS", value_name = "ADDR", value_parser = cfg::parse_metrics)]
    metrics: Option<cfg::Metrics>,
    /// Answer local programs (`gnomon now`) on this Unix socket with the
    /// proven time now; `off` for none.
    #[arg(long, env = "GNOMON_SYNC_NOW_SOCKET", value_name = "PATH", value_parser = cfg::parse_now_socket)]
    now_socket: Option<cfg::NowSocket>,
    /// The now socket's group (a name or number).
    #[arg(long, env = "GNOMON_SYNC_NOW_SOCKET_GROUP", value_name = "GROUP", value_parser = cfg::parse_group)]
    now_socket_group: Option<String>,
    /// Who may ask on the now socket: 0600, 0660 (the group) or 0666
    /// (every local user).
    #[arg(long, env = "GNOMON_SYNC_NOW_SOCKET_MODE", value_name = "MODE", value_parser = cfg::parse_socket_mode)]
    now_socket_mode: Option<u32>,
    /// The bound on the rate error of the oscillator (CLOCK_MONOTONIC_RAW,
    /// which NTP does not slew), ppm, 1..=100000, that widens the proven
    /// interval as time passes.
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
    /// One JSON object on stdout for every outcome, with `exit_code`
    /// (--once, --check, --status, --clear-floor, --print-config,
    /// --print-chrony-conf; the service: when it stops).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    log: super::logging::LogArgs,
    /// Testing only: accept a plain-HTTP `reports` URL on loopback.
    #[arg(long, hide = true)]
    allow_loopback_http_reports: bool,
}

/// A flag that is a `[sync]` key ends its help with the key's default, as
/// `--print-config` prints it (gnomon_sync::config::default_of): the help,
/// gnomon-sync(1) and the code cannot disagree.
fn with_default(arg: Arg) -> Arg {
    let Some(default) = arg.get_long().and_then(cfg::default_of) else {
        return arg;
    };
    let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
    arg.help(format!("{help} [default: {}]", default.plain()))
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
            servers_url: (!self.servers_url.is_empty()).then(|| self.servers_url.clone()),
            servers_key: (!self.servers_key.is_empty()).then(|| self.servers_key.clone()),
            servers_threshold: self.servers_threshold,
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
    if let Err(e) = settings.check(&file) {
        return usage(e);
    }
    if args.print_config {
        if args.json {
            // The same table, as the one object --json promises.
            let table: toml::Table = settings.to_string().parse().unwrap_or_default();
            let fields = serde_json::to_value(table).unwrap_or_default();
            words::print_outcome(fields, Exit::Ok as u8);
        } else {
            print!("{settings}");
        }
        return Exit::Ok.into();
    }
    if args.print_chrony_conf {
        return match gnomon_sync::chrony::conf(&settings) {
            Ok(lines) if args.json => {
                words::print_outcome(serde_json::json!({ "chrony_conf": lines }), Exit::Ok as u8);
                Exit::Ok.into()
            }
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
    // A round of its own (--once, --check) prints its lines as it always
    // has; the service logs through the one setup of every service (time,
    // level, --log-format; JSON under --json).
    let log: Log = if args.once || args.check {
        Arc::new(|line: &str| {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "gnomon sync: {line}");
        })
    } else {
        super::logging::init(&args.log.config(args.json));
        Arc::new(super::logging::sync_line)
    };
    let log = in_words(log);
    let chrony = settings
        .chrony_sock
        .clone()
        .map(|p| (p, settings.chrony_max_radius));
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
    service_loop::serve(service, &log, args.json)
}

/// `log`, each line without the `(os error N)` that gnomon-sync's
/// messages carry from the system's errors (a library of its own, without
/// the CLI's words).
fn in_words(log: Log) -> Log {
    Arc::new(move |line: &str| log(&words::strip_os_error(line)))
}

fn usage(msg: impl std::fmt::Display) -> ExitCode {
    super::client_out::usage("sync", words::strip_os_error(&msg.to_string()))
}
