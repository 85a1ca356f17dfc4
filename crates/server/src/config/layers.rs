//! The three sources of settings (file, environment, flags) reduced to one
//! list of raw values, each with its key and origin, before any of them is
//! interpreted.

use std::path::Path;

use serde::Deserialize;
use toml::{Spanned, Value};

use super::error::{ConfigError, Origin};
use super::keys::{lookup, KeySpec};

/// A value before interpretation: from the file it is TOML, typed as
/// written; from flags and the environment it is text.
#[derive(Clone, Debug)]
pub(crate) enum Raw {
    Toml(Value),
    Text(Vec<String>),
}

/// One setting from one source.
#[derive(Clone, Debug)]
pub(crate) struct Setting {
    pub(crate) spec: &'static KeySpec,
    pub(crate) origin: Origin,
    pub(crate) raw: Raw,
}

/// Settings from the command line and the environment, applied over the
/// file. The CLI fills this from its flags (see `KEYS` for the names); a
/// later `set` of the same key wins.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub(crate) settings: Vec<Setting>,
}

impl Overrides {
    /// No overrides.
    pub fn new() -> Overrides {
        Overrides::default()
    }

    /// Set `name` (a dotted key, flag name or environment variable name) to
    /// `values` (one for scalar keys, any number for lists), recording that
    /// it came from `origin`. Fails only for a name that is no key.
    pub fn set(
        &mut self,
        name: &str,
        origin: Origin,
        values: Vec<String>,
    ) -> Result<(), ConfigError> {
        let spec = lookup(name).ok_or_else(|| ConfigError::UnknownKey {
            name: name.to_owned(),
        })?;
        self.settings.push(Setting {
            spec,
            origin,
            raw: Raw::Text(values),
        });
        Ok(())
    }

    /// Set `name` from the flag of that name.
    pub fn flag(&mut self, name: &str, values: Vec<String>) -> Result<(), ConfigError> {
        let spec = lookup(name).ok_or_else(|| ConfigError::UnknownKey {
            name: name.to_owned(),
        })?;
        self.set(spec.key, Origin::Flag(spec.flag), values)
    }

    /// Set `name` from its environment variable.
    pub fn env(&mut self, name: &str, value: String) -> Result<(), ConfigError> {
        let spec = lookup(name).ok_or_else(|| ConfigError::UnknownKey {
            name: name.to_owned(),
        })?;
        self.set(spec.key, Origin::Env(spec.env), vec![value])
    }

    /// Whether nothing is overridden.
    pub fn is_empty(&self) -> bool {
        self.settings.is_empty()
    }
}

type Field = Option<Spanned<Value>>;

/// The file's shape. Values stay raw so that their interpretation, and its
/// error messages, are the same whatever the source.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileConfig {
    listen: Field,
    workers: Field,
    batch_size: Field,
    recv_buffer: Field,
    max_queue_delay: Field,
    batch_wait: Field,
    versions: Field,
    batch_disputed: Field,
    google_nonce: Field,
    min_request_size: Field,
    key_file: Field,
    offline_dir: Field,
    offline_public_key: Field,
    metrics: Field,
    xdp: Field,
    grease: Field,
    clock: Option<ClockTable>,
    online_key: Option<OnlineKeyTable>,
    tcp: Option<TcpTable>,
    log: Option<LogTable>,
    limit: Option<LimitTable>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ClockTable {
    radius_floor: Field,
    unsynchronized: Field,
    unsynchronized_radius: Field,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct OnlineKeyTable {
    validity: Field,
    rotate_every: Field,
    jitter: Field,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct TcpTable {
    enable: Field,
    max_connections: Field,
    idle_timeout: Field,
    read_timeout: Field,
    write_timeout: Field,
    max_frame: Field,
    max_lifetime: Field,
    max_requests: Field,
    max_per_source: Field,
    max_per_network: Field,
    source_prefix_v4: Field,
    source_prefix_v6: Field,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct LogTable {
    format: Field,
    level: Field,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct LimitTable {
    rate: Field,
    burst: Field,
    ipv4_prefix: Field,
    ipv6_prefix: Field,
    table_size: Field,
    allow: Field,
    deny: Field,
    signature_share: Field,
    signature_burst: Field,
}

/// Parse a configuration file's text into settings. `path` is used in
/// messages only.
pub(crate) fn file_settings(text: &str, path: &Path) -> Result<Vec<Setting>, ConfigError> {
    let file: FileConfig = toml::from_str(text).map_err(|e| ConfigError::File {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    let clock = file.clock.unwrap_or_default();
    let online = file.online_key.unwrap_or_default();
    let tcp = file.tcp.unwrap_or_default();
    let log = file.log.unwrap_or_default();
    let limit = file.limit.unwrap_or_default();
    let fields = [
        ("listen", file.listen),
        ("workers", file.workers),
        ("batch-size", file.batch_size),
        ("recv-buffer", file.recv_buffer),
        ("max-queue-delay", file.max_queue_delay),
        ("batch-wait", file.batch_wait),
        ("versions", file.versions),
        ("batch-disputed", file.batch_disputed),
        ("google-nonce", file.google_nonce),
        ("min-request-size", file.min_request_size),
        ("key-file", file.key_file),
        ("offline-dir", file.offline_dir),
        ("offline-public-key", file.offline_public_key),
        ("metrics", file.metrics),
        ("xdp", file.xdp),
        ("grease", file.grease),
        ("clock.radius-floor", clock.radius_floor),
        ("clock.unsynchronized", clock.unsynchronized),
        ("clock.unsynchronized-radius", clock.unsynchronized_radius),
        ("online-key.validity", online.validity),
        ("online-key.rotate-every", online.rotate_every),
        ("online-key.jitter", online.jitter),
        ("tcp.enable", tcp.enable),
        ("tcp.max-connections", tcp.max_connections),
        ("tcp.idle-timeout", tcp.idle_timeout),
        ("tcp.read-timeout", tcp.read_timeout),
        ("tcp.write-timeout", tcp.write_timeout),
        ("tcp.max-frame", tcp.max_frame),
        ("tcp.max-lifetime", tcp.max_lifetime),
        ("tcp.max-requests", tcp.max_requests),
        ("tcp.max-per-source", tcp.max_per_source),
        ("tcp.max-per-network", tcp.max_per_network),
        ("tcp.source-prefix-v4", tcp.source_prefix_v4),
        ("tcp.source-prefix-v6", tcp.source_prefix_v6),
        ("log.format", log.format),
        ("log.level", log.level),
        ("limit.rate", limit.rate),
        ("limit.burst", limit.burst),
        ("limit.ipv4-prefix", limit.ipv4_prefix),
        ("limit.ipv6-prefix", limit.ipv6_prefix),
        ("limit.table-size", limit.table_size),
        ("limit.allow", limit.allow),
        ("limit.deny", limit.deny),
        ("limit.signature-share", limit.signature_share),
        ("limit.signature-burst", limit.signature_burst),
    ];
    let mut out = Vec::new();
    for (name, field) in fields {
        let Some(spanned) = field else { continue };
        // Every name above is in KEYS (a test checks it); a miss would be a
        // bug here, reported rather than panicking.
        let spec = lookup(name).ok_or_else(|| ConfigError::UnknownKey {
            name: name.to_owned(),
        })?;
        let line = line_of(text, spanned.span().start);
        out.push(Setting {
            spec,
            origin: Origin::File {
                path: path.to_owned(),
                line,
            },
            raw: Raw::Toml(spanned.into_inner()),
        });
    }
    Ok(out)
}

fn line_of(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    text.as_bytes()[..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

impl Raw {
    /// The value as the user wrote it, for messages.
    pub(crate) fn shown(&self) -> String {
        match self {
            Raw::Toml(v) => v.to_string(),
            Raw::Text(v) if v.len() == 1 => format!("{:?}", v[0]),
            Raw::Text(v) => format!("{v:?}"),
        }
    }

    fn single_text(&self) -> Option<&str> {
        match self {
            Raw::Text(v) if v.len() == 1 => Some(v[0].trim()),
            _ => None,
        }
    }

    pub(crate) fn integer(&self) -> Option<i64> {
        match self {
            Raw::Toml(Value::Integer(i)) => Some(*i),
            _ => self.single_text()?.parse().ok(),
        }
    }

    pub(crate) fn float(&self) -> Option<f64> {
        let f = match self {
            Raw::Toml(Value::Float(f)) => *f,
            Raw::Toml(Value::Integer(i)) => *i as f64,
            _ => self.single_text()?.parse().ok()?,
        };
        f.is_finite().then_some(f)
    }

    pub(crate) fn boolean(&self) -> Option<bool> {
        match self {
            Raw::Toml(Value::Boolean(b)) => Some(*b),
            _ => match self.single_text()? {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            },
        }
    }

    pub(crate) fn string(&self) -> Option<&str> {
        match self {
            Raw::Toml(Value::String(s)) => Some(s),
            _ => self.single_text(),
        }
    }

    /// A list of strings; a single TOML string counts as a list of one.
    pub(crate) fn strings(&self) -> Option<Vec<&str>> {
        match self {
            Raw::Toml(Value::String(s)) => Some(vec![s.as_str()]),
            Raw::Toml(Value::Array(a)) => a.iter().map(Value::as_str).collect(),
            Raw::Toml(_) => None,
            Raw::Text(v) => Some(v.iter().map(|s| s.trim()).collect()),
        }
    }
}
