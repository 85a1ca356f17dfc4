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

/// Distinct prefixes tracked at once. Past this, idle ones are forgotten;
/// if none is idle the request is refused, so a flood from many prefixes
/// costs a bounded table, never unbounded memory.
const MAX_PREFIXES: usize = 4096;

/// A token bucket per prefix: `burst` requests at once, refilled at
/// `per_minute`.
#[derive(Debug)]
pub struct RateLimiter {
    per_minute: u32,
    burst: u32,
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl RateLimiter {
    /// `per_minute` requests a minute per prefix, up to `per_minute` at
    /// once.
    pub fn new(per_minute: u32) -> Self {
        RateLimiter {
            per_minute,
            burst: per_minute.max(1),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token for `prefix`; false when it has none left.
    pub fn allow(&self, prefix: &str, now: Instant) -> bool {
        let rate = f64::from(self.per_minute) / 60.0;
        let burst = f64::from(self.burst);
        let refill = |(tokens, at): (f64, Instant)| {
            (
                burst.min(tokens + rate * now.saturating_duration_since(at).as_secs_f64()),
                now,
            )
        };
        let mut map = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if !map.contains_key(prefix) && map.len() >= MAX_PREFIXES {
            map.retain(|_, b| refill(*b).0 < burst);
            if map.len() >= MAX_PREFIXES {
                return false;
            }
        }
        let bucket = map.entry(prefix.to_string()).or_insert((burst, now));
        *bucket = refill(*bucket);
        if bucket.0 >= 1.0 {
            bucket.0 -= 1.0;
            true
        } else {
            false
        }
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
        let l = RateLimiter::new(3);
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
    fn the_table_is_bounded() {
        let l = RateLimiter::new(1);
        let t = Instant::now();
        for i in 0..MAX_PREFIXES {
            assert!(l.allow(&i.to_string(), t));
        }
        assert!(!l.allow("one more", t), "full and nobody idle: refused");
        let later = t + Duration::from_secs(60);
        assert!(l.allow("one more", later), "idle buckets are forgotten");
    }
}
