//! Who to ask: a server's addresses, key and the versions to offer it.

use core::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::sync::mpsc;
use std::time::Instant;

use base64::Engine;
use gnomon_protocol::serverlist::{
    parse_host_port, Address, AddressError, Host, ListedServer, Transport, UsableServer,
};
use gnomon_protocol::{LongTermKey, Offer, Profile, ProfileSet, Scheme, ServerList, PROFILES};

/// The port IANA assigned to Roughtime (RFC 10049 §12.1).
pub const DEFAULT_PORT: u16 = 5319;

/// Which versions to offer a server.
#[derive(Clone, Copy, Debug)]
pub enum Versions {
    /// Find the newest version among these (see [`crate::discovery`]).
    Discover(ProfileSet),
    /// Send exactly this offer: a forced version, or the one a server
    /// answered before.
    Offer(Offer),
}

/// A server to query.
#[derive(Clone, Debug)]
pub struct Server {
    /// A name for output and reports.
    pub name: String,
    /// The long-term public key: Ed25519 (32 bytes) or ML-DSA-44 (1312
    /// bytes). Its scheme decides which versions are offered.
    pub public_key: LongTermKey,
    /// Where to reach it. UDP addresses are asked first, for versions
    /// served over UDP; TCP addresses are the fallback for versions that
    /// define TCP, and the only way to ask versions not served over UDP.
    pub addresses: Vec<Address>,
    /// What to offer.
    pub versions: Versions,
    /// Who runs it, when the list says (`"operator"`): servers of one
    /// operator are one voter ([`crate::Electorate`]).
    pub operator: Option<String>,
}

impl Server {
    /// A server at `target` (`host`, `host:port`, `[v6]:port`, a bare IPv6
    /// address; port 5319 when omitted), reachable over UDP and TCP on that
    /// port, with every version of the key's scheme to discover.
    pub fn at(target: &str, public_key: impl Into<LongTermKey>) -> Result<Server, TargetError> {
        let public_key = public_key.into();
        let (host, port) = parse_target(target, DEFAULT_PORT).map_err(TargetError)?;
        let addresses = [Transport::Udp, Transport::Tcp]
            .into_iter()
            .map(|transport| Address {
                transport,
                host: host.clone(),
                port,
            })
            .collect();
        Ok(Server {
            name: target.to_string(),
            versions: Versions::Discover(ProfileSet::ALL.of_scheme(public_key.scheme())),
            public_key,
            addresses,
            operator: None,
        })
    }

    /// Offer only `profile`, as `--version` does.
    pub fn with_version(mut self, profile: &'static Profile) -> Server {
        self.versions = Versions::Offer(Offer::single(profile));
        self
    }

    /// The usable servers of a list, each offered the versions of its key's
    /// scheme up to the one it lists (the highest it speaks), with the
    /// list's addresses.
    pub fn from_list(list: &ServerList) -> Vec<Server> {
        list.servers
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Server::from_listed(i, s))
            .collect()
    }

    fn from_listed(index: usize, listed: &ListedServer) -> Option<Server> {
        let u: &UsableServer = listed.status.as_ref().ok()?;
        let set = match u.version.profile() {
            // "version" is the highest the server speaks: anything it
            // prefers less may also be spoken.
            Some(top) => PROFILES
                .iter()
                .filter(|p| p.version.preference() <= top.version.preference())
                .fold(ProfileSet::empty(), |s, p| s.with(p.id)),
            None => u.version.candidates(),
        }
        .of_scheme(u.public_key.scheme());
        // A listed version of the other scheme than the key's says nothing
        // about what the key signs: offer every version of its scheme.
        let set = if set == ProfileSet::empty() {
            ProfileSet::ALL.of_scheme(u.public_key.scheme())
        } else {
            set
        };
        Some(Server {
            name: listed
                .name
                .clone()
                .unwrap_or_else(|| format!("server #{}", index + 1)),
            public_key: u.public_key.clone(),
            addresses: u.addresses.clone(),
            versions: Versions::Discover(set),
            operator: listed.operator.clone(),
        })
    }

    /// The first address of `transport`, as text, for output.
    pub fn describe_address(&self, transport: Transport) -> Option<String> {
        self.addresses
            .iter()
            .find(|a| a.transport == transport)
            .map(|a| format_address(&a.host, a.port))
    }
}

/// `host:port` text of an address (IPv6 in brackets).
pub(crate) fn format_address(host: &Host, port: u16) -> String {
    match host {
        Host::Ipv4(b) => format!("{}:{port}", Ipv4Addr::from(*b)),
        Host::Ipv6(b) => format!("[{}]:{port}", Ipv6Addr::from(*b)),
        Host::Name(n) => format!("{n}:{port}"),
    }
}

/// Parse a command-line target: `host`, `host:port`, `1.2.3.4[:port]`,
/// `[v6]`, `[v6]:port` or a bare IPv6 address.
pub fn parse_target(s: &str, default_port: u16) -> Result<(Host, u16), AddressError> {
    let with_port = if s.starts_with('[') {
        if s.ends_with(']') {
            format!("{s}:{default_port}")
        } else {
            s.to_string()
        }
    } else {
        match s.matches(':').count() {
            0 => format!("{s}:{default_port}"),
            1 => s.to_string(),
            // Several colons and no brackets: a bare IPv6 address, no port.
            _ => format!("[{s}]:{default_port}"),
        }
    };
    parse_host_port(&with_port)
}

/// A target address that does not parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TargetError(pub AddressError);

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            AddressError::MissingPort => "no port after the host",
            AddressError::Port => "the port is not a number from 0 to 65535",
            AddressError::EmptyHost => "the host is empty",
            AddressError::UnbracketedIpv6 => "write an IPv6 address with a port as [address]:port",
            AddressError::Brackets => "unbalanced brackets around an IPv6 address",
            AddressError::Ipv6 => "not a valid IPv6 address",
            AddressError::ZoneId => "IPv6 zone identifiers (%…) are not supported",
            AddressError::Ipv4 => "not a valid dotted-decimal IPv4 address",
            AddressError::Hostname => "not a valid host name",
            _ => "not a valid address",
        })
    }
}

impl std::error::Error for TargetError {}

/// Socket addresses of a host (DNS for names), in resolver order, or a
/// timeout at `by`. The system resolver cannot be cancelled, so a name is
/// looked up on its own thread and abandoned when `by` passes: a resolver
/// that never answers costs a thread until its own timeout, never the query.
pub(crate) fn resolve(host: &Host, port: u16, by: Instant) -> std::io::Result<Vec<SocketAddr>> {
    let name = match host {
        Host::Ipv4(b) => return Ok(vec![SocketAddr::from((Ipv4Addr::from(*b), port))]),
        Host::Ipv6(b) => return Ok(vec![SocketAddr::from((Ipv6Addr::from(*b), port))]),
        Host::Name(n) => n.clone(),
    };
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("gnomon-resolve".into())
        .spawn(move || {
            let result = (name.as_str(), port)
                .to_socket_addrs()
                .map(|a| a.collect::<Vec<_>>());
            // The receiver is gone when the query gave up: nothing to do.
            let _ = tx.send(result);
        })?;
    match rx.recv_timeout(by.saturating_duration_since(Instant::now())) {
        Ok(result) => result,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no answer from the resolver before the query's deadline",
        )),
    }
}

/// Why a public key was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// Neither base64 nor hex of a key's length.
    Encoding,
    /// Decodes to this many bytes, the length of no scheme's key.
    Length(usize),
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Encoding => f.write_str(
                "the key is neither base64 nor hex (64 hex digits for Ed25519, 2624 for ML-DSA-44)",
            ),
            KeyError::Length(n) => write!(
                f,
                "the key is {n} bytes; Ed25519 keys are 32 bytes and ML-DSA-44 keys are 1312"
            ),
        }
    }
}

impl std::error::Error for KeyError {}

/// A long-term public key in base64 (as server lists write it) or hex: 32
/// bytes for Ed25519, 1312 for ML-DSA-44 (the length says which).
pub fn parse_public_key(s: &str) -> Result<LongTermKey, KeyError> {
    let s = s.trim();
    let hex_len = |scheme: Scheme| 2 * scheme.public_len() == s.len();
    let bytes = if Scheme::ALL.into_iter().any(hex_len) && s.bytes().all(|b| b.is_ascii_hexdigit())
    {
        (0..s.len() / 2)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| KeyError::Encoding)?
    } else {
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(s))
            .map_err(|_| KeyError::Encoding)?
    };
    LongTermKey::from_bytes(&bytes).ok_or(KeyError::Length(bytes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_take_the_default_port() {
        assert_eq!(
            parse_target("192.0.2.1", 5319),
            Ok((Host::Ipv4([192, 0, 2, 1]), 5319))
        );
        assert_eq!(
            parse_target("192.0.2.1:2002", 5319),
            Ok((Host::Ipv4([192, 0, 2, 1]), 2002))
        );
        let mut one = [0u8; 16];
        one[15] = 1;
        assert_eq!(parse_target("::1", 5319), Ok((Host::Ipv6(one), 5319)));
        assert_eq!(parse_target("[::1]", 5319), Ok((Host::Ipv6(one), 5319)));
        assert_eq!(
            parse_target("[::1]:2003", 5319),
            Ok((Host::Ipv6(one), 2003))
        );
        assert_eq!(
            parse_target("Time.Example.NET", 5319),
            Ok((Host::Name("time.example.net".into()), 5319))
        );
        assert_eq!(parse_target("host:99999", 5319), Err(AddressError::Port));
        assert_eq!(parse_target("", 5319), Err(AddressError::EmptyHost));
        assert_eq!(parse_target("[::1", 5319), Err(AddressError::Brackets));
    }

    #[test]
    fn keys_in_base64_or_hex() {
        let b64 = "iBVjxg/1j7y1+kQUTBYdTabxCppesU/07D4PMDJk2WA=";
        let key = parse_public_key(b64).unwrap();
        assert_eq!(key.scheme(), Scheme::Ed25519);
        assert_eq!(key.bytes()[0], 0x88);
        let hex: String = key.bytes().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(parse_public_key(&hex), Ok(key.clone()));
        assert_eq!(parse_public_key(b64.trim_end_matches('=')), Ok(key));
        assert_eq!(parse_public_key("AAAA"), Err(KeyError::Length(3)));
        assert_eq!(parse_public_key("not base64!"), Err(KeyError::Encoding));
    }

    fn tannerryan_root() -> Vec<u8> {
        let hex = include_str!(
            "../../../tests/external-vectors/tannerryan-ml-dsa-44/root-public-key.hex"
        )
        .trim();
        (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn ml_dsa_keys_in_base64_or_hex() {
        let raw = tannerryan_root();
        assert_eq!(raw.len(), 1312);
        let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        let from_hex = parse_public_key(&hex).unwrap();
        assert_eq!(from_hex.scheme(), Scheme::MlDsa44);
        assert_eq!(from_hex.bytes(), raw.as_slice());
        let b64 = base64::engine::general_purpose::STANDARD.encode(&raw);
        assert_eq!(parse_public_key(&b64), Ok(from_hex.clone()));
        assert_eq!(
            parse_public_key(&format!("  {}\n", b64.trim_end_matches('='))),
            Ok(from_hex.clone())
        );
        assert_eq!(parse_public_key(&hex.to_uppercase()), Ok(from_hex));
        // One byte short or long of either scheme: refused, naming both.
        for n in [31, 33, 1311, 1313, 64, 0] {
            let b64 = base64::engine::general_purpose::STANDARD.encode(vec![7u8; n]);
            assert_eq!(parse_public_key(&b64), Err(KeyError::Length(n)), "{n}");
        }
        let msg = KeyError::Length(1311).to_string();
        assert!(msg.contains("32") && msg.contains("1312"), "{msg}");
        // Hex one digit short of an ML-DSA key is not hex of a key, nor base64.
        assert_eq!(parse_public_key(&hex[1..]), Err(KeyError::Encoding));
    }

    #[test]
    fn listed_ml_dsa_servers_are_offered_only_their_version() {
        use base64::Engine as _;
        let pq = base64::engine::general_purpose::STANDARD.encode(tannerryan_root());
        let ed = "iBVjxg/1j7y1+kQUTBYdTabxCppesU/07D4PMDJk2WA=";
        let entry = |name: &str, version: u32, kind: &str, key: &str| {
            format!(
                r#"{{"name":"{name}","version":{version},"publicKeyType":"{kind}","publicKey":"{key}","addresses":[{{"protocol":"tcp","address":"192.0.2.7:2002"}}]}}"#
            )
        };
        let json = format!(
            r#"{{"servers":[{},{},{},{}]}}"#,
            entry("pq", 0x9000_0001, "ml-dsa-44", &pq),
            entry("pq-listed-as-1", 1, "ML-DSA-44", &pq),
            entry("ed", 1, "ed25519", ed),
            entry("mislabelled", 0x9000_0001, "ml-dsa-44", ed),
        );
        let list = ServerList::parse(json.as_bytes()).unwrap();
        let servers = Server::from_list(&list);
        // The mislabelled entry (a 32-byte key called ml-dsa-44) is unusable.
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["pq", "pq-listed-as-1", "ed"]);
        let offered = |s: &Server| -> Vec<&'static str> {
            match s.versions {
                Versions::Discover(set) => set.iter().map(|p| p.name).collect(),
                Versions::Offer(_) => panic!("not discovery"),
            }
        };
        for s in &servers[..2] {
            assert_eq!(s.public_key.scheme(), Scheme::MlDsa44, "{}", s.name);
            assert_eq!(offered(s), ["ml-dsa-44"], "{}", s.name);
        }
        assert_eq!(servers[2].public_key.scheme(), Scheme::Ed25519);
        let ed_offers = offered(&servers[2]);
        assert!(ed_offers.contains(&"rfc-10049"));
        assert!(!ed_offers.contains(&"ml-dsa-44"));
    }

    #[test]
    fn a_key_chooses_the_versions_offered() {
        let ed = Server::at("192.0.2.1", [9u8; 32]).unwrap();
        let Versions::Discover(set) = ed.versions else {
            panic!("not discovery")
        };
        assert!(set.iter().all(|p| p.scheme == Scheme::Ed25519));
        assert!(set.iter().any(|p| p.name == "rfc-10049"));
        assert!(!set.iter().any(|p| p.name == "ml-dsa-44"));

        let key = LongTermKey::from_bytes(&tannerryan_root()).unwrap();
        let pq = Server::at("192.0.2.1", key).unwrap();
        let Versions::Discover(set) = pq.versions else {
            panic!("not discovery")
        };
        let names: Vec<&str> = set.iter().map(|p| p.name).collect();
        assert_eq!(names, ["ml-dsa-44"]);
        let families = crate::discovery::families(set);
        assert_eq!(families.len(), 1);
        assert_eq!(
            families[0].versions(),
            [gnomon_protocol::Version(0x9000_0001)]
        );
    }
}
