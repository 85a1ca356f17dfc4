//! One logging setup for every service: `serve`, `sync` as a service,
//! `watch` and `report-server`. Lines go to stderr, each with its time
//! (UTC) and level: text for people, or one JSON object a line for a
//! collector (`--log-format json`; `--json` too, whose stdout then carries
//! the service's one object).
//!
//! The flags, variables, values and help are serve's configuration keys
//! `log.format` and `log.level` (gnomon_server::config::KEYS), so
//! `--log-level debug` or `GNOMON_LOG_FORMAT=json` means the same to each
//! service, and their `--help` says it in the same words.

use clap::{Arg, ArgMatches, Command};
use gnomon_server::config::{lookup, KeySpec, LogConfig, LogFormat, LogLevel};
use tracing_subscriber::filter::LevelFilter;

/// Changes the least severe level logged: a reload applies `log.level`.
pub(crate) type LevelHandle =
    tracing_subscriber::reload::Handle<LevelFilter, tracing_subscriber::Registry>;

pub(crate) fn level_filter(level: LogLevel) -> LevelFilter {
    match level {
        LogLevel::Error => LevelFilter::ERROR,
        LogLevel::Warn => LevelFilter::WARN,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Debug => LevelFilter::DEBUG,
        LogLevel::Trace => LevelFilter::TRACE,
    }
}

/// Structured logs on stderr. The level sits in a reloadable layer
/// (callsites cache their interest, so it costs nothing per event until
/// it changes). A text line is the time, the level and the sentence; the
/// fields an event carries besides (a watched server's old and new state)
/// are for JSON, where a collector reads them without parsing the
/// sentence that already says them.
pub(crate) fn init(log: &LogConfig) -> LevelHandle {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let (filter, handle) = tracing_subscriber::reload::Layer::new(level_filter(log.level));
    let lines = tracing_subscriber::fmt::layer()
        .with_target(false)
        .with_writer(std::io::stderr);
    let registry = tracing_subscriber::registry().with(filter);
    let _ = match log.format {
        LogFormat::Text => {
            let sentence_only = tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
                if field.name() == "message" {
                    write!(w, "{value:?}")
                } else {
                    Ok(())
                }
            });
            registry
                .with(
                    lines
                        .fmt_fields(sentence_only)
                        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())),
                )
                .try_init()
        }
        LogFormat::Json => registry.with(lines.json()).try_init(),
    };
    handle
}

/// `--log-format` and `--log-level` of the services that do not take
/// serve's whole configuration (serve has them among its keys).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LogArgs {
    format: LogFormat,
    level: LogLevel,
}

impl LogArgs {
    /// The setup to [`init`]: `--json` makes the lines JSON whatever
    /// `--log-format` says, so that everything the service prints is.
    pub(crate) fn config(&self, json: bool) -> LogConfig {
        LogConfig {
            format: if json { LogFormat::Json } else { self.format },
            level: self.level,
        }
    }
}

const FORMATS: [LogFormat; 2] = [LogFormat::Text, LogFormat::Json];
const LEVELS: [LogLevel; 5] = [
    LogLevel::Error,
    LogLevel::Warn,
    LogLevel::Info,
    LogLevel::Debug,
    LogLevel::Trace,
];

fn spec(key: &str) -> &'static KeySpec {
    lookup(key).unwrap_or_else(|| panic!("{key} is one of serve's configuration keys"))
}

/// A value by its name, or what the key accepts.
fn named<T: Copy>(s: &str, key: &str, all: &[T], name: fn(T) -> &'static str) -> Result<T, String> {
    all.iter()
        .copied()
        .find(|v| name(*v) == s.trim())
        .ok_or_else(|| format!("`{s}`: expected {}", spec(key).expected))
}

fn parse_format(s: &str) -> Result<LogFormat, String> {
    named(s, "log.format", &FORMATS, LogFormat::name)
}

fn parse_level(s: &str) -> Result<LogLevel, String> {
    named(s, "log.level", &LEVELS, LogLevel::name)
}

/// The flag of `key`, with serve's help for it: the sentence, the values
/// and the default.
fn flag(key: &str) -> Arg {
    let spec = spec(key);
    Arg::new(spec.flag)
        .long(spec.flag)
        .env(spec.env)
        .value_name(spec.value_name)
        .help(format!(
            "{} [{}; default {}]",
            spec.help, spec.expected, spec.default
        ))
        .num_args(1)
}

impl clap::Args for LogArgs {
    fn augment_args(cmd: Command) -> Command {
        cmd.arg(flag("log.format").value_parser(parse_format))
            .arg(flag("log.level").value_parser(parse_level))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl clap::FromArgMatches for LogArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut args = LogArgs::default();
        args.update_from_arg_matches(matches)?;
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        if let Some(f) = matches.get_one::<LogFormat>(spec("log.format").flag) {
            self.format = *f;
        }
        if let Some(l) = matches.get_one::<LogLevel>(spec("log.level").flag) {
            self.level = *l;
        }
        Ok(())
    }
}

/// The log of `gnomon sync` as a service: its lines through the one setup,
/// each at the level its first word gives (gnomon_sync::Log).
pub(crate) fn sync_line(line: &str) {
    match gnomon_sync::sink::log_level(line) {
        (gnomon_sync::sink::LineLevel::Warning, text) => tracing::warn!("{text}"),
        (gnomon_sync::sink::LineLevel::Error, text) => tracing::error!("{text}"),
        (gnomon_sync::sink::LineLevel::Info, text) => tracing::info!("{text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_configuration_keys_values() {
        assert_eq!(parse_format("json"), Ok(LogFormat::Json));
        assert_eq!(parse_level("debug"), Ok(LogLevel::Debug));
        let refused = parse_format("xml").unwrap_err();
        assert!(refused.contains("\"text\" or \"json\""), "{refused}");
        for l in LEVELS {
            assert_eq!(parse_level(l.name()), Ok(l));
        }
    }
}
