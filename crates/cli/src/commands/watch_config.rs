//! What `gnomon watch` and `gnomon report-server` are told, checked once.
//!
//! ```text
//!  defaults ◀── file ([watch], [report-server]; --config) ◀── GNOMON_* ◀── flags
//! ```
//!
//! One file holds both tables (deploy/gnomon-watch.toml shows every key):
//! a monitor running the sink in its own process (`sink = true`) takes the
//! sink's limits from `[report-server]`. Each key is a flag of the same
//! name and a variable (`max-body` → `--max-body`,
//! `GNOMON_REPORT_SERVER_MAX_BODY`); flags and variables go through the
//! parsers below, so a value is range-checked the same way wherever it
//! came from. Unknown keys and tables are errors. The duration and integer
//! checks are sync's (gnomon_sync::config), so every client-side command
//! reads `5m` the same way.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gnomon_sync::config::{
    duration_in, int_in, parse_max_liars, DurationText, IntOrText, MaxLiars,
};
use serde::Deserialize;

use super::config::files;

/// `interval`: 1 s to a day.
pub(crate) fn parse_interval(s: &str) -> Result<Duration, String> {
    duration_in(
        s,
        Duration::from_secs(1),
        Duration::from_secs(86_400),
        "a duration in 1s..=1d",
    )
}

/// `timeout`: 100 ms to 10 s.
pub(crate) fn parse_timeout(s: &str) -> Result<Duration, String> {
    duration_in(
        s,
        Duration::from_millis(100),
        Duration::from_secs(10),
        "a duration in 100ms..=10s",
    )
}

/// `expiry-warning`: 0 to 30 days.
pub(crate) fn parse_expiry_warning(s: &str) -> Result<Duration, String> {
    duration_in(
        s,
        Duration::ZERO,
        Duration::from_secs(30 * 86_400),
        "a duration in 0s..=30d",
    )
}

/// `warn-radius`: 1 ms to a day.
pub(crate) fn parse_warn_radius(s: &str) -> Result<Duration, String> {
    duration_in(
        s,
        Duration::from_millis(1),
        Duration::from_secs(86_400),
        "a duration in 1ms..=1d",
    )
}

/// `concurrency`: 1..=256.
pub(crate) fn parse_concurrency(s: &str) -> Result<u16, String> {
    int_in(s, 1, 256, "an integer in 1..=256").map(|v| v as u16)
}

/// `burst`: 2..=64.
pub(crate) fn parse_burst(s: &str) -> Result<u16, String> {
    int_in(s, 2, 64, "an integer in 2..=64").map(|v| v as u16)
}

/// `listen`: `127.0.0.1:8080`, `[::1]:8080`.
pub(crate) fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a socket address (like 127.0.0.1:8080)"))
}

/// `database`: `sqlite:PATH` or `postgres://…` (the store says more when
/// it connects; this catches a typo before anything starts).
pub(crate) fn parse_database(s: &str) -> Result<String, String> {
    let ok = ["sqlite:", "postgres://", "postgresql://"]
        .iter()
        .any(|p| s.len() > p.len() && s.starts_with(p));
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "`{s}` is not a database URL (sqlite:PATH, postgres://… or postgresql://…)"
        ))
    }
}

/// `[watch]`, each key present or not (from the file, or from flags and
/// variables).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub(crate) struct WatchLayer {
    pub servers: Option<PathBuf>,
    pub listen: Option<SocketAddr>,
    pub database: Option<String>,
    pub interval: Option<Duration>,
    pub concurrency: Option<u16>,
    pub timeout: Option<Duration>,
    pub burst: Option<u16>,
    pub max_liars: Option<MaxLiars>,
    pub report: Option<bool>,
    pub expiry_warning: Option<Duration>,
    pub warn_radius: Option<Duration>,
    pub sink: Option<bool>,
    pub publish: PublishLayer,
}

/// `[report-server]`, each key present or not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub(crate) struct SinkLayer {
    pub listen: Option<SocketAddr>,
    pub database: Option<String>,
    pub max_body: Option<u64>,
    pub rate: Option<u32>,
    pub max_connections: Option<u64>,
    pub accept_keys: Option<PathBuf>,
    pub quota_per_source: Option<u64>,
    pub quota: Option<u64>,
    pub retention: Option<Duration>,
    pub rate_table: Option<u64>,
}

/// A file's two tables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FileLayers {
    pub watch: WatchLayer,
    pub sink: SinkLayer,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    watch: Option<WatchTable>,
    #[serde(rename = "report-server")]
    report_server: Option<SinkTable>,
}

/// Values as TOML types them; checked by the same parsers as flags.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct WatchTable {
    servers: Option<String>,
    listen: Option<String>,
    database: Option<String>,
    interval: Option<String>,
    concurrency: Option<i64>,
    timeout: Option<String>,
    burst: Option<i64>,
    max_liars: Option<IntOrText>,
    report: Option<bool>,
    expiry_warning: Option<String>,
    warn_radius: Option<String>,
    sink: Option<bool>,
    publish_key: Option<String>,
    publish_expiry: Option<String>,
    publish_name: Option<String>,
    publish_url: Option<String>,
    publish_window: Option<String>,
    pkcs11_module: Option<String>,
    pkcs11_token: Option<String>,
    pkcs11_key: Option<String>,
    pkcs11_pin_file: Option<String>,
    servers_url: Option<Vec<String>>,
    servers_key: Option<Vec<String>>,
    servers_threshold: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct SinkTable {
    listen: Option<String>,
    database: Option<String>,
    max_body: Option<i64>,
    rate: Option<i64>,
    max_connections: Option<i64>,
    accept_keys: Option<String>,
    quota_per_source: Option<i64>,
    quota: Option<i64>,
    retention: Option<String>,
    rate_table: Option<i64>,
}

/// Applies `parse` to a present value, naming `[table] key` in the error.
fn checked<T, V: ToString>(
    file: &Path,
    table: &str,
    key: &str,
    v: Option<V>,
    parse: fn(&str) -> Result<T, String>,
) -> Result<Option<T>, String> {
    v.map(|v| {
        parse(&v.to_string()).map_err(|e| format!("{}: [{table}] {key}: {e}", file.display()))
    })
    .transpose()
}

impl FileLayers {
    /// Both tables of `path` (either may be absent); a relative `servers`
    /// is relative to the file's directory.
    pub(crate) fn from_file(path: &Path) -> Result<FileLayers, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "cannot read configuration file {}: {}",
                path.display(),
                crate::words::io(&e)
            )
        })?;
        FileLayers::from_toml(&text, path)
    }

    /// As [`FileLayers::from_file`], from the text; `path` names it.
    pub(crate) fn from_toml(text: &str, path: &Path) -> Result<FileLayers, String> {
        let doc: FileDoc = toml::from_str(text).map_err(|e| {
            let hints = files::hints_for(text, files::Kind::Watch);
            files::with_hints(&format!("{}: {e}", path.display()), &hints)
        })?;
        let w = doc.watch.unwrap_or_default();
        let publish = publish::from_table(path, &w)?;
        let r = doc.report_server.unwrap_or_default();
        let base = path.parent().unwrap_or(Path::new(""));
        let (wt, rt) = ("watch", "report-server");
        Ok(FileLayers {
            watch: WatchLayer {
                servers: w.servers.map(|p| base.join(p)),
                listen: checked(path, wt, "listen", w.listen, parse_listen)?,
                database: checked(path, wt, "database", w.database, parse_database)?,
                interval: checked(path, wt, "interval", w.interval, parse_interval)?,
                concurrency: checked(path, wt, "concurrency", w.concurrency, parse_concurrency)?,
                timeout: checked(path, wt, "timeout", w.timeout, parse_timeout)?,
                burst: checked(path, wt, "burst", w.burst, parse_burst)?,
                max_liars: checked(path, wt, "max-liars", w.max_liars, parse_max_liars)?,
                report: w.report,
                expiry_warning: checked(
                    path,
                    wt,
                    "expiry-warning",
                    w.expiry_warning,
                    parse_expiry_warning,
                )?,
                warn_radius: checked(path, wt, "warn-radius", w.warn_radius, parse_warn_radius)?,
                sink: w.sink,
                publish,
            },
            sink: SinkLayer {
                listen: checked(path, rt, "listen", r.listen, parse_listen)?,
                database: checked(path, rt, "database", r.database, parse_database)?,
                max_body: checked(path, rt, "max-body", r.max_body, parse_max_body)?,
                rate: checked(path, rt, "rate", r.rate, parse_rate)?,
                max_connections: checked(
                    path,
                    rt,
                    "max-connections",
                    r.max_connections,
                    parse_max_connections,
                )?,
                accept_keys: r.accept_keys.map(|p| base.join(p)),
                quota_per_source: checked(
                    path,
                    rt,
                    "quota-per-source",
                    r.quota_per_source,
                    parse_quota,
                )?,
                quota: checked(path, rt, "quota", r.quota, parse_quota)?,
                retention: checked(path, rt, "retention", r.retention, parse_retention)?,
                rate_table: checked(path, rt, "rate-table", r.rate_table, parse_rate_table)?,
            },
        })
    }

    /// The file named by `--config`, or nothing.
    pub(crate) fn load(config: Option<&Path>) -> Result<FileLayers, String> {
        config.map_or_else(|| Ok(FileLayers::default()), FileLayers::from_file)
    }
}

/// `gnomon watch`'s checked settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct WatchSettings {
    /// None: the list comes from `servers-url`.
    pub servers: Option<PathBuf>,
    pub listen: SocketAddr,
    pub database: Option<String>,
    pub interval: Duration,
    pub concurrency: u16,
    pub timeout: Duration,
    pub burst: u16,
    /// `None`: auto.
    pub max_liars: Option<usize>,
    pub report: bool,
    pub expiry_warning: Duration,
    pub warn_radius: Duration,
    pub sink: bool,
    pub publish: PublishSettings,
}

impl WatchSettings {
    /// Defaults, then `file`, then `over` (variables and flags), key by
    /// key. `servers` and `listen` have no default; `sink` needs a
    /// database to keep the reports in.
    pub(crate) fn resolve(file: &WatchLayer, over: &WatchLayer) -> Result<WatchSettings, String> {
        macro_rules! pick {
            ($f:ident) => {
                over.$f.clone().or_else(|| file.$f.clone())
            };
        }
        let required = |key: &str, var: &str| {
            format!("`{key}` is required: --{key}, {var} or `{key}` in the [watch] table")
        };
        let no_url = over.publish.servers_url.is_none() && file.publish.servers_url.is_none();
        if pick!(servers).is_none() && no_url {
            return Err(format!(
                "{}; or servers-url with servers-key for monitors' signed lists",
                required("servers", "GNOMON_WATCH_SERVERS")
            ));
        }
        let s = WatchSettings {
            servers: pick!(servers),
            listen: pick!(listen).ok_or_else(|| required("listen", "GNOMON_WATCH_LISTEN"))?,
            database: pick!(database),
            interval: pick!(interval).unwrap_or(Duration::from_secs(300)),
            concurrency: pick!(concurrency).unwrap_or(8),
            timeout: pick!(timeout).unwrap_or(Duration::from_secs(1)),
            burst: pick!(burst).unwrap_or(12),
            max_liars: pick!(max_liars).and_then(|m| m.0),
            report: pick!(report).unwrap_or(false),
            expiry_warning: pick!(expiry_warning).unwrap_or(Duration::from_secs(3600)),
            warn_radius: pick!(warn_radius).unwrap_or(Duration::from_secs(10)),
            sink: pick!(sink).unwrap_or(false),
            publish: publish::resolve(
                &file.publish,
                &over.publish,
                pick!(interval).unwrap_or(Duration::from_secs(300)),
            )?,
        };
        match (&s.servers, s.publish.servers_url.is_empty()) {
            (None, true) => {
                return Err(format!(
                    "{}; servers-url holds no URL",
                    required("servers", "GNOMON_WATCH_SERVERS")
                ))
            }
            (Some(_), false) => {
                return Err(
                    "servers names a list file and servers-url signed lists: give one \
                            of them"
                        .into(),
                )
            }
            _ => {}
        }
        if s.sink && s.database.is_none() {
            return Err("`sink` keeps reports in a database: give `database` too \
                        (--database, GNOMON_WATCH_DATABASE or [watch] database)"
                .into());
        }
        Ok(s)
    }
}

pub(super) fn quoted(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// The effective settings as a `[watch]` table that loads back the same.
impl fmt::Display for WatchSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "[watch]")?;
        if let Some(servers) = &self.servers {
            writeln!(f, "servers = {}", quoted(&servers.display().to_string()))?;
        }
        writeln!(f, "listen = {}", quoted(&self.listen.to_string()))?;
        if let Some(d) = &self.database {
            writeln!(f, "database = {}", quoted(d))?;
        }
        writeln!(f, "interval = \"{}\"", DurationText(self.interval))?;
        writeln!(f, "concurrency = {}", self.concurrency)?;
        writeln!(f, "timeout = \"{}\"", DurationText(self.timeout))?;
        writeln!(f, "burst = {}", self.burst)?;
        match self.max_liars {
            Some(n) => writeln!(f, "max-liars = {n}")?,
            None => writeln!(f, "max-liars = \"auto\"")?,
        }
        writeln!(f, "report = {}", self.report)?;
        writeln!(
            f,
            "expiry-warning = \"{}\"",
            DurationText(self.expiry_warning)
        )?;
        writeln!(f, "warn-radius = \"{}\"", DurationText(self.warn_radius))?;
        writeln!(f, "sink = {}", self.sink)?;
        publish::write(&self.publish, f)
    }
}

mod publish;
mod sink;

pub(crate) use publish::{
    parse_publish_expiry, parse_publish_name, parse_publish_url, parse_publish_window,
    parse_threshold, PublishLayer, PublishSettings, TokenKey,
};
pub(crate) use sink::*;

#[cfg(test)]
mod tests;
