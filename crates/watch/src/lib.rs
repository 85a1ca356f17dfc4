//! # gnomon-watch
//!
//! The monitor of Roughtime servers: a prober that checks every server of
//! a list on a schedule with the client's own code, the latest state and
//! history it keeps, and the web page, metrics and JSON that show them.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod probe;
pub mod state;
pub mod web;
