//! Who sent a report, as far as we keep it (an address prefix), and how
//! many reports each prefix may send.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The sender's /24 (IPv4, and IPv4-mapped IPv6) or /48 (IPv6): enough to
/// rate-limit and to audit where reports come from, never one person's
/// address.
pub fn sender_prefix(ip: IpAddr) -> String {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(a) => {
            let [x, y, z, _] = a.octets();
            format!("{}/24", Ipv4Addr::new(x, y, z, 0))
        }
        IpAddr::V6(a) => {
            let s = a.segments();
            format!("{}/48", Ipv6Addr::new(s[0], s[1], s[2], 0, 0, 0, 0, 0))
        }
    }
}

/// Distinct prefixes tracked at once, by default. When the table is full
/// a newcomer takes the place of the prefix seen least recently (counted),
/// so a flood from many prefixes costs a bounded table and never locks
/// out a sender the table has not seen yet.
pub const DEFAULT_MAX_PREFIXES: usize = 4096;

/// A prefix's bucket: tokens, when they were last topped up, and when the
/// prefix was last seen (a tick of the table's clock, for LRU).
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
    seen: u64,
}

#[derive(Debug, Default)]
struct Table {
    buckets: HashMap<String, Bucket>,
    tick: u64,
    evicted: u64,
}

/// A token bucket per prefix: `burst` requests at once, refilled at
/// `per_minute`.
#[derive(Debug)]
pub struct RateLimiter {
    per_minute: u32,
    burst: u32,
    max_prefixes: usize,
    table: Mutex<Table>,
}

impl RateLimiter {
    /// `per_minute` requests a minute per prefix, up to `per_minute` at
    /// once, for at most `max_prefixes` prefixes at a time.
    pub fn new(per_minute: u32, max_prefixes: usize) -> Self {
        RateLimiter {
            per_minute,
            burst: per_minute.max(1),
            max_prefixes: max_prefixes.max(1),
            table: Mutex::new(Table::default()),
        }
    }

    /// Takes one token for `prefix`; false when it has none left.
    pub fn allow(&self, prefix: &str, now: Instant) -> bool {
        let rate = f64::from(self.per_minute) / 60.0;
        let burst = f64::from(self.burst);
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        t.tick += 1;
        let tick = t.tick;
        if !t.buckets.contains_key(prefix) && t.buckets.len() >= self.max_prefixes {
            // One pass over a bounded table: the least recently seen goes.
            let lru = t
                .buckets
                .iter()
                .min_by_key(|(_, b)| b.seen)
                .map(|(k, _)| k.clone());
            if let Some(k) = lru {
                t.buckets.remove(&k);
                t.evicted += 1;
            }
        }
        let b = t.buckets.entry(prefix.to_string()).or_insert(Bucket {
            tokens: burst,
            at: now,
            seen: tick,
        });
        b.tokens = burst.min(b.tokens + rate * now.saturating_duration_since(b.at).as_secs_f64());
        b.at = now;
        b.seen = tick;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Prefixes dropped from the full table since start.
    pub fn evicted(&self) -> u64 {
        self.table.lock().unwrap_or_else(|p| p.into_inner()).evicted
    }
}

/// How long a full bucket takes to refill one token, for Retry-After.
pub fn retry_after(per_minute: u32) -> Duration {
    Duration::from_secs(60u64.div_ceil(u64::from(per_minute.max(1))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_drop_the_host_part() {
        assert_eq!(sender_prefix("192.0.2.77".parse().unwrap()), "192.0.2.0/24");
        assert_eq!(
            sender_prefix("2001:db8:aa:bb::1".parse().unwrap()),
            "2001:db8:aa::/48"
        );
        assert_eq!(
            sender_prefix("::ffff:198.51.100.9".parse().unwrap()),
            "198.51.100.0/24"
        );
    }

    #[test]
    fn a_prefix_gets_its_burst_then_waits() {
        let l = RateLimiter::new(3, DEFAULT_MAX_PREFIXES);
        let t = Instant::now();
        assert!((0..3).all(|_| l.allow("a", t)));
        assert!(!l.allow("a", t));
        assert!(l.allow("b", t), "another prefix has its own bucket");
        assert!(
            l.allow("a", t + Duration::from_secs(20)),
            "one token a 20 s"
        );
        assert!(!l.allow("a", t + Duration::from_secs(20)));
    }

    #[test]
    fn a_full_table_evicts_the_least_recently_seen() {
        let l = RateLimiter::new(1, 3);
        let t = Instant::now();
        for p in ["a", "b", "c"] {
            assert!(l.allow(p, t));
        }
        // "a" is seen again (refused: its token is spent), so "b" is now
        // the least recently seen.
        assert!(!l.allow("a", t));
        assert!(l.allow("newcomer", t), "a full table admits a newcomer");
        assert_eq!(l.evicted(), 1);
        assert!(l.allow("b", t), "b was evicted: a fresh bucket");
        assert!(!l.allow("newcomer", t), "the newcomer was kept");
        assert_eq!(l.evicted(), 2, "b's return evicted c");
        assert!(!l.allow("a", t), "a, recently seen, kept its empty bucket");
    }
}
