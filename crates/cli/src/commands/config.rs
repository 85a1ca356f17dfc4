//! `gnomon config check`, and the configuration flags `serve` shares.
//!
//! The flags are built from `gnomon_server::config::KEYS`, so every key has
//! a flag (`tcp.max-connections` → `--tcp-max-connections`) and an
//! environment variable (`GNOMON_TCP_MAX_CONNECTIONS`), and the server crate
//! alone parses and range-checks values. Clap reads the environment; the
//! value source it reports tells an error message whether to name the flag
//! or the variable.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};
use gnomon_server::config::{Config, ConfigError, Kind, Origin, Overrides, KEYS};

use crate::words;

mod check;
pub(crate) mod files;

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Check any gnomon configuration file without starting anything:
    /// serve's (deploy/gnomon.toml), sync's ([sync]), watch's and
    /// report-server's ([watch], [report-server]) or the signing machine's
    /// ([pkcs11]). Prints the effective configuration as TOML and which
    /// command reads the file, or the error and exits 64. For serve's file
    /// the GNOMON_* environment and the flags below apply, as `serve`
    /// would apply them.
    Check {
        /// The TOML file.
        file: PathBuf,
        /// Also open every key file and delegation directory it names, as
        /// `serve` would, and report their public keys and expiry (and
        /// read report-server's accept-keys file).
        #[arg(long)]
        load_keys: bool,
        /// Print one JSON object (the file's kind, the commands that read
        /// it, the effective configuration, notes, exit_code) instead of
        /// text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        flags: ConfigFlags,
    },
}

pub(crate) fn run(args: Args) -> ExitCode {
    match args.action {
        Action::Check {
            file,
            load_keys,
            json,
            flags,
        } => check::run(&file, load_keys, json, flags),
    }
}

/// Every configuration key as a flag with its environment variable.
/// `serve` flattens this (with `--config`, see [`ConfigArgs`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct ConfigFlags {
    /// What the flags and environment set, in the order clap reported it.
    pub(crate) overrides: Overrides,
    /// The flags given on the command line (not from the environment).
    pub(crate) given: Vec<&'static str>,
}

impl clap::FromArgMatches for ConfigFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = ConfigFlags::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        for spec in KEYS {
            let Some(values) = matches.get_many::<String>(spec.flag) else {
                continue;
            };
            let values: Vec<String> = values.cloned().collect();
            // Clap prefers a flag to its variable, so one source per key.
            let origin = match matches.value_source(spec.flag) {
                Some(ValueSource::EnvVariable) => Origin::Env(spec.env),
                _ => {
                    self.given.push(spec.flag);
                    Origin::Flag(spec.flag)
                }
            };
            self.overrides
                .set(spec.key, origin, values)
                .map_err(|e| clap::Error::raw(clap::error::ErrorKind::InvalidValue, e))?;
        }
        Ok(())
    }
}

impl clap::Args for ConfigFlags {
    fn augment_args(cmd: Command) -> Command {
        KEYS.iter().fold(cmd, |cmd, spec| {
            let help = format!(
                "{} [{}; default {}]",
                spec.help, spec.expected, spec.default
            );
            let arg = Arg::new(spec.flag)
                .long(spec.flag)
                .env(spec.env)
                .value_name(spec.value_name)
                .help(help)
                .help_heading(
                    "Configuration (flags override GNOMON_* variables, which override the file)",
                );
            let arg = match spec.kind {
                Kind::Value => arg.num_args(1).action(ArgAction::Set),
                // `--tcp-enable` alone means true; `=` keeps a following
                // positional argument from being read as its value.
                Kind::Switch => arg
                    .num_args(0..=1)
                    .require_equals(true)
                    .default_missing_value("true")
                    .action(ArgAction::Set),
                Kind::List => arg.action(ArgAction::Append).value_delimiter(','),
            };
            cmd.arg(arg)
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// `--config FILE` and the configuration flags: what `serve` needs to call
/// [`ConfigArgs::load`].
#[derive(Clone, Debug, clap::Args)]
pub(crate) struct ConfigArgs {
    /// Configuration file (TOML); see deploy/gnomon.toml for every key.
    #[arg(long, env = "GNOMON_CONFIG", value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) flags: ConfigFlags,
}

impl ConfigArgs {
    /// Defaults, the file if any, the environment, the flags. A file that
    /// does not load is explained: an unreadable one in words, a key in the
    /// wrong table with the table it belongs in, another command's file
    /// with that command.
    pub(crate) fn load(&self) -> Result<Config, ConfigError> {
        Config::load(self.config.as_deref(), &self.flags.overrides).map_err(explained)
    }
}

/// `e` with what the parser cannot know: where a misplaced key belongs,
/// and which command reads a file that is not serve's.
fn explained(e: ConfigError) -> ConfigError {
    match e {
        ConfigError::Read { path, error } => ConfigError::File {
            message: format!("cannot read it: {}", words::io(&error)),
            path,
        },
        ConfigError::File { path, message } => {
            let doc = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| t.parse::<toml::Table>().ok());
            let mut hints = Vec::new();
            if let Some(doc) = doc {
                match files::detect(&doc) {
                    Ok(files::Kind::Serve) => {}
                    Ok(kind) => hints.push(format!(
                        "this is {}, not serve's: `gnomon config check {}` checks it",
                        kind.described(),
                        path.display()
                    )),
                    Err(mixed) => hints.push(mixed),
                }
                hints.extend(files::misplaced(&doc, files::Kind::Serve));
            }
            ConfigError::File {
                message: files::with_hints(&message, &hints),
                path,
            }
        }
        other => other,
    }
}
