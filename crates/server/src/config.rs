//! The server's configuration, parsed once into typed values.
//!
//! ```text
//!  defaults ◀── file (TOML, --config) ◀── GNOMON_* environment ◀── flags
//!      └──────────────┬──────────────────────────┘
//!              Config::load ──▶ Config (every value range-checked) or ConfigError
//! ```
//!
//! Later sources win, key by key (a list given by a flag replaces the
//! file's list). Every key is in [`KEYS`] with its flag, environment
//! variable, accepted values and default; `deploy/gnomon.toml` shows them
//! all. The file is TOML with kebab-case keys and four tables (`[clock]`,
//! `[online-key]`, `[tcp]`, `[log]`); an unknown key is an error, and so is
//! a value outside what its key accepts: the message names the key, where
//! the value came from (file and line, variable or flag) and the accepted
//! range. Relative paths in the file are relative to the file's directory.
//!
//! The result holds only valid values: each field's type refuses
//! out-of-range input at construction (`BatchSize::new(0)` is `None`), and
//! the rules between keys (rotation shorter than validity, unsynchronized
//! radius at least the floor) are checked here, once.
//!
//! Durations are written as an integer and a unit: `500ms`, `3s`, `5m`,
//! `12h`, `7d`.

mod diff;
mod error;
mod keys;
mod layers;
#[cfg(test)]
mod tests;
#[macro_use]
mod values;
mod limit;
mod tcp;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gnomon_protocol::{LongTermKey, Profile, ProfileSet};

pub use diff::RESTART_ONLY;
pub use error::{ConfigError, Origin};
pub use keys::{lookup, KeySpec, Kind, KEYS};
pub use layers::Overrides;
pub use limit::{
    Burst, Ipv4Prefix, Ipv6Prefix, LimitSettings, NetList, Rate, SignatureBurst, SignatureShare,
    TableSize, MAX_LIST,
};
pub use tcp::{
    IdleTimeout, MaxConnections, MaxFrame, MaxLifetime, MaxPerNetwork, MaxPerSource, MaxRequests,
    ReadTimeout, SourcePrefixV4, SourcePrefixV6, TcpConfig, WriteTimeout,
};
pub use values::{
    parse_duration, BatchSize, BatchWait, ClockConfig, Grease, IdentitySource, Jitter, KeyValidity,
    Listen, LogConfig, LogFormat, LogLevel, MinRequestSize, QueueDelay, Radius, RecvBuffer,
    RotateEvery, Rotation, UnsyncPolicy, Versions, Workers,
};

use layers::{file_settings, Setting};
use values::DurationText;

/// Everything `gnomon serve` is told, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `listen`: addresses served, UDP and TCP. Default `127.0.0.1:5319`.
    pub listen: Listen,
    /// `workers`: worker threads, 1..=256. Default: available cores.
    pub workers: Workers,
    /// `batch-size`: most requests per batch, 1..=1024. Default 64.
    pub batch_size: BatchSize,
    /// `recv-buffer`: kernel receive buffer per socket, 64 KiB..=1 GiB.
    /// Default 4 MiB.
    pub recv_buffer: RecvBuffer,
    /// `max-queue-delay`: drop requests older than this, 1ms..=60s.
    /// Default 500 ms.
    pub max_queue_delay: QueueDelay,
    /// `batch-wait`: wait this long for a fuller batch, 0..=10ms. Default
    /// 50 µs.
    pub batch_wait: BatchWait,
    /// `versions`: profiles answered. Default all.
    pub versions: Versions,
    /// `batch-disputed`: batch the versions whose Merkle orientation is
    /// disputed (the tree orientation the drafts and deployments disagree on). Default false.
    pub batch_disputed: bool,
    /// `google-nonce`: top-level NONC in Google responses. Default false.
    pub google_nonce: bool,
    /// `min-request-size`: smallest datagram answered, 256..=1024.
    /// Default 1024.
    pub min_request_size: MinRequestSize,
    /// `key-file` then `offline-dir`: the long-term identities, in order;
    /// the first of each signature scheme answers requests without SRV. Empty: an ephemeral key.
    pub identities: Vec<IdentitySource>,
    /// `metrics`: Prometheus and health endpoint. Default none.
    pub metrics: Option<SocketAddr>,
    /// `xdp`: the interface whose UDP for the listen addresses is served
    /// through AF_XDP. Default none: sockets only.
    pub xdp: Option<String>,
    /// `grease`: fraction of deliberately broken responses, 0..=0.5.
    /// Default 0.
    pub grease: Grease,
    /// `[clock]`: radius floor and unsynchronized-clock policy.
    pub clock: ClockConfig,
    /// `[online-key]`: validity, rotation period and jitter.
    pub online_key: Rotation,
    /// `[tcp]`: the TCP transport.
    pub tcp: TcpConfig,
    /// `[log]`: format and level.
    pub log: LogConfig,
    /// `[limit]`: deny and allow lists, rate per source prefix, signature
    /// budget.
    pub limit: LimitSettings,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: Listen::default(),
            workers: Workers::available(),
            batch_size: BatchSize::DEFAULT,
            recv_buffer: RecvBuffer::DEFAULT,
            max_queue_delay: QueueDelay::DEFAULT,
            batch_wait: BatchWait::DEFAULT,
            versions: Versions::default(),
            batch_disputed: false,
            google_nonce: false,
            min_request_size: MinRequestSize::DEFAULT,
            identities: Vec::new(),
            metrics: None,
            xdp: None,
            grease: Grease::default(),
            clock: ClockConfig::default(),
            online_key: Rotation::default(),
            tcp: TcpConfig::default(),
            log: LogConfig::default(),
            limit: LimitSettings::default(),
        }
    }
}

impl Config {
    /// Defaults, then `file` if given, then `overrides` (environment and
    /// flags, as the CLI collected them). This is the one way `serve` gets
    /// its configuration.
    pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
        let mut settings = Vec::new();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
                path: path.to_owned(),
                error,
            })?;
            settings = file_settings(&text, path)?;
        }
        settings.extend(overrides.settings.iter().cloned());
        build(&settings)
    }

    /// As [`Config::load`], from a file's text; `path` names it in messages
    /// and anchors its relative paths.
    pub fn from_toml(
        text: &str,
        path: &Path,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        let mut settings = file_settings(text, path)?;
        settings.extend(overrides.settings.iter().cloned());
        build(&settings)
    }

    /// Whether no long-term key is configured: `serve` then makes an
    /// ephemeral one and must warn that it is not for production.
    pub fn ephemeral_key(&self) -> bool {
        self.identities.is_empty()
    }

    /// The profiles answered, for `Acceptor::profiles`: those configured.
    /// Identities may be of either scheme; the workers narrow each batch
    /// to the profiles some identity held can sign (`KeyEpoch::profiles`),
    /// and UDP to those that go over UDP (docs/PQ.md).
    pub fn profiles(&self) -> ProfileSet {
        self.versions.profiles()
    }
}

/// What the unsynchronized policy key says, before its radius is attached.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PolicyName {
    Refuse,
    Answer,
}

fn build(settings: &[Setting]) -> Result<Config, ConfigError> {
    let mut c = Config::default();
    let mut policy = (PolicyName::Answer, None);
    let mut unsync_radius: (Radius, Option<Origin>) = (UnsyncPolicy::DEFAULT_RADIUS, None);
    let mut validity = (KeyValidity::DEFAULT, None);
    let mut rotate = (RotateEvery::DEFAULT, None);
    let mut jitter = Jitter::DEFAULT;
    let mut key_files = Vec::new();
    let mut offline_dirs = (Vec::new(), None);
    let mut offline_keys = (Vec::new(), None);
    let mut floor_origin = None;

    for spec in KEYS {
        // The last setting of a key wins: file, then environment, then flags.
        let Some(s) = settings.iter().rev().find(|s| s.spec.key == spec.key) else {
            continue;
        };
        let origin = Some(s.origin.clone());
        match spec.key {
            "listen" => {
                let mut addrs = Vec::new();
                for item in s.raw.strings().ok_or_else(|| invalid(s))? {
                    addrs.push(item.parse().map_err(|_| invalid_item(s, item))?);
                }
                c.listen = Listen::new(addrs).ok_or_else(|| invalid(s))?;
            }
            "workers" => c.workers = int(s, Workers::new)?,
            "batch-size" => c.batch_size = int(s, BatchSize::new)?,
            "recv-buffer" => c.recv_buffer = int(s, RecvBuffer::new)?,
            "max-queue-delay" => c.max_queue_delay = duration(s, QueueDelay::new)?,
            "batch-wait" => c.batch_wait = duration(s, BatchWait::new)?,
            "versions" => c.versions = versions(s)?,
            "batch-disputed" => c.batch_disputed = s.raw.boolean().ok_or_else(|| invalid(s))?,
            "google-nonce" => c.google_nonce = s.raw.boolean().ok_or_else(|| invalid(s))?,
            "min-request-size" => c.min_request_size = int(s, MinRequestSize::new)?,
            "key-file" => key_files = paths(s, IdentitySource::KeyFile)?,
            "offline-dir" => {
                offline_dirs = (paths(s, |p| IdentitySource::OfflineDir(p, None))?, origin)
            }
            "offline-public-key" => offline_keys = (public_keys(s)?, origin),
            "metrics" => {
                let text = s.raw.string().ok_or_else(|| invalid(s))?;
                c.metrics = match text {
                    "off" => None,
                    addr => Some(addr.parse().map_err(|_| invalid(s))?),
                };
            }
            "xdp" => {
                let text = s.raw.string().ok_or_else(|| invalid(s))?;
                c.xdp = match text {
                    "off" => None,
                    name if valid_interface(name) => Some(name.to_owned()),
                    _ => return Err(invalid(s)),
                };
            }
            "grease" => {
                c.grease = s
                    .raw
                    .float()
                    .and_then(Grease::new)
                    .ok_or_else(|| invalid(s))?
            }
            "clock.radius-floor" => {
                c.clock.radius_floor = duration(s, Radius::new)?;
                floor_origin = origin;
            }
            "clock.unsynchronized" => {
                let name = match s.raw.string() {
                    Some("refuse") => PolicyName::Refuse,
                    Some("answer-with-radius") => PolicyName::Answer,
                    _ => return Err(invalid(s)),
                };
                policy = (name, origin);
            }
            "clock.unsynchronized-radius" => unsync_radius = (duration(s, Radius::new)?, origin),
            "online-key.validity" => validity = (duration(s, KeyValidity::new)?, origin),
            "online-key.rotate-every" => rotate = (duration(s, RotateEvery::new)?, origin),
            "online-key.jitter" => jitter = int(s, Jitter::new)?,
            "tcp.enable" => c.tcp.enable = s.raw.boolean().ok_or_else(|| invalid(s))?,
            "tcp.max-connections" => c.tcp.max_connections = int(s, MaxConnections::new)?,
            "tcp.idle-timeout" => c.tcp.idle_timeout = duration(s, IdleTimeout::new)?,
            "tcp.read-timeout" => c.tcp.read_timeout = duration(s, ReadTimeout::new)?,
            "tcp.write-timeout" => c.tcp.write_timeout = duration(s, WriteTimeout::new)?,
            "tcp.max-frame" => c.tcp.max_frame = int(s, MaxFrame::new)?,
            "tcp.max-lifetime" => c.tcp.max_lifetime = duration(s, MaxLifetime::new)?,
            "tcp.max-requests" => c.tcp.max_requests = int(s, MaxRequests::new)?,
            "tcp.max-per-source" => c.tcp.max_per_source = int(s, MaxPerSource::new)?,
            "tcp.max-per-network" => c.tcp.max_per_network = int(s, MaxPerNetwork::new)?,
            "tcp.source-prefix-v4" => c.tcp.source_prefix_v4 = int(s, SourcePrefixV4::new)?,
            "tcp.source-prefix-v6" => c.tcp.source_prefix_v6 = int(s, SourcePrefixV6::new)?,
            "log.format" => c.log.format = named(s, &LogFormat::NAMES)?,
            "log.level" => c.log.level = named(s, &LogLevel::NAMES)?,
            "limit.rate" => c.limit.rate = int(s, Rate::new)?,
            "limit.burst" => c.limit.burst = int(s, Burst::new)?,
            "limit.ipv4-prefix" => c.limit.ipv4_prefix = int(s, Ipv4Prefix::new)?,
            "limit.ipv6-prefix" => c.limit.ipv6_prefix = int(s, Ipv6Prefix::new)?,
            "limit.table-size" => c.limit.table_size = int(s, TableSize::new)?,
            "limit.allow" => c.limit.allow = nets(s)?,
            "limit.deny" => c.limit.deny = nets(s)?,
            "limit.signature-share" => {
                c.limit.signature_share = s
                    .raw
                    .float()
                    .and_then(SignatureShare::new)
                    .ok_or_else(|| invalid(s))?
            }
            "limit.signature-burst" => c.limit.signature_burst = duration(s, SignatureBurst::new)?,
            _ => {
                return Err(ConfigError::UnknownKey {
                    name: spec.key.to_owned(),
                })
            }
        }
    }

    c.identities = key_files;
    if !offline_keys.0.is_empty() && offline_keys.0.len() != offline_dirs.0.len() {
        return Err(ConfigError::Conflict {
            first: ("offline-public-key", offline_keys.1),
            second: ("offline-dir", offline_dirs.1),
            rule: "give one public key per offline-dir entry, in the same order (or none)",
        });
    }
    let mut pins = offline_keys.0.into_iter();
    c.identities.extend(
        offline_dirs
            .0
            .into_iter()
            .map(|id| match (id, pins.next()) {
                (IdentitySource::OfflineDir(dir, _), pin) => IdentitySource::OfflineDir(dir, pin),
                (other, _) => other,
            }),
    );

    // Unset, the policy depends on the key: a configured key is a real
    // server, which must not sign times nobody vouches for; the ephemeral
    // quick-start answers (with a large radius and a warning) so that a
    // bare `gnomon serve` works on hosts without NTP.
    if policy.1.is_none() && !c.identities.is_empty() {
        policy.0 = PolicyName::Refuse;
        if unsync_radius.1.is_some() {
            return Err(ConfigError::Conflict {
                first: ("clock.unsynchronized-radius", unsync_radius.1),
                second: ("clock.unsynchronized", None),
                rule: "with a configured key the policy defaults to \"refuse\", which uses no \
                       radius; set clock.unsynchronized = \"answer-with-radius\" to use it",
            });
        }
    }
    c.clock.unsynchronized = match policy.0 {
        PolicyName::Refuse if unsync_radius.1.is_some() => {
            return Err(ConfigError::Conflict {
                first: ("clock.unsynchronized", policy.1),
                second: ("clock.unsynchronized-radius", unsync_radius.1),
                rule: "a radius is only used with \"answer-with-radius\"; remove it or change the policy",
            });
        }
        PolicyName::Refuse => UnsyncPolicy::Refuse,
        PolicyName::Answer if unsync_radius.0 < c.clock.radius_floor => {
            return Err(ConfigError::Conflict {
                first: ("clock.unsynchronized-radius", unsync_radius.1),
                second: ("clock.radius-floor", floor_origin),
                rule: "the radius while unsynchronized must be at least the floor",
            });
        }
        PolicyName::Answer => UnsyncPolicy::AnswerWithRadius(unsync_radius.0),
    };

    c.online_key = Rotation::new(validity.0, rotate.0, jitter).ok_or(ConfigError::Conflict {
        first: ("online-key.validity", validity.1),
        second: ("online-key.rotate-every", rotate.1),
        rule: "validity must exceed rotate-every plus its jitter \
               (rotate-every × (100 + jitter) / 100), so that a late rotation \
               still comes before the current delegation expires",
    })?;
    Ok(c)
}

fn invalid(s: &Setting) -> ConfigError {
    invalid_shown(s, s.raw.shown())
}

fn invalid_item(s: &Setting, item: &str) -> ConfigError {
    invalid_shown(s, format!("{item:?}"))
}

fn invalid_shown(s: &Setting, value: String) -> ConfigError {
    ConfigError::Invalid {
        key: s.spec.key,
        origin: s.origin.clone(),
        value,
        expected: s.spec.expected,
    }
}

fn int<T: TryFrom<i64>, N>(s: &Setting, new: impl Fn(T) -> Option<N>) -> Result<N, ConfigError> {
    s.raw
        .integer()
        .and_then(|i| T::try_from(i).ok())
        .and_then(new)
        .ok_or_else(|| invalid(s))
}

fn duration<N>(s: &Setting, new: impl Fn(Duration) -> Option<N>) -> Result<N, ConfigError> {
    s.raw
        .string()
        .and_then(parse_duration)
        .and_then(new)
        .ok_or_else(|| invalid(s))
}

fn named<T: Copy>(s: &Setting, names: &[(&str, T)]) -> Result<T, ConfigError> {
    let text = s.raw.string().ok_or_else(|| invalid(s))?;
    names
        .iter()
        .find(|(n, _)| *n == text)
        .map(|(_, v)| *v)
        .ok_or_else(|| invalid(s))
}

fn versions(s: &Setting) -> Result<Versions, ConfigError> {
    let items = s.raw.strings().ok_or_else(|| invalid(s))?;
    let mut set = ProfileSet::empty();
    for item in items {
        if item.eq_ignore_ascii_case("all") {
            set = ProfileSet::ALL;
            continue;
        }
        let p = Profile::by_name(item).ok_or_else(|| invalid_item(s, item))?;
        set = set.with(p.id);
    }
    Versions::new(set).ok_or_else(|| invalid(s))
}

fn nets(s: &Setting) -> Result<NetList, ConfigError> {
    let items = s.raw.strings().ok_or_else(|| invalid(s))?;
    NetList::parse(&items).map_err(|shown| invalid_shown(s, shown))
}

/// A list of base64 Ed25519 public keys.
/// Base64 long-term public keys: 32 bytes for Ed25519, 1312 for
/// ML-DSA-44 (the scheme follows from the length).
fn public_keys(s: &Setting) -> Result<Vec<LongTermKey>, ConfigError> {
    use base64::Engine as _;
    let mut out = Vec::new();
    for item in s.raw.strings().ok_or_else(|| invalid(s))? {
        let key = base64::engine::general_purpose::STANDARD
            .decode(item.trim())
            .ok()
            .and_then(|b| LongTermKey::from_bytes(&b))
            .ok_or_else(|| invalid_item(s, item))?;
        out.push(key);
    }
    Ok(out)
}

fn paths(
    s: &Setting,
    make: fn(PathBuf) -> IdentitySource,
) -> Result<Vec<IdentitySource>, ConfigError> {
    let base = match &s.origin {
        Origin::File { path, .. } => path.parent().map(Path::to_owned),
        _ => None,
    };
    let mut out = Vec::new();
    for item in s.raw.strings().ok_or_else(|| invalid(s))? {
        if item.is_empty() {
            return Err(invalid_item(s, item));
        }
        let p = match &base {
            Some(dir) => dir.join(item),
            None => PathBuf::from(item),
        };
        out.push(make(p));
    }
    Ok(out)
}

/// The effective configuration as TOML that loads back to the same value.
/// Paths are printed as resolved: a relative path in the file was joined to
/// the file's directory, so the output is exact when loaded from the
/// working directory or when those paths are absolute.
impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quote = |s: &str| toml::Value::String(s.to_owned()).to_string();
        let list = |items: Vec<String>| {
            let quoted: Vec<String> = items.iter().map(|s| quote(s)).collect();
            format!("[{}]", quoted.join(", "))
        };
        let listen = self.listen.addrs().iter().map(|a| a.to_string()).collect();
        writeln!(f, "listen = {}", list(listen))?;
        writeln!(f, "workers = {}", self.workers)?;
        writeln!(f, "batch-size = {}", self.batch_size)?;
        writeln!(f, "recv-buffer = {}", self.recv_buffer)?;
        writeln!(f, "max-queue-delay = \"{}\"", self.max_queue_delay)?;
        writeln!(f, "batch-wait = \"{}\"", self.batch_wait)?;
        let versions: Vec<String> = if self.versions.is_all() {
            vec!["all".into()]
        } else {
            self.versions
                .profiles()
                .iter()
                .map(|p| p.name.into())
                .collect()
        };
        writeln!(f, "versions = {}", list(versions))?;
        writeln!(f, "batch-disputed = {}", self.batch_disputed)?;
        writeln!(f, "google-nonce = {}", self.google_nonce)?;
        writeln!(f, "min-request-size = {}", self.min_request_size)?;
        let (mut keys, mut dirs, mut pins) = (Vec::new(), Vec::new(), Vec::new());
        for id in &self.identities {
            match id {
                IdentitySource::KeyFile(p) => keys.push(p.display().to_string()),
                IdentitySource::OfflineDir(p, pin) => {
                    dirs.push(p.display().to_string());
                    pins.extend(pin.as_ref().map(|k| {
                        use base64::Engine as _;
                        base64::engine::general_purpose::STANDARD.encode(k.bytes())
                    }));
                }
            }
        }
        writeln!(f, "key-file = {}", list(keys))?;
        writeln!(f, "offline-dir = {}", list(dirs))?;
        writeln!(f, "offline-public-key = {}", list(pins))?;
        match self.metrics {
            Some(a) => writeln!(f, "metrics = \"{a}\"")?,
            None => writeln!(f, "metrics = \"off\"")?,
        }
        match &self.xdp {
            Some(i) => writeln!(f, "xdp = \"{i}\"")?,
            None => writeln!(f, "xdp = \"off\"")?,
        }
        writeln!(f, "grease = {:?}", self.grease.get())?;

        writeln!(f, "\n[clock]")?;
        writeln!(f, "radius-floor = \"{}\"", self.clock.radius_floor)?;
        match self.clock.unsynchronized {
            UnsyncPolicy::Refuse => writeln!(f, "unsynchronized = \"refuse\"")?,
            UnsyncPolicy::AnswerWithRadius(r) => {
                writeln!(f, "unsynchronized = \"answer-with-radius\"")?;
                writeln!(f, "unsynchronized-radius = \"{r}\"")?;
            }
        }

        writeln!(f, "\n[online-key]")?;
        let rot = &self.online_key;
        writeln!(f, "validity = \"{}\"", DurationText(rot.validity()))?;
        writeln!(f, "rotate-every = \"{}\"", DurationText(rot.rotate_every()))?;
        writeln!(f, "jitter = {}", rot.jitter_percent())?;

        writeln!(f, "\n[tcp]")?;
        writeln!(f, "enable = {}", self.tcp.enable)?;
        writeln!(f, "max-connections = {}", self.tcp.max_connections)?;
        writeln!(f, "idle-timeout = \"{}\"", self.tcp.idle_timeout)?;
        writeln!(f, "read-timeout = \"{}\"", self.tcp.read_timeout)?;
        writeln!(f, "write-timeout = \"{}\"", self.tcp.write_timeout)?;
        writeln!(f, "max-frame = {}", self.tcp.max_frame)?;
        writeln!(f, "max-lifetime = \"{}\"", self.tcp.max_lifetime)?;
        writeln!(f, "max-requests = {}", self.tcp.max_requests)?;
        writeln!(f, "max-per-source = {}", self.tcp.max_per_source)?;
        writeln!(f, "max-per-network = {}", self.tcp.max_per_network)?;
        writeln!(f, "source-prefix-v4 = {}", self.tcp.source_prefix_v4)?;
        writeln!(f, "source-prefix-v6 = {}", self.tcp.source_prefix_v6)?;

        writeln!(f, "\n[log]")?;
        writeln!(f, "format = \"{}\"", self.log.format.name())?;
        writeln!(f, "level = \"{}\"", self.log.level.name())?;

        self.limit.write_toml(f, list)
    }
}

/// A name the kernel could give an interface: 1 to 15 bytes (IFNAMSIZ
/// less the NUL), none of them '/', whitespace or ':' , and not "." or
/// "..". Also what keeps the name safe inside a metric label.
fn valid_interface(name: &str) -> bool {
    (1..16).contains(&name.len())
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'/' | b':' | b'"' | b'\\'))
}
