//! Server lists ("ecosystem" JSON of Google's protocol, and RFC 10049's server list JSON): the RFC form
//! with integer versions and the legacy forms with string versions.
//!
//! Only a document that is not a list at all fails to parse. Everything
//! wrong with one server (a key type we cannot use, a bad key, a version we
//! do not know, no usable address) makes that server [`Unusable`] and leaves
//! the rest of the list intact.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use base64::Engine;
use serde_json::{Map, Value};

use crate::profile::{Framing, Profile, ProfileSet, PROFILES};
use crate::report::B64;
use crate::scheme::{LongTermKey, Scheme};
use crate::version::Version;

/// Media type of a server list (drafts 16+).
pub const MEDIA_TYPE: &str = "application/roughtime-server+json";

/// A parsed server list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerList {
    /// Every server object, in list order, usable or not.
    pub servers: Vec<ListedServer>,
    /// HTTPS URLs the list may be refreshed from.
    pub sources: Vec<String>,
    /// HTTPS URL malfeasance reports are POSTed to.
    pub reports: Option<String>,
    /// URLs left out because they are not HTTPS (the drafts require it).
    pub ignored_urls: Vec<String>,
}

/// One entry of `servers`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedServer {
    /// Display name, if the entry has one.
    pub name: Option<String>,
    /// Who runs it (`"operator"`, an extension of gnomon's): entries of
    /// one operator count as one server when votes are counted.
    pub operator: Option<String>,
    /// The server, or why it cannot be used.
    pub status: Result<UsableServer, Unusable>,
}

/// A server a client can query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsableServer {
    /// The version as listed.
    pub version: ListedVersion,
    /// The long-term public key, of the scheme `publicKeyType` names.
    pub public_key: LongTermKey,
    /// How the key was written (hex is not allowed by the drafts).
    pub key_encoding: KeyEncoding,
    /// Addresses that parsed, in list order.
    pub addresses: Vec<Address>,
    /// Addresses that did not, with their index in the entry's list.
    pub skipped_addresses: Vec<(usize, AddressError)>,
}

/// The `version` of a list entry: the highest version the server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListedVersion {
    /// An integer (or a decimal/hex string of one) naming a known profile.
    Number(Version),
    /// `"Google-Roughtime"` (Cloudflare's lists).
    GoogleString,
    /// `"IETF-Roughtime"` (Cloudflare's lists): some draft, which one unsaid.
    IetfString,
}

impl ListedVersion {
    /// The profile the entry names, if it names exactly one. 0x8000000c
    /// maps to the TYPE-carrying row (drafts 14–19), what every deployed
    /// 0x8000000c server answers.
    pub fn profile(&self) -> Option<&'static Profile> {
        match self {
            ListedVersion::Number(v) if *v == Version::GOOGLE => Some(Profile::google()),
            ListedVersion::Number(v) => Profile::for_wire(*v, true),
            ListedVersion::GoogleString => Some(Profile::google()),
            ListedVersion::IetfString => None,
        }
    }

    /// Profiles worth offering this server: the named one, or every framed
    /// profile for `"IETF-Roughtime"`.
    pub fn candidates(&self) -> ProfileSet {
        match self.profile() {
            Some(p) => ProfileSet::empty().with(p.id),
            None => PROFILES
                .iter()
                .filter(|p| p.framing == Framing::Packet)
                .fold(ProfileSet::empty(), |s, p| s.with(p.id)),
        }
    }
}

/// How `publicKey` was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyEncoding {
    /// Base64, as the drafts require.
    Base64,
    /// Hex, two digits a byte (roughenough's `serverlist-localhost.json`).
    Hex,
}

/// Why a listed server cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unusable {
    /// The entry is not a JSON object.
    NotAnObject,
    /// A required key is absent.
    Missing(&'static str),
    /// A value has the wrong JSON type.
    WrongType(&'static str),
    /// `publicKeyType` names no scheme gnomon knows (neither `ed25519`
    /// nor `ml-dsa-44`).
    KeyType,
    /// `publicKey` is neither base64 nor hex.
    KeyEncoding,
    /// `publicKey` decodes to this many bytes, not the length of the
    /// scheme `publicKeyType` names.
    KeyLength(Scheme, usize),
    /// An integer version no profile speaks (0, 2, 0x8000000d, …).
    UnknownVersion(u32),
    /// A version string we do not recognise, or a number beyond u32.
    BadVersion,
    /// No address parsed; the first error, if there was an address at all.
    NoAddress(Option<AddressError>),
}

/// Transport of an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// UDP.
    Udp,
    /// TCP (drafts 08+).
    Tcp,
}

/// A server address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    /// UDP or TCP.
    pub transport: Transport,
    /// The host.
    pub host: Host,
    /// The port.
    pub port: u16,
}

/// The host part of an address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// Dotted-decimal IPv4.
    Ipv4([u8; 4]),
    /// Bracketed IPv6, in network order.
    Ipv6([u8; 16]),
    /// A DNS name (lower-cased, without a trailing dot).
    Name(String),
}

impl Host {
    /// Whether this is an IPv6 address.
    pub fn is_ipv6(&self) -> bool {
        matches!(self, Host::Ipv6(_))
    }
}

/// Why an address was skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AddressError {
    /// The address entry is not an object with string `protocol` and `address`.
    Shape,
    /// `protocol` is neither `udp` nor `tcp`.
    Protocol,
    /// No `:port` after the host.
    MissingPort,
    /// The port is not a decimal number in 0–65535.
    Port,
    /// The host is empty.
    EmptyHost,
    /// An IPv6 address without brackets (required from draft 15).
    UnbracketedIpv6,
    /// `[` without a matching `]`, or text between `]` and `:`.
    Brackets,
    /// Bracketed text that is not an IPv6 address.
    Ipv6,
    /// An IPv6 zone identifier (`%eth0`), which lists must not carry.
    ZoneId,
    /// Digits and dots that are not a dotted-decimal IPv4 address.
    Ipv4,
    /// Not a valid DNS name.
    Hostname,
}

/// Why a document is not a server list at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListError {
    /// Not JSON.
    Json {
        /// Line of the error.
        line: usize,
        /// Column of the error.
        column: usize,
    },
    /// The top level is not an object.
    NotAnObject,
    /// No `servers` key.
    NoServers,
    /// A top-level key has the wrong type (`servers`, `sources`, `reports`).
    WrongType(&'static str),
}

impl ServerList {
    /// Parse a server list in any known form.
    pub fn parse(json: &[u8]) -> Result<ServerList, ListError> {
        let doc: Value = serde_json::from_slice(json).map_err(|e| ListError::Json {
            line: e.line(),
            column: e.column(),
        })?;
        let top = doc.as_object().ok_or(ListError::NotAnObject)?;
        let servers = top
            .get("servers")
            .ok_or(ListError::NoServers)?
            .as_array()
            .ok_or(ListError::WrongType("servers"))?;
        let mut list = ServerList {
            servers: servers.iter().map(parse_server).collect(),
            sources: Vec::new(),
            reports: None,
            ignored_urls: Vec::new(),
        };
        if let Some(v) = top.get("sources") {
            let arr = v.as_array().ok_or(ListError::WrongType("sources"))?;
            for s in arr {
                let s = s.as_str().ok_or(ListError::WrongType("sources"))?;
                list.keep_https(s, |l, s| l.sources.push(s));
            }
        }
        if let Some(v) = top.get("reports") {
            let s = v.as_str().ok_or(ListError::WrongType("reports"))?;
            list.keep_https(s, |l, s| l.reports = Some(s));
        }
        Ok(list)
    }

    fn keep_https(&mut self, url: &str, put: impl FnOnce(&mut ServerList, String)) {
        let https = url
            .get(..8)
            .is_some_and(|p| p.eq_ignore_ascii_case("https://"));
        if https {
            put(self, url.to_string());
        } else {
            self.ignored_urls.push(url.to_string());
        }
    }

    /// The servers that can be used, with their names.
    pub fn usable(&self) -> impl Iterator<Item = (Option<&str>, &UsableServer)> {
        self.servers
            .iter()
            .filter_map(|s| s.status.as_ref().ok().map(|u| (s.name.as_deref(), u)))
    }
}

fn parse_server(v: &Value) -> ListedServer {
    let obj = v.as_object();
    ListedServer {
        name: obj
            .and_then(|o| o.get("name"))
            .and_then(Value::as_str)
            .map(String::from),
        operator: obj
            .and_then(|o| o.get("operator"))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from),
        status: obj.ok_or(Unusable::NotAnObject).and_then(usable_server),
    }
}

fn usable_server(obj: &Map<String, Value>) -> Result<UsableServer, Unusable> {
    let text = |k: &'static str| -> Result<&str, Unusable> {
        obj.get(k)
            .ok_or(Unusable::Missing(k))?
            .as_str()
            .ok_or(Unusable::WrongType(k))
    };
    let scheme = Scheme::by_name(text("publicKeyType")?).ok_or(Unusable::KeyType)?;
    let (public_key, key_encoding) = decode_key(text("publicKey")?, scheme)?;
    let version = parse_version(obj.get("version").ok_or(Unusable::Missing("version"))?)?;
    let list = obj
        .get("addresses")
        .ok_or(Unusable::Missing("addresses"))?
        .as_array()
        .ok_or(Unusable::WrongType("addresses"))?;
    let mut addresses = Vec::new();
    let mut skipped_addresses = Vec::new();
    for (i, a) in list.iter().enumerate() {
        match parse_address_entry(a) {
            Ok(addr) => addresses.push(addr),
            Err(e) => skipped_addresses.push((i, e)),
        }
    }
    if addresses.is_empty() {
        return Err(Unusable::NoAddress(skipped_addresses.first().map(|s| s.1)));
    }
    Ok(UsableServer {
        version,
        public_key,
        key_encoding,
        addresses,
        skipped_addresses,
    })
}

fn decode_key(s: &str, scheme: Scheme) -> Result<(LongTermKey, KeyEncoding), Unusable> {
    let n = scheme.public_len();
    let (bytes, encoding) = if s.len() == 2 * n && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        let bytes = s
            .as_bytes()
            .chunks_exact(2)
            .map(|pair| (hex_digit(pair[0]) << 4) | hex_digit(pair[1]))
            .collect::<Vec<u8>>();
        (bytes, KeyEncoding::Hex)
    } else {
        let bytes = B64.decode(s).map_err(|_| Unusable::KeyEncoding)?;
        (bytes, KeyEncoding::Base64)
    };
    match LongTermKey::from_bytes(&bytes) {
        Some(key) if key.scheme() == scheme => Ok((key, encoding)),
        _ => Err(Unusable::KeyLength(scheme, bytes.len())),
    }
}

fn hex_digit(b: u8) -> u8 {
    // Callers checked `is_ascii_hexdigit`, so the fallback is never taken.
    char::from(b).to_digit(16).unwrap_or(0) as u8
}

fn parse_version(v: &Value) -> Result<ListedVersion, Unusable> {
    let number = match v {
        Value::Number(n) => n.as_u64().ok_or(Unusable::BadVersion)?,
        Value::String(s) if s.eq_ignore_ascii_case("Google-Roughtime") => {
            return Ok(ListedVersion::GoogleString)
        }
        Value::String(s) if s.eq_ignore_ascii_case("IETF-Roughtime") => {
            return Ok(ListedVersion::IetfString)
        }
        Value::String(s) => parse_number(s).ok_or(Unusable::BadVersion)?,
        _ => return Err(Unusable::WrongType("version")),
    };
    let v = Version(u32::try_from(number).map_err(|_| Unusable::BadVersion)?);
    let listed = ListedVersion::Number(v);
    match listed.profile() {
        Some(_) => Ok(listed),
        None => Err(Unusable::UnknownVersion(v.0)),
    }
}

fn parse_number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

fn parse_address_entry(v: &Value) -> Result<Address, AddressError> {
    let obj = v.as_object().ok_or(AddressError::Shape)?;
    let field = |k| {
        obj.get(k)
            .and_then(Value::as_str)
            .ok_or(AddressError::Shape)
    };
    let protocol = field("protocol")?;
    let transport = if protocol.eq_ignore_ascii_case("udp") {
        Transport::Udp
    } else if protocol.eq_ignore_ascii_case("tcp") {
        Transport::Tcp
    } else {
        return Err(AddressError::Protocol);
    };
    let (host, port) = parse_host_port(field("address")?)?;
    Ok(Address {
        transport,
        host,
        port,
    })
}

/// Parse `host:port` as a server list writes it: dotted IPv4, bracketed
/// IPv6 without a zone, or a DNS name; a decimal port in 0–65535.
pub fn parse_host_port(s: &str) -> Result<(Host, u16), AddressError> {
    if let Some(rest) = s.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or(AddressError::Brackets)?;
        let port = after.strip_prefix(':').ok_or(if after.is_empty() {
            AddressError::MissingPort
        } else {
            AddressError::Brackets
        })?;
        if inside.contains('%') {
            return Err(AddressError::ZoneId);
        }
        let ip = parse_ipv6(inside).ok_or(AddressError::Ipv6)?;
        return Ok((Host::Ipv6(ip), parse_port(port)?));
    }
    let (host, port) = s.rsplit_once(':').ok_or(AddressError::MissingPort)?;
    if host.contains(':') {
        return Err(AddressError::UnbracketedIpv6);
    }
    Ok((parse_host(host)?, parse_port(port)?))
}

fn parse_port(s: &str) -> Result<u16, AddressError> {
    if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AddressError::Port);
    }
    s.parse().map_err(|_| AddressError::Port)
}

fn parse_host(s: &str) -> Result<Host, AddressError> {
    if s.is_empty() {
        return Err(AddressError::EmptyHost);
    }
    // A name cannot be all digits and dots (its last label is never numeric),
    // so such a host is an IPv4 address or nothing.
    if s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return parse_ipv4(s).map(Host::Ipv4).ok_or(AddressError::Ipv4);
    }
    let name = s.strip_suffix('.').unwrap_or(s);
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if name.len() > 253 || !name.split('.').all(label_ok) {
        return Err(AddressError::Hostname);
    }
    Ok(Host::Name(name.to_ascii_lowercase()))
}

fn parse_ipv4(s: &str) -> Option<[u8; 4]> {
    let mut out = [0u8; 4];
    let mut parts = s.split('.');
    for o in out.iter_mut() {
        let p = parts.next()?;
        // Leading zeros read as octal in some parsers; dotted decimal has none.
        if p.is_empty() || p.len() > 3 || (p.len() > 1 && p.starts_with('0')) {
            return None;
        }
        *o = p.parse().ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// RFC 4291 §2.2 text: up to eight groups of 1–4 hex digits, at most one
/// `::`, optionally ending in a dotted IPv4 address.
fn parse_ipv6(s: &str) -> Option<[u8; 16]> {
    let (head, tail) = match s.split_once("::") {
        Some((h, t)) => (h, Some(t)),
        None => (s, None),
    };
    let mut groups: Vec<u16> = Vec::with_capacity(8);
    let mut tail_groups: Vec<u16> = Vec::with_capacity(8);
    let tail_is_last = tail.is_some();
    groups_into(head, !tail_is_last, &mut groups)?;
    if let Some(t) = tail {
        if t.contains("::") {
            return None;
        }
        groups_into(t, true, &mut tail_groups)?;
    }
    let total = groups.len() + tail_groups.len();
    match tail {
        None if total != 8 => return None,
        // "::" stands for at least one zero group.
        Some(_) if total > 7 => return None,
        _ => {}
    }
    let mut out = [0u8; 16];
    let zeros = 8 - total;
    let all = groups
        .iter()
        .chain(core::iter::repeat_n(&0u16, zeros))
        .chain(tail_groups.iter());
    for (chunk, g) in out.chunks_exact_mut(2).zip(all) {
        chunk.copy_from_slice(&g.to_be_bytes());
    }
    Some(out)
}

/// Parse colon-separated groups; the last may be dotted IPv4 when `last`.
fn groups_into(s: &str, last: bool, out: &mut Vec<u16>) -> Option<()> {
    if s.is_empty() {
        return Some(());
    }
    let parts: Vec<&str> = s.split(':').collect();
    for (i, p) in parts.iter().enumerate() {
        if last && i + 1 == parts.len() && p.contains('.') {
            let v4 = parse_ipv4(p)?;
            out.push(u16::from_be_bytes([v4[0], v4[1]]));
            out.push(u16::from_be_bytes([v4[2], v4[3]]));
        } else {
            if p.is_empty() || p.len() > 4 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u16::from_str_radix(p, 16).ok()?);
        }
        if out.len() > 8 {
            return None;
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_text_forms() {
        let v = |s| parse_ipv6(s);
        assert_eq!(v("::"), Some([0; 16]));
        let mut one = [0u8; 16];
        one[15] = 1;
        assert_eq!(v("::1"), Some(one));
        assert_eq!(v("0:0:0:0:0:0:0:1"), Some(one));
        let doc = v("2001:db8::2:33").unwrap();
        assert_eq!(doc[..4], [0x20, 0x01, 0x0d, 0xb8]);
        assert_eq!(doc[12..], [0, 2, 0, 0x33]);
        let mapped = v("::ffff:192.0.2.1").unwrap();
        assert_eq!(mapped[10..], [0xff, 0xff, 192, 0, 2, 1]);
        for bad in [
            "",
            ":",
            "1:2:3:4:5:6:7",
            "1:2:3:4:5:6:7:8:9",
            "1::2::3",
            "12345::",
            "1:2:3:4:5:6:7::8",
            "g::",
            "::1.2.3",
            "1.2.3.4::",
            ":1::",
        ] {
            assert_eq!(v(bad), None, "{bad}");
        }
        // "::" may stand for exactly one group.
        assert!(v("1:2:3:4:5:6::8").is_some());
    }

    #[test]
    fn hex_digits() {
        assert_eq!(hex_digit(b'F'), 15);
        assert_eq!(hex_digit(b'a'), 10);
        assert_eq!(hex_digit(b'9'), 9);
    }
}
