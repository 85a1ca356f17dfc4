//! # gnomon-metrics-http
//!
//! Serving `/metrics` (and whatever else the caller answers, `/health` for
//! the server): hyper's HTTP/1 server on a current-thread tokio runtime
//! that lives on one thread alone. `gnomon serve` and `gnomon sync` both
//! use it; neither knows the other (the layering rule: dependencies point down).
//!
//! ```text
//!  metrics thread: runtime ─ accept ─▶ slots ─▶ task per connection
//!     task: deadline(CONNECTION_DEADLINE, hyper http1 (header timeout,
//!           8 KiB buffer, no keep-alive) ─▶ answer(path))
//! ```
//!
//! The endpoint is for a scraper and a load balancer, and anyone who can
//! reach it may be hostile (one byte every second or so held the server's
//! old hand-written endpoint, and shutdown with it). So: each connection is
//! a task, so a slow one holds only itself; each has a deadline from accept
//! that covers reading the request and writing the answer, however the
//! bytes are paced; at most `MAX_CONNECTIONS` are open and
//! `MAX_PER_SOURCE` from one source, and a newcomer over either cap takes
//! the slot of the oldest connection that has not sent its whole request
//! ([`slots`], which every gnomon HTTP listener uses); and at stop the
//! runtime is dropped, which drops every connection still open instead of
//! waiting for it. Why hyper and not a
//! hand-written parser or another crate: docs/DESIGN.md.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod slots;

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

use slots::{ConnTable, Marker, Reason};

/// Connections served at once. A scraper and a health checker need one
/// each; the rest is room for retries.
pub const MAX_CONNECTIONS: usize = 16;
/// Connections from one source (address, IPv6 /64) at once: a host that
/// runs both the scraper and the health checker, with room for a retry
/// each, and a quarter of the slots, so one holder leaves the rest free.
pub const MAX_PER_SOURCE: usize = 4;
/// Everything about one connection (request in, answer out) ends this long
/// after accept.
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(5);
/// The request head must be complete this long after accept.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest request head buffered; hyper's smallest allowed buffer, far more
/// than a GET needs.
const MAX_HEAD: usize = 8192;
/// How often the accept loop looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

/// The media type of Prometheus' text format.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4";

/// The answer to a GET.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// HTTP status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
}

impl Reply {
    /// 200 with Prometheus text; the endpoint's own connection counters
    /// are appended.
    pub fn metrics(body: String) -> Reply {
        Reply {
            status: 200,
            content_type: PROMETHEUS_TEXT,
            body,
        }
    }

    /// `status` with a line of plain text.
    pub fn text(status: u16, body: impl Into<String>) -> Reply {
        Reply {
            status,
            content_type: "text/plain",
            body: body.into(),
        }
    }
}

/// What happened to the endpoint's connections, for its own metrics.
struct Counters {
    slots: Arc<ConnTable>,
    served: Cell<u64>,
    timed_out: Cell<u64>,
}

fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}

/// Serve GETs on `addr` on a thread named `thread`, answered by `answer`
/// (given the path), until `stop` is set. The thread ends within
/// `STOP_POLL` of that, whatever clients are connected. Other methods get
/// 405; a 200 with [`PROMETHEUS_TEXT`] gets the endpoint's connection
/// counters appended (`gnomon_http_connections_total`,
/// `gnomon_http_connections_evicted_total`, `gnomon_http_open_connections`).
pub fn spawn(
    addr: SocketAddr,
    thread: &str,
    stop: Arc<AtomicBool>,
    answer: impl Fn(&str) -> Reply + Send + 'static,
) -> io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = std::net::TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    let handle = std::thread::Builder::new()
        .name(thread.into())
        .spawn(move || {
            let tasks = tokio::task::LocalSet::new();
            tasks.block_on(&runtime, serve(listener, stop, answer));
            // Dropping the tasks and the runtime here closes every
            // connection still open: stopping waits for no client.
        })?;
    Ok((local, handle))
}

async fn serve(
    listener: std::net::TcpListener,
    stop: Arc<AtomicBool>,
    answer: impl Fn(&str) -> Reply + 'static,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let answer = Rc::new(answer);
    let counters = Rc::new(Counters {
        slots: ConnTable::new(MAX_CONNECTIONS, MAX_PER_SOURCE),
        served: Cell::new(0),
        timed_out: Cell::new(0),
    });
    while !stop.load(Ordering::Relaxed) {
        let Ok(accepted) = tokio::time::timeout(STOP_POLL, listener.accept()).await else {
            continue;
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            // Out of descriptors and the like: the connection stays queued,
            // so pause rather than spin.
            Err(_) => {
                tokio::time::sleep(STOP_POLL).await;
                continue;
            }
        };
        let Some(slot) = counters.slots.admit(peer.ip()) else {
            continue;
        };
        let (answer, counters) = (answer.clone(), counters.clone());
        tokio::task::spawn_local(async move {
            let marker = slot.marker();
            let service = service_fn(|request: Request<Incoming>| {
                let reply = respond(&request, &*answer, &counters, &marker);
                async move { Ok::<_, Infallible>(reply) }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_HEAD)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            match slot
                .run(tokio::time::timeout(CONNECTION_DEADLINE, connection))
                .await
            {
                Some(Ok(_)) => bump(&counters.served),
                Some(Err(_)) => bump(&counters.timed_out),
                // Counted by the table.
                None => {}
            }
        });
    }
}

fn respond(
    request: &Request<Incoming>,
    answer: &dyn Fn(&str) -> Reply,
    counters: &Counters,
    marker: &Marker,
) -> Response<Full<Bytes>> {
    // The head is in and a GET's body is ignored: the request is complete.
    marker.complete();
    if request.method() != Method::GET {
        return reply(Reply::text(405, "GET only\n"));
    }
    let mut r = answer(request.uri().path());
    if r.status == 200 && r.content_type == PROMETHEUS_TEXT {
        render_http(&mut r.body, counters);
    }
    reply(r)
}

fn reply(r: Reply) -> Response<Full<Bytes>> {
    let mut out = Response::new(Full::new(Bytes::from(r.body)));
    *out.status_mut() = StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    out.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(r.content_type),
    );
    out
}

/// The endpoint's own connection counters.
fn render_http(o: &mut String, c: &Counters) {
    let _ = writeln!(o, "# HELP gnomon_http_connections_total Connections to this endpoint, by outcome.\n# TYPE gnomon_http_connections_total counter");
    let t = &c.slots;
    let refused: u64 = Reason::ALL.iter().map(|&r| t.refused(r)).sum();
    let evicted: u64 = Reason::ALL.iter().map(|&r| t.evicted(r)).sum();
    for (outcome, n) in [
        ("served", c.served.get()),
        ("refused", refused),
        ("deadline", c.timed_out.get()),
        ("evicted", evicted),
    ] {
        let _ = writeln!(
            o,
            "gnomon_http_connections_total{{outcome=\"{outcome}\"}} {n}"
        );
    }
    let _ = writeln!(o, "# HELP gnomon_http_connections_evicted_total Connections closed before their request was complete to make room for a newcomer, by the cap it met.\n# TYPE gnomon_http_connections_evicted_total counter");
    for r in Reason::ALL {
        let _ = writeln!(
            o,
            "gnomon_http_connections_evicted_total{{reason=\"{}\"}} {}",
            r.label(),
            t.evicted(r)
        );
    }
    let _ = writeln!(o, "# HELP gnomon_http_open_connections Connections to this endpoint open now.\n# TYPE gnomon_http_open_connections gauge\ngnomon_http_open_connections {}", t.open());
}
