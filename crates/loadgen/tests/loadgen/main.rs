//! The loadgen crate's integration tests, one binary (each module was
//! once a binary of its own): the shared helpers first, then the tests.

mod common;

mod load;
mod null_server;
mod tcp;
