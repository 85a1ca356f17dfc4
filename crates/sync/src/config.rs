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
//! parses flags and variables with the parsers below, so a value is
//! range-checked the same way wherever it came from. Unknown keys are an
//! error. This is not the server's configuration: a machine that only
//! syncs never runs `serve`, and the server crate stays out of the client
//! side (the layering rule: dependencies point down).

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Where state lives unless told: the directory the systemd units give
/// (`StateDirectory=gnomon`), shared by the service and the boot step so
/// that both see the same floor.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/gnomon";

/// `chrony-max-radius` unless told: ±5 s (`delay 10`). A consensus of
/// servers answering with `gnomon serve`'s default 3 s radius floor is as
/// wide as one of them plus half a round trip, a little over 3 s, so a
/// 3 s bound would send chrony nothing from them.
pub const DEFAULT_CHRONY_MAX_RADIUS: Duration = Duration::from_secs(5);

/// Every key: (name, accepted values, default, help). The order is the
/// order `--print-config` and deploy/gnomon-sync.toml use.
pub const KEYS: &[(&str, &str, &str, &str)] = &[
    (
        "servers",
        "a path",
        "(none: required)",
        "The server list (RFC 10049's server list JSON)",
    ),
    (
        "state-dir",
        "a path",
        "\"/var/lib/gnomon\"",
        "The floor, the last chain, the list cache and reports",
    ),
    (
        "interval",
        "a duration in 1s..=1d",
        "\"10m\"",
        "Time between rounds",
    ),
    (
        "jitter",
        "an integer in 0..=50 (percent)",
        "10",
        "Each wait is the interval ± this percent, at random",
    ),
    (
        "min-servers",
        "an integer in 1..=64",
        "3",
        "Servers asked per round, at least",
    ),
    (
        "quorum",
        "an integer in 1..=64",
        "2",
        "Servers that must agree with the consensus (beyond what max-liars needs)",
    ),
    (
        "max-liars",
        "an integer in 0..=21, or \"auto\"",
        "\"auto\"",
        "How many listed servers may lie: a consensus needs 2 × this + 1 answering; \
         auto is max(1, (n − 1) / 3) of the n listed",
    ),
    (
        "max-radius",
        "a duration in 1ms..=1d",
        "\"10s\"",
        "The clock is never set from a wider consensus",
    ),
    (
        "max-offset",
        "a duration in 0s..=1d",
        "\"0s\"",
        "--check: tolerance around the consensus interval",
    ),
    (
        "timeout",
        "a duration in 10ms..=1m",
        "\"1s\"",
        "First UDP wait per query (×1.5 per retry)",
    ),
    (
        "retries",
        "an integer in 1..=20",
        "3",
        "UDP attempts per query",
    ),
    (
        "report",
        "true or false",
        "true",
        "POST malfeasance reports when a URL is known",
    ),
    (
        "report-url",
        "an https:// URL",
        "(the list's `reports`)",
        "Where to POST reports",
    ),
    (
        "chrony-sock",
        "a path of 1..=107 bytes",
        "(none: no samples)",
        "chrony's `refclock SOCK` socket: every consensus is sent there as a sample",
    ),
    (
        "chrony-max-radius",
        "a duration in 1ms..=1h",
        "\"5s\"",
        "The radius chrony is told (delay = 2 × this): a wider consensus is never sent",
    ),
    (
        "servers-url",
        "an https:// URL",
        "(the list's `sources`)",
        "Where the list is refreshed from",
    ),
    (
        "list-refresh",
        "a duration in 1s..=30d",
        "\"1d\"",
        "Time between list refreshes (± jitter)",
    ),
    (
        "list-timeout",
        "a duration in 1s..=5m",
        "\"30s\"",
        "One list download, connect to last byte",
    ),
    (
        "list-ca",
        "a path (PEM certificates)",
        "(Mozilla's roots)",
        "Trust only these CAs for list downloads",
    ),
    (
        "metrics",
        "a socket address",
        "(none: off)",
        "Serve Prometheus /metrics here",
    ),
    (
        "now-socket",
        "a path of 1..=107 bytes, or \"off\"",
        "\"/run/gnomon/now.sock\"",
        "Answer local programs (`gnomon now`) with the proven time now (docs/NOW.md)",
    ),
    (
        "now-socket-group",
        "a group name or number",
        "(the service's group)",
        "The now socket's group: with mode 0660, its members may ask",
    ),
    (
        "now-socket-mode",
        "\"0600\", \"0660\" or \"0666\"",
        "\"0660\"",
        "Who may ask: the owner, the group, or every local user",
    ),
    (
        "now-drift-ppm",
        "an integer in 1..=100000",
        "100",
        "The bound on the raw oscillator's rate error that widens the proven interval",
    ),
];

/// `now-socket` unless told: under the directory the systemd unit makes
/// (`RuntimeDirectory=gnomon`).
pub const DEFAULT_NOW_SOCKET: &str = "/run/gnomon/now.sock";

/// `now-socket` as given: a path, or off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NowSocket(pub Option<PathBuf>);

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
    /// `servers-url`.
    pub servers_url: Option<String>,
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
            servers_url: None,
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
    pub servers_url: Option<String>,
    pub list_refresh: Option<Duration>,
    pub list_timeout: Option<Duration>,
    pub list_ca: Option<PathBuf>,
    pub metrics: Option<SocketAddr>,
    pub now_socket: Option<NowSocket>,
    pub now_socket_group: Option<String>,
    pub now_socket_mode: Option<u32>,
    pub now_drift_ppm: Option<u32>,
}

/// A file that does not load.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    sync: Option<FileTable>,
}

/// Values as TOML types them; checked by the same parsers as flags.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileTable {
    servers: Option<String>,
    state_dir: Option<String>,
    interval: Option<String>,
    jitter: Option<i64>,
    min_servers: Option<i64>,
    quorum: Option<i64>,
    max_liars: Option<IntOrText>,
    max_radius: Option<String>,
    max_offset: Option<String>,
    timeout: Option<String>,
    retries: Option<i64>,
    report: Option<bool>,
    report_url: Option<String>,
    chrony_sock: Option<String>,
    chrony_max_radius: Option<String>,
    servers_url: Option<String>,
    list_refresh: Option<String>,
    list_timeout: Option<String>,
    list_ca: Option<String>,
    metrics: Option<String>,
    now_socket: Option<String>,
    now_socket_group: Option<String>,
    now_socket_mode: Option<String>,
    now_drift_ppm: Option<i64>,
}

impl Layer {
    /// The `[sync]` table of a TOML file; relative paths are relative to
    /// the file's directory.
    pub fn from_file(path: &Path) -> Result<Layer, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
        Layer::from_toml(&text, path)
    }

    /// As [`Layer::from_file`], from the text; `path` names it.
    pub fn from_toml(text: &str, path: &Path) -> Result<Layer, ConfigError> {
        let doc: FileDoc =
            toml::from_str(text).map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
        let t = doc.sync.unwrap_or_default();
        let bad = |key: &str, why: String| {
            ConfigError(format!("{}: [sync] {key}: {why}", path.display()))
        };
        let base = path.parent().unwrap_or(Path::new(""));
        let in_file = |p: String| base.join(p);
        let int = |key: &str, v: Option<i64>, f: fn(&str) -> Result<i64, String>| {
            v.map(|i| f(&i.to_string()).map_err(|e| bad(key, e)))
                .transpose()
        };
        let dur = |key: &str, v: Option<String>, f: fn(&str) -> Result<Duration, String>| {
            v.map(|s| f(&s).map_err(|e| bad(key, e))).transpose()
        };
        Ok(Layer {
            servers: t.servers.map(in_file),
            state_dir: t.state_dir.map(in_file),
            interval: dur("interval", t.interval, parse_interval)?,
            jitter: int("jitter", t.jitter, |s| parse_jitter(s).map(i64::from))?.map(|v| v as u8),
            min_servers: int("min-servers", t.min_servers, |s| {
                parse_count(s).map(|v| v as i64)
            })?
            .map(|v| v as usize),
            quorum: int("quorum", t.quorum, |s| parse_count(s).map(|v| v as i64))?
                .map(|v| v as usize),
            max_liars: t
                .max_liars
                .map(|v| parse_max_liars(&v.text()).map_err(|e| bad("max-liars", e)))
                .transpose()?,
            max_radius: dur("max-radius", t.max_radius, parse_max_radius)?,
            max_offset: dur("max-offset", t.max_offset, parse_max_offset)?,
            timeout: dur("timeout", t.timeout, parse_timeout)?,
            retries: int("retries", t.retries, |s| parse_retries(s).map(i64::from))?
                .map(|v| v as u32),
            report: t.report,
            report_url: t
                .report_url
                .map(|u| parse_report_url(&u).map_err(|e| bad("report-url", e)))
                .transpose()?,
            chrony_sock: t
                .chrony_sock
                .map(|p| parse_chrony_sock(&p).map_err(|e| bad("chrony-sock", e)))
                .transpose()?
                .map(|p| base.join(p)),
            chrony_max_radius: dur(
                "chrony-max-radius",
                t.chrony_max_radius,
                parse_chrony_max_radius,
            )?,
            servers_url: t
                .servers_url
                .map(|u| parse_servers_url(&u).map_err(|e| bad("servers-url", e)))
                .transpose()?,
            list_refresh: dur("list-refresh", t.list_refresh, parse_list_refresh)?,
            list_timeout: dur("list-timeout", t.list_timeout, parse_list_timeout)?,
            list_ca: t.list_ca.map(in_file),
            metrics: t
                .metrics
                .map(|a| parse_metrics(&a).map_err(|e| bad("metrics", e)))
                .transpose()?,
            now_socket: t
                .now_socket
                .map(|p| parse_now_socket(&p).map_err(|e| bad("now-socket", e)))
                .transpose()?
                .map(|n| NowSocket(n.0.map(|p| base.join(p)))),
            now_socket_group: t
                .now_socket_group
                .map(|g| parse_group(&g).map_err(|e| bad("now-socket-group", e)))
                .transpose()?,
            now_socket_mode: t
                .now_socket_mode
                .map(|m| parse_socket_mode(&m).map_err(|e| bad("now-socket-mode", e)))
                .transpose()?,
            now_drift_ppm: int("now-drift-ppm", t.now_drift_ppm, |s| {
                parse_drift_ppm(s).map(i64::from)
            })?
            .map(|v| v as u32),
        })
    }
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
            servers_url: pick!(servers_url),
            list_refresh: pick!(list_refresh).unwrap_or(d.list_refresh),
            list_timeout: pick!(list_timeout).unwrap_or(d.list_timeout),
            list_ca: pick!(list_ca),
            metrics: pick!(metrics),
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
        if let Some(u) = &self.servers_url {
            writeln!(f, "servers-url = {}", q(u))?;
        }
        writeln!(f, "list-refresh = \"{}\"", DurationText(self.list_refresh))?;
        writeln!(f, "list-timeout = \"{}\"", DurationText(self.list_timeout))?;
        if let Some(p) = &self.list_ca {
            writeln!(f, "list-ca = {}", q(&p.display().to_string()))?;
        }
        if let Some(a) = &self.metrics {
            writeln!(f, "metrics = {}", q(&a.to_string()))?;
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

/// A duration in the largest unit that writes it exactly (`--print-config`
/// of sync, watch and report-server).
pub struct DurationText(pub Duration);

impl fmt::Display for DurationText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        for (unit, size) in [
            ("d", 86_400_000),
            ("h", 3_600_000),
            ("m", 60_000),
            ("s", 1000),
        ] {
            if ms >= size && ms.is_multiple_of(size) {
                return write!(f, "{}{unit}", ms / size);
            }
        }
        if ms == 0 {
            return f.write_str("0s");
        }
        write!(f, "{ms}ms")
    }
}

/// `500ms`, `10s`, `5m`, `12h`, `1d` (an integer and a unit; a bare
/// integer is seconds).
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let ms = match unit.trim() {
        "ms" => 1,
        "" | "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    n.checked_mul(ms).map(Duration::from_millis)
}

/// A duration in `lo..=hi`; the error says `what` was expected.
pub fn duration_in(s: &str, lo: Duration, hi: Duration, what: &str) -> Result<Duration, String> {
    match parse_duration(s) {
        Some(d) if lo <= d && d <= hi => Ok(d),
        _ => Err(format!("`{s}` is not {what}")),
    }
}

/// An integer in `lo..=hi`; the error says `what` was expected.
pub fn int_in(s: &str, lo: i64, hi: i64, what: &str) -> Result<i64, String> {
    match s.trim().parse::<i64>() {
        Ok(v) if lo <= v && v <= hi => Ok(v),
        _ => Err(format!("`{s}` is not {what}")),
    }
}

/// `interval`: 1 s to a day.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    duration_in(
        s,
        Duration::from_secs(1),
        Duration::from_secs(86_400),
        KEYS[2].1,
    )
}

/// `jitter`: 0..=50 percent.
pub fn parse_jitter(s: &str) -> Result<u8, String> {
    int_in(s, 0, 50, KEYS[3].1).map(|v| v as u8)
}

/// `min-servers`, `quorum`: 1..=64.
pub fn parse_count(s: &str) -> Result<usize, String> {
    int_in(s, 1, 64, "an integer in 1..=64").map(|v| v as usize)
}

/// `max-liars` as given: a number, or auto (`None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxLiars(pub Option<usize>);

/// A TOML value that may be written as a number or as text
/// (`max-liars = 1`, `max-liars = "auto"`).
#[derive(Deserialize, Clone, Debug)]
#[serde(untagged)]
pub enum IntOrText {
    /// A number.
    Int(i64),
    /// Text.
    Text(String),
}

impl IntOrText {
    fn text(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for IntOrText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntOrText::Int(i) => write!(f, "{i}"),
            IntOrText::Text(s) => f.write_str(s),
        }
    }
}

/// `max-liars`: 0..=21 (a list of 64, the longest sync asks, outvotes 21),
/// or `auto`.
pub fn parse_max_liars(s: &str) -> Result<MaxLiars, String> {
    if s.trim().eq_ignore_ascii_case("auto") {
        return Ok(MaxLiars(None));
    }
    int_in(s, 0, 21, KEYS[6].1).map(|v| MaxLiars(Some(v as usize)))
}

/// `max-radius`: 1 ms to a day.
pub fn parse_max_radius(s: &str) -> Result<Duration, String> {
    duration_in(
        s,
        Duration::from_millis(1),
        Duration::from_secs(86_400),
        KEYS[7].1,
    )
}

/// `max-offset`: 0 to a day.
pub fn parse_max_offset(s: &str) -> Result<Duration, String> {
    duration_in(s, Duration::ZERO, Duration::from_secs(86_400), KEYS[8].1)
}

/// `timeout`: 10 ms to a minute.
pub fn parse_timeout(s: &str) -> Result<Duration, String> {
    duration_in(
        s,
        Duration::from_millis(10),
        Duration::from_secs(60),
        KEYS[9].1,
    )
}

/// `retries`: 1..=20.
pub fn parse_retries(s: &str) -> Result<u32, String> {
    int_in(s, 1, 20, KEYS[10].1).map(|v| v as u32)
}

/// `report-url`: HTTPS only (tests put a loopback HTTP URL in the list's
/// `reports`, which a hidden flag of the CLI accepts).
pub fn parse_report_url(s: &str) -> Result<String, String> {
    let lower = s.to_ascii_lowercase();
    if lower.starts_with("https://") && lower.len() > "https://".len() {
        Ok(s.to_string())
    } else {
        Err(format!("`{s}` is not an https:// URL"))
    }
}

/// `chrony-sock`: a path that fits a Unix socket address (sun_path holds
/// 108 bytes with the terminating NUL), so a typo'd long path is an error
/// at start, not a failure at every sample.
pub fn parse_chrony_sock(s: &str) -> Result<PathBuf, String> {
    if s.is_empty() || s.len() > 107 || s.contains('\0') {
        return Err(format!("`{s}` is not {}", KEYS[13].1));
    }
    Ok(PathBuf::from(s))
}

/// `chrony-max-radius`: 1 ms to an hour. chrony is told this bound as
/// the refclock's `delay` (twice it), so it is what chrony believes the
/// error of every sample is; a consensus wider than it is never sent.
pub fn parse_chrony_max_radius(s: &str) -> Result<Duration, String> {
    duration_in(
        s,
        Duration::from_millis(1),
        Duration::from_secs(3600),
        KEYS[14].1,
    )
}

/// `servers-url`: HTTPS only. A list fetched in the clear could be
/// replaced by anyone on the path, and with it the keys sync trusts.
pub fn parse_servers_url(s: &str) -> Result<String, String> {
    let lower = s.to_ascii_lowercase();
    if lower.starts_with("http://") {
        return Err(format!(
            "`{s}` is plain HTTP: a server list names the keys sync trusts, and anyone on the \
             path could replace it; use an https:// URL"
        ));
    }
    parse_report_url(s)
}

/// `list-refresh`: 1 s to 30 days.
pub fn parse_list_refresh(s: &str) -> Result<Duration, String> {
    duration_in(
        s,
        Duration::from_secs(1),
        Duration::from_secs(30 * 86_400),
        "a duration in 1s..=30d",
    )
}

/// `list-timeout`: 1 s to 5 minutes.
pub fn parse_list_timeout(s: &str) -> Result<Duration, String> {
    duration_in(
        s,
        Duration::from_secs(1),
        Duration::from_secs(300),
        "a duration in 1s..=5m",
    )
}

/// `metrics`: `127.0.0.1:9102`, `[::1]:9102`.
pub fn parse_metrics(s: &str) -> Result<SocketAddr, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a socket address (like 127.0.0.1:9102)"))
}

/// `now-socket`: a path that fits a Unix socket address, or `off`.
pub fn parse_now_socket(s: &str) -> Result<NowSocket, String> {
    if s == "off" {
        return Ok(NowSocket(None));
    }
    if s.is_empty() || s.len() > 107 || s.contains('\0') {
        return Err(format!("`{s}` is not {}", KEYS[20].1));
    }
    Ok(NowSocket(Some(PathBuf::from(s))))
}

/// `now-socket-group`: a name as groupadd takes them, or a number.
pub fn parse_group(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 32
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b));
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!("`{s}` is not {}", KEYS[21].1))
    }
}

/// The gid of `group` (a number, or a name in /etc/group).
pub fn group_id(group: &str) -> Result<u32, String> {
    if let Ok(n) = group.parse::<u32>() {
        return Ok(n);
    }
    let text = std::fs::read_to_string("/etc/group").map_err(|e| format!("/etc/group: {e}"))?;
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let gid = f.nth(1)?;
            (name == group).then(|| gid.parse::<u32>().ok()).flatten()
        })
        .next()
        .ok_or_else(|| format!("no group `{group}` in /etc/group"))
}

/// `now-socket-mode`: 0600, 0660 or 0666.
pub fn parse_socket_mode(s: &str) -> Result<u32, String> {
    match s.trim() {
        "0600" | "600" => Ok(0o600),
        "0660" | "660" => Ok(0o660),
        "0666" | "666" => Ok(0o666),
        _ => Err(format!("`{s}` is not {}", KEYS[22].1)),
    }
}

/// `now-drift-ppm`: 1..=100000.
pub fn parse_drift_ppm(s: &str) -> Result<u32, String> {
    int_in(s, 1, 100_000, KEYS[23].1).map(|v| v as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_now_socket_keys_default_parse_and_print_back() {
        let p = Path::new("/etc/gnomon/sync.toml");
        let d = Settings::default();
        assert_eq!(d.now_socket.as_deref(), Some(Path::new(DEFAULT_NOW_SOCKET)));
        assert_eq!((d.now_socket_mode, d.now_drift_ppm), (0o660, 100));
        let l = Layer::from_toml(
            "[sync]\nnow-socket = \"off\"\nnow-socket-mode = \"0666\"\nnow-socket-group = \"gnomon-now\"\nnow-drift-ppm = 20\n",
            p,
        )
        .unwrap();
        let s = Settings::resolve(&l, &Layer::default());
        assert_eq!(s.now_socket, None);
        assert_eq!((s.now_socket_mode, s.now_drift_ppm), (0o666, 20));
        assert_eq!(s.now_socket_group.as_deref(), Some("gnomon-now"));
        let again = Layer::from_toml(&s.to_string(), p).unwrap();
        assert_eq!(Settings::resolve(&again, &Layer::default()), s);
        let l = Layer::from_toml("[sync]\nnow-socket = \"now.sock\"\n", p).unwrap();
        let s = Settings::resolve(&l, &Layer::default());
        assert_eq!(
            s.now_socket.as_deref(),
            Some(Path::new("/etc/gnomon/now.sock"))
        );
        for bad in [
            "now-socket-mode = \"0777\"",
            "now-drift-ppm = 0",
            "now-socket-group = \"a b\"",
            "now-socket = \"\"",
        ] {
            assert!(
                Layer::from_toml(&format!("[sync]\n{bad}\n"), p).is_err(),
                "{bad}"
            );
        }
        assert_eq!(group_id("0"), Ok(0));
        assert_eq!(group_id("root"), Ok(0));
        assert!(group_id("no-such-group-here").is_err());
    }

    #[test]
    fn layers_apply_in_order_and_print_back() {
        let file = Layer::from_toml(
            "[sync]\nservers = \"list.json\"\ninterval = \"5m\"\nquorum = 3\n",
            Path::new("/etc/gnomon/sync.toml"),
        )
        .unwrap();
        let over = Layer {
            quorum: Some(4),
            ..Layer::default()
        };
        let s = Settings::resolve(&file, &over);
        assert_eq!(
            s.servers.as_deref(),
            Some(Path::new("/etc/gnomon/list.json"))
        );
        assert_eq!(s.interval, Duration::from_secs(300));
        assert_eq!(s.quorum, 4);
        assert_eq!(s.min_servers, 3);
        let again = Layer::from_toml(&s.to_string(), Path::new("/x.toml")).unwrap();
        assert_eq!(Settings::resolve(&again, &Layer::default()), s);
    }

    #[test]
    fn out_of_range_values_and_unknown_keys_are_errors() {
        let p = Path::new("/s.toml");
        let e = Layer::from_toml("[sync]\ninterval = \"500ms\"\n", p).unwrap_err();
        assert!(e.0.contains("[sync] interval"), "{e}");
        assert!(Layer::from_toml("[sync]\nquorum = 0\n", p).is_err());
        assert!(Layer::from_toml("[sync]\nquorumm = 2\n", p).is_err());
        assert!(Layer::from_toml("[other]\n", p).is_err());
        assert!(Layer::from_toml("[sync]\nreport-url = \"http://x\"\n", p).is_err());
        assert_eq!(parse_interval("1s"), Ok(Duration::from_secs(1)));
        assert!(parse_interval("0s").is_err());
        assert!(parse_interval("2d").is_err());
        let e = Layer::from_toml("[sync]\nservers-url = \"http://lists.example/l.json\"\n", p)
            .unwrap_err();
        assert!(e.0.contains("plain HTTP"), "{e}");
        assert!(parse_servers_url("https://lists.example/l.json").is_ok());
        assert!(parse_list_refresh("31d").is_err());
        assert!(parse_metrics("127.0.0.1:9102").is_ok());
        assert!(parse_metrics("localhost").is_err());
    }

    #[test]
    fn chrony_sock_is_a_path_that_fits_a_unix_socket_address() {
        let p = Path::new("/etc/gnomon/sync.toml");
        let l = Layer::from_toml("[sync]\nchrony-sock = \"/run/chrony.gnomon.sock\"\n", p).unwrap();
        let s = Settings::resolve(&l, &Layer::default());
        assert_eq!(
            s.chrony_sock.as_deref(),
            Some(Path::new("/run/chrony.gnomon.sock"))
        );
        assert!(s
            .to_string()
            .contains("chrony-sock = \"/run/chrony.gnomon.sock\""));
        assert_eq!(Settings::default().chrony_sock, None);
        let long = format!("[sync]\nchrony-sock = \"/{}\"\n", "x".repeat(107));
        let e = Layer::from_toml(&long, p).unwrap_err();
        assert!(e.0.contains("[sync] chrony-sock"), "{e}");
        assert!(parse_chrony_sock("").is_err());
        assert!(parse_chrony_sock(&format!("/{}", "x".repeat(106))).is_ok());
    }

    #[test]
    fn chrony_max_radius_defaults_to_the_documented_5_s_and_is_range_checked() {
        let p = Path::new("/etc/gnomon/sync.toml");
        let d = Settings::default();
        assert_eq!(d.chrony_max_radius, Duration::from_secs(5));
        assert!(d.to_string().contains("chrony-max-radius = \"5s\""));
        let l = Layer::from_toml("[sync]\nchrony-max-radius = \"1500ms\"\n", p).unwrap();
        let s = Settings::resolve(&l, &Layer::default());
        assert_eq!(s.chrony_max_radius, Duration::from_millis(1500));
        let again = Layer::from_toml(&s.to_string(), p).unwrap();
        assert_eq!(Settings::resolve(&again, &Layer::default()), s);
        for bad in ["0s", "2h", "x"] {
            let e = Layer::from_toml(&format!("[sync]\nchrony-max-radius = \"{bad}\"\n"), p)
                .unwrap_err();
            assert!(e.0.contains("[sync] chrony-max-radius"), "{e}");
        }
        assert_eq!(parse_chrony_max_radius("1ms"), Ok(Duration::from_millis(1)));
        assert_eq!(parse_chrony_max_radius("1h"), Ok(Duration::from_secs(3600)));
    }
}
