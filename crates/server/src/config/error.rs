//! Configuration errors. Each names the key, where its value came from,
//! and what would have been accepted.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Where a setting's value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A line of a configuration file.
    File {
        /// The file.
        path: PathBuf,
        /// 1-based line of the value.
        line: usize,
    },
    /// An environment variable.
    Env(&'static str),
    /// A command-line flag (its name without dashes).
    Flag(&'static str),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { path, line } => write!(f, "{}:{line}", path.display()),
            Origin::Env(var) => write!(f, "environment variable {var}"),
            Origin::Flag(flag) => write!(f, "flag --{flag}"),
        }
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: io::Error,
    },
    /// The file is not TOML, has an unknown key, or a table where a value
    /// belongs. The parser's message names the key and shows the line.
    File {
        /// The file.
        path: PathBuf,
        /// The TOML parser's message.
        message: String,
    },
    /// An override names no key (a caller passed a name not in `KEYS`).
    UnknownKey {
        /// The name given.
        name: String,
    },
    /// A value outside what the key accepts.
    Invalid {
        /// The dotted key.
        key: &'static str,
        /// Where the value came from.
        origin: Origin,
        /// The value as written.
        value: String,
        /// What the key accepts.
        expected: &'static str,
    },
    /// Two settings that are each valid but not together.
    Conflict {
        /// The first key and where its value came from (`None`: default).
        first: (&'static str, Option<Origin>),
        /// The second.
        second: (&'static str, Option<Origin>),
        /// What must hold between them.
        rule: &'static str,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Read { path, error } => {
                write!(
                    f,
                    "cannot read configuration file {}: {error}",
                    path.display()
                )
            }
            ConfigError::File { path, message } => {
                write!(
                    f,
                    "configuration file {}: {}",
                    path.display(),
                    message.trim_end()
                )
            }
            ConfigError::UnknownKey { name } => write!(f, "unknown configuration key `{name}`"),
            ConfigError::Invalid {
                key,
                origin,
                value,
                expected,
            } => write!(
                f,
                "{origin}: invalid value {value} for `{key}`: expected {expected}"
            ),
            ConfigError::Conflict {
                first,
                second,
                rule,
            } => {
                let from = |o: &Option<Origin>| match o {
                    Some(o) => format!(" ({o})"),
                    None => " (default)".to_owned(),
                };
                write!(
                    f,
                    "`{}`{} and `{}`{} conflict: {rule}",
                    first.0,
                    from(&first.1),
                    second.0,
                    from(&second.1)
                )
            }
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::Read { error, .. } => Some(error),
            _ => None,
        }
    }
}
