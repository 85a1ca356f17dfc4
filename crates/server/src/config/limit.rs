//! The `[limit]` table: deny and allow lists, the rate per source prefix,
//! and the signature budget (docs/OPERATIONS.md, "Rate limits").

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;

use super::values::fmt_duration;
use crate::limit::LimitConfig;

bounded_int!(
    /// Requests per second one source prefix may send to one worker; 0
    /// turns rate limiting off.
    Rate(u32), 0, 1_000_000, LimitConfig::DEFAULT_RATE
);

bounded_int!(
    /// Requests a prefix may send at once before its rate applies.
    Burst(u32), 1, 1_000_000, LimitConfig::DEFAULT_BURST
);

bounded_int!(
    /// IPv4 sources share a limit per prefix of this length.
    Ipv4Prefix(u8), 8, 32, 32
);

bounded_int!(
    /// IPv6 sources share a limit per prefix of this length.
    Ipv6Prefix(u8), 16, 128, 64
);

bounded_int!(
    /// Source prefixes tracked per worker (16 bytes each).
    TableSize(u32), 1024, 4_194_304, LimitConfig::DEFAULT_TABLE as u32
);

bounded_duration!(
    /// How much worker time the signature budget saves up while idle, as
    /// wall time at the share: the burst of single-signature answers.
    SignatureBurst,
    Duration::from_millis(1),
    Duration::from_secs(10),
    Duration::from_micros(LimitConfig::DEFAULT_SIGNATURE_BURST_US)
);

/// Share of each worker's time the versions answered one per signature
/// may take, `0.01..=1.0`; 1.0 is no budget.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SignatureShare(f64);

impl SignatureShare {
    /// The default: a quarter.
    pub const DEFAULT: SignatureShare = SignatureShare(LimitConfig::DEFAULT_SHARE_PPM as f64 / 1e6);

    /// `f` if it is in `0.01..=1.0`.
    pub fn new(f: f64) -> Option<SignatureShare> {
        (0.01..=1.0).contains(&f).then_some(SignatureShare(f))
    }

    /// The share.
    pub fn get(self) -> f64 {
        self.0
    }
}

/// Most networks in one list: each is compared with every source.
pub const MAX_LIST: usize = 1024;

/// A deny or allow list: networks, or bare addresses as one-host networks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetList(Vec<IpNet>);

impl NetList {
    /// Parse `items`; an error names the item that is neither a network
    /// nor an address, or the count if there are more than [`MAX_LIST`].
    pub fn parse(items: &[&str]) -> Result<NetList, String> {
        if items.len() > MAX_LIST {
            return Err(format!("{} networks", items.len()));
        }
        let mut nets = Vec::with_capacity(items.len());
        // An empty item is no network: `--limit-allow ""` empties the list.
        for item in items.iter().filter(|i| !i.is_empty()) {
            let net = match item.parse::<IpNet>() {
                // 10.1.2.3/8 means 10.0.0.0/8, as routing tables read it.
                Ok(n) => n.trunc(),
                Err(_) => IpNet::from(item.parse::<IpAddr>().map_err(|_| format!("{item:?}"))?),
            };
            nets.push(net);
        }
        Ok(NetList(nets))
    }

    /// The networks.
    pub fn nets(&self) -> &[IpNet] {
        &self.0
    }
}

/// The `[limit]` table, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct LimitSettings {
    /// `limit.rate`.
    pub rate: Rate,
    /// `limit.burst`.
    pub burst: Burst,
    /// `limit.ipv4-prefix`.
    pub ipv4_prefix: Ipv4Prefix,
    /// `limit.ipv6-prefix`.
    pub ipv6_prefix: Ipv6Prefix,
    /// `limit.table-size`.
    pub table_size: TableSize,
    /// `limit.allow`. Default: loopback.
    pub allow: NetList,
    /// `limit.deny`. Default: empty.
    pub deny: NetList,
    /// `limit.signature-share`.
    pub signature_share: SignatureShare,
    /// `limit.signature-burst`.
    pub signature_burst: SignatureBurst,
}

impl Default for LimitSettings {
    fn default() -> Self {
        LimitSettings {
            rate: Rate::DEFAULT,
            burst: Burst::DEFAULT,
            ipv4_prefix: Ipv4Prefix::DEFAULT,
            ipv6_prefix: Ipv6Prefix::DEFAULT,
            table_size: TableSize::DEFAULT,
            allow: NetList(LimitConfig::loopback()),
            deny: NetList(Vec::new()),
            signature_share: SignatureShare::DEFAULT,
            signature_burst: SignatureBurst::DEFAULT,
        }
    }
}

impl LimitSettings {
    /// What each worker is given.
    pub fn worker(&self) -> LimitConfig {
        LimitConfig {
            rate: (self.rate.get() > 0).then_some(self.rate.get()),
            burst: self.burst.get(),
            ipv4_prefix: self.ipv4_prefix.get(),
            ipv6_prefix: self.ipv6_prefix.get(),
            table_size: self.table_size.get() as usize,
            allow: self.allow.0.clone(),
            deny: self.deny.0.clone(),
            signature_share_ppm: (self.signature_share.get() * 1e6).round() as u32,
            signature_burst_us: self.signature_burst.get().as_micros() as u64,
        }
    }

    /// The table as TOML, for `Config`'s display.
    pub(crate) fn write_toml(
        &self,
        f: &mut fmt::Formatter<'_>,
        list: impl Fn(Vec<String>) -> String,
    ) -> fmt::Result {
        let nets = |l: &NetList| list(l.0.iter().map(|n| n.to_string()).collect());
        writeln!(f, "\n[limit]")?;
        writeln!(f, "rate = {}", self.rate)?;
        writeln!(f, "burst = {}", self.burst)?;
        writeln!(f, "ipv4-prefix = {}", self.ipv4_prefix)?;
        writeln!(f, "ipv6-prefix = {}", self.ipv6_prefix)?;
        writeln!(f, "table-size = {}", self.table_size)?;
        writeln!(f, "allow = {}", nets(&self.allow))?;
        writeln!(f, "deny = {}", nets(&self.deny))?;
        writeln!(f, "signature-share = {:?}", self.signature_share.get())?;
        writeln!(f, "signature-burst = \"{}\"", self.signature_burst)
    }
}
