//! Serving a router to hostile HTTP clients, for the status page (web/)
//! and the report sink (sink/) alike, as the server's metrics endpoint
//! does: a task per connection, a cap on how many are open (more are
//! closed at accept), a deadline from accept that covers the whole
//! exchange however slowly the bytes come, a header timeout, a small head
//! buffer and no keep-alive.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt as _;

/// Everything about one connection ends this long after accept: a body
/// trickled a byte at a time holds one slot this long at most.
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(10);
/// The request head must be complete this long after accept.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(3);
/// Largest request head buffered (hyper's smallest allowed buffer).
pub const MAX_HEAD: usize = 8192;

/// Serves `router` on `listener` until `shutdown` completes; connections
/// still open then are dropped. Each request carries the peer's address
/// as `ConnectInfo<SocketAddr>`. `refused` is called for each connection
/// closed at accept because `max_connections` were open.
pub async fn serve_router(
    listener: TcpListener,
    router: Router,
    max_connections: usize,
    refused: impl Fn(),
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(max_connections));
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
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            refused();
            drop(stream);
            continue;
        };
        let router = router.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let mut req = req.map(Body::new);
                req.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
                router.clone().oneshot(req)
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_HEAD)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_DEADLINE, conn).await;
            drop(slot);
        });
    }
}
