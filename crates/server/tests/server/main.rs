//! The server crate's integration tests, one binary (each module was
//! once a binary of its own): the shared helpers first, then the tests.

mod common;

mod clock_state;
mod engine;
mod pq;
mod send_errors;
mod tcp;
mod xdp_frame;
mod xdp_program;
mod xdp_worker;
