//! # gnomon-sync
//!
//! Roughtime as the trusted time source of a machine, built on
//! gnomon-client: the client's measurement sequence, chain and consensus,
//! run on a schedule, with the state a machine needs across restarts. It
//! never disciplines the clock: chrony (or ntpd-rs) does; sync feeds it
//! (a [`Sink`]), checks it (`--check`) or makes one bounded step at boot
//! (`--once --set-clock`).
//!
//! ```text
//!   list (file, cached) ──▶ Service ──round──▶ round::run ──▶ Client::measure (gnomon-client)
//!                              │                    └──▶ consensus of the servers not excluded
//!                              ├──▶ decision: step plan, check, floor (pure)
//!                              ├──▶ state dir: floor, chain, list cache, reports (atomic writes)
//!                              ├──▶ sinks: chrony SOCK refclock, …
//!                              └──▶ now::Board (anchor on the raw clock) ◀── now socket
//! ```
//!
//! Argument parsing stays in the CLI (crates/cli/src/commands/sync.rs);
//! everything it decides is here, so it is tested without a process.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod chrony;
pub mod clock;
pub mod config;
pub mod counts;
pub mod decision;
mod jitter;
pub mod list;
pub mod metrics;
pub mod now;
pub mod now_socket;
pub mod refresh;
pub mod round;
pub mod service;
pub mod signed;
pub mod sink;
pub mod state;

pub use config::{Layer, Settings};
pub use decision::{Evidence, Refusal, StepPlan, StepRules};
pub use round::Round;
pub use service::{Control, Outcome, Service};
pub use sink::{Log, Sink};
pub use state::{State, Store};
