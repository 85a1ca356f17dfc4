//! The sha512x4 crate's integration tests, one binary (each module was
//! once a binary of its own): the shared helpers first, then the tests.

mod common;

mod agree;
mod backends;
