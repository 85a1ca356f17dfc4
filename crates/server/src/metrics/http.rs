//! Serving `/metrics` and `/health` through gnomon-metrics-http (hyper on a
//! current-thread runtime of its own, connection cap, per-connection
//! deadline: crates/metrics-http), which gnomon sync's endpoint shares.
//! What is answered is decided here.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;

use gnomon_metrics_http::Reply;

use super::{render, Snapshot};

/// Serve `/metrics` and `/health` on `addr` until `stop` is set. The
/// thread ends promptly after that, whatever clients are connected.
pub fn spawn(
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    snapshot: impl Fn() -> Snapshot + Send + 'static,
) -> io::Result<(SocketAddr, JoinHandle<()>)> {
    gnomon_metrics_http::spawn(addr, "gnomon-metrics", stop, move |path| {
        respond(path, &snapshot)
    })
}

fn respond(path: &str, snapshot: &dyn Fn() -> Snapshot) -> Reply {
    match path {
        "/metrics" => Reply::metrics(render(&snapshot())),
        "/health" => {
            let s = snapshot();
            if s.healthy() {
                Reply::text(200, "ok\n")
            } else if !s.answering {
                // The policy that refuses is the one thing the operator
                // can change here; the flag is what a probe's reader types.
                Reply::text(
                    503,
                    "not answering: clock unsynchronized and clock.unsynchronized is \
                     \"refuse\"; --clock-unsynchronized answer-with-radius (or \
                     GNOMON_CLOCK_UNSYNCHRONIZED) answers with a wider radius meanwhile\n",
                )
            } else {
                Reply::text(503, "not signing: no delegation covers the current time\n")
            }
        }
        _ => Reply::text(404, "try /metrics or /health\n"),
    }
}
