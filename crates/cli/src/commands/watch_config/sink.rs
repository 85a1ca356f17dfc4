//! `[report-server]`: the report sink's limits, as `gnomon report-server`
//! and `gnomon watch --sink` take them.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gnomon_sync::config::{duration_in, int_in, DurationText};
use gnomon_watch::sink::{
    KeySet, SinkConfig, DEFAULT_MAX_BODY, DEFAULT_MAX_CONNECTIONS, DEFAULT_QUOTA_PER_SOURCE,
    DEFAULT_QUOTA_TOTAL, DEFAULT_RATE_PER_MINUTE, DEFAULT_RATE_TABLE, DEFAULT_RETENTION,
};

use super::{quoted, SinkLayer};

/// `max-body`: 1 KiB to 16 MiB.
pub(crate) fn parse_max_body(s: &str) -> Result<u64, String> {
    int_in(s, 1024, 16 << 20, "a byte count in 1024..=16777216").map(|v| v as u64)
}

/// `rate`: 1..=100000 a minute.
pub(crate) fn parse_rate(s: &str) -> Result<u32, String> {
    int_in(s, 1, 100_000, "an integer in 1..=100000").map(|v| v as u32)
}

/// `max-connections`: 1..=65536.
pub(crate) fn parse_max_connections(s: &str) -> Result<u64, String> {
    int_in(s, 1, 65_536, "an integer in 1..=65536").map(|v| v as u64)
}

/// `quota`, `quota-per-source`: 1 KiB to 1 TiB.
pub(crate) fn parse_quota(s: &str) -> Result<u64, String> {
    int_in(s, 1024, 1 << 40, "a byte count in 1024..=1099511627776").map(|v| v as u64)
}

/// `retention`: 1 s to 100 years.
pub(crate) fn parse_retention(s: &str) -> Result<Duration, String> {
    duration_in(
        s,
        Duration::from_secs(1),
        Duration::from_secs(36_500 * 86_400),
        "a duration in 1s..=36500d",
    )
}

/// `rate-table`: 1..=1048576 prefixes.
pub(crate) fn parse_rate_table(s: &str) -> Result<u64, String> {
    int_in(s, 1, 1 << 20, "an integer in 1..=1048576").map(|v| v as u64)
}

/// The keys of `accept-keys`: a server list (JSON, what `gnomon watch
/// --servers` reads: its servers' keys) or base64 keys, one a line (blank
/// lines and `#` comments are skipped). A file naming no key is an error:
/// it would refuse every report.
pub(crate) fn load_keys(path: &Path) -> Result<KeySet, String> {
    use base64::Engine;
    let raw = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let what = path.display().to_string();
    let text = String::from_utf8_lossy(&raw);
    let keys = if text.trim_start().starts_with('{') {
        let loaded = gnomon_sync::list::parse(raw.clone(), &what)?;
        KeySet::new(loaded.servers.iter().map(|s| &s.public_key))
    } else {
        let mut keys = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let key = base64::engine::general_purpose::STANDARD
                .decode(line)
                .ok()
                .and_then(|k| gnomon_protocol::LongTermKey::from_bytes(&k))
                .ok_or_else(|| {
                    format!(
                        "{what}:{}: `{line}` is not a public key (base64 of 32 bytes, Ed25519, or 1312, ML-DSA-44)",
                        n + 1
                    )
                })?;
            keys.push(key);
        }
        KeySet::new(keys.iter())
    };
    if keys.is_empty() {
        return Err(format!("{what}: no public keys in it"));
    }
    Ok(keys)
}

/// `gnomon report-server`'s checked settings (also the limits of the sink
/// `gnomon watch --sink` runs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SinkSettings {
    pub listen: SocketAddr,
    pub database: String,
    pub max_body: u64,
    pub rate: u32,
    pub max_connections: u64,
    pub accept_keys: Option<PathBuf>,
    pub quota_per_source: u64,
    pub quota: u64,
    pub retention: Duration,
    pub rate_table: u64,
}

impl SinkSettings {
    /// Defaults, then `file`, then `over`, key by key.
    pub(crate) fn resolve(file: &SinkLayer, over: &SinkLayer) -> SinkSettings {
        macro_rules! pick {
            ($f:ident) => {
                over.$f.clone().or_else(|| file.$f.clone())
            };
        }
        SinkSettings {
            listen: pick!(listen).unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8080))),
            database: pick!(database).unwrap_or_else(|| "sqlite:gnomon-reports.db".into()),
            max_body: pick!(max_body).unwrap_or(DEFAULT_MAX_BODY as u64),
            rate: pick!(rate).unwrap_or(DEFAULT_RATE_PER_MINUTE),
            max_connections: pick!(max_connections).unwrap_or(DEFAULT_MAX_CONNECTIONS as u64),
            accept_keys: pick!(accept_keys),
            quota_per_source: pick!(quota_per_source).unwrap_or(DEFAULT_QUOTA_PER_SOURCE),
            quota: pick!(quota).unwrap_or(DEFAULT_QUOTA_TOTAL),
            retention: pick!(retention).unwrap_or(DEFAULT_RETENTION),
            rate_table: pick!(rate_table).unwrap_or(DEFAULT_RATE_TABLE as u64),
        }
    }

    /// The sink's limits, with the keys of `accept-keys` read (an
    /// unreadable or empty file is an error). `also` are keys to accept
    /// besides (`gnomon watch --sink`: its list's). A quota per source as
    /// large as the total is refused: one sender could fill the sink.
    pub(crate) fn sink_config(&self, also: Option<KeySet>) -> Result<SinkConfig, String> {
        if self.quota_per_source >= self.quota {
            return Err(format!(
                "quota-per-source ({}) must be below quota ({}): at it, one sender's /24 or /48 \
                 would fill the sink and leave no room for anyone else's reports",
                self.quota_per_source, self.quota
            ));
        }
        let mut keys = self.accept_keys.as_deref().map(load_keys).transpose()?;
        if let Some(more) = also {
            keys.get_or_insert_with(KeySet::default).extend(more);
        }
        Ok(SinkConfig {
            max_body: self.max_body as usize,
            rate_per_minute: self.rate,
            max_connections: self.max_connections as usize,
            keys: keys.map(std::sync::Arc::new),
            quota_per_source: self.quota_per_source,
            quota_total: self.quota,
            retention: self.retention,
            rate_table: self.rate_table as usize,
        })
    }
}

/// The effective settings as a `[report-server]` table.
impl fmt::Display for SinkSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "[report-server]")?;
        writeln!(f, "listen = {}", quoted(&self.listen.to_string()))?;
        writeln!(f, "database = {}", quoted(&self.database))?;
        writeln!(f, "max-body = {}", self.max_body)?;
        writeln!(f, "rate = {}", self.rate)?;
        writeln!(f, "max-connections = {}", self.max_connections)?;
        if let Some(k) = &self.accept_keys {
            writeln!(f, "accept-keys = {}", quoted(&k.display().to_string()))?;
        }
        writeln!(f, "quota-per-source = {}", self.quota_per_source)?;
        writeln!(f, "quota = {}", self.quota)?;
        writeln!(f, "retention = \"{}\"", DurationText(self.retention))?;
        writeln!(f, "rate-table = {}", self.rate_table)
    }
}
