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

/// How refusals read: every key's bad value, an unknown key, a value from
/// the environment or a flag.
#[cfg(test)]
mod tests {
    use crate::config::tests::err;
    use crate::config::{Config, ConfigError, Overrides, KEYS};

    /// One bad value per key: the message names the key, the file and line,
    /// the value and the accepted range.
    #[test]
    fn every_bad_value_names_key_line_and_range() {
        let cases: &[(&str, &str, &str)] = &[
            ("listen", "listen = []", "at least one"),
            (
                "listen",
                "listen = [\"localhost:5319\"]",
                "\"localhost:5319\"",
            ),
            (
                "listen",
                "listen = [\"1.2.3.4:1\", \"1.2.3.4:1\"]",
                "distinct",
            ),
            ("listen", "listen = 5319", "socket addresses"),
            ("workers", "workers = 0", "1..=256"),
            ("workers", "workers = 257", "1..=256"),
            ("workers", "workers = \"4\"", "1..=256"),
            ("batch-size", "batch-size = 0", "1..=1024"),
            ("batch-size", "batch-size = 1025", "1..=1024"),
            ("batch-size", "batch-size = -1", "1..=1024"),
            ("recv-buffer", "recv-buffer = 1000", "65536..=1073741824"),
            ("max-queue-delay", "max-queue-delay = \"0ms\"", "1ms..=1m"),
            ("max-queue-delay", "max-queue-delay = 500", "1ms..=1m"),
            ("max-queue-delay", "max-queue-delay = \"2min\"", "1ms..=1m"),
            ("batch-wait", "batch-wait = \"11ms\"", "0ms..=10ms"),
            ("batch-wait", "batch-wait = 100", "0ms..=10ms"),
            ("versions", "versions = [\"draft-99\"]", "\"draft-99\""),
            ("versions", "versions = []", "profile names"),
            (
                "batch-disputed",
                "batch-disputed = \"yes\"",
                "true or false",
            ),
            ("google-nonce", "google-nonce = 1", "true or false"),
            ("min-request-size", "min-request-size = 1500", "256..=1024"),
            ("min-request-size", "min-request-size = 100", "256..=1024"),
            ("key-file", "key-file = [\"\"]", "gnomon keygen"),
            ("key-file", "key-file = [1]", "gnomon keygen"),
            ("offline-dir", "offline-dir = false", "gnomon delegate"),
            (
                "offline-public-key",
                "offline-public-key = [\"AAAA\"]",
                "32 bytes",
            ),
            ("metrics", "metrics = \"on\"", "\"off\""),
            ("xdp", "xdp = \"eth0/1\"", "interface's name"),
            ("xdp", "xdp = \"a-name-longer-than-15\"", "interface's name"),
            ("xdp", "xdp = \"\"", "interface's name"),
            ("xdp", "xdp = 1", "interface's name"),
            ("grease", "grease = 0.6", "0.0..=0.5"),
            ("grease", "grease = -0.1", "0.0..=0.5"),
            ("grease", "grease = nan", "0.0..=0.5"),
            (
                "clock.radius-floor",
                "[clock]\nradius-floor = \"0s\"",
                "1s..=1h",
            ),
            (
                "clock.radius-floor",
                "[clock]\nradius-floor = \"2h\"",
                "1s..=1h",
            ),
            (
                "clock.unsynchronized",
                "[clock]\nunsynchronized = \"ignore\"",
                "\"refuse\"",
            ),
            (
                "clock.unsynchronized-radius",
                "[clock]\nunsynchronized-radius = \"99d\"",
                "1s..=1h",
            ),
            (
                "online-key.validity",
                "[online-key]\nvalidity = \"1m\"",
                "10m..=30d",
            ),
            (
                "online-key.rotate-every",
                "[online-key]\nrotate-every = \"31d\"",
                "1m..=30d",
            ),
            ("online-key.jitter", "[online-key]\njitter = 51", "0..=50"),
            ("tcp.enable", "[tcp]\nenable = \"no\"", "true or false"),
            (
                "tcp.max-connections",
                "[tcp]\nmax-connections = 0",
                "1..=1000000",
            ),
            (
                "tcp.idle-timeout",
                "[tcp]\nidle-timeout = \"500ms\"",
                "1s..=1h",
            ),
            (
                "tcp.read-timeout",
                "[tcp]\nread-timeout = \"10ms\"",
                "100ms..=1m",
            ),
            ("tcp.max-frame", "[tcp]\nmax-frame = 100000", "1024..=65536"),
            (
                "tcp.write-timeout",
                "[tcp]\nwrite-timeout = \"2m\"",
                "100ms..=1m",
            ),
            (
                "tcp.max-lifetime",
                "[tcp]\nmax-lifetime = \"2d\"",
                "1s..=1d",
            ),
            ("tcp.max-requests", "[tcp]\nmax-requests = 0", "1..=1000000"),
            (
                "tcp.max-per-source",
                "[tcp]\nmax-per-source = 0",
                "1..=1000000",
            ),
            (
                "tcp.max-per-network",
                "[tcp]\nmax-per-network = 0",
                "1..=1000000",
            ),
            (
                "tcp.source-prefix-v4",
                "[tcp]\nsource-prefix-v4 = 33",
                "8..=32",
            ),
            (
                "tcp.source-prefix-v6",
                "[tcp]\nsource-prefix-v6 = 8",
                "16..=128",
            ),
            ("log.format", "[log]\nformat = \"xml\"", "\"json\""),
            ("log.level", "[log]\nlevel = \"verbose\"", "\"trace\""),
            ("limit.rate", "[limit]\nrate = -1", "0..=1000000"),
            ("limit.burst", "[limit]\nburst = 0", "1..=1000000"),
            ("limit.ipv4-prefix", "[limit]\nipv4-prefix = 33", "8..=32"),
            ("limit.ipv6-prefix", "[limit]\nipv6-prefix = 8", "16..=128"),
            (
                "limit.table-size",
                "[limit]\ntable-size = 10",
                "1024..=4194304",
            ),
            (
                "limit.allow",
                "[limit]\nallow = [\"10.0.0.0/33\"]",
                "2001:db8::/32",
            ),
            (
                "limit.deny",
                "[limit]\ndeny = [\"example.org\"]",
                "2001:db8::/32",
            ),
            ("limit.deny", "[limit]\ndeny = 7", "2001:db8::/32"),
            (
                "limit.signature-share",
                "[limit]\nsignature-share = 0.001",
                "0.01..=1.0",
            ),
            (
                "limit.signature-burst",
                "[limit]\nsignature-burst = \"20s\"",
                "1ms..=10s",
            ),
        ];
        let mut seen = std::collections::BTreeSet::new();
        for (key, text, range) in cases {
            // Put the value on line 3 so that the line number is checked.
            let msg = err(&format!("# test\n\n{text}"));
            let line = 3 + text.matches('\n').count();
            assert!(msg.contains(&format!("`{key}`")), "{msg}");
            assert!(
                msg.contains(&format!("/etc/gnomon/test.toml:{line}:")),
                "{msg}"
            );
            assert!(msg.contains(range), "{msg} lacks {range}");
            seen.insert(*key);
        }
        for spec in KEYS {
            assert!(
                seen.contains(spec.key),
                "no bad-value case for {}",
                spec.key
            );
        }
    }

    #[test]
    fn unknown_keys_are_named_with_the_accepted_ones() {
        let msg = err("bach-size = 3");
        assert!(msg.contains("bach-size"), "{msg}");
        assert!(msg.contains("batch-size"), "{msg}");
        assert!(msg.contains("/etc/gnomon/test.toml"), "{msg}");
        let msg = err("[tcp]\nmax-conections = 3");
        assert!(
            msg.contains("max-conections") && msg.contains("max-connections"),
            "{msg}"
        );
        let msg = err("[metrics]\naddress = \"x\"");
        assert!(msg.contains("metrics"), "{msg}");
        let msg = err("batch-size = ");
        assert!(msg.contains("line 1"), "{msg}");
    }

    #[test]
    fn overrides_name_their_variable_or_flag() {
        let mut o = Overrides::new();
        o.env("GNOMON_BATCH_SIZE", "0".into()).unwrap();
        let e = Config::load(None, &o).unwrap_err().to_string();
        assert!(e.contains("environment variable GNOMON_BATCH_SIZE"), "{e}");
        assert!(e.contains("`batch-size`") && e.contains("1..=1024"), "{e}");

        let mut o = Overrides::new();
        o.flag("tcp-max-frame", vec!["12".into()]).unwrap();
        let e = Config::load(None, &o).unwrap_err().to_string();
        assert!(e.contains("flag --tcp-max-frame"), "{e}");
        assert!(
            e.contains("`tcp.max-frame`") && e.contains("1024..=65536"),
            "{e}"
        );

        let mut o = Overrides::new();
        o.flag("listen", vec!["127.0.0.1:1".into(), "nonsense".into()])
            .unwrap();
        let e = Config::load(None, &o).unwrap_err().to_string();
        assert!(
            e.contains("flag --listen") && e.contains("\"nonsense\""),
            "{e}"
        );

        let mut o = Overrides::new();
        assert!(matches!(
            o.flag("no-such-flag", vec![]),
            Err(ConfigError::UnknownKey { .. })
        ));
    }
}
