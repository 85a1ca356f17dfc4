//! Every system call and shared-memory access of the AF_XDP datapath, and
//! the only `unsafe` in it: the bpf(2) calls that load the program, make
//! the socket map and attach the program to an interface, and the AF_XDP
//! socket with its frame area (UMEM) and four rings shared with the
//! kernel. Everything above this module is safe code over [`Xsk`] and
//! [`Attachment`].
//!
//! The attachment is a BPF link (`BPF_LINK_CREATE`), owned by one file
//! descriptor: when the process exits for any reason, SIGKILL and a crash
//! included, the kernel closes the descriptor and detaches the program. No
//! pinned object is left behind for an operator to clean up, and a link
//! never replaces a program someone else attached (the call fails with
//! EBUSY instead).
//!
//! `bpf` loads the program, makes its maps and attaches the link;
//! `netlink` hears of address changes;
//! `ring` is one ring shared with the kernel; `xsk` is the socket with its
//! frame area and four rings.
#![allow(unsafe_code)]

mod bpf;
mod netlink;
mod ring;
mod xsk;

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

pub use bpf::{AddressSet, Array, Attachment, Mode, Program, SocketMap};
pub use netlink::AddressEvents;
pub use xsk::{Frame, KernelCounters, Xsk, FRAME_SIZE, RING};

/// Whether this kernel and process can make an AF_XDP socket at all: the
/// reason when not (no AF_XDP in the kernel, or not allowed).
pub fn unavailable() -> Option<io::Error> {
    // SAFETY: socket(2) with constant arguments; closed at once.
    let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Some(io::Error::last_os_error());
    }
    // SAFETY: the descriptor just made.
    drop(unsafe { OwnedFd::from_raw_fd(raw) });
    None
}

/// The interface's index, by name.
pub fn ifindex(name: &str) -> io::Result<u32> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the interface name"))?;
    // SAFETY: a NUL-terminated name that lives through the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(i)
    }
}
