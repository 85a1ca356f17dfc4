//! # gnomon-protocol
//!
//! The Roughtime protocol, every version, with no I/O: no sockets, threads,
//! clock reads or randomness. Time and random bytes are arguments, so the
//! server, the client, the tests and the fuzzers drive the same code. The
//! crate is `#![no_std]` + `alloc` and forbids `unsafe`, which keeps that
//! boundary checked by the compiler.
//!
//! ```text
//!                 client                                   server
//!  Offer::build ──────────── request bytes ──────────▶ Acceptor::parse
//!                                                          │ Request (borrowed, profile chosen)
//!                                                          ▼
//!                                             Responder::respond (batch)
//!                                               leaves ▶ tree ▶ SREP ▶ 1 signature
//!  verify_response ◀──────── response bytes ─────────── per request: template + PATH/INDX/NONC
//!   │ Verified { midpoint_us, radius_us, … }
//!   ▼
//!  chain (next nonce) ▶ causal-order check ▶ malfeasance report
//! ```
//!
//! Every difference between versions is a field of a [`Profile`] row in
//! [`profile::PROFILES`]; nothing else compares version numbers.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

pub mod cert;
pub mod chain;
pub mod error;
pub mod hash;
mod link;
pub mod merkle;
mod messages;
pub mod profile;
pub mod proof;
pub mod quorum;
pub mod report;
pub mod request;
pub mod responder;
pub mod scheme;
pub mod serverlist;
pub mod signed_list;
pub mod tag;
pub mod time;
pub mod verify;
pub mod version;
pub mod wire;

pub use cert::{Certificate, CertificateSet, KeyPair, Sign};
pub use chain::{causal_violations, chain_nonce, Exchange, Measurement};
pub use error::WireError;
pub use profile::{Profile, ProfileId, ProfileSet, PROFILES};
pub use proof::{verify_proof, Proof, ProofError, ProofPolicy, ProofWorkspace, Proven};
pub use report::{parse_report, ParsedReport, Report, ReportCheck};
pub use request::{Acceptor, Offer, Request, RequestError};
pub use responder::{BatchContext, Responder, ResponderOptions, ResponseSink};
pub use scheme::{LongTermKey, MlDsa44KeyPair, PublicKey, Scheme};
pub use serverlist::ServerList;
pub use tag::Tag;
pub use verify::{verify_response, Verified, VerifyError};
pub use version::Version;
