//! `gnomon config check`, and the configuration flags `serve` shares.
//!
//! The flags are built from `gnomon_server::config::KEYS`, so every key has
//! a flag (`tcp.max-connections` → `--tcp-max-connections`) and an
//! environment variable (`GNOMON_TCP_MAX_CONNECTIONS`), and the server crate
//! alone parses and range-checks values. Clap reads the environment; the
//! value source it reports tells an error message whether to name the flag
//! or the variable.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};
use gnomon_server::config::{Config, ConfigError, IdentitySource, Kind, Origin, Overrides, KEYS};
use gnomon_server::keyfile;
use gnomon_server::offline::{format_utc, OfflineStore};

/// Exit status for a configuration that does not load (EX_USAGE).
const EXIT_CONFIG: u8 = crate::exit::USAGE;

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Check a configuration file without starting the server: print the
    /// effective configuration (file, then GNOMON_* environment, then
    /// flags) as TOML, or the error and exit 64.
    Check {
        /// The TOML file.
        file: PathBuf,
        /// Also open every key file and delegation directory it names, as
        /// `serve` would, and report their public keys and expiry.
        #[arg(long)]
        load_keys: bool,
        #[command(flatten)]
        flags: ConfigFlags,
    },
}

pub(crate) fn run(args: Args) -> ExitCode {
    match args.action {
        Action::Check {
            file,
            load_keys,
            flags,
        } => check(
            &ConfigArgs {
                config: Some(file),
                flags,
            },
            load_keys,
        ),
    }
}

fn check(args: &ConfigArgs, load_keys: bool) -> ExitCode {
    let file = args.config.as_deref().unwrap_or(Path::new("(none)"));
    let config = match args.load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gnomon config check: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    // Everything is checked before anything is printed: a configuration
    // printed in full and then refused reads as accepted at a glance.
    if load_keys {
        if let Err(e) = check_keys(&config) {
            eprintln!("gnomon config check: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    }
    print!("{config}");
    if config.ephemeral_key() {
        eprintln!(
            "gnomon config check: note: no key-file or offline-dir; `serve` would use an \
             ephemeral key, which is not for production"
        );
    }
    eprintln!("gnomon config check: {}: OK", file.display());
    ExitCode::SUCCESS
}

/// Open every identity the way `serve` will and describe it on stderr.
fn check_keys(config: &Config) -> Result<(), String> {
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    for id in &config.identities {
        match id {
            IdentitySource::KeyFile(path) => {
                let key = keyfile::load(path).map_err(|e| e.to_string())?;
                eprintln!(
                    "key file {}: {} public key {}",
                    path.display(),
                    key.scheme().name(),
                    B64.encode(key.public())
                );
            }
            IdentitySource::OfflineDir(dir, pin) => {
                let store = OfflineStore::load(dir, pin.as_ref().map(|k| k.bytes()))
                    .map_err(|e| e.to_string())?;
                let current = store.current(now_us).map_or_else(
                    || "none valid now".to_owned(),
                    |d| format!("current until {}", format_utc(d.maxt_us)),
                );
                let host = store
                    .host()
                    .map_or_else(String::new, |h| format!("host {h}, "));
                eprintln!(
                    "offline dir {}: {host}{} public key {}, {} delegations, {current}, last expires {}",
                    dir.display(),
                    store.long_term_public.scheme().name(),
                    B64.encode(store.long_term_public.bytes()),
                    store.delegations().len(),
                    format_utc(store.last_expiry_us()),
                );
            }
        }
    }
    Ok(())
}

/// Every configuration key as a flag with its environment variable.
/// `serve` flattens this (with `--config`, see [`ConfigArgs`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct ConfigFlags {
    /// What the flags and environment set, in the order clap reported it.
    pub(crate) overrides: Overrides,
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
                _ => Origin::Flag(spec.flag),
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
    /// Defaults, the file if any, the environment, the flags.
    pub(crate) fn load(&self) -> Result<Config, ConfigError> {
        Config::load(self.config.as_deref(), &self.flags.overrides)
    }
}
