//! Per-source limits, checked before a datagram is parsed: the deny and
//! allow lists, and a request rate per source prefix.
//!
//! ```text
//!  source address ─▶ canonical (::ffff:a.b.c.d is IPv4) ─▶ longest match in deny/allow
//!    deny ─▶ drop (counted "denied")      allow ─▶ exempt from every limit
//!    else ─▶ prefix (/32 IPv4, /64 IPv6 by default) ─▶ keyed hash ─▶ bucket of 4
//!          ─▶ GCRA: over rate + burst ─▶ drop (counted "rate_limited")
//! ```
//!
//! Each worker has its own table, allocated once at start: no locks, no
//! allocation per request, one cache line touched per request. The table
//! is a cache, not a registry: a source not in it starts with a full
//! burst, and a new source evicts the idlest entry of its bucket. Hashing
//! is SipHash with a key drawn at process start (std's `RandomState`), so a
//! sender cannot choose addresses that land in one bucket to evict a
//! victim's entry or have its own entries evicted on purpose. A source
//! spoofing millions of addresses gets a fresh burst per address it owns
//! no entry for; that is what the signature budget (`budget.rs`) and the
//! stale drop are for.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use ipnet::IpNet;

/// Entries per bucket: 4 × 16 bytes, one cache line.
const WAYS: usize = 4;

/// What the limits say about one datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Within its prefix's rate (or rate limiting is off).
    Pass,
    /// On the allow list: no rate limit, no signature budget.
    Trusted,
    /// On the deny list.
    Denied,
    /// Its prefix is over its rate.
    Limited,
}

/// Per-source limits as the worker needs them, plain numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitConfig {
    /// Requests per second each source prefix may send to one worker;
    /// `None`: no rate limit.
    pub rate: Option<u32>,
    /// Requests a prefix may send at once above its rate.
    pub burst: u32,
    /// IPv4 sources are limited per prefix of this length.
    pub ipv4_prefix: u8,
    /// IPv6 sources are limited per prefix of this length.
    pub ipv6_prefix: u8,
    /// Prefixes tracked per worker (rounded up to a power of two).
    pub table_size: usize,
    /// Sources exempt from every limit.
    pub allow: Vec<IpNet>,
    /// Sources dropped unanswered.
    pub deny: Vec<IpNet>,
    /// Share of a worker's time the versions answered one per signature
    /// may take, in millionths; 1 000 000: no budget.
    pub signature_share_ppm: u32,
    /// Most worker time the signature budget saves up while idle, µs.
    pub signature_burst_us: u64,
}

impl LimitConfig {
    /// Default rate per prefix and worker, requests per second.
    pub const DEFAULT_RATE: u32 = 50;
    /// Default burst, requests.
    pub const DEFAULT_BURST: u32 = 100;
    /// Default table size, prefixes per worker (1 MiB).
    pub const DEFAULT_TABLE: usize = 65_536;
    /// Default signature share: a quarter of each worker.
    pub const DEFAULT_SHARE_PPM: u32 = 250_000;
    /// Default signature burst: 100 ms of worker time.
    pub const DEFAULT_SIGNATURE_BURST_US: u64 = 100_000;

    /// No limit at all: every source passes, no budget (tests, fuzzing).
    pub fn unlimited() -> LimitConfig {
        LimitConfig {
            rate: None,
            allow: Vec::new(),
            signature_share_ppm: 1_000_000,
            ..LimitConfig::default()
        }
    }

    /// The loopback networks, allow-listed by default (see
    /// docs/OPERATIONS.md, "Rate limits").
    pub fn loopback() -> Vec<IpNet> {
        ["127.0.0.0/8", "::1/128"]
            .iter()
            .filter_map(|s| s.parse().ok())
            .collect()
    }
}

impl Default for LimitConfig {
    fn default() -> Self {
        LimitConfig {
            rate: Some(Self::DEFAULT_RATE),
            burst: Self::DEFAULT_BURST,
            ipv4_prefix: 32,
            ipv6_prefix: 64,
            table_size: Self::DEFAULT_TABLE,
            allow: Self::loopback(),
            deny: Vec::new(),
            signature_share_ppm: Self::DEFAULT_SHARE_PPM,
            signature_burst_us: Self::DEFAULT_SIGNATURE_BURST_US,
        }
    }
}

/// One tracked prefix: its hash (as a tag) and its GCRA theoretical
/// arrival time, ns on the worker's monotonic clock.
#[derive(Clone, Copy, Default)]
struct Entry {
    tag: u64,
    tat: u64,
}

/// Generic cell rate algorithm: one number per prefix.
#[derive(Clone, Copy, Debug)]
struct Gcra {
    /// ns between requests at the sustained rate.
    interval: u64,
    /// How far ahead of now a prefix's arrival time may run: the burst.
    tolerance: u64,
}

/// One worker's limiter. `S` hashes prefixes: the process's keyed
/// [`RandomState`] in the server, a fixed one where counts must repeat
/// (the instruction-count gate).
pub struct SourceLimiter<S = RandomState> {
    /// Both lists as one, in the 128-bit form of [`bits`].
    rules: Vec<Rule>,
    gcra: Option<Gcra>,
    v4_shift: u32,
    v6_shift: u32,
    hasher: S,
    buckets: Vec<[Entry; WAYS]>,
}

impl<S: BuildHasher> SourceLimiter<S> {
    /// A limiter with its table allocated. `hasher` carries the process's
    /// random key; every worker may share it.
    pub fn new(config: &LimitConfig, hasher: S) -> SourceLimiter<S> {
        let (rules, gcra, buckets) = Self::compile(config);
        SourceLimiter {
            rules,
            gcra,
            v4_shift: 32 - u32::from(config.ipv4_prefix.clamp(1, 32)),
            v6_shift: 128 - u32::from(config.ipv6_prefix.clamp(1, 128)),
            hasher,
            buckets: vec![[Entry::default(); WAYS]; buckets],
        }
    }

    /// Apply new settings (a configuration reload), between two batches.
    /// The lists and the rate change at once. The table, and with it every
    /// prefix's history, is kept when its size and the prefix lengths are
    /// unchanged: a reload must not hand every source a fresh burst.
    pub fn reconfigure(&mut self, config: &LimitConfig) {
        let (rules, gcra, buckets) = Self::compile(config);
        let v4_shift = 32 - u32::from(config.ipv4_prefix.clamp(1, 32));
        let v6_shift = 128 - u32::from(config.ipv6_prefix.clamp(1, 128));
        if buckets != self.buckets.len() || v4_shift != self.v4_shift || v6_shift != self.v6_shift {
            self.buckets = vec![[Entry::default(); WAYS]; buckets];
        }
        self.rules = rules;
        self.gcra = gcra;
        self.v4_shift = v4_shift;
        self.v6_shift = v6_shift;
    }

    /// The rules, the rate and the number of buckets `config` asks for.
    fn compile(config: &LimitConfig) -> (Vec<Rule>, Option<Gcra>, usize) {
        let gcra = config.rate.filter(|&r| r > 0).map(|rate| {
            let interval = 1_000_000_000 / u64::from(rate);
            Gcra {
                interval,
                tolerance: interval * u64::from(config.burst.max(1) - 1),
            }
        });
        let buckets = match gcra {
            Some(_) => (config.table_size.max(WAYS) / WAYS).next_power_of_two(),
            None => 0,
        };
        let rule = |allow| move |net: &IpNet| Rule::new(net, allow);
        let mut rules: Vec<Rule> = config.deny.iter().map(rule(false)).collect();
        rules.extend(config.allow.iter().map(rule(true)));
        (rules, gcra, buckets)
    }

    /// What the allow and deny lists alone say of `ip`: `Trusted`,
    /// `Denied`, or `None` when neither list holds it. Where both do, the
    /// longer prefix wins and a tie denies.
    pub fn listed(&self, ip: IpAddr) -> Option<Verdict> {
        self.listed_canonical(ip.to_canonical())
    }

    #[inline]
    fn listed_canonical(&self, ip: IpAddr) -> Option<Verdict> {
        if self.rules.is_empty() {
            return None;
        }
        let (addr, v4) = (bits(ip), ip.is_ipv4());
        // The longest match; deny rules come first, so a tie denies.
        let mut best: Option<&Rule> = None;
        for r in &self.rules {
            if (addr ^ r.net) & r.mask == 0 && r.v4 == v4 && best.is_none_or(|b| r.len > b.len) {
                best = Some(r);
            }
        }
        best.map(|r| {
            if r.allow {
                Verdict::Trusted
            } else {
                Verdict::Denied
            }
        })
    }

    /// Judge one datagram from `ip` arriving at `now_ns` (monotonic, never
    /// decreasing within a worker) and count it against its prefix.
    pub fn check(&mut self, ip: IpAddr, now_ns: u64) -> Verdict {
        let ip = ip.to_canonical();
        if let Some(v) = self.listed_canonical(ip) {
            return v;
        }
        let Some(gcra) = self.gcra else {
            return Verdict::Pass;
        };
        let key = self.prefix(ip);
        let tag = self.hasher.hash_one(key);
        let mask = self.buckets.len() - 1;
        let bucket = &mut self.buckets[tag as usize & mask];
        let way = match bucket.iter().position(|e| e.tag == tag) {
            Some(w) => w,
            None => {
                // The idlest entry: an arrival time in the past is as good
                // as empty.
                let w = (0..WAYS).min_by_key(|&w| bucket[w].tat).unwrap_or(0);
                bucket[w] = Entry { tag, tat: 0 };
                w
            }
        };
        let e = &mut bucket[way];
        let tat = e.tat.max(now_ns);
        if tat - now_ns > gcra.tolerance {
            return Verdict::Limited;
        }
        e.tat = tat + gcra.interval;
        Verdict::Pass
    }

    /// The source's prefix as one number; IPv4 keeps the mapped form so
    /// the two families never share a key.
    fn prefix(&self, ip: IpAddr) -> u128 {
        match ip {
            IpAddr::V4(v4) => {
                let bits = u64::from(u32::from(v4)) >> self.v4_shift << self.v4_shift;
                0xffff_0000_0000 | u128::from(bits)
            }
            IpAddr::V6(v6) => {
                let bits = u128::from(v6);
                bits.checked_shr(self.v6_shift)
                    .map_or(0, |b| b << self.v6_shift)
                    | 1 << 127
            }
        }
    }
}

/// The process's hashing key, drawn once: every worker's table uses it.
pub fn process_hasher() -> RandomState {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    KEY.get_or_init(RandomState::new).clone()
}

/// The source prefix `ip` belongs to: the address with all but the first
/// `v4` (IPv4) or `v6` (IPv6) bits cleared. What one "source" is for the
/// TCP connection caps (`TcpConfig::source_prefix_v4`/`_v6`) and for the
/// fair shares of the signature budget (budget/fair.rs), over
/// TCP with the TCP lengths and over UDP with `ipv4_prefix`/`ipv6_prefix`.
pub fn source_prefix(ip: IpAddr, v4: u8, v6: u8) -> IpAddr {
    // An IPv4 client of a dual-stack socket counts as its IPv4 address.
    let ip = match ip {
        IpAddr::V6(a) => a.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(a) => {
            let bits = u32::from(a);
            let mask = u32::MAX
                .checked_shl(32 - u32::from(v4.min(32)))
                .unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(bits & mask))
        }
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            let mask = u128::MAX
                .checked_shl(128 - u32::from(v6.min(128)))
                .unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(bits & mask))
        }
    }
}

/// One network of the deny or allow list, compiled.
#[derive(Clone, Copy, Debug)]
struct Rule {
    net: u128,
    mask: u128,
    len: u8,
    /// An IPv6 rule as wide as ::/0 must not hold IPv4 sources.
    v4: bool,
    allow: bool,
}

impl Rule {
    fn new(net: &IpNet, allow: bool) -> Rule {
        // IPv4 networks sit in the IPv4-mapped range, as [`bits`] puts
        // IPv4 sources, so one comparison serves both families.
        let len = match net {
            IpNet::V4(n) => 96 + n.prefix_len(),
            IpNet::V6(n) => n.prefix_len(),
        };
        let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        Rule {
            net: bits(net.network()) & mask,
            mask,
            len,
            v4: matches!(net, IpNet::V4(_)),
            allow,
        }
    }
}

impl SourceLimiter<RandomState> {
    /// The lists of `config` alone, with no rate and no table: for the TCP
    /// transport, whose handshake proves the source and whose connections
    /// are capped instead.
    pub fn lists_only(config: &LimitConfig) -> SourceLimiter<RandomState> {
        let lists = LimitConfig {
            rate: None,
            ..config.clone()
        };
        SourceLimiter::new(&lists, RandomState::new())
    }
}

/// An address as 128 bits, IPv4 as ::ffff:a.b.c.d.
fn bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    /// `rate` and `burst`, no lists, a small table.
    fn config(rate: u32, burst: u32) -> LimitConfig {
        LimitConfig {
            rate: Some(rate),
            burst,
            allow: Vec::new(),
            table_size: 1024,
            ..LimitConfig::default()
        }
    }

    fn limiter(rate: u32, burst: u32) -> SourceLimiter {
        SourceLimiter::new(&config(rate, burst), RandomState::new())
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn passed(l: &mut SourceLimiter, src: &str, n: usize, now: u64) -> usize {
        (0..n)
            .filter(|_| l.check(ip(src), now) == Verdict::Pass)
            .count()
    }

    #[test]
    fn sources_are_grouped_by_prefix() {
        assert_eq!(source_prefix(ip("10.1.2.3"), 32, 64), ip("10.1.2.3"));
        assert_eq!(source_prefix(ip("10.1.2.3"), 24, 64), ip("10.1.2.0"));
        assert_eq!(source_prefix(ip("10.1.2.3"), 0, 64), ip("0.0.0.0"));
        assert_eq!(
            source_prefix(ip("2001:db8:1:2:3:4:5:6"), 32, 64),
            ip("2001:db8:1:2::")
        );
        assert_eq!(
            source_prefix(ip("2001:db8:1:2:3:4:5:6"), 32, 128),
            ip("2001:db8:1:2:3:4:5:6")
        );
        assert_eq!(source_prefix(ip("2001:db8::1"), 32, 0), ip("::"));
        // An IPv4 client of a dual-stack socket is its IPv4 address, not
        // one of a single ::ffff:0:0/64 holding every IPv4 client.
        assert_eq!(source_prefix(ip("::ffff:10.1.2.3"), 24, 64), ip("10.1.2.0"));
    }

    #[test]
    fn a_prefix_gets_its_burst_then_its_rate() {
        let mut l = limiter(10, 5);
        assert_eq!(passed(&mut l, "192.0.2.1", 50, SEC), 5);
        // A second later: ten more at 10/s, no more.
        assert_eq!(passed(&mut l, "192.0.2.1", 50, 2 * SEC), 5);
        assert_eq!(passed(&mut l, "192.0.2.1", 50, 3 * SEC), 5);
        // Spread out at the rate, every request passes.
        let mut now = 10 * SEC;
        for _ in 0..100 {
            now += SEC / 10;
            assert_eq!(l.check(ip("192.0.2.1"), now), Verdict::Pass);
        }
    }

    #[test]
    fn a_reload_keeps_each_prefixs_history_unless_the_table_changes() {
        let mut l = limiter(10, 5);
        assert_eq!(passed(&mut l, "192.0.2.1", 50, SEC), 5);
        let listed = LimitConfig {
            deny: vec!["198.51.100.0/24".parse().unwrap()],
            ..config(10, 5)
        };
        l.reconfigure(&listed);
        // The new list applies at once; the spent burst stays spent.
        assert_eq!(l.check(ip("198.51.100.7"), SEC), Verdict::Denied);
        assert_eq!(passed(&mut l, "192.0.2.1", 50, SEC), 0);
        // A table of another size starts empty: a fresh burst.
        l.reconfigure(&LimitConfig {
            table_size: 4096,
            ..listed
        });
        assert_eq!(passed(&mut l, "192.0.2.1", 50, SEC), 5);
        // Rate limiting turned off: everything passes.
        l.reconfigure(&LimitConfig {
            rate: None,
            ..config(10, 5)
        });
        assert_eq!(passed(&mut l, "192.0.2.1", 50, SEC), 50);
    }

    #[test]
    fn prefixes_are_counted_apart_and_together() {
        let mut l = limiter(1, 3);
        assert_eq!(passed(&mut l, "192.0.2.1", 10, SEC), 3);
        // Another /32: its own budget.
        assert_eq!(passed(&mut l, "192.0.2.2", 10, SEC), 3);
        // The same /64: shared.
        assert_eq!(passed(&mut l, "2001:db8::1", 10, SEC), 3);
        assert_eq!(passed(&mut l, "2001:db8::ffff:2", 10, SEC), 0);
        assert_eq!(passed(&mut l, "2001:db8:0:1::1", 10, SEC), 3);
        // A v4-mapped address is the IPv4 source.
        assert_eq!(passed(&mut l, "::ffff:192.0.2.1", 10, SEC), 0);
        assert_eq!(l.check(ip("::ffff:192.0.2.1"), SEC), Verdict::Limited);
    }

    #[test]
    fn prefix_lengths_are_configurable() {
        let config = LimitConfig {
            ipv4_prefix: 24,
            ipv6_prefix: 48,
            ..config(1, 2)
        };
        let mut l = SourceLimiter::new(&config, RandomState::new());
        assert_eq!(passed(&mut l, "198.51.100.1", 1, SEC), 1);
        assert_eq!(passed(&mut l, "198.51.100.200", 10, SEC), 1);
        assert_eq!(passed(&mut l, "198.51.101.1", 10, SEC), 2);
        assert_eq!(passed(&mut l, "2001:db8:1:2::1", 1, SEC), 1);
        assert_eq!(passed(&mut l, "2001:db8:1:ffff::1", 10, SEC), 1);
    }

    #[test]
    fn lists_deny_and_exempt_longest_match_first() {
        let config = LimitConfig {
            allow: vec![
                "10.0.0.0/8".parse().unwrap(),
                "192.0.2.7/32".parse().unwrap(),
            ],
            deny: vec![
                "192.0.2.0/24".parse().unwrap(),
                "10.9.0.0/16".parse().unwrap(),
            ],
            ..config(1, 1)
        };
        let mut l = SourceLimiter::new(&config, RandomState::new());
        for _ in 0..100 {
            assert_eq!(l.check(ip("10.1.2.3"), SEC), Verdict::Trusted);
            assert_eq!(l.check(ip("192.0.2.7"), SEC), Verdict::Trusted);
            assert_eq!(l.check(ip("::ffff:10.1.2.3"), SEC), Verdict::Trusted);
            assert_eq!(l.check(ip("192.0.2.8"), SEC), Verdict::Denied);
            assert_eq!(l.check(ip("10.9.1.1"), SEC), Verdict::Denied);
        }
        assert_eq!(passed(&mut l, "203.0.113.1", 10, SEC), 1);
        // A family's whole space holds nothing of the other's.
        let whole = LimitConfig {
            deny: vec!["::/0".parse().unwrap()],
            allow: vec!["0.0.0.0/0".parse().unwrap()],
            ..self::config(1, 1)
        };
        let mut l = SourceLimiter::new(&whole, RandomState::new());
        assert_eq!(l.check(ip("192.0.2.1"), SEC), Verdict::Trusted);
        assert_eq!(l.check(ip("::ffff:192.0.2.1"), SEC), Verdict::Trusted);
        assert_eq!(l.check(ip("2001:db8::1"), SEC), Verdict::Denied);
    }

    #[test]
    fn no_rate_means_no_table() {
        let l = SourceLimiter::new(&LimitConfig::unlimited(), RandomState::new());
        assert!(l.buckets.is_empty());
        let mut l = l;
        assert_eq!(l.check(ip("192.0.2.1"), SEC), Verdict::Pass);
    }

    #[test]
    fn a_full_table_forgets_the_idlest_not_the_busy() {
        // One bucket of four ways: every source shares it.
        let config = LimitConfig {
            table_size: WAYS,
            ..config(1, 2)
        };
        let mut l = SourceLimiter::new(&config, RandomState::new());
        assert_eq!(passed(&mut l, "192.0.2.1", 10, SEC), 2);
        // Later, many one-off sources pass through the bucket; the flooder
        // stays ahead of them in arrival time, so it keeps its entry.
        for i in 0..200 {
            let src = format!("198.51.100.{i}");
            assert_eq!(passed(&mut l, &src, 1, SEC), 1);
            assert_eq!(passed(&mut l, "192.0.2.1", 1, SEC), 0);
        }
    }
}
