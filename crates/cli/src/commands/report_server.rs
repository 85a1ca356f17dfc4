//! `gnomon report-server`: the report sink (gnomon-watch's sink module)
//! as a command. Runs until SIGTERM or SIGINT, which stop it at any point,
//! the opening of its database included.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use gnomon_watch::sink::{self, Ended, RunError};
use gnomon_watch::store::describe;
use serde_json::json;

use super::client_out::{usage, Exit};
use super::logging::LogArgs;
use super::outcome::Outcome;
use super::watch_config::{self as cfg, FileLayers, SinkLayer, SinkSettings};

/// Arguments. Every setting is also a key of the `[report-server]` table
/// of --config and a GNOMON_REPORT_SERVER_* variable
/// (deploy/gnomon-watch.toml); the log's are every service's
/// (--log-format, --log-level, GNOMON_LOG_*).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A TOML file with a [report-server] table (flags and
    /// GNOMON_REPORT_SERVER_* win over it).
    #[arg(long, env = "GNOMON_REPORT_SERVER_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Address to serve HTTP on (put a TLS proxy in front for the public)
    /// [default: 127.0.0.1:8080].
    #[arg(long, env = "GNOMON_REPORT_SERVER_LISTEN", value_name = "ADDR", value_parser = cfg::parse_listen)]
    listen: Option<SocketAddr>,
    /// Where reports are kept: sqlite:PATH (created and migrated on first
    /// start) or postgres://USER@HOST/DB (given up on after 10 s without a
    /// connection) [default: sqlite:gnomon-reports.db].
    #[arg(long, env = "GNOMON_REPORT_SERVER_DATABASE", value_name = "URL", value_parser = cfg::parse_database)]
    database: Option<String>,
    /// Largest report accepted, bytes (larger: 413), 1024..=16777216
    /// [default: 65536].
    #[arg(long, env = "GNOMON_REPORT_SERVER_MAX_BODY", value_name = "BYTES", value_parser = cfg::parse_max_body)]
    max_body: Option<u64>,
    /// Report POSTs a minute per sender /24 (IPv4) or /48 (IPv6); more get
    /// 429. 1..=100000 [default: 10].
    #[arg(long, env = "GNOMON_REPORT_SERVER_RATE", value_name = "N", value_parser = cfg::parse_rate)]
    rate: Option<u32>,
    /// Connections served at once; more are closed at accept. 1..=65536
    /// [default: 64].
    #[arg(long, env = "GNOMON_REPORT_SERVER_MAX_CONNECTIONS", value_name = "N", value_parser = cfg::parse_max_connections)]
    max_connections: Option<u64>,
    /// Keep only reports accusing one of these servers (others get 422
    /// `unwatched`): a server list (JSON) or base64 public keys, one a
    /// line [default: reports about any server are kept].
    #[arg(long, env = "GNOMON_REPORT_SERVER_ACCEPT_KEYS", value_name = "FILE")]
    accept_keys: Option<PathBuf>,
    /// Bytes of reports kept from one sender /24 or /48; past it, 429.
    /// 1024..=1099511627776 [default: 16777216].
    #[arg(long, env = "GNOMON_REPORT_SERVER_QUOTA_PER_SOURCE", value_name = "BYTES", value_parser = cfg::parse_quota)]
    quota_per_source: Option<u64>,
    /// Bytes of reports kept in all; past it, 507. 1024..=1099511627776
    /// [default: 1073741824].
    #[arg(long, env = "GNOMON_REPORT_SERVER_QUOTA", value_name = "BYTES", value_parser = cfg::parse_quota)]
    quota: Option<u64>,
    /// Reports older than this are deleted (checked every tenth of it, at
    /// most hourly). 1s..=36500d [default: 365d].
    #[arg(long, env = "GNOMON_REPORT_SERVER_RETENTION", value_name = "DURATION", value_parser = cfg::parse_retention)]
    retention: Option<std::time::Duration>,
    /// Sender prefixes the rate limit tracks at once; past it the least
    /// recently seen is forgotten. 1..=1048576 [default: 4096].
    #[arg(long, env = "GNOMON_REPORT_SERVER_RATE_TABLE", value_name = "N", value_parser = cfg::parse_rate_table)]
    rate_table: Option<u64>,
    /// Print the effective settings as a [report-server] table and exit.
    #[arg(long)]
    print_config: bool,
    #[command(flatten)]
    log: LogArgs,
    /// Log JSON objects on stderr (as --log-format json) and, when the
    /// sink ends, print one JSON object on stdout: what it did before a
    /// signal stopped it, or why it could not start, with `exit_code`.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args) -> ExitCode {
    let file = match FileLayers::load(args.config.as_deref()) {
        Ok(f) => f,
        Err(e) => return usage("report-server", e),
    };
    let over = SinkLayer {
        listen: args.listen,
        database: args.database.clone(),
        max_body: args.max_body,
        rate: args.rate,
        max_connections: args.max_connections,
        accept_keys: args.accept_keys.clone(),
        quota_per_source: args.quota_per_source,
        quota: args.quota,
        retention: args.retention,
        rate_table: args.rate_table,
    };
    let settings = SinkSettings::resolve(&file.sink, &over);
    if args.print_config {
        print!("{settings}");
        return Exit::Ok.into();
    }
    let config = match settings.sink_config(None) {
        Ok(c) => c,
        Err(e) => return usage("report-server", e),
    };
    // From here on it is a service: what it says is a log line.
    super::logging::init(&args.log.config(args.json));
    let end = Outcome { json: args.json };
    let database = describe(&settings.database);
    match sink::run(settings.listen, &settings.database, config) {
        Ok(Ended::Connecting { signal }) => end.stopped(json!({
            "stopped_by": signal,
            "while": "opening the database",
            "database": database,
        })),
        Ok(Ended::Served {
            signal,
            listen,
            summary,
        }) => end.stopped(json!({
            "stopped_by": signal,
            "listen": listen.to_string(),
            "database": database,
            "reports": {
                "accepted": summary.accepted,
                "duplicate": summary.duplicate,
                "refused": summary.refused,
            },
        })),
        Err(RunError::Listen { addr, error }) => end.listen_failed(addr, &error),
        Err(RunError::Store(e)) => end.store_failed(&e),
        Err(RunError::Other(why)) => end.failed("runtime", &why, crate::exit::SOFTWARE),
    }
}
