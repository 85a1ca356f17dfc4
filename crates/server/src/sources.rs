//! Sources no reply may go to, dropped before any parsing or crypto.
//!
//! UDP sources are unauthenticated: whatever an attacker writes in the IP
//! header is where the reply goes. Some sources cannot be answered at all
//! (the kernel refuses a broadcast destination with EACCES, turns `::` and
//! 0.0.0.0 into this host), and some are certainly forged (a loopback
//! source on a non-loopback address, an IPv4-mapped source on our
//! IPv6-only sockets; on a dual-stack socket a service manager passed, the
//! mapped form is how every IPv4 source arrives, and it is judged as that
//! IPv4 address). Answering them wastes a signature at
//! best and, before this filter, stopped the server (issue 10, finding 1).
//!
//! The check is a handful of integer comparisons per datagram. Directed
//! broadcasts (127.255.255.255 on loopback, 192.0.2.255 on a /24) depend on
//! the host's interfaces: [`Broadcasts`] is refreshed from `getifaddrs` off
//! the hot path (at start and every second by the key thread), and each
//! worker copies it only when its generation changes. An address the table
//! has not learnt yet (an interface added less than a second ago, or more
//! than [`MAX_BROADCASTS`] of them) still cannot stop the server: the
//! kernel refuses the reply and the send error is counted as `send_refused`.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use arrayvec::ArrayVec;

use crate::stats::Drop;

/// Most directed-broadcast addresses remembered (one per IPv4 interface
/// address with a prefix shorter than /31).
pub const MAX_BROADCASTS: usize = 1024;

type Table = ArrayVec<u32, MAX_BROADCASTS>;

/// The host's directed-broadcast addresses, shared by every worker.
#[derive(Debug, Default)]
pub struct Broadcasts {
    generation: AtomicU64,
    table: Mutex<Table>,
}

impl Broadcasts {
    /// Read the interfaces now (allocates; never call it from a worker).
    pub fn refresh(&self) -> io::Result<()> {
        let mut found = Vec::new();
        let mut own = Vec::new();
        for i in if_addrs::get_if_addrs()? {
            if let if_addrs::IfAddr::V4(a) = i.addr {
                found.extend(directed(a.ip, a.prefixlen, a.broadcast));
                own.push(a.ip);
            }
        }
        // An address of this host is never a broadcast, whatever a /31
        // peer's or a mis-set `brd` says.
        found.retain(|b| !own.contains(b));
        self.set(found);
        Ok(())
    }

    /// Replace the table (sorted, deduplicated, capped).
    pub fn set(&self, addrs: impl IntoIterator<Item = Ipv4Addr>) {
        let mut v: Vec<u32> = addrs.into_iter().map(u32::from).collect();
        v.sort_unstable();
        v.dedup();
        v.truncate(MAX_BROADCASTS);
        let Ok(mut t) = self.table.lock() else { return };
        if t.as_slice() != v.as_slice() {
            t.clear();
            t.extend(v);
            self.generation.fetch_add(1, Ordering::Release);
        }
    }
}

/// The broadcast addresses the kernel gives an IPv4 interface address: the
/// one it was configured with, and the all-ones host part of its prefix
/// when the prefix is shorter than /31 (as `fib_add_ifaddr` does). The
/// limited broadcast 255.255.255.255 is checked without a table.
pub fn directed(
    ip: Ipv4Addr,
    prefixlen: u8,
    configured: Option<Ipv4Addr>,
) -> impl Iterator<Item = Ipv4Addr> {
    let subnet = (prefixlen < 31).then(|| {
        let host = u32::MAX.checked_shr(u32::from(prefixlen)).unwrap_or(0);
        Ipv4Addr::from(u32::from(ip) | host)
    });
    // glibc reports the address itself when none was configured (`ip addr
    // add 10.0.0.1/24` without `brd`): that is no broadcast.
    configured
        .filter(|b| !b.is_unspecified() && !b.is_broadcast() && *b != ip)
        .into_iter()
        .chain(subnet)
}

/// A worker's copy of [`Broadcasts`], taken when it changes.
#[derive(Debug, Default)]
pub struct SourceFilter {
    generation: u64,
    table: Table,
    /// Bit `k` set when some entry's low six bits are `k`: most addresses
    /// are ruled out by one shift, without a search.
    low_bits: u64,
    /// Whether the socket is bound to one loopback address (`Some(true)`),
    /// one other address (`Some(false)`), or every address (`None`: the
    /// arrival address comes with each datagram).
    bound_loopback: Option<bool>,
    /// Whether the socket is a dual-stack IPv6 one (`IPV6_V6ONLY` off, as a
    /// service manager may pass): IPv4 datagrams then arrive from, and to,
    /// `::ffff:a.b.c.d`, and are judged as the IPv4 addresses they are.
    dual_stack: bool,
}

impl SourceFilter {
    /// A filter for a socket bound to `local`, IPv6-only (or IPv4).
    pub fn new(local: Option<SocketAddr>) -> SourceFilter {
        SourceFilter::for_socket(local, false)
    }

    /// A filter for a socket bound to `local`; `dual_stack` when it is an
    /// IPv6 socket that also carries IPv4 (`IPV6_V6ONLY` off).
    pub fn for_socket(local: Option<SocketAddr>, dual_stack: bool) -> SourceFilter {
        SourceFilter {
            bound_loopback: local
                .filter(|a| !a.ip().to_canonical().is_unspecified())
                .map(|a| is_loopback(a.ip())),
            dual_stack: dual_stack && local.is_some_and(|a| a.is_ipv6()),
            ..SourceFilter::default()
        }
    }

    /// Take the shared table if it changed. Once per batch: one atomic
    /// load, a copy only after a refresh found a difference.
    pub fn sync(&mut self, shared: &Broadcasts) {
        let g = shared.generation.load(Ordering::Acquire);
        if g != self.generation {
            // A refresh holds the lock briefly; try again next batch.
            if let Ok(t) = shared.table.try_lock() {
                self.table.clone_from(&t);
                self.low_bits = t.iter().fold(0, |m, a| m | 1 << (a & 63));
                self.generation = g;
            }
        }
    }

    /// Why a datagram from `from`, sent to local address `to`, must not be
    /// answered; `None` when it may be.
    #[inline]
    pub fn check(&self, from: &SocketAddr, to: Option<IpAddr>) -> Option<Drop> {
        self.check_source(from, to)
            .or_else(|| self.check_destination(to))
    }

    #[inline]
    fn check_source(&self, from: &SocketAddr, to: Option<IpAddr>) -> Option<Drop> {
        if from.port() == 0 {
            return Some(Drop::SourcePortZero);
        }
        let local_loopback = || match self.bound_loopback {
            Some(l) => l,
            // The kernel did not say where it arrived: nothing to compare.
            None => to.is_none_or(is_loopback),
        };
        match from.ip() {
            IpAddr::V4(a) => self.check_v4(u32::from(a), local_loopback),
            IpAddr::V6(a) => {
                if let Some(v4) = a.to_ipv4_mapped() {
                    // The embedded class first, so a mapped broadcast is
                    // counted as a broadcast. On a dual-stack socket the
                    // kernel writes every IPv4 source this way; on an
                    // IPv6-only one no IPv4 datagram can arrive, so the
                    // form itself is forged.
                    let v4 = self.check_v4(u32::from(v4), local_loopback);
                    if self.dual_stack {
                        v4
                    } else {
                        Some(v4.unwrap_or(Drop::SourceMapped))
                    }
                } else if a.is_unspecified() {
                    Some(Drop::SourceUnspecified)
                } else if a.is_multicast() {
                    Some(Drop::SourceMulticast)
                } else if a.is_loopback() && !local_loopback() {
                    Some(Drop::SourceLoopback)
                } else {
                    None
                }
            }
        }
    }

    /// A socket bound to every address also receives datagrams sent to a
    /// broadcast address or to a group every host joins (224.0.0.1,
    /// ff02::1), one copy per worker. A reply would have to come from that
    /// address, and one forged request would reach every server on the
    /// subnet. Only sockets bound to every address say where a datagram
    /// arrived, and only they can receive these.
    #[inline]
    fn check_destination(&self, to: Option<IpAddr>) -> Option<Drop> {
        // A dual-stack socket says ::ffff:a.b.c.d for an IPv4 arrival.
        match to?.to_canonical() {
            IpAddr::V4(d) => {
                let d = u32::from(d);
                if d >> 28 == 0xe {
                    Some(Drop::DestinationMulticast)
                } else if d == u32::MAX || self.is_directed_broadcast(d) {
                    Some(Drop::DestinationBroadcast)
                } else {
                    None
                }
            }
            IpAddr::V6(d) => d.is_multicast().then_some(Drop::DestinationMulticast),
        }
    }

    #[inline]
    fn is_directed_broadcast(&self, a: u32) -> bool {
        self.low_bits >> (a & 63) & 1 != 0 && self.table.binary_search(&a).is_ok()
    }

    #[inline]
    fn check_v4(&self, a: u32, local_loopback: impl Fn() -> bool) -> Option<Drop> {
        if a == 0 {
            Some(Drop::SourceUnspecified)
        } else if a >> 28 == 0xe {
            Some(Drop::SourceMulticast)
        } else if a == u32::MAX || self.is_directed_broadcast(a) {
            Some(Drop::SourceBroadcast)
        } else if a >> 24 == 127 && !local_loopback() {
            Some(Drop::SourceLoopback)
        } else {
            None
        }
    }
}

fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(local: &str, broadcasts: &[&str]) -> SourceFilter {
        let shared = Broadcasts::default();
        shared.set(broadcasts.iter().map(|b| b.parse().unwrap()));
        let mut f = SourceFilter::new(Some(local.parse().unwrap()));
        f.sync(&shared);
        f
    }

    fn check(f: &SourceFilter, from: &str, to: Option<&str>) -> Option<Drop> {
        f.check(&from.parse().unwrap(), to.map(|t| t.parse().unwrap()))
    }

    #[test]
    fn every_unanswerable_class_is_named() {
        let lo = filter("127.0.0.1:2002", &["127.255.255.255"]);
        let lo6 = filter("[::1]:2002", &[]);
        let (port0, bcast, mcast, unspec, mapped) = (
            Some(Drop::SourcePortZero),
            Some(Drop::SourceBroadcast),
            Some(Drop::SourceMulticast),
            Some(Drop::SourceUnspecified),
            Some(Drop::SourceMapped),
        );
        for (f, from, want) in [
            (&lo, "127.0.0.1:0", port0),
            (&lo, "255.255.255.255:9", bcast),
            (&lo, "127.255.255.255:9", bcast),
            (&lo, "224.0.0.1:9", mcast),
            (&lo, "239.255.255.250:9", mcast),
            (&lo, "0.0.0.0:9", unspec),
            (&lo, "127.0.0.1:9", None),
            (&lo, "127.0.0.2:9", None),
            (&lo, "192.0.2.7:9", None),
            (&lo, "223.255.255.255:9", None),
            (&lo, "240.0.0.1:9", None),
            (&lo6, "[::]:9", unspec),
            (&lo6, "[ff02::1]:9", mcast),
            (&lo6, "[::1]:0", port0),
            (&lo6, "[::ffff:255.255.255.255]:9", bcast),
            (&lo6, "[::ffff:0.0.0.0]:9", unspec),
            (&lo6, "[::ffff:224.0.0.1]:9", mcast),
            (&lo6, "[::1]:9", None),
            (&lo6, "[::ffff:127.0.0.1]:9", mapped),
            (&lo6, "[::ffff:192.0.2.1]:9", mapped),
            (&lo6, "[2001:db8::1]:9", None),
        ] {
            assert_eq!(check(f, from, None), want, "{from}");
        }
    }

    #[test]
    fn loopback_sources_only_on_loopback_addresses() {
        let bound = filter("192.0.2.2:2002", &[]);
        assert_eq!(
            check(&bound, "127.0.0.1:9", None),
            Some(Drop::SourceLoopback)
        );
        assert_eq!(check(&bound, "192.0.2.7:9", None), None);
        // Bound to every address: the arrival address decides.
        let any = filter("0.0.0.0:2002", &[]);
        assert_eq!(
            check(&any, "127.0.0.1:9", Some("192.0.2.2")),
            Some(Drop::SourceLoopback)
        );
        assert_eq!(check(&any, "127.0.0.1:9", Some("127.0.0.1")), None);
        assert_eq!(check(&any, "127.9.9.9:9", Some("127.0.0.53")), None);
        let any6 = filter("[::]:2002", &[]);
        assert_eq!(
            check(&any6, "[::1]:9", Some("fd00::2")),
            Some(Drop::SourceLoopback)
        );
        assert_eq!(check(&any6, "[::1]:9", Some("::1")), None);
        assert_eq!(
            check(&any6, "[::ffff:127.0.0.1]:9", Some("fd00::2")),
            Some(Drop::SourceLoopback)
        );
    }

    #[test]
    fn a_dual_stack_socket_judges_mapped_sources_as_ipv4() {
        let shared = Broadcasts::default();
        shared.set(["192.0.2.255".parse().unwrap()]);
        let mut any = SourceFilter::for_socket(Some("[::]:2002".parse().unwrap()), true);
        any.sync(&shared);
        for (from, to, want) in [
            ("[::ffff:127.0.0.1]:9", "::ffff:127.0.0.1", None),
            ("[::ffff:192.0.2.7]:9", "::ffff:192.0.2.2", None),
            ("[2001:db8::7]:9", "2001:db8::2", None),
            (
                "[::ffff:127.0.0.1]:9",
                "::ffff:192.0.2.2",
                Some(Drop::SourceLoopback),
            ),
            (
                "[::ffff:192.0.2.255]:9",
                "::ffff:192.0.2.2",
                Some(Drop::SourceBroadcast),
            ),
            (
                "[::ffff:0.0.0.0]:9",
                "::ffff:192.0.2.2",
                Some(Drop::SourceUnspecified),
            ),
            (
                "[::ffff:192.0.2.7]:9",
                "::ffff:192.0.2.255",
                Some(Drop::DestinationBroadcast),
            ),
            (
                "[::ffff:192.0.2.7]:9",
                "::ffff:224.0.0.1",
                Some(Drop::DestinationMulticast),
            ),
            (
                "[::ffff:192.0.2.7]:0",
                "::ffff:192.0.2.2",
                Some(Drop::SourcePortZero),
            ),
        ] {
            assert_eq!(check(&any, from, Some(to)), want, "{from} to {to}");
        }
        // Bound to one mapped loopback address: loopback sources only.
        let lo = SourceFilter::for_socket(Some("[::ffff:127.0.0.1]:2002".parse().unwrap()), true);
        assert_eq!(check(&lo, "[::ffff:127.0.0.1]:9", None), None);
        // The flag means nothing on an IPv4 socket, and an IPv6-only one
        // still drops the mapped form as forged.
        let v4 = SourceFilter::for_socket(Some("127.0.0.1:2002".parse().unwrap()), true);
        assert_eq!(check(&v4, "127.0.0.1:9", None), None);
        let only = SourceFilter::for_socket(Some("[::1]:2002".parse().unwrap()), false);
        assert_eq!(
            check(&only, "[::ffff:192.0.2.7]:9", None),
            Some(Drop::SourceMapped)
        );
    }

    #[test]
    fn broadcast_and_multicast_destinations_are_not_answered() {
        let any = filter("0.0.0.0:2002", &["192.0.2.255"]);
        let from = "192.0.2.7:9";
        for (to, want) in [
            ("192.0.2.255", Some(Drop::DestinationBroadcast)),
            ("255.255.255.255", Some(Drop::DestinationBroadcast)),
            ("224.0.0.1", Some(Drop::DestinationMulticast)),
            ("192.0.2.2", None),
        ] {
            assert_eq!(check(&any, from, Some(to)), want, "{to}");
        }
        let any6 = filter("[::]:2002", &[]);
        assert_eq!(
            check(&any6, "[2001:db8::7]:9", Some("ff02::1")),
            Some(Drop::DestinationMulticast)
        );
        assert_eq!(check(&any6, "[2001:db8::7]:9", Some("2001:db8::2")), None);
        // The source is judged first.
        assert_eq!(
            check(&any, "192.0.2.7:0", Some("192.0.2.255")),
            Some(Drop::SourcePortZero)
        );
    }

    #[test]
    fn directed_broadcasts_follow_the_interfaces() {
        let shared = Broadcasts::default();
        let mut f = SourceFilter::new(Some("0.0.0.0:2002".parse().unwrap()));
        f.sync(&shared);
        let from: SocketAddr = "192.0.2.255:9".parse().unwrap();
        assert_eq!(f.check(&from, Some("192.0.2.2".parse().unwrap())), None);
        let lan: Vec<_> = directed("192.0.2.2".parse().unwrap(), 24, None).collect();
        assert_eq!(lan, ["192.0.2.255".parse::<Ipv4Addr>().unwrap()]);
        shared.set(lan);
        f.sync(&shared);
        assert_eq!(
            f.check(&from, Some("192.0.2.2".parse().unwrap())),
            Some(Drop::SourceBroadcast)
        );
        // /31 and /32 have no broadcast; a configured one is kept.
        assert_eq!(directed("10.0.0.0".parse().unwrap(), 31, None).count(), 0);
        assert_eq!(directed("10.0.0.1".parse().unwrap(), 32, None).count(), 0);
        let odd: Vec<_> = directed(
            "10.1.0.1".parse().unwrap(),
            16,
            Some("10.1.0.255".parse().unwrap()),
        )
        .collect();
        assert_eq!(odd.len(), 2);
        let unset: Vec<_> = directed(
            "10.1.0.1".parse().unwrap(),
            24,
            Some("10.1.0.1".parse().unwrap()),
        )
        .collect();
        assert_eq!(unset, ["10.1.0.255".parse::<Ipv4Addr>().unwrap()]);
        assert_eq!(directed("10.0.0.1".parse().unwrap(), 0, None).count(), 1);
    }

    #[test]
    fn refresh_learns_loopback_broadcast() {
        let shared = Broadcasts::default();
        shared.refresh().unwrap();
        let mut f = SourceFilter::new(Some("127.0.0.1:2002".parse().unwrap()));
        f.sync(&shared);
        // lo carries 127.0.0.1/8 on every Linux host.
        assert_eq!(
            f.check(&"127.255.255.255:9".parse().unwrap(), None),
            Some(Drop::SourceBroadcast)
        );
    }
}
