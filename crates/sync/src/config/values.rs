//! The values of the keys: one parser each, range-checked, shared by the
//! flags, the `GNOMON_SYNC_*` variables and the file, and the types they
//! give.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::KEYS;

/// What `key` accepts, in words (its row of [`KEYS`]).
fn accepts(key: &str) -> &'static str {
    KEYS.iter()
        .find(|k| k.0 == key)
        .map_or("a valid value", |k| k.1)
}

/// `now-socket` as given: a path, or off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NowSocket(pub Option<PathBuf>);

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
        accepts("interval"),
    )
}

/// `jitter`: 0..=50 percent.
pub fn parse_jitter(s: &str) -> Result<u8, String> {
    int_in(s, 0, 50, accepts("jitter")).map(|v| v as u8)
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
    pub(super) fn text(&self) -> String {
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
    int_in(s, 0, 21, accepts("max-liars")).map(|v| MaxLiars(Some(v as usize)))
}

/// `max-radius`: 1 ms to a day.
pub fn parse_max_radius(s: &str) -> Result<Duration, String> {
    duration_in(
        s,
        Duration::from_millis(1),
        Duration::from_secs(86_400),
        accepts("max-radius"),
    )
}

/// `max-offset`: 0 to a day.
pub fn parse_max_offset(s: &str) -> Result<Duration, String> {
    duration_in(
        s,
        Duration::ZERO,
        Duration::from_secs(86_400),
        accepts("max-offset"),
    )
}

/// `timeout`: 10 ms to a minute.
pub fn parse_timeout(s: &str) -> Result<Duration, String> {
    duration_in(
        s,
        Duration::from_millis(10),
        Duration::from_secs(60),
        accepts("timeout"),
    )
}

/// `retries`: 1..=20.
pub fn parse_retries(s: &str) -> Result<u32, String> {
    int_in(s, 1, 20, accepts("retries")).map(|v| v as u32)
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
        return Err(format!("`{s}` is not {}", accepts("chrony-sock")));
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
        accepts("chrony-max-radius"),
    )
}

/// `servers-url`: an https:// or http:// URL. Plain HTTP is allowed only
/// with `servers-key` ([`plain_http_refused`], checked once every key is
/// known): a list fetched in the clear and not signed could be replaced by
/// anyone on the path, and with it the keys sync trusts.
pub fn parse_servers_url(s: &str) -> Result<String, String> {
    if is_http(s) && s.len() > "http://".len() {
        return Ok(s.to_string());
    }
    parse_report_url(s).map_err(|_| format!("`{s}` is neither an https:// nor an http:// URL"))
}

/// Whether `url` is plain HTTP.
pub(crate) fn is_http(url: &str) -> bool {
    url.get(..7)
        .is_some_and(|p| p.eq_ignore_ascii_case("http://"))
}

/// The error for a plain-HTTP `url` given without `servers-key`; `key`
/// names where it was given (`--servers-url`, `[sync] servers-url`).
pub fn plain_http_refused(url: &str, key: &str) -> String {
    format!(
        "{key} `{url}` is plain HTTP: a server list names the keys sync trusts, and anyone on \
         the path could replace an unsigned one; use an https:// URL, or pin the monitor's key \
         with servers-key (its signature then protects the list)"
    )
}

/// `servers-key` as given: an OpenSSH public key line, or a path (read
/// when the service starts). A value that starts with a key type is
/// parsed now, so a mistyped key is an error where it was written.
pub fn parse_servers_key(s: &str) -> Result<String, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err(
            "an empty key: give the monitor's public key line (\"ssh-ed25519 AAAA… comment\") \
             or the path of its .pub file"
                .into(),
        );
    }
    if super::keys::looks_like_key(t) {
        gnomon_protocol::signed_list::MonitorKey::parse(t).map_err(|e| e.to_string())?;
    }
    Ok(t.to_string())
}

/// `servers-threshold`: 1..=64 here; at most the number of keys is
/// checked once they are all known ([`pins`](super::keys::pins)).
pub fn parse_threshold(s: &str) -> Result<usize, String> {
    int_in(
        s,
        1,
        64,
        "an integer in 1..=64 (at most the number of servers-key)",
    )
    .map(|v| v as usize)
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

/// `metrics` as given: an address, or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metrics(pub Option<SocketAddr>);

/// Whether `s` says "none here" the way every address of gnomon's does
/// (serve's `metrics`, sync's `now-socket`).
fn is_off(s: &str) -> bool {
    s.trim().eq_ignore_ascii_case("off")
}

/// `metrics`: `127.0.0.1:9102`, `[::1]:9102`, or `off`.
pub fn parse_metrics(s: &str) -> Result<Metrics, String> {
    if is_off(s) {
        return Ok(Metrics(None));
    }
    s.trim()
        .parse()
        .map(|a| Metrics(Some(a)))
        .map_err(|_| format!("`{s}` is neither a socket address (like 127.0.0.1:9102) nor `off`"))
}

/// `now-socket`: a path that fits a Unix socket address, or `off`.
pub fn parse_now_socket(s: &str) -> Result<NowSocket, String> {
    if is_off(s) {
        return Ok(NowSocket(None));
    }
    if s.is_empty() || s.len() > 107 || s.contains('\0') {
        return Err(format!("`{s}` is not {}", accepts("now-socket")));
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
        Err(format!("`{s}` is not {}", accepts("now-socket-group")))
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
        _ => Err(format!("`{s}` is not {}", accepts("now-socket-mode"))),
    }
}

/// `now-drift-ppm`: 1..=100000.
pub fn parse_drift_ppm(s: &str) -> Result<u32, String> {
    int_in(s, 1, 100_000, accepts("now-drift-ppm")).map(|v| v as u32)
}
