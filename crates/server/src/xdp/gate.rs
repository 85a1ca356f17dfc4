//! What the program needs to know about the host to take only what the
//! kernel would deliver (program.rs): the interface's own MAC address and
//! the host's own addresses, held in the program's maps and kept current
//! as interfaces change; and the counters of what it left to the kernel.
//!
//! The addresses are those a wildcard socket accepts: every address of
//! every interface (the kernel's weak host model: an address on `lo` or on
//! another interface is accepted from this one too), except loopback ones
//! (dropped from a wire as martians) and IPv6 link-local ones of other
//! interfaces (scoped to their link). Until an address added since the
//! last read is learnt, frames to it go to the kernel and are answered by
//! the sockets; after one is removed, the program may take frames to it
//! until the next read, which the key thread makes within a tenth of a
//! second of the kernel's announcement, or within a second without one.

use std::collections::BTreeSet;
use std::io;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::program::{Maps, Passed};
use super::sys::{AddressSet, Array};

/// Most addresses the table holds; past it, frames to the rest go to the
/// kernel (and are answered by the sockets).
pub const MAX_LOCAL: usize = 4096;

/// The maps and what was last written to them.
pub struct Gate {
    interface: String,
    settings: Array,
    local: AddressSet,
    passed: Array,
    held: Mutex<Held>,
    /// Addresses in the table, for the metrics.
    count: AtomicUsize,
}

#[derive(Default)]
struct Held {
    mac: Option<[u8; 6]>,
    keys: BTreeSet<[u8; 16]>,
}

/// The program's key for `ip`: IPv6 as it is, IPv4 mapped (::ffff:a.b.c.d).
pub fn key(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// Of the host's addresses (interface name, address), those a wildcard
/// socket accepts from a wire on `interface`, as keys, at most
/// [`MAX_LOCAL`].
pub fn local_keys<'a>(
    addrs: impl IntoIterator<Item = (&'a str, IpAddr)>,
    interface: &str,
) -> BTreeSet<[u8; 16]> {
    let link_local = |ip: &Ipv6Addr| ip.segments()[0] & 0xffc0 == 0xfe80;
    addrs
        .into_iter()
        .filter(|&(name, ip)| match ip {
            IpAddr::V4(v4) => !v4.is_loopback() && !v4.is_unspecified() && !v4.is_multicast(),
            IpAddr::V6(v6) => {
                !v6.is_loopback()
                    && !v6.is_unspecified()
                    && !v6.is_multicast()
                    && v6.to_ipv4_mapped().is_none()
                    && (!link_local(&v6) || name == interface)
            }
        })
        .map(|(_, ip)| key(ip))
        .take(MAX_LOCAL)
        .collect()
}

/// `aa:bb:cc:dd:ee:ff`, as sysfs writes an Ethernet address.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.trim().split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

impl Gate {
    /// The maps for `interface`, filled from the host as it is now.
    pub fn new(interface: &str) -> io::Result<Gate> {
        let gate = Gate {
            interface: interface.to_owned(),
            settings: Array::new(1, b"gnomon_settings")?,
            local: AddressSet::new(MAX_LOCAL as u32)?,
            passed: Array::new(Passed::ALL.len() as u32, b"gnomon_passed")?,
            held: Mutex::new(Held::default()),
            count: AtomicUsize::new(0),
        };
        gate.refresh()?;
        Ok(gate)
    }

    /// The descriptors the program is assembled with, beside `xsks`.
    pub fn maps(&self, xsks: i32) -> Maps {
        Maps {
            xsks,
            settings: self.settings.raw(),
            local: self.local.raw(),
            passed: self.passed.raw(),
        }
    }

    /// Read the interface's MAC address and the host's addresses again and
    /// bring the maps up to date (allocates: the key thread's work, never
    /// a worker's). An error leaves what was written before in place.
    pub fn refresh(&self) -> io::Result<()> {
        let path = format!("/sys/class/net/{}/address", self.interface);
        let mac = std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| parse_mac(&s))
            .ok_or_else(|| {
                io::Error::other(format!(
                    "no Ethernet address for {} in {path}",
                    self.interface
                ))
            })?;
        let addrs = if_addrs::get_if_addrs()?;
        let want = local_keys(
            addrs.iter().map(|i| (i.name.as_str(), i.ip())),
            &self.interface,
        );
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if held.mac != Some(mac) {
            let mut value = [0u8; 8];
            value[..6].copy_from_slice(&mac);
            self.settings.set(0, value)?;
            held.mac = Some(mac);
        }
        // Add before removing: an address that moved is never missing.
        for k in want.difference(&held.keys.clone()) {
            self.local.insert(k)?;
            held.keys.insert(*k);
        }
        for k in held.keys.difference(&want).copied().collect::<Vec<_>>() {
            self.local.remove(&k)?;
            held.keys.remove(&k);
        }
        self.count.store(held.keys.len(), Ordering::Relaxed);
        Ok(())
    }

    /// How many of the host's addresses the program knows.
    pub fn local_addresses(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// The frames for a served port left to the kernel, by reason (index
    /// order of [`Passed::ALL`]).
    pub fn passed(&self) -> [u64; Passed::ALL.len()] {
        Passed::ALL.map(|p| self.passed.get(p as u32).map_or(0, u64::from_ne_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_wildcard_accepts_every_own_address_but_loopback_and_foreign_links() {
        let addrs = [
            ("lo", ip("127.0.0.1")),
            ("lo", ip("::1")),
            // An anycast service address on lo is the host's.
            ("lo", ip("192.0.2.53")),
            ("eth0", ip("10.0.0.5")),
            ("eth0", ip("fe80::1")),
            ("eth1", ip("10.1.0.5")),
            ("eth1", ip("fe80::2")),
            ("eth1", ip("2001:db8::5")),
        ];
        let got = local_keys(addrs, "eth0");
        let want: BTreeSet<_> = [
            "192.0.2.53",
            "10.0.0.5",
            "fe80::1",
            "10.1.0.5",
            "2001:db8::5",
        ]
        .map(|s| key(ip(s)))
        .into();
        assert_eq!(got, want);
    }

    #[test]
    fn the_table_is_bounded() {
        let many: Vec<(&str, IpAddr)> = (0..(MAX_LOCAL as u32 + 100))
            .map(|n| ("eth0", IpAddr::V4((0x0a00_0000 + n).into())))
            .collect();
        assert_eq!(local_keys(many, "eth0").len(), MAX_LOCAL);
    }

    #[test]
    fn macs_parse_as_sysfs_writes_them() {
        assert_eq!(
            parse_mac("02:00:5e:10:00:fe\n"),
            Some([2, 0, 0x5e, 0x10, 0, 0xfe])
        );
        for bad in [
            "",
            "02:00:5e:10:00",
            "02:00:5e:10:00:fe:01",
            "zz:00:00:00:00:00",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad:?}");
        }
    }
}
