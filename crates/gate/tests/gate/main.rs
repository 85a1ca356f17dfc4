//! The gate crate's integration tests, one binary (each module was
//! once a binary of its own): the shared helpers first, then the tests.

mod compare;
mod stages;
