//! `gnomon report-server`: the report sink (gnomon-watch's sink module)
//! as a command. Runs until SIGTERM or SIGINT.

use std::net::SocketAddr;
use std::process::ExitCode;

use gnomon_watch::sink::{self, SinkConfig};

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Address to serve HTTP on (put a TLS proxy in front for the public).
    #[arg(
        long,
        env = "GNOMON_REPORT_SERVER_LISTEN",
        value_name = "ADDR",
        default_value = "127.0.0.1:8080"
    )]
    pub(crate) listen: SocketAddr,
    /// Where reports are kept: sqlite:PATH (created and migrated on first
    /// start) or postgres://USER@HOST/DB.
    #[arg(
        long,
        env = "GNOMON_REPORT_SERVER_DATABASE",
        value_name = "URL",
        default_value = "sqlite:gnomon-reports.db"
    )]
    pub(crate) database: String,
    /// Largest report accepted, bytes (larger: 413).
    #[arg(long, env = "GNOMON_REPORT_SERVER_MAX_BODY", value_name = "BYTES",
          default_value_t = sink::DEFAULT_MAX_BODY as u64,
          value_parser = clap::value_parser!(u64).range(1024..=16 * 1024 * 1024))]
    pub(crate) max_body: u64,
    /// Report POSTs a minute per sender /24 (IPv4) or /48 (IPv6); more get 429.
    #[arg(long, env = "GNOMON_REPORT_SERVER_RATE", value_name = "N",
          default_value_t = sink::DEFAULT_RATE_PER_MINUTE,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub(crate) rate: u32,
    /// Connections served at once; more are closed at accept.
    #[arg(long, env = "GNOMON_REPORT_SERVER_MAX_CONNECTIONS", value_name = "N",
          default_value_t = sink::DEFAULT_MAX_CONNECTIONS as u64,
          value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub(crate) max_connections: u64,
}

pub(crate) fn run(args: Args) -> ExitCode {
    let config = SinkConfig {
        max_body: args.max_body as usize,
        rate_per_minute: args.rate,
        max_connections: args.max_connections as usize,
    };
    match sink::run(args.listen, &args.database, config) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gnomon report-server: {e}");
            super::client_out::Exit::Local.into()
        }
    }
}
