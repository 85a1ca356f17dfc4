//! The sink's HTTP side: the accept loop with its limits, and the routes.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Path, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, LOCATION, RETRY_AFTER};
use axum::http::Uri;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use gnomon_client::format_utc;
use gnomon_client::report_check::{check_json, parse_verifiable};
use gnomon_protocol::report::MEDIA_TYPE;
use serde_json::json;
use tokio::net::TcpListener;

use super::accept::Stored;
use super::limit::{retry_after, sender_prefix};
use super::metrics::{Reject, Summary};
use super::{page, Shared, SinkConfig, PAGE_SIZE};
use crate::store::{Cursor, Inserted, PageAt, ReportPage};
use crate::Store;

/// Most lines `/api/reports?limit=` gives on one page.
const MAX_API_LIMIT: u32 = 1000;

/// Retry-After for a quota refusal: room comes back only as reports
/// expire, so not soon.
const QUOTA_RETRY_SECS: u64 = 3600;

/// Serves the sink on `listener` until `shutdown` completes; connections
/// still open then are dropped. Returns what it did.
pub async fn serve(
    listener: TcpListener,
    store: Store,
    config: SinkConfig,
    shutdown: impl Future<Output = ()>,
) -> io::Result<Summary> {
    let shared = Shared::new(store, config, false);
    let slots = crate::http::connection_table(shared.config.max_connections);
    let _ = shared.counters.connections.set(slots.clone());
    let retention = tokio::spawn(super::retention_loop(shared.clone()));
    let served = crate::http::serve_router(listener, routes(shared.clone()), slots, shutdown).await;
    retention.abort();
    served.map(|()| shared.counters.summary())
}

pub(crate) fn routes(shared: Arc<Shared>) -> Router {
    reports_routes(shared.clone()).merge(
        Router::new()
            .route("/", get(list).post(receive))
            .route("/metrics", get(metrics))
            .with_state(shared),
    )
}

/// Everything under `/reports`: what a process serving other pages at `/`
/// and `/metrics` (`gnomon watch --sink`) mounts beside them. `GET
/// /reports` is the audit list, as `GET /` is on the sink alone.
pub(crate) fn reports_routes(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/reports", get(list).post(receive))
        .route("/reports/{file}", get(raw))
        .route("/reports/{id}/verify", get(verify))
        .route("/api/reports", get(list_json))
        .with_state(shared)
}

fn json_response(status: StatusCode, v: serde_json::Value) -> Response {
    let mut r = (status, v.to_string() + "\n").into_response();
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn refuse(shared: &Shared, why: Reject, detail: impl Into<String>) -> Response {
    shared.counters.rejected(why);
    let status = StatusCode::from_u16(why.status()).unwrap_or(StatusCode::BAD_REQUEST);
    let mut r = json_response(
        status,
        json!({ "status": "rejected", "reason": why.label(), "detail": detail.into() }),
    );
    let retry = match why {
        Reject::RateLimited => Some(retry_after(shared.config.rate_per_minute).as_secs()),
        Reject::SourceQuota | Reject::StorageFull => Some(QUOTA_RETRY_SECS),
        _ => None,
    };
    if let Some(secs) = retry {
        r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    r
}

/// Whether the Content-Type is the report media type (parameters such as
/// a charset are allowed; the type compares case-insensitively).
fn is_report_type(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case(MEDIA_TYPE))
}

async fn receive(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let prefix = sender_prefix(peer.ip());
    if !shared.limiter.allow(&prefix, Instant::now()) {
        return refuse(
            &shared,
            Reject::RateLimited,
            "too many reports from your network; retry later",
        );
    }
    if !is_report_type(&headers) {
        return refuse(
            &shared,
            Reject::ContentType,
            format!("Content-Type must be {MEDIA_TYPE}"),
        );
    }
    let max = shared.config.max_body;
    let too_large = || format!("a report is at most {max} bytes");
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return refuse(&shared, Reject::TooLarge, too_large());
    }
    let bytes: Bytes = match axum::body::to_bytes(body, max).await {
        Ok(b) => b,
        Err(e) => {
            let over = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            return if over {
                refuse(&shared, Reject::TooLarge, too_large())
            } else {
                refuse(&shared, Reject::Read, "the body could not be read")
            };
        }
    };
    let location = |id: &str| format!("/reports/{id}.json");
    match super::accept::accept(&shared, bytes, prefix).await {
        Ok(Stored {
            id,
            inserted: Inserted::New,
        }) => {
            let url = location(&id);
            let mut r = json_response(
                StatusCode::CREATED,
                json!({ "status": "stored", "id": id, "url": url }),
            );
            if let Ok(v) = HeaderValue::from_str(&url) {
                r.headers_mut().insert(LOCATION, v);
            }
            r
        }
        Ok(Stored {
            id,
            inserted: Inserted::Duplicate,
        }) => json_response(
            StatusCode::OK,
            json!({ "status": "already known", "id": id, "url": location(&id) }),
        ),
        Err((why, detail)) => refuse(&shared, why, detail),
    }
}

/// An id as we make them: 64 lowercase hex digits.
fn valid_id(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "no such report\n").into_response()
}

fn unavailable() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        "the database is unavailable\n",
    )
        .into_response()
}

async fn raw(State(shared): State<Arc<Shared>>, Path(file): Path<String>) -> Response {
    let Some(id) = file.strip_suffix(".json").filter(|id| valid_id(id)) else {
        return not_found();
    };
    match shared.store.report(id).await {
        Ok(Some(r)) => {
            let mut resp = r.body.into_response();
            resp.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
            resp
        }
        Ok(None) => not_found(),
        Err(_) => unavailable(),
    }
}

/// The check made when the report arrived, as stored: no signature is
/// checked again. A row stored before checks were kept is checked once and
/// its check kept.
async fn verify(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    if !valid_id(&id) {
        return not_found();
    }
    let stored = match shared.store.report(&id).await {
        Ok(Some(r)) => r,
        Ok(None) => return not_found(),
        Err(_) => return unavailable(),
    };
    let mut v = match stored.check_json.as_deref().map(serde_json::from_str) {
        Some(Ok(v)) => {
            shared.counters.verdict_served();
            v
        }
        _ => {
            let body = stored.body.clone();
            let counted = shared.clone();
            let fresh =
                tokio::task::spawn_blocking(move || match parse_verifiable(body.as_bytes()) {
                    Ok(report) => {
                        counted.counters.verified(report.entries.len());
                        check_json(&report, &report.verify())
                    }
                    Err(e) => json!({ "valid": false, "error": e }),
                })
                .await;
            let Ok(v) = fresh else {
                return unavailable();
            };
            let _ = shared.store.set_report_check(&id, &v.to_string()).await;
            v
        }
    };
    v["id"] = json!(stored.id);
    v["verdict_when_received"] = json!(stored.verdict);
    v["received_us"] = json!(stored.received_us);
    json_response(StatusCode::OK, v)
}

/// Which page a request asks for: `?before=CURSOR` (older), `?after=CURSOR`
/// (newer), else the newest; and `limit=N`. None: a cursor that does not
/// read.
fn page_query(uri: &Uri) -> Option<(PageAt, Option<u32>)> {
    let mut at = PageAt::Newest;
    let mut limit = None;
    for pair in uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "before" => at = PageAt::Before(Cursor::parse(v)?),
            "after" => at = PageAt::After(Cursor::parse(v)?),
            "limit" => limit = Some(v.parse::<u32>().ok()?.clamp(1, MAX_API_LIMIT)),
            _ => {}
        }
    }
    Some((at, limit))
}

fn bad_cursor() -> Response {
    (
        StatusCode::BAD_REQUEST,
        "before=, after= take a cursor from a page's links; limit= a count\n",
    )
        .into_response()
}

/// The cursors a page links to: (newer, older).
fn links(page: &ReportPage) -> (Option<String>, Option<String>) {
    let newer = page
        .lines
        .first()
        .filter(|_| page.newer)
        .map(|l| Cursor::at(l).to_string());
    let older = page
        .lines
        .last()
        .filter(|_| page.older)
        .map(|l| Cursor::at(l).to_string());
    (newer, older)
}

async fn list(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    let Some((at, _)) = page_query(&uri) else {
        return bad_cursor();
    };
    let page = match shared.store.reports_page(&at, PAGE_SIZE).await {
        Ok(p) => p,
        Err(_) => return unavailable(),
    };
    let servers = shared.store.servers().await.unwrap_or_default();
    let (newer, older) = links(&page);
    match page::render(&page.lines, &servers, newer, older, shared.beside_status) {
        Ok(html) => Html(html).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "page failed\n").into_response(),
    }
}

/// `GET /api/reports`: a page of the newest-first list as JSON, with the
/// cursors of the pages beside it.
async fn list_json(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    let Some((at, limit)) = page_query(&uri) else {
        return bad_cursor();
    };
    let page = match shared
        .store
        .reports_page(&at, limit.unwrap_or(PAGE_SIZE))
        .await
    {
        Ok(p) => p,
        Err(_) => return unavailable(),
    };
    let (newer, older) = links(&page);
    // The links keep the page size asked for.
    let keep = limit.map(|n| format!("&limit={n}")).unwrap_or_default();
    let reports: Vec<serde_json::Value> = page
        .lines
        .iter()
        .map(|l| {
            json!({
                "id": l.id,
                "url": format!("/reports/{}.json", l.id),
                "verify": format!("/reports/{}/verify", l.id),
                "received_us": l.received_us,
                "received": format_utc(u64::try_from(l.received_us).unwrap_or(0)),
                "verdict": l.verdict,
                "size": l.size,
                "accused": l.accused,
                "judged": l.judged,
            })
        })
        .collect();
    json_response(
        StatusCode::OK,
        json!({
            "reports": reports,
            "newer": newer,
            "older": older,
            "newer_url": newer.as_ref().map(|c| format!("/api/reports?after={c}{keep}")),
            "older_url": older.as_ref().map(|c| format!("/api/reports?before={c}{keep}")),
        }),
    )
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    let mut r = shared.metrics().await.into_response();
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}
