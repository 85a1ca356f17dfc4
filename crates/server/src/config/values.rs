//! Range-checked value types. Each has a private field and a constructor
//! that refuses out-of-range input, so a value that exists is valid.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use gnomon_protocol::{LongTermKey, ProfileSet, PROFILES};

/// An integer setting with inclusive bounds.
macro_rules! bounded_int {
    ($(#[$doc:meta])* $name:ident($t:ty), $min:expr, $max:expr, $default:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name($t);

        // A zero MIN makes one comparison trivially true for unsigned types.
        #[allow(unused_comparisons)]
        const _: () = assert!($min <= $default && $default <= $max);

        impl $name {
            /// Smallest accepted value.
            pub const MIN: $t = $min;
            /// Largest accepted value.
            pub const MAX: $t = $max;
            /// The default.
            pub const DEFAULT: $name = $name($default);

            /// `v` if it is in `MIN..=MAX`.
            #[allow(unused_comparisons)]
            pub const fn new(v: $t) -> Option<$name> {
                if v >= $min && v <= $max {
                    Some($name(v))
                } else {
                    None
                }
            }

            /// The value.
            pub const fn get(self) -> $t {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

/// A duration setting with inclusive bounds.
macro_rules! bounded_duration {
    ($(#[$doc:meta])* $name:ident, $min:expr, $max:expr, $default:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(Duration);

        const _: () = assert!(
            $min.as_nanos() <= $default.as_nanos() && $default.as_nanos() <= $max.as_nanos()
        );

        impl $name {
            /// Shortest accepted value.
            pub const MIN: Duration = $min;
            /// Longest accepted value.
            pub const MAX: Duration = $max;
            /// The default.
            pub const DEFAULT: $name = $name($default);

            /// `d` if it is in `MIN..=MAX`.
            pub const fn new(d: Duration) -> Option<$name> {
                if d.as_nanos() >= $min.as_nanos() && d.as_nanos() <= $max.as_nanos() {
                    Some($name(d))
                } else {
                    None
                }
            }

            /// The value.
            pub const fn get(self) -> Duration {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt_duration(self.0, f)
            }
        }
    };
}

/// Worker threads, each with its own socket per listen address, `1..=256`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Workers(u16);

impl Workers {
    /// Smallest accepted value.
    pub const MIN: u16 = 1;
    /// Largest accepted value.
    pub const MAX: u16 = 256;

    /// `n` if it is in `MIN..=MAX`.
    pub const fn new(n: u16) -> Option<Workers> {
        if n >= Self::MIN && n <= Self::MAX {
            Some(Workers(n))
        } else {
            None
        }
    }

    /// The value.
    pub const fn get(self) -> u16 {
        self.0
    }

    /// One worker per available core, as far as the range allows: the
    /// default.
    pub fn available() -> Workers {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        Workers(n.clamp(usize::from(Self::MIN), usize::from(Self::MAX)) as u16)
    }
}

impl fmt::Display for Workers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

bounded_int!(
    /// Most requests read, signed and answered at once. The engine further
    /// caps a batch by the PATH room each request leaves (the amplification rule).
    BatchSize(u16), 1, 1024, 64
);

bounded_int!(
    /// Kernel receive buffer per socket, bytes. The kernel may cap it at
    /// `net.core.rmem_max` unless the server may force it.
    RecvBuffer(u32), 65_536, 1 << 30, 4 << 20
);

bounded_int!(
    /// Smallest request datagram answered, bytes. Below 1024 the server
    /// answers clients that pad less (roughtimed-era test clients send 844);
    /// above 1024 it would drop every known client, so that is the ceiling.
    MinRequestSize(u16), 256, 1024, 1024
);

bounded_int!(
    /// Online key rotation jitter, percent of the rotation period. Spreads
    /// rotations of a fleet started together.
    Jitter(u8), 0, 50, 10
);

bounded_duration!(
    /// A request that waited in the socket longer than this (kernel receive
    /// timestamp to the batch's clock read) is dropped unanswered: its client
    /// has likely given up, and fresh requests deserve the CPU.
    QueueDelay,
    Duration::from_millis(1),
    Duration::from_secs(60),
    Duration::from_millis(500)
);

bounded_duration!(
    /// How long a worker holding less than a full batch waits for more
    /// requests, counted from the oldest one's arrival, before it signs. A
    /// signature costs as much as about fifteen 1 KiB leaves, so at moderate
    /// load a short wait saves most of the CPU per request; under heavy
    /// load receives come back full and nothing waits. 0 turns it off.
    BatchWait,
    Duration::ZERO,
    Duration::from_millis(10),
    // The largest wait that leaves room for a 200 µs p99 at half the
    // capacity (docs/COST.md, "Latency and batch-wait").
    Duration::from_micros(50)
);

bounded_duration!(
    /// An uncertainty radius. The upper bound keeps every version's RADI
    /// encoding (µs in a `u32` for the drafts) in range.
    Radius,
    Duration::from_secs(1),
    Duration::from_secs(3600),
    Duration::from_secs(3)
);

impl Radius {
    /// The radius in µs, as `BatchContext::radius_us` takes it.
    pub const fn micros(self) -> u32 {
        // MAX is 3.6e9 µs, below u32::MAX.
        self.0.as_micros() as u32
    }
}

bounded_duration!(
    /// Validity of each online key's delegation (MAXT − MINT).
    KeyValidity,
    Duration::from_secs(600),
    Duration::from_secs(30 * 86_400),
    Duration::from_secs(24 * 3600)
);

bounded_duration!(
    /// How often a new online key is minted.
    RotateEvery,
    Duration::from_secs(60),
    Duration::from_secs(30 * 86_400),
    Duration::from_secs(12 * 3600)
);

/// Listen addresses: at least one, no duplicates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listen(Vec<SocketAddr>);

impl Listen {
    /// `addrs` if it is non-empty and has no duplicates.
    pub fn new(addrs: Vec<SocketAddr>) -> Option<Listen> {
        let distinct = addrs
            .iter()
            .enumerate()
            .all(|(i, a)| !addrs[..i].contains(a));
        (!addrs.is_empty() && distinct).then_some(Listen(addrs))
    }

    /// The addresses, in configured order.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.0
    }
}

impl Default for Listen {
    fn default() -> Self {
        Listen(vec![SocketAddr::from(([127, 0, 0, 1], 5319))])
    }
}

/// The profiles answered: a non-empty set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Versions(ProfileSet);

impl Versions {
    /// `set` unless it is empty.
    pub fn new(set: ProfileSet) -> Option<Versions> {
        (set.0 & ProfileSet::ALL.0 != 0).then_some(Versions(ProfileSet(set.0 & ProfileSet::ALL.0)))
    }

    /// The set, for `Acceptor::profiles`.
    pub fn profiles(self) -> ProfileSet {
        self.0
    }

    /// Whether every profile is answered.
    pub fn is_all(self) -> bool {
        self.0 == ProfileSet::ALL
    }
}

impl Default for Versions {
    fn default() -> Self {
        Versions(ProfileSet::ALL)
    }
}

impl fmt::Display for Versions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_all() {
            return f.write_str("all");
        }
        let names: Vec<&str> = PROFILES
            .iter()
            .filter(|p| self.0.contains(p.id))
            .map(|p| p.name)
            .collect();
        f.write_str(&names.join(", "))
    }
}

/// Fraction of responses deliberately broken (RFC 10049 §7), `0.0..=0.5`.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct Grease(f64);

impl Grease {
    /// Largest accepted fraction: more would break most answers.
    pub const MAX: f64 = 0.5;

    /// `f` if it is a number in `0.0..=0.5`.
    pub fn new(f: f64) -> Option<Grease> {
        (0.0..=Self::MAX).contains(&f).then_some(Grease(f))
    }

    /// The fraction.
    pub fn get(self) -> f64 {
        self.0
    }
}

/// What to do while the kernel says the clock is unsynchronized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnsyncPolicy {
    /// Drop every request: no answer is better than a wrong one.
    Refuse,
    /// Answer, advertising this radius (never below the floor).
    AnswerWithRadius(Radius),
}

impl UnsyncPolicy {
    /// The radius used when answering while unsynchronized.
    pub const DEFAULT_RADIUS: Radius = match Radius::new(Duration::from_secs(60)) {
        Some(r) => r,
        None => panic!("60 s is a valid radius"),
    };

    /// The radius to advertise while unsynchronized, µs; `None` refuses.
    /// This is `EngineConfig::unsynchronized_radius_us`.
    pub fn radius_us(self) -> Option<u64> {
        match self {
            UnsyncPolicy::Refuse => None,
            UnsyncPolicy::AnswerWithRadius(r) => Some(u64::from(r.micros())),
        }
    }
}

impl Default for UnsyncPolicy {
    /// Answer with 60 s: the default of the ephemeral quick-start. Many
    /// hosts (containers, CI machines, laptops without an NTP daemon)
    /// report unsynchronized clocks; refusing there would make a bare
    /// `gnomon serve` silent. With a configured key the default is
    /// `Refuse` (decided when the configuration is built).
    fn default() -> Self {
        UnsyncPolicy::AnswerWithRadius(Self::DEFAULT_RADIUS)
    }
}

/// Radius settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockConfig {
    /// Smallest radius advertised; the kernel's estimate is used when larger.
    pub radius_floor: Radius,
    /// Policy while the kernel clock is unsynchronized.
    pub unsynchronized: UnsyncPolicy,
}

impl Default for ClockConfig {
    fn default() -> Self {
        ClockConfig {
            radius_floor: Radius::DEFAULT,
            unsynchronized: UnsyncPolicy::default(),
        }
    }
}

/// Online key lifetime: validity, rotation period and jitter, such that a
/// rotation delayed by the full jitter still happens before the current
/// delegation expires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rotation {
    validity: KeyValidity,
    rotate_every: RotateEvery,
    jitter: Jitter,
}

impl Rotation {
    /// The three settings, if the longest jittered rotation period
    /// (`rotate_every × (1 + jitter)`) is shorter than `validity`.
    pub fn new(validity: KeyValidity, rotate_every: RotateEvery, jitter: Jitter) -> Option<Self> {
        let longest = rotate_every.get().as_nanos() * (100 + u128::from(jitter.get())) / 100;
        (longest < validity.get().as_nanos()).then_some(Rotation {
            validity,
            rotate_every,
            jitter,
        })
    }

    /// Validity of each delegation.
    pub fn validity(&self) -> Duration {
        self.validity.get()
    }

    /// Mean time between rotations.
    pub fn rotate_every(&self) -> Duration {
        self.rotate_every.get()
    }

    /// Jitter, percent of `rotate_every` (rotation happens uniformly within
    /// `rotate_every × (1 ± jitter/100)`).
    pub fn jitter_percent(&self) -> u8 {
        self.jitter.get()
    }
}

impl Default for Rotation {
    fn default() -> Self {
        Rotation {
            validity: KeyValidity::DEFAULT,
            rotate_every: RotateEvery::DEFAULT,
            jitter: Jitter::DEFAULT,
        }
    }
}

/// Log line format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Least severe level logged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// Errors only.
    Error,
    /// Warnings and errors.
    Warn,
    /// The default.
    #[default]
    Info,
    /// Debugging detail.
    Debug,
    /// Everything.
    Trace,
}

impl LogFormat {
    pub(crate) const NAMES: [(&'static str, LogFormat); 2] =
        [("text", LogFormat::Text), ("json", LogFormat::Json)];
}

impl LogLevel {
    pub(crate) const NAMES: [(&'static str, LogLevel); 5] = [
        ("error", LogLevel::Error),
        ("warn", LogLevel::Warn),
        ("info", LogLevel::Info),
        ("debug", LogLevel::Debug),
        ("trace", LogLevel::Trace),
    ];

    /// The level's name, as `tracing` spells it in lower case.
    pub fn name(self) -> &'static str {
        LogLevel::NAMES
            .iter()
            .find(|(_, l)| *l == self)
            .map_or("info", |(n, _)| n)
    }
}

impl LogFormat {
    /// The format's name.
    pub fn name(self) -> &'static str {
        LogFormat::NAMES
            .iter()
            .find(|(_, l)| *l == self)
            .map_or("text", |(n, _)| n)
    }
}

/// Logging.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogConfig {
    /// Line format.
    pub format: LogFormat,
    /// Level.
    pub level: LogLevel,
}

/// Where one long-term identity's keys come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdentitySource {
    /// A long-term key file ([`crate::keyfile`]); the server mints and
    /// rotates online keys itself.
    KeyFile(PathBuf),
    /// A directory of offline delegations ([`crate::offline`]); the
    /// long-term key stays elsewhere. With a public key, the directory's
    /// files must be signed by that key (`offline-public-key`, of either
    /// scheme), so a directory swapped for another identity's is refused
    /// at load.
    OfflineDir(PathBuf, Option<LongTermKey>),
}

/// Parse a duration written as an integer and a unit: `ms`, `s`, `m`, `h`
/// or `d` (`"500ms"`, `"3s"`, `"12h"`, `"7d"`). `None` for anything else,
/// including overflow.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (digits, unit) = text.split_at(split);
    if digits.is_empty() {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    let nanos_per: u64 = match unit {
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        _ => return None,
    };
    n.checked_mul(nanos_per).map(Duration::from_nanos)
}

/// Write a duration in the largest unit [`parse_duration`] reads that
/// divides it exactly, so that printing and parsing round-trip.
pub(crate) fn fmt_duration(d: Duration, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let us = d.as_micros();
    for (unit, per) in [
        ("d", 86_400_000_000),
        ("h", 3_600_000_000),
        ("m", 60_000_000),
        ("s", 1_000_000),
        ("ms", 1_000),
    ] {
        if us != 0 && us.is_multiple_of(per) {
            return write!(f, "{}{unit}", us / per);
        }
    }
    if us == 0 {
        return write!(f, "0ms");
    }
    write!(f, "{us}us")
}

/// A duration displayed as [`parse_duration`] reads it.
pub(crate) struct DurationText(pub(crate) Duration);

impl fmt::Display for DurationText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_duration(self.0, f)
    }
}
