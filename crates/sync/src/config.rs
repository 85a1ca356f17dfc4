//! What `gnomon sync` is told, checked once.
//!
//! ```text
//!  defaults ◀── file ([sync] table, --config) ◀── GNOMON_SYNC_* ◀── flags
//!                          └──────── Settings::resolve ──▶ Settings
//! ```
//!
//! The keys live in a `[sync]` table (deploy/gnomon-sync.toml shows them
//! all); each is a flag of the same name and a `GNOMON_SYNC_*` variable
//! (`max-radius` → `--max-radius`, `GNOMON_SYNC_MAX_RADIUS`). The CLI
//! parses flags and variables with the parsers re-exported here (one per
//! value, in `config/values.rs`), and a file's table is read with the same
//! ones (`config/file.rs`), so a value is range-checked the same way
//! wherever it came from. Unknown keys are an error. This is not the server's configuration: a machine that only
//! syncs never runs `serve`, and the server crate stays out of the client
//! side (the layering rule: dependencies point down).

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

mod defaults;
mod file;
pub(crate) use file::unreadable;
pub mod keys;
mod values;

pub use defaults::{default_of, KeyDefault};

pub use file::ConfigError;
pub use values::{
    duration_in, group_id, int_in, parse_chrony_max_radius, parse_chrony_sock, parse_count,
    parse_drift_ppm, parse_duration, parse_group, parse_interval, parse_jitter, parse_list_refresh,
    parse_list_timeout, parse_max_liars, parse_max_offset, parse_max_radius, parse_metrics,
    parse_now_socket, parse_report_url, parse_retries, parse_servers_key, parse_servers_url,
    parse_socket_mode, parse_threshold, parse_timeout, plain_http_refused, DurationText, IntOrText,
    MaxLiars, Metrics, NowSocket,
};

/// Where state lives unless told: the directory the systemd units give
/// (`StateDirectory=gnomon`), shared by the service and the boot step so
/// that both see the same floor.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/gnomon";

/// `chrony-max-radius` unless told: ±5 s (`delay 10`). A consensus of
/// servers answering with `gnomon serve`'s default 3 s radius floor is as
/// wide as one of them plus half a round trip, a little over 3 s, so a
/// 3 s bound would send chrony nothing from them.
pub const DEFAULT_CHRONY_MAX_RADIUS: Duration = Duration::from_secs(5);

/// Every key: (name, accepted values, default in words, help). The
/// default is in words only for a key that is unset unless given; the
/// others' are what `Settings::default()` prints ([`default_of`]), so no
/// text here can drift from the value the code uses. The order is the
/// order `--print-config` and deploy/gnomon-sync.toml use.
pub const KEYS: &[(&str, &str, &str, &str)] = &[
    (
        "servers",
        "a path",
        "",
        "The server list (RFC 10049's server list JSON); required unless servers-url is given, \
         and not given with servers-key (the monitors' signed lists are the list then)",
    ),
    (
        "state-dir",
        "a path",
        "",
        "The floor, the last chain, the list cache and reports",
    ),
    (
        "interval",
        "a duration in 1s..=1d",
        "",
        "Time between rounds",
    ),
    (
        "jitter",
        "an integer in 0..=50 (percent)",
        "",
        "Each wait is the interval ± this percent, at random",
    ),
    (
        "min-servers",
        "an integer in 1..=64",
        "",
        "Servers asked per round, at least",
    ),
    (
        "quorum",
        "an integer in 1..=64",
        "",
        "Servers that must agree with the consensus (beyond what max-liars needs)",
    ),
    (
        "max-liars",
        "an integer in 0..=21, or \"auto\"",
        "",
        "How many listed servers may lie: a consensus needs 2 × this + 1 answering; \
         auto is max(1, (n − 1) / 3) of the n listed",
    ),
    (
        "max-radius",
        "a duration in 1ms..=1d",
        "",
        "The clock is never set from a wider consensus",
    ),
    (
        "max-offset",
        "a duration in 0s..=1d",
        "",
        "--check: tolerance around the consensus interval",
    ),
    (
        "timeout",
        "a duration in 10ms..=1m",
        "",
        "First UDP wait per query (×1.5 per retry)",
    ),
    (
        "retries",
        "an integer in 1..=20",
        "",
        "UDP attempts per query",
    ),
    (
        "report",
        "true or false",
        "",
        "POST malfeasance reports when a URL is known",
    ),
    (
        "report-url",
        "an https:// URL",
        "the list's `reports`",
        "Where to POST reports",
    ),
    (
        "chrony-sock",
        "a path of 1..=107 bytes",
        "none (no samples)",
        "chrony's `refclock SOCK` socket: every consensus is sent there as a sample",
    ),
    (
        "chrony-max-radius",
        "a duration in 1ms..=1h",
        "",
        "The radius chrony is told (delay = 2 × this): a wider consensus is never sent",
    ),
    (
        "servers-url",
        "an https:// URL (http:// too with servers-key); repeatable",
        "the list's `sources`",
        "Where the list is refreshed from; with servers-key, one monitor's signed list each \
         (its signature at URL.sig)",
    ),
    (
        "servers-key",
        "an OpenSSH line \"ssh-ed25519 AAAA… comment\", or a .pub file; repeatable",
        "none (lists are not signed)",
        "A monitor key whose signed lists (servers-url) are believed",
    ),
    (
        "servers-threshold",
        "an integer in 1..=the number of servers-key",
        "",
        "How many pinned monitors must list a server for it to be used",
    ),
    (
        "list-refresh",
        "a duration in 1s..=30d",
        "",
        "Time between list refreshes (± jitter)",
    ),
    (
        "list-timeout",
        "a duration in 1s..=5m",
        "",
        "One list download, connect to last byte",
    ),
    (
        "list-ca",
        "a path (PEM certificates)",
        "Mozilla's roots",
        "Trust only these CAs for list downloads",
    ),
    (
        "metrics",
        "a socket address, or \"off\"",
        "",
        "Serve Prometheus /metrics here",
    ),
    (
        "now-socket",
        "a path of 1..=107 bytes, or \"off\"",
        "",
        "Answer local programs (`gnomon now`) with the proven time now (docs/NOW.md)",
    ),
    (
        "now-socket-group",
        "a group name or number",
        "the service's group",
        "The now socket's group: with mode 0660, its members may ask",
    ),
    (
        "now-socket-mode",
        "\"0600\", \"0660\" or \"0666\"",
        "",
        "Who may ask: the owner, the group, or every local user",
    ),
    (
        "now-drift-ppm",
        "an integer in 1..=100000",
        "",
        "The bound on the raw oscillator's rate error that widens the proven interval",
    ),
];

/// `now-socket` unless told: under the directory the systemd unit makes
/// (`RuntimeDirectory=gnomon`).
pub const DEFAULT_NOW_SOCKET: &str = "/run/gnomon/now.sock";

/// The checked settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `servers`.
    pub servers: Option<PathBuf>,
    /// `state-dir`.
    pub state_dir: PathBuf,
    /// `interval`.
    pub interval: Duration,
    /// `jitter`, percent.
    pub jitter: u8,
    /// `min-servers`.
    pub min_servers: usize,
    /// `quorum`.
    pub quorum: usize,
    /// `max-liars`: `None` for auto (max(1, ⌊(n − 1)/3⌋) of the list).
    pub max_liars: Option<usize>,
    /// `max-radius`.
    pub max_radius: Duration,
    /// `max-offset`.
    pub max_offset: Duration,
    /// `timeout`.
    pub timeout: Duration,
    /// `retries`.
    pub retries: u32,
    /// `report`.
    pub report: bool,
    /// `report-url`.
    pub report_url: Option<String>,
    /// `chrony-sock`.
    pub chrony_sock: Option<PathBuf>,
    /// `chrony-max-radius`: the error the chrony.conf line declares.
    pub chrony_max_radius: Duration,
    /// `servers-url`, in the order given (none: the list's `sources`).
    pub servers_url: Vec<String>,
    /// `servers-key`, as given: key lines or paths of `.pub` files
    /// ([`keys::load_key`] reads them).
    pub servers_key: Vec<String>,
    /// `servers-threshold`.
    pub servers_threshold: usize,
    /// `list-refresh`.
    pub list_refresh: Duration,
    /// `list-timeout`.
    pub list_timeout: Duration,
    /// `list-ca`.
    pub list_ca: Option<PathBuf>,
    /// `metrics`.
    pub metrics: Option<SocketAddr>,
    /// `now-socket`: `None` when off.
    pub now_socket: Option<PathBuf>,
    /// `now-socket-group`, as written.
    pub now_socket_group: Option<String>,
    /// `now-socket-mode`.
    pub now_socket_mode: u32,
    /// `now-drift-ppm`.
    pub now_drift_ppm: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            servers: None,
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
            interval: Duration::from_secs(600),
            jitter: 10,
            min_servers: 3,
            quorum: 2,
            max_liars: None,
            max_radius: Duration::from_secs(10),
            max_offset: Duration::ZERO,
            timeout: Duration::from_secs(1),
            retries: 3,
            report: true,
            report_url: None,
            chrony_sock: None,
            chrony_max_radius: DEFAULT_CHRONY_MAX_RADIUS,
            servers_url: Vec::new(),
            servers_key: Vec::new(),
            servers_threshold: 1,
            list_refresh: Duration::from_secs(86_400),
            list_timeout: Duration::from_secs(30),
            list_ca: None,
            metrics: None,
            now_socket: Some(PathBuf::from(DEFAULT_NOW_SOCKET)),
            now_socket_group: None,
            now_socket_mode: 0o660,
            now_drift_ppm: crate::now::DEFAULT_DRIFT_PPM,
        }
    }
}

/// One source's settings, each key present or not. The CLI fills one from
/// flags and variables; [`Layer::from_file`] fills one from a file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct Layer {
    pub servers: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub interval: Option<Duration>,
    pub jitter: Option<u8>,
    pub min_servers: Option<usize>,
    pub quorum: Option<usize>,
    pub max_liars: Option<MaxLiars>,
    pub max_radius: Option<Duration>,
    pub max_offset: Option<Duration>,
    pub timeout: Option<Duration>,
    pub retries: Option<u32>,
    pub report: Option<bool>,
    pub report_url: Option<String>,
    pub chrony_sock: Option<PathBuf>,
    pub chrony_max_radius: Option<Duration>,
    pub servers_url: Option<Vec<String>>,
    pub servers_key: Option<Vec<String>>,
    pub servers_threshold: Option<usize>,
    pub list_refresh: Option<Duration>,
    pub list_timeout: Option<Duration>,
    pub list_ca: Option<PathBuf>,
    pub metrics: Option<Metrics>,
    pub now_socket: Option<NowSocket>,
    pub now_socket_group: Option<String>,
    pub now_socket_mode: Option<u32>,
    pub now_drift_ppm: Option<u32>,
}

impl Settings {
    /// Defaults, then `file`, then `over` (variables and flags): later wins,
    /// key by key.
    pub fn resolve(file: &Layer, over: &Layer) -> Settings {
        let d = Settings::default();
        macro_rules! pick {
            ($f:ident) => {
                over.$f.clone().or_else(|| file.$f.clone())
            };
        }
        Settings {
            servers: pick!(servers),
            state_dir: pick!(state_dir).unwrap_or(d.state_dir),
            interval: pick!(interval).unwrap_or(d.interval),
            jitter: pick!(jitter).unwrap_or(d.jitter),
            min_servers: pick!(min_servers).unwrap_or(d.min_servers),
            quorum: pick!(quorum).unwrap_or(d.quorum),
            max_liars: pick!(max_liars).map_or(d.max_liars, |m| m.0),
            max_radius: pick!(max_radius).unwrap_or(d.max_radius),
            max_offset: pick!(max_offset).unwrap_or(d.max_offset),
            timeout: pick!(timeout).unwrap_or(d.timeout),
            retries: pick!(retries).unwrap_or(d.retries),
            report: pick!(report).unwrap_or(d.report),
            report_url: pick!(report_url),
            chrony_sock: pick!(chrony_sock),
            chrony_max_radius: pick!(chrony_max_radius).unwrap_or(d.chrony_max_radius),
            servers_url: pick!(servers_url).unwrap_or_default(),
            servers_key: pick!(servers_key).unwrap_or_default(),
            servers_threshold: pick!(servers_threshold).unwrap_or(d.servers_threshold),
            list_refresh: pick!(list_refresh).unwrap_or(d.list_refresh),
            list_timeout: pick!(list_timeout).unwrap_or(d.list_timeout),
            list_ca: pick!(list_ca),
            metrics: pick!(metrics).and_then(|m| m.0),
            now_socket: match pick!(now_socket) {
                Some(n) => n.0,
                None => d.now_socket,
            },
            now_socket_group: pick!(now_socket_group),
            now_socket_mode: pick!(now_socket_mode).unwrap_or(d.now_socket_mode),
            now_drift_ppm: pick!(now_drift_ppm).unwrap_or(d.now_drift_ppm),
        }
    }
}

impl Settings {
    /// What no single key's parser can check, once every layer is in:
    /// `servers-key` needs `servers-url` and no `servers` file, the keys
    /// load and are distinct, `servers-threshold` is at most the number of
    /// keys, and a plain-HTTP `servers-url` needs a key. `file` is the
    /// configuration file's layer, to name where a URL was written.
    pub fn check(&self, file: &Layer) -> Result<(), String> {
        let from_file = |url: &String| file.servers_url.as_ref().is_some_and(|v| v.contains(url));
        if self.servers_key.is_empty() {
            if let Some(url) = self.servers_url.iter().find(|u| values::is_http(u)) {
                let key = if from_file(url) {
                    "[sync] servers-url"
                } else {
                    "--servers-url"
                };
                return Err(plain_http_refused(url, key));
            }
        } else {
            if self.servers_url.is_empty() {
                return Err(
                    "servers-key is given without servers-url: give the URL of each monitor's \
                     signed list (--servers-url URL, its signature at URL.sig)"
                        .into(),
                );
            }
            if let Some(p) = &self.servers {
                return Err(format!(
                    "servers {} and servers-key are both given: with pinned keys the list is \
                     the monitors' signed lists (servers-url); drop one of them",
                    p.display()
                ));
            }
        }
        keys::pins(&self.servers_key, self.servers_threshold).map(drop)
    }
}

/// The effective settings as a `[sync]` table that loads back to the same
/// value.
impl fmt::Display for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let q = |s: &str| toml::Value::String(s.to_owned()).to_string();
        writeln!(f, "[sync]")?;
        if let Some(p) = &self.servers {
            writeln!(f, "servers = {}", q(&p.display().to_string()))?;
        }
        writeln!(
            f,
            "state-dir = {}",
            q(&self.state_dir.display().to_string())
        )?;
        writeln!(f, "interval = \"{}\"", DurationText(self.interval))?;
        writeln!(f, "jitter = {}", self.jitter)?;
        writeln!(f, "min-servers = {}", self.min_servers)?;
        writeln!(f, "quorum = {}", self.quorum)?;
        match self.max_liars {
            Some(n) => writeln!(f, "max-liars = {n}")?,
            None => writeln!(f, "max-liars = \"auto\"")?,
        }
        writeln!(f, "max-radius = \"{}\"", DurationText(self.max_radius))?;
        writeln!(f, "max-offset = \"{}\"", DurationText(self.max_offset))?;
        writeln!(f, "timeout = \"{}\"", DurationText(self.timeout))?;
        writeln!(f, "retries = {}", self.retries)?;
        writeln!(f, "report = {}", self.report)?;
        if let Some(u) = &self.report_url {
            writeln!(f, "report-url = {}", q(u))?;
        }
        if let Some(p) = &self.chrony_sock {
            writeln!(f, "chrony-sock = {}", q(&p.display().to_string()))?;
        }
        writeln!(
            f,
            "chrony-max-radius = \"{}\"",
            DurationText(self.chrony_max_radius)
        )?;
        // One value as a string (the form older files use), several as an
        // array.
        let many = |f: &mut fmt::Formatter<'_>, key: &str, v: &[String]| match v {
            [] => Ok(()),
            [one] => writeln!(f, "{key} = {}", q(one)),
            all => {
                let items: Vec<String> = all.iter().map(|u| q(u)).collect();
                writeln!(f, "{key} = [{}]", items.join(", "))
            }
        };
        many(f, "servers-url", &self.servers_url)?;
        many(f, "servers-key", &self.servers_key)?;
        writeln!(f, "servers-threshold = {}", self.servers_threshold)?;
        writeln!(f, "list-refresh = \"{}\"", DurationText(self.list_refresh))?;
        writeln!(f, "list-timeout = \"{}\"", DurationText(self.list_timeout))?;
        if let Some(p) = &self.list_ca {
            writeln!(f, "list-ca = {}", q(&p.display().to_string()))?;
        }
        match &self.metrics {
            Some(a) => writeln!(f, "metrics = {}", q(&a.to_string()))?,
            None => writeln!(f, "metrics = \"off\"")?,
        }
        match &self.now_socket {
            Some(p) => writeln!(f, "now-socket = {}", q(&p.display().to_string()))?,
            None => writeln!(f, "now-socket = \"off\"")?,
        }
        if let Some(g) = &self.now_socket_group {
            writeln!(f, "now-socket-group = {}", q(g))?;
        }
        writeln!(f, "now-socket-mode = \"{:04o}\"", self.now_socket_mode)?;
        writeln!(f, "now-drift-ppm = {}", self.now_drift_ppm)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
