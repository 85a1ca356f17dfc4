//! Serving `/metrics` and `/health`: hyper's HTTP/1 server on a
//! current-thread tokio runtime that lives on the metrics thread alone.
//!
//! ```text
//!  gnomon-metrics thread: runtime ─ accept ─▶ cap ─▶ task per connection
//!     task: deadline(CONNECTION_DEADLINE, hyper http1 (header timeout,
//!           8 KiB buffer, no keep-alive) ─▶ respond)
//! ```
//!
//! The endpoint is for a scraper and a load balancer, and anyone who can
//! reach it may be hostile (one byte every second or so held the old
//! hand-written server, and shutdown with it). So: each connection is a task,
//! so a slow one holds only itself; each has a deadline from accept that
//! covers reading the request and writing the answer, however the bytes
//! are paced; at most `MAX_CONNECTIONS` are open, further ones are closed at
//! once; and at shutdown the runtime is dropped, which drops every
//! connection still open instead of waiting for it. Why hyper and not a
//! hand-written parser or another crate: docs/DESIGN.md.

use std::cell::Cell;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::CONTENT_TYPE;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};

use super::{render, Snapshot};

/// Connections served at once; more are closed at accept. A scraper and a
/// health checker need one each; the rest is room for retries.
const MAX_CONNECTIONS: usize = 16;
/// Everything about one connection (request in, answer out) ends this long
/// after accept.
const CONNECTION_DEADLINE: Duration = Duration::from_secs(5);
/// The request head must be complete this long after accept.
const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest request head buffered; hyper's smallest allowed buffer, far more
/// than a GET needs.
const MAX_HEAD: usize = 8192;
/// How often the accept loop looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

/// What happened to the endpoint's connections, for its own metrics.
#[derive(Default)]
struct Counters {
    open: Cell<u64>,
    served: Cell<u64>,
    refused: Cell<u64>,
    timed_out: Cell<u64>,
}

fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}

/// Serve `/metrics` and `/health` on `addr` until `stop` is set. The
/// thread ends within `STOP_POLL` of that, whatever clients are connected.
pub fn spawn(
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    snapshot: impl Fn() -> Snapshot + Send + 'static,
) -> io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = std::net::TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    let handle = std::thread::Builder::new()
        .name("gnomon-metrics".into())
        .spawn(move || {
            let tasks = tokio::task::LocalSet::new();
            tasks.block_on(&runtime, serve(listener, stop, snapshot));
            // Dropping the tasks and the runtime here closes every
            // connection still open: shutdown waits for no client.
        })?;
    Ok((local, handle))
}

async fn serve(
    listener: std::net::TcpListener,
    stop: Arc<AtomicBool>,
    snapshot: impl Fn() -> Snapshot + 'static,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let snapshot = Rc::new(snapshot);
    let counters = Rc::new(Counters::default());
    while !stop.load(Ordering::Relaxed) {
        let Ok(accepted) = tokio::time::timeout(STOP_POLL, listener.accept()).await else {
            continue;
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            // Out of descriptors and the like: the connection stays queued,
            // so pause rather than spin.
            Err(_) => {
                tokio::time::sleep(STOP_POLL).await;
                continue;
            }
        };
        if counters.open.get() >= MAX_CONNECTIONS as u64 {
            bump(&counters.refused);
            continue;
        }
        counters.open.set(counters.open.get() + 1);
        let (snapshot, counters) = (snapshot.clone(), counters.clone());
        tokio::task::spawn_local(async move {
            let service = service_fn(|request: Request<Incoming>| {
                let answer = respond(&request, &*snapshot, &counters);
                async move { Ok::<_, Infallible>(answer) }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_HEAD)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            match tokio::time::timeout(CONNECTION_DEADLINE, connection).await {
                Ok(_) => bump(&counters.served),
                Err(_) => bump(&counters.timed_out),
            }
            counters.open.set(counters.open.get() - 1);
        });
    }
}

fn respond(
    request: &Request<Incoming>,
    snapshot: &dyn Fn() -> Snapshot,
    counters: &Counters,
) -> Response<Full<Bytes>> {
    if request.method() != Method::GET {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "GET only\n");
    }
    match request.uri().path() {
        "/metrics" => {
            let mut text = render(&snapshot());
            render_http(&mut text, counters);
            reply(StatusCode::OK, "text/plain; version=0.0.4", text)
        }
        "/health" => {
            let s = snapshot();
            if s.healthy() {
                reply(StatusCode::OK, "text/plain", "ok\n")
            } else if !s.answering {
                reply(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/plain",
                    "not answering: clock unsynchronized\n",
                )
            } else {
                reply(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/plain",
                    "not signing: no delegation covers the current time\n",
                )
            }
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "try /metrics or /health\n",
        ),
    }
}

fn reply(status: StatusCode, ctype: &'static str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, hyper::header::HeaderValue::from_static(ctype));
    r
}

/// The endpoint's own connection counters.
fn render_http(o: &mut String, c: &Counters) {
    let _ = writeln!(o, "# HELP gnomon_http_connections_total Connections to /metrics and /health, by outcome.\n# TYPE gnomon_http_connections_total counter");
    for (outcome, n) in [
        ("served", c.served.get()),
        ("refused", c.refused.get()),
        ("deadline", c.timed_out.get()),
    ] {
        let _ = writeln!(
            o,
            "gnomon_http_connections_total{{outcome=\"{outcome}\"}} {n}"
        );
    }
    let _ = writeln!(o, "# HELP gnomon_http_open_connections Connections to /metrics and /health open now.\n# TYPE gnomon_http_open_connections gauge\ngnomon_http_open_connections {}", c.open.get());
}
