//! The `gnomon` binary: one entry point for the server, the client and the
//! tools. Each subcommand lives in its own module under `commands/`.
//!
//! A library so that tools outside the binary (crates/xtask writes the man
//! pages and shell completions) read the one CLI definition, [`command`],
//! without the binary carrying their code; src/bin/gnomon.rs calls [`main`].

mod commands;
pub mod exit;
mod pkcs11;
mod words;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Roughtime server, client and tools for every protocol version.
#[derive(Debug, Parser)]
#[command(name = "gnomon", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server (ephemeral key on 127.0.0.1:5319 when nothing is configured).
    Serve(commands::serve::Args),
    /// Make a new long-term key, as a file (mode 0600) or inside a PKCS#11
    /// token; print its public key.
    Keygen(commands::keygen::Args),
    /// Make offline delegations from a long-term key (a file, or a PKCS#11
    /// token that signs them), for a server that never holds that key.
    Delegate(commands::delegate::Args),
    /// Check a configuration file.
    Config(commands::config::Args),
    /// Ask one server, or run the measurement sequence over a server list.
    Query(commands::query::Args),
    /// Keep this machine's time proven by Roughtime: a service feeding
    /// chrony, a boot-time step (--once --set-clock), a fleet check (--check).
    Sync(Box<commands::sync::Args>),
    /// Monitor the servers of a list: a status page, /metrics and
    /// /api/servers over probes of every server on a schedule.
    Watch(commands::watch::Args),
    /// Check a malfeasance report offline.
    VerifyReport(commands::verify_report::Args),
    /// For a device that cannot reach a server: run the measurement
    /// sequence bound to its value and write the proof bundle it verifies.
    Relay(commands::relay::Args),
    /// Check a relay's proof bundle offline, as the device does, and print
    /// the interval it proves for now.
    VerifyProof(commands::verify_proof::Args),
    /// Accept, verify, keep and serve malfeasance reports (HTTP, SQLite or
    /// PostgreSQL).
    ReportServer(commands::report_server::Args),
    /// Decode a Roughtime request or response.
    Inspect(commands::inspect::Args),
    /// Load generator and do-nothing responder, for sizing servers.
    Bench(commands::bench::Args),
    /// Ask a running server's /health endpoint; exit 0 when healthy
    /// (a container's HEALTHCHECK).
    Health(commands::health::Args),
    /// Print the time now as `gnomon sync` proves it (its now socket):
    /// the earliest and latest it can be, whatever the wall clock says.
    Now(commands::now::Args),
    /// Print the shell completion script for bash, zsh, fish, elvish or
    /// PowerShell.
    Completions(commands::completions::Args),
}

/// The command line as clap sees it: every subcommand, flag, help text.
/// Each subcommand's `--help` ends with the exit codes it can return: its
/// own words where its definition has them, else the rows of
/// [`exit::TABLE`] that name it.
pub fn command() -> clap::Command {
    with_exit_codes(Cli::command(), "")
}

fn with_exit_codes(cmd: clap::Command, path: &str) -> clap::Command {
    let has_own = cmd
        .get_after_help()
        .is_some_and(|h| h.to_string().contains("Exit codes:"));
    let mut cmd = if has_own || path.is_empty() {
        cmd
    } else {
        cmd.after_help(exit::help_section(path))
    };
    let names: Vec<String> = cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help")
        .map(|s| s.get_name().to_owned())
        .collect();
    for name in names {
        let sub_path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path} {name}")
        };
        cmd = cmd.mut_subcommand(&name, |s| with_exit_codes(s, &sub_path));
    }
    cmd
}

/// Whether a subcommand's `--version` or `-V` is followed by what looks
/// like a value (`query HOST --version 1`) rather than by nothing or by
/// another flag.
fn version_given_a_value() -> bool {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    args.iter().enumerate().skip(1).any(|(i, a)| {
        (a == "--version" || a == "-V")
            && args
                .get(i + 1)
                .is_some_and(|next| !next.to_string_lossy().starts_with('-'))
    })
}

/// Parses the process's arguments and runs the subcommand.
pub fn main() -> ExitCode {
    // Looked for before parsing: a command line that does not parse must
    // still get its JSON object when it asked for JSON.
    if std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
    {
        commands::client_out::json_errors();
    }
    let cli = match command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return match e.kind() {
                // `query --version 1` was how the protocol version was
                // once chosen: printing gnomon's version and exiting 0
                // would tell that script its query succeeded.
                clap::error::ErrorKind::DisplayVersion if version_given_a_value() => {
                    let text = "`--version` prints gnomon's version and takes no value; \
                                the protocol version to offer is `--protocol V` \
                                (such as --protocol 1 or --protocol draft-11)";
                    eprintln!("gnomon: {text}");
                    commands::client_out::usage_json(text);
                    ExitCode::from(exit::USAGE)
                }
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                // clap exits with 2 on a usage error, which the client
                // commands use for "invalid answer": usage errors are 64
                // (EX_USAGE).
                _ => {
                    let text = e.render().to_string();
                    let text = text.strip_prefix("error: ").unwrap_or(&text);
                    commands::client_out::usage_json(text);
                    ExitCode::from(exit::USAGE)
                }
            };
        }
    };
    // Tools behave like Unix tools when their reader goes away (`| head`):
    // they end quietly instead of panicking on a write error. The server
    // keeps SIGPIPE ignored, so a TCP peer that vanishes cannot kill it.
    if !matches!(cli.command, Command::Serve(_)) {
        sigpipe::reset();
    }
    match cli.command {
        Command::Serve(a) => commands::serve::run(a),
        Command::Keygen(a) => commands::keygen::run(a),
        Command::Delegate(a) => commands::delegate::run(a),
        Command::Config(a) => commands::config::run(a),
        Command::Query(a) => commands::query::run(a),
        Command::Sync(a) => commands::sync::run(*a),
        Command::Watch(a) => commands::watch::run(a),
        Command::VerifyReport(a) => commands::verify_report::run(a),
        Command::Relay(a) => commands::relay::run(a),
        Command::VerifyProof(a) => commands::verify_proof::run(a),
        Command::ReportServer(a) => commands::report_server::run(a),
        Command::Inspect(a) => commands::inspect::run(a),
        Command::Bench(a) => commands::bench::run(a),
        Command::Health(a) => commands::health::run(a),
        Command::Now(a) => commands::now::run(a),
        Command::Completions(a) => commands::completions::run(a),
    }
}
