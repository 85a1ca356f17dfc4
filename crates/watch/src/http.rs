//! Serving a router to hostile HTTP clients, for the status page (web/)
//! and the report sink (sink/) alike, as the server's metrics endpoint
//! does: a task per connection, caps on how many are open in all and from
//! one source, enforced by gnomon-metrics-http's connection table (a
//! newcomer over a cap takes the slot of the oldest connection whose
//! request is not complete yet; only when every holder has sent its whole
//! request is it closed at accept), a deadline from accept that covers the
//! whole exchange however slowly the bytes come, a header timeout, a small
//! head buffer and no keep-alive.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::Router;
use gnomon_metrics_http::slots::{CompleteAtEnd, ConnTable, Reason};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tower::ServiceExt as _;

/// Everything about one connection ends this long after accept: a body
/// trickled a byte at a time holds one slot this long at most.
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(10);
/// The request head must be complete this long after accept.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(3);
/// Largest request head buffered (hyper's smallest allowed buffer).
pub const MAX_HEAD: usize = 8192;
/// Connections open at once from one source (an address, an IPv6 /64): a
/// browser opens up to six to one host, a reporter one; one holder leaves
/// the rest of the listener's slots to everyone else.
pub const MAX_PER_SOURCE: usize = 8;

/// The connection table of a listener with `max_connections` slots.
pub fn connection_table(max_connections: usize) -> Arc<ConnTable> {
    ConnTable::new(max_connections, MAX_PER_SOURCE)
}

/// Prometheus text for a listener's connection table: refusals (every
/// holder had sent its whole request) and evictions, by the cap met.
pub fn render_connections(prefix: &str, what: &str, table: &ConnTable) -> String {
    let refused: u64 = Reason::ALL.iter().map(|&r| table.refused(r)).sum();
    let mut o = format!(
        "# HELP {prefix}_connections_refused_total Connections to {what} closed at accept (every slot held by a complete request).\n\
         # TYPE {prefix}_connections_refused_total counter\n\
         {prefix}_connections_refused_total {refused}\n\
         # HELP {prefix}_connections_evicted_total Connections to {what} closed before their request was complete, to make room for a newcomer, by the cap it met.\n\
         # TYPE {prefix}_connections_evicted_total counter\n"
    );
    for r in Reason::ALL {
        o += &format!(
            "{prefix}_connections_evicted_total{{reason=\"{}\"}} {}\n",
            r.label(),
            table.evicted(r)
        );
    }
    o
}

/// Serves `router` on `listener` until `shutdown` completes; connections
/// still open then are dropped. Each request carries the peer's address
/// as `ConnectInfo<SocketAddr>`. `slots` admits (and counts) connections.
pub async fn serve_router(
    listener: TcpListener,
    router: Router,
    slots: Arc<ConnTable>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                // Out of descriptors, or a reset before accept: the next
                // accept may work; do not spin on it.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(slot) = slots.admit(peer.ip()) else {
            drop(stream);
            continue;
        };
        let router = router.clone();
        tokio::spawn(async move {
            let marker = slot.marker();
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                // Complete once its body has been read to the end.
                let marker = marker.clone();
                let mut req = req.map(|b| Body::new(CompleteAtEnd::new(b, marker)));
                req.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
                router.clone().oneshot(req)
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_HEAD)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            // Evicted or not, the connection is closed when this ends.
            let _ = slot
                .run(tokio::time::timeout(CONNECTION_DEADLINE, conn))
                .await;
        });
    }
}
