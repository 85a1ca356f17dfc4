//! A network call on a thread of its own, and the caller's wait for it:
//! detached from the interpreter (`Python::detach`) in slices, checking
//! for signals between them, so other Python threads run meanwhile and
//! Ctrl-C raises `KeyboardInterrupt` within a slice.

use std::time::Duration;

use pyo3::prelude::*;

/// How long the caller waits, detached, before it looks for a signal.
const SIGNAL_SLICE: Duration = Duration::from_millis(50);

/// Run `work` on a thread of its own and wait for it in slices of
/// [`SIGNAL_SLICE`], detached from the interpreter, checking for signals
/// between them: a blocking query would otherwise hold Ctrl-C until its
/// deadline. An interrupted call returns the signal's exception at once;
/// its thread ends by itself within the query's own deadline, and its
/// result is dropped.
pub(crate) fn interruptible<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("gnomon-query".into())
        .spawn(move || {
            let _ = tx.send(work());
        })
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(format!("cannot start a thread: {e}")))?;
    let mut rx = rx;
    loop {
        // The receiver goes into the detached closure and comes back: it
        // is Send, not Sync.
        let (got, back) = py.detach(move || (rx.recv_timeout(SIGNAL_SLICE), rx));
        rx = back;
        match got {
            Ok(v) => return Ok(v),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => py.check_signals()?,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(pyo3::exceptions::PyRuntimeError::new_err(
                    "the query's thread ended without an answer",
                ))
            }
        }
    }
}
