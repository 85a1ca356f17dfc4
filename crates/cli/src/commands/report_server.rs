//! `gnomon report-server`: the report sink (gnomon-watch's sink module)
//! as a command. Runs until SIGTERM or SIGINT.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use gnomon_watch::sink;

use super::client_out::{usage, Exit};
use super::watch_config::{self as cfg, FileLayers, SinkLayer, SinkSettings};

/// Arguments. Every setting is also a key of the `[report-server]` table
/// of --config and a GNOMON_REPORT_SERVER_* variable
/// (deploy/gnomon-watch.toml).
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
    /// start) or postgres://USER@HOST/DB [default: sqlite:gnomon-reports.db].
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
    /// Print the effective settings as a [report-server] table and exit.
    #[arg(long)]
    print_config: bool,
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
    };
    let settings = SinkSettings::resolve(&file.sink, &over);
    if args.print_config {
        print!("{settings}");
        return Exit::Ok.into();
    }
    match sink::run(settings.listen, &settings.database, settings.sink_config()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gnomon report-server: {e}");
            Exit::Local.into()
        }
    }
}
