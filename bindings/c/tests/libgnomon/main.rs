//! The libgnomon crate's integration tests, one binary (each module was
//! once a binary of its own): the shared helpers first, then the tests.

mod c_support;

mod abi;
mod c_programs;
mod consensus;
mod header;
mod messages;
mod ml_dsa;
mod no_std;
mod proof_device;
mod signed_list;
