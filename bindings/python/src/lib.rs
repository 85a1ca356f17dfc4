//! `gnomon._native`: the Rust half of the `gnomon` Python package.
//!
//! Everything here returns plain values (bytes, ints, strings, tuples and
//! dicts); `python/gnomon/__init__.py` turns them into typed dataclasses and
//! datetimes. Failures are raised as the classes of `gnomon._errors`, so the
//! exception types are ordinary Python classes with attributes.
//!
//! No input from Python reaches a panic: byte strings are parsed by the
//! protocol crate (fuzzed, `Result` everywhere), keys and version names are
//! checked here first. Network calls run on a thread of their own while
//! the caller waits detached from the interpreter (`Python::detach`) in
//! slices, checking for signals between them: other Python threads run
//! meanwhile, and Ctrl-C raises `KeyboardInterrupt` within a slice.
//!
//! ```text
//!  Python ─▶ exchange.rs  versions, build_request, verify, query: one server
//!            measure.rs   measure (the sequence over a list), verify_report
//!            proof.rs     verify_proof: a relayed proof, as the device checks it
//!            signed_list.rs verify_server_list: monitors' signed lists, k of n
//!              ├─▶ args.rs      keys, versions, bounded ints, timeout and transport
//!              ├─▶ blocking.rs  the network call's own thread; the wait, signals
//!              └─▶ convert.rs   results as dicts; the exceptions of gnomon._errors
//!                    └─▶ gnomon-client ─▶ gnomon-protocol
//! ```

use pyo3::prelude::*;

mod args;
mod blocking;
mod convert;
mod exchange;
mod measure;
mod proof;
mod signed_list;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(exchange::versions, m)?)?;
    m.add_function(wrap_pyfunction!(exchange::build_request, m)?)?;
    m.add_function(wrap_pyfunction!(exchange::verify, m)?)?;
    m.add_function(wrap_pyfunction!(exchange::query, m)?)?;
    m.add_function(wrap_pyfunction!(measure::measure, m)?)?;
    m.add_function(wrap_pyfunction!(measure::verify_report, m)?)?;
    m.add_function(wrap_pyfunction!(proof::verify_proof, m)?)?;
    m.add_function(wrap_pyfunction!(signed_list::verify_server_list, m)?)?;
    Ok(())
}
