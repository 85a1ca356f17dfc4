//! The client crate's integration tests, one binary (each module was
//! once a binary of its own): the shared helpers first, then the tests.

mod common;

mod consensus_adversary;
mod failures;
mod lists;
mod query;
mod sequence;
