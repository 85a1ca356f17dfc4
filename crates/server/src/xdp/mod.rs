//! The AF_XDP datapath (`serve --xdp IFACE`): UDP for the served addresses
//! is taken from the interface's receive queues before the kernel's
//! network stack sees it, answered by the same responder as the socket
//! path, and sent back through the same queues. Everything else on the
//! interface (ARP, ICMP, TCP, other ports, fragments) reaches the kernel
//! as before, and the ordinary UDP sockets stay bound to serve what the
//! program passes.
//!
//! Only what the kernel would deliver to the served sockets is taken: a
//! frame to another host's or a group MAC address, to an address the host
//! does not have, from or to a loopback address, or from one of the
//! host's own addresses goes to the kernel, which judges it as it would
//! without the program (program.rs, and docs/OPERATIONS.md).
//!
//! `frame` reads and rewrites Ethernet/IP/UDP headers; `program` assembles
//! the XDP program; `gate` keeps the host's addresses and MAC in its maps;
//! `sys` holds every system call and all the `unsafe`; `worker` is the
//! per-queue loop; `interpret` runs the program by hand for the tests.

pub mod frame;
pub mod gate;
#[doc(hidden)]
pub mod interpret;
pub mod program;
pub mod sys;
pub mod worker;

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

pub use gate::Gate;
pub use sys::{unavailable, AddressEvents, KernelCounters, Mode};
pub use worker::XdpWorker;

use crate::worker::Worker;

/// What `--xdp` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpConfig {
    /// The interface's name.
    pub interface: String,
    /// Where the program runs; `None`: in the driver if it can, else
    /// generic.
    pub mode: Option<Mode>,
}

/// The program attached and its sockets' map; dropping it detaches the
/// program (as the process ending does).
pub struct Attached {
    /// The interface.
    pub interface: String,
    /// Where the program runs.
    pub mode: Mode,
    /// Whether the sockets are bound zero-copy (the driver offers it).
    pub zero_copy: bool,
    /// Receive queues served, one worker each.
    pub queues: u32,
    /// The host's addresses and MAC as the program knows them, and what it
    /// passed to the kernel.
    pub gate: Arc<Gate>,
    // Field order: the link goes first, so no frame is steered to a map
    // or socket that is gone.
    _attachment: sys::Attachment,
    _program: sys::Program,
    _map: sys::SocketMap,
}

/// How many receive queues `interface` has (its `queues/rx-*` entries in
/// sysfs; 1 when sysfs does not say).
pub fn rx_queues(interface: &str) -> u32 {
    let dir = Path::new("/sys/class/net").join(interface).join("queues");
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                .count() as u32
        })
        .unwrap_or(1)
        .max(1)
}

/// Attach the program for `served` to the configured interface and make
/// one socket per receive queue; `worker(q)` makes the shared part of
/// queue `q`'s worker. The workers are returned to be run on threads of
/// the caller's; the program stays attached while the result lives.
pub fn start(
    config: &XdpConfig,
    served: &[SocketAddr],
    mut worker: impl FnMut(u32) -> Worker,
) -> io::Result<(Attached, Vec<XdpWorker>)> {
    let what = |e: io::Error, doing: &str| {
        io::Error::new(
            e.kind(),
            format!("xdp on {}: {doing}: {e}", config.interface),
        )
    };
    if let Some(e) = unavailable() {
        return Err(what(
            e,
            "cannot make an AF_XDP socket (kernel without CONFIG_XDP_SOCKETS, or no CAP_NET_RAW)",
        ));
    }
    let ifindex = sys::ifindex(&config.interface).map_err(|e| what(e, "no such interface"))?;
    let queues = rx_queues(&config.interface);
    let map = sys::SocketMap::new(queues).map_err(|e| {
        what(
            e,
            "cannot make the socket map (needs CAP_BPF or CAP_SYS_ADMIN)",
        )
    })?;
    let gate = Gate::new(&config.interface)
        .map_err(|e| what(e, "cannot make the table of local addresses"))?;
    let program = sys::Program::load(&program::assemble(served, &gate.maps(map.raw())))
        .map_err(|e| what(e, "cannot load the program"))?;
    let mut workers = Vec::with_capacity(queues as usize);
    for q in 0..queues {
        let xsk = sys::Xsk::new(ifindex, q)
            .map_err(|e| what(e, &format!("cannot bind an AF_XDP socket to queue {q}")))?;
        map.insert(q, &xsk)
            .map_err(|e| what(e, &format!("cannot add queue {q}'s socket to the map")))?;
        workers.push(XdpWorker {
            worker: worker(q),
            xsk,
        });
    }
    let attachment = sys::Attachment::attach(&program, ifindex, config.mode).map_err(|e| {
        what(
            e,
            "cannot attach the program (EBUSY: another XDP program is attached)",
        )
    })?;
    let zero_copy = workers.iter().all(|w| w.xsk.zero_copy);
    Ok((
        Attached {
            interface: config.interface.clone(),
            mode: attachment.mode,
            zero_copy,
            queues,
            gate: Arc::new(gate),
            _attachment: attachment,
            _program: program,
            _map: map,
        },
        workers,
    ))
}
