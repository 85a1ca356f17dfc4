//! gnomon-loadgen: `gnomon bench load`, a Roughtime load generator that
//! verifies what it gets back, and `gnomon bench null-server`, the
//! do-nothing UDP responder a server's cost is measured against.
//!
//! ```text
//!  LoadConfig ─check─▶ target (loopback unless allow_remote)
//!      │
//!      ├─ worker 0: socket ─ ring of sent requests ─ send ▶ ◀ receive ─ match ─ verify
//!      ├─ worker 1: …                       (no shared state on the hot path)
//!      ▼
//!  Report: sent, answered, valid, invalid, lost, latency percentiles ─▶ text | JSON
//! ```
//!
//! With `Transport::Tcp` each worker is a connection driven closed-loop
//! instead (`tcp`): the transport of ML-DSA-44, whose answers no datagram
//! may carry.
//!
//! Only `sys` contains `unsafe` (the batched socket calls, socket options,
//! `ppoll`, `getrusage`, the signal handler, and the io_uring backend in
//! `sys::uring`).
#![deny(unsafe_code)]

mod config;
mod histogram;
mod null_server;
mod report;
mod ring;
mod stats;
mod sys;
mod tcp;
mod worker;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use socket2::{Domain, Protocol, Socket, Type};

pub use config::{
    LoadConfig, LoadError, Mode, Transport, DEFAULT_RATE_WINDOW, MAX_DURATION, MAX_RATE,
    MAX_REQUEST_SIZE, MAX_TIMEOUT, MAX_WINDOW, MAX_WORKERS,
};
pub use null_server::{Backend, NullConfig, NullServer, NullStats, MAX_REPLY_SIZE};
pub use report::{Latency, Report};
pub use sys::stop_on_signals;

use crate::report::RunInfo;
use crate::stats::WorkerStats;

/// Generous socket buffers, so the generator is not where packets drop.
const SOCKET_BUFFER: usize = 4 << 20;

/// Run the load described by `cfg`. Setting `stop` ends sending early; the
/// report covers what was done until then.
pub fn run(cfg: &LoadConfig, stop: &AtomicBool) -> Result<Report, LoadError> {
    let target = cfg.check()?;
    if cfg.transport == Transport::Tcp {
        return Ok(tcp::run_all(cfg, target, stop));
    }
    let sockets = (0..cfg.workers)
        .map(|_| open(target))
        .collect::<Result<Vec<_>, _>>()
        .map_err(LoadError::Socket)?;
    let shared = worker::Shared {
        cfg,
        start: Instant::now(),
        stop,
        salt: salt(),
    };
    let per = cfg
        .count
        .map(|c| (c / cfg.workers as u64, c % cfg.workers as u64));
    let mut total = WorkerStats::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = sockets
            .iter()
            .enumerate()
            .map(|(id, sock)| {
                let quota = per.map(|(q, r)| q + u64::from((id as u64) < r));
                let shared = &shared;
                s.spawn(move || worker::run(id, sock, shared, quota))
            })
            .collect();
        for h in handles {
            let st = h.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
            total.merge(&st);
        }
    });
    let info = RunInfo {
        target,
        transport: cfg.transport,
        version: cfg.profile.name,
        mode: cfg.mode,
        workers: cfg.workers,
        window: cfg.effective_window(),
        verify_fraction: cfg.verify_fraction,
        request_size: cfg.request_size,
        any_reply: cfg.any_reply,
        elapsed_secs: shared.start.elapsed().as_secs_f64(),
        cpu_secs: total.cpu.as_secs_f64(),
    };
    Ok(Report::new(info, &total))
}

fn open(target: SocketAddr) -> std::io::Result<UdpSocket> {
    let s = Socket::new(
        Domain::for_address(target),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    // Best effort: the kernel caps these at its configured maximum.
    let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = s.set_send_buffer_size(SOCKET_BUFFER);
    s.connect(&target.into())?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// A per-run value that keeps one run's nonces apart from another's. It
/// needs to differ between runs, not to be secret.
fn salt() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}
