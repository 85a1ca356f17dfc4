//! The kernel's announcements of address and link changes (rtnetlink), so
//! the program's table of local addresses follows them within one poll
//! of the key thread rather than the next full reread.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A non-blocking subscription to address and link changes.
pub struct AddressEvents(OwnedFd);

impl AddressEvents {
    /// Subscribe to IPv4 and IPv6 address changes and link changes (a new
    /// MAC address arrives as a link change).
    pub fn subscribe() -> io::Result<AddressEvents> {
        // SAFETY: socket(2) with constant arguments.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                libc::NETLINK_ROUTE,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the descriptor just made, owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: an all-zero sockaddr_nl is a valid value of it.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_groups =
            (libc::RTMGRP_LINK | libc::RTMGRP_IPV4_IFADDR | libc::RTMGRP_IPV6_IFADDR) as u32;
        // SAFETY: `addr` is a live sockaddr_nl of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&raw const addr).cast::<libc::sockaddr>(),
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(AddressEvents(fd))
    }

    /// Whether anything was announced since the last call. Reads every
    /// pending message; what they say is not parsed, since the caller
    /// rereads the whole table anyway. A lost announcement (the socket's
    /// buffer overran) counts as a change.
    pub fn changed(&self) -> bool {
        let mut buf = [0u8; 8192];
        let mut any = false;
        // Bounded: a flood of announcements cannot keep the caller here.
        for _ in 0..64 {
            // SAFETY: `buf` is live and writable for its whole length.
            let n = unsafe {
                libc::recv(
                    self.0.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n > 0 {
                any = true;
                continue;
            }
            if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOBUFS) {
                any = true;
                continue;
            }
            break;
        }
        any
    }
}
