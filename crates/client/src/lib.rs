//! # gnomon-client
//!
//! A Roughtime client for every protocol version: it finds the newest
//! version a server speaks, asks over UDP with exponential backoff (and over
//! TCP when UDP gets no answer, for versions that define TCP), verifies
//! every answer in full, runs the measurement sequence of RFC 10049
//! across servers of different versions, and keeps the proof when a server
//! lies.
//!
//! ```text
//!  Server (address, key, versions)
//!    │ discovery::families: offers that share one request format, newest first
//!    ▼
//!  Client::query ──UDP, 1 s × 1.5^(n−1)──▶ server ──▶ verify_response ─▶ Answer
//!    │   └─ no answer: TCP (versions that define it), then older families
//!    ▼
//!  Client::measure: ≥ 3 servers, twice, each nonce chained from the last answer
//!    ▼
//!  causal-order check ─▶ consensus ─▶ malfeasance report ─▶ post_report
//! ```
//!
//! The protocol itself (request building, verification, chaining, reports)
//! is `gnomon-protocol`'s; this crate adds sockets, clocks, randomness and
//! policy. Randomness comes from the operating system unless an
//! [`Entropy`] source is injected.
//!
//! ## Example
//!
//! ```no_run
//! use gnomon_client::{Client, Config, Server};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let key = gnomon_client::parse_public_key("iBVjxg/1j7y1+kQUTBYdTabxCppesU/07D4PMDJk2WA=")?;
//! let server = Server::at("roughtime.example.net", key)?; // port 5319
//! let mut client = Client::new(Config::default());
//! let answer = client.query(&server)?;
//! println!(
//!     "{} ± {} µs via {} (offset {} µs)",
//!     gnomon_client::format_utc(answer.verified.midpoint_us),
//!     answer.verified.radius_us,
//!     answer.verified.profile.name,
//!     answer.offset_us,
//! );
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod clock;
pub mod consensus;
pub mod decode;
pub mod discovery;
mod entropy;
mod error;
mod post;
mod progress;
mod query;
pub mod report_check;
mod sequence;
mod server;
mod time;
mod transport;

pub use clock::{SystemClock, WallClock};
pub use consensus::{
    agree, describe_assumption, Agreement, Assumption, Bond, Consensus, Electorate, Flag, Identity,
    Vouch,
};
pub use entropy::{Entropy, EntropyError, OsEntropy, SeededEntropy};
pub use error::{describe_verify_error, QueryError, Rejection, SILENT_SERVER};
pub use post::{no_reports_url, post_report, reports_url, PostError, PostPolicy, Posted};
pub use progress::Retry;
pub use query::{Answer, Backoff, Client, Config, TcpMode};
pub use sequence::{Entry, Plan, Selection, Sequence};
pub use server::{
    parse_public_key, parse_target, KeyError, Server, TargetError, Versions, DEFAULT_PORT,
};
pub use time::{format_duration_us, format_utc};
