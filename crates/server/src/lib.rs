//! gnomon-server: the Roughtime server engine.
//!
//! ```text
//!  socket (SO_REUSEPORT, one per worker) ──recvmmsg──▶ batch of datagrams
//!    ▶ source check (no reply to broadcast, multicast, unspecified, port 0,
//!      spoofed loopback) ▶ source limits (deny/allow lists, rate per prefix)
//!    ▶ stale check (kernel receive timestamp)
//!    ▶ parse + validate (drop, count why) ▶ signature budget (versions answered singly)
//!    ▶ group by (profile, identity) ▶ per group: leaves ▶ tree ▶ one signature
//!    ▶ responses written into send buffers ▶ sendmmsg ──▶ socket
//! ```
//!
//! With `serve --xdp`, the socket and its two calls are replaced by one
//! receive queue's AF_XDP rings, and the stages between stay the same
//! (`xdp`).
//!
//! Only `sys` and `xdp::sys` contain `unsafe` (the syscalls and the rings
//! shared with the kernel); everything else is safe code around
//! `gnomon-protocol`.
#![deny(unsafe_code)]

pub mod activation;
pub mod bind_error;
pub mod budget;
pub mod config;
pub mod engine;
pub mod failure;
pub mod grease;
mod interfaces;
pub mod kernel_time;
pub mod key;
pub mod keyfile;
pub mod keys;
pub mod limit;
pub mod liveness;
pub mod metrics;
pub mod offline;
pub mod reload;
pub mod settings;
pub mod signer;
pub mod sources;
pub mod stats;
pub mod sys;
pub mod systemd;
pub mod tcp;
pub mod worker;
pub mod xdp;

pub use engine::{Engine, EngineConfig};
