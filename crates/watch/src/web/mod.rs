//! The monitor's HTTP side: `/` (the status page), `/servers/NAME` (one
//! server's history and latest response), `/metrics` and `/api/servers`.
//!
//! Anyone who can reach the port may be hostile, so connections are
//! served by crate::http (shared with the report sink), as the server's
//! metrics endpoint serves them: a task each, a cap on how many are open
//! (more are closed at accept), a deadline from accept that covers the
//! whole exchange however slowly the bytes come, a header timeout, a
//! small head buffer and no keep-alive. Only GET is
//! routed; nothing is read from a request but its path.

pub mod metrics;
pub mod plot;
mod published;
// The cells the page shows; a module of the crate since the probes log
// each state change in the same words (probe/changes.rs).
pub use crate::view;

use std::future::Future;
use std::io;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use minijinja::{context, Environment};
use serde::Serialize;
use tokio::net::TcpListener;

use crate::history;
use crate::publish::Publisher;
use crate::sink::Sink;
use crate::state::{Latest, Point, Shared, Status};
use crate::store::Store;
use view::Cell;

/// Connections served at once (and [`crate::http::MAX_PER_SOURCE`] from
/// one source); a newcomer takes the slot of the oldest connection whose
/// request is not complete.
pub const MAX_CONNECTIONS: usize = 64;
/// What the handlers read.
pub struct App {
    /// The prober's latest state.
    pub latest: Shared,
    /// What makes a check a warning.
    pub limits: view::Limits,
    /// Where the history is, when not only in memory.
    pub store: Option<Store>,
    /// The report sink served beside the pages (`/reports…`), when on.
    pub sink: Option<Sink>,
    /// The signed server list, when this monitor publishes one.
    pub publisher: Option<Publisher>,
    /// Who holds the page's connection slots (and the counts of
    /// evictions and refusals).
    connections: Arc<gnomon_metrics_http::slots::ConnTable>,
    templates: Environment<'static>,
}

impl App {
    /// Handlers over `latest`.
    pub fn new(
        latest: Shared,
        limits: view::Limits,
        store: Option<Store>,
        sink: Option<Sink>,
        publisher: Option<Publisher>,
    ) -> Arc<App> {
        let mut templates = Environment::new();
        // `.html` names turn on auto-escaping: every value from the list
        // or a server is text, never markup.
        templates
            .add_template("status.html", include_str!("status.html"))
            .expect("the status template parses");
        templates
            .add_template("server.html", include_str!("server.html"))
            .expect("the server template parses");

        Arc::new(App {
            latest,
            limits,
            store,
            sink,
            publisher,
            connections: crate::http::connection_table(MAX_CONNECTIONS),
            templates,
        })
    }
}

/// Serve on `listener` until `shutdown` completes; connections still open
/// then are dropped.
pub async fn serve(
    listener: TcpListener,
    app: Arc<App>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let slots = app.connections.clone();
    crate::http::serve_router(listener, router(app), slots, shutdown).await
}

/// The routes, and the sink's under `/reports` when it runs here.
pub fn router(app: Arc<App>) -> Router {
    let sink = app.sink.as_ref().map(Sink::router);
    let pages = Router::new()
        .route("/", get(status_page))
        .route("/servers/{name}", get(server_page))
        .route("/metrics", get(metrics_text))
        .route("/api/servers", get(api_servers))
        .route("/servers.json", get(published::servers_json))
        .route("/servers.json.sig", get(published::servers_sig))
        .with_state(app);
    match sink {
        Some(s) => pages.merge(s),
        None => pages,
    }
}

/// The script that keeps a page current in place; the pages are whole
/// without it.
const REFRESH: &str = include_str!("refresh.html");

fn refresh_script() -> minijinja::Value {
    minijinja::Value::from_safe_string(REFRESH.to_string())
}

/// What a server name keeps unencoded in its page's path: letters,
/// digits, `-`, `_` and `~`. Dots are encoded, so `..` stays a name.
const NAME_IN_PATH: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'~');

/// A server as `/api/servers` and the page show it.
#[derive(Serialize)]
struct Row<'a> {
    #[serde(flatten)]
    status: &'a Status,
    /// `ok`, `warning`, `down`, `invalid` or `lying`.
    state: &'static str,
    checks: Vec<Cell>,
    /// `/servers/NAME`, the name percent-encoded.
    link: String,
}

fn row<'a>(s: &'a Status, app: &App) -> Row<'a> {
    let checks = view::cells(s, &app.limits);
    Row {
        state: view::overall(s, &checks),
        checks,
        link: format!(
            "/servers/{}",
            percent_encoding::utf8_percent_encode(&s.name, NAME_IN_PATH)
        ),
        status: s,
    }
}

fn with_type(body: String, media: &'static str) -> Response {
    let mut r = body.into_response();
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(media));
    r
}

fn render(app: &App, name: &str, ctx: minijinja::Value) -> Response {
    page(app.templates.get_template(name).and_then(|t| t.render(ctx)))
}

fn page(html: Result<String, minijinja::Error>) -> Response {
    match html {
        Ok(html) => Html(html).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the page could not be rendered: {e}\n"),
        )
            .into_response(),
    }
}

fn utc(us: i64) -> String {
    gnomon_client::format_utc(us.max(0) as u64)
}

/// How long before `now_us` the time `then_us` was, in words a reader
/// takes in at a glance ("12 s ago", "3 min ago"). A time ahead of now
/// (the clock stepped back) is "just now".
pub fn ago(now_us: i64, then_us: i64) -> String {
    let s = now_us.saturating_sub(then_us) / 1_000_000;
    match s {
        ..=0 => "just now".into(),
        1..=119 => format!("{s} s ago"),
        120..=7_199 => format!("{} min ago", s / 60),
        7_200..=172_799 => format!("{} h ago", s / 3600),
        _ => format!("{} days ago", s / 86_400),
    }
}

/// A row as the status page shows it: the API's, and how long ago.
#[derive(Serialize)]
struct PageRow<'a> {
    #[serde(flatten)]
    row: Row<'a>,
    ago: String,
}

/// The status page as of `now_us`; `reports` links the sink's list.
fn status_html(
    app: &App,
    latest: &Latest,
    now_us: i64,
    reports: bool,
) -> Result<String, minijinja::Error> {
    let rows: Vec<PageRow<'_>> = latest
        .servers
        .iter()
        .map(|s| PageRow {
            row: row(s, app),
            ago: ago(now_us, s.checked_at_us),
        })
        .collect();
    let consensus = latest.consensus.map(|(lo, hi)| {
        format!(
            "{} … {} from this monitor's clock",
            view::signed_ms(lo),
            view::signed_ms(hi)
        )
    });
    let ctx = context! {
        rows => rows,
        columns => view::COLUMNS,
        rounds => latest.rounds,
        last_round => latest.last_round_us.map(utc),
        last_round_ago => latest.last_round_us.map(|t| ago(now_us, t)),
        consensus => consensus,
        disagreement => latest.disagreement.clone(),
        assumption => latest.assumption.clone(),
        why_none => latest.why_none.clone(),
        published => app.publisher.as_ref().map(published::section),
        reports => reports,
        refresh => refresh_script(),
    };
    app.templates.get_template("status.html")?.render(ctx)
}

async fn status_page(State(app): State<Arc<App>>) -> Response {
    let Ok(latest) = app.latest.read() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    page(status_html(
        &app,
        &latest,
        crate::probe::now_us(),
        app.sink.is_some(),
    ))
}

async fn server_page(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    // The store is read before the lock is taken: no await holds it.
    let stored = match &app.store {
        Some(store) => match history::points(store, &name, crate::probe::now_us()).await {
            Ok(p) => Some(p),
            Err(e) => {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("the history could not be read: {e}\n"),
                )
                    .into_response()
            }
        },
        None => None,
    };
    let Ok(latest) = app.latest.read() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let Some(s) = latest.server(&name) else {
        return (StatusCode::NOT_FOUND, "no such server in the list\n").into_response();
    };
    let window = stored.unwrap_or_else(|| {
        let points: Vec<Point> = latest
            .history
            .get(&name)
            .map(|h| h.iter().copied().collect())
            .unwrap_or_default();
        history::Window {
            rounds: points.len() as u64,
            up: points.iter().filter(|p| p.up).count() as u64,
            points,
        }
    });
    let points = &window.points;
    let uptime = (window.rounds > 0).then(|| 100.0 * window.up as f64 / window.rounds as f64);
    let offset_svg = plot::offset(points);
    let rtt_svg = plot::rtt(points);
    let decoded =
        s.raw_response
            .as_deref()
            .map(|bytes| match gnomon_client::decode::decode(bytes) {
                Ok(d) => {
                    let sigs =
                        gnomon_protocol::PublicKey::from_bytes(&s.public_key).and_then(|k| {
                            gnomon_client::decode::check_signatures(
                                bytes,
                                &d,
                                k,
                                s.raw_request.as_deref(),
                            )
                        });
                    gnomon_client::decode::to_text(&d, sigs.as_ref(), true)
                }
                Err(e) => format!("not a Roughtime message ({} bytes): {e}", bytes.len()),
            });
    let r = row(s, &app);
    let ctx = context! {
        row => r,
        checked_at => utc(s.checked_at_us),
        ago => ago(crate::probe::now_us(), s.checked_at_us),
        reports => app.sink.is_some(),
        refresh => refresh_script(),
        uptime => uptime.map(|u| format!("{u:.1} % of {} rounds", window.rounds)),
        offset_svg => minijinja::Value::from_safe_string(offset_svg),
        rtt_svg => minijinja::Value::from_safe_string(rtt_svg),
        decoded => decoded,
        cert_window => match (s.cert_mint_us, s.cert_maxt_us) {
            (Some(a), Some(b)) => Some(format!("{} to {}", utc(a as i64), if b == u64::MAX { "no end".to_string() } else { utc(b as i64) })),
            _ => None,
        },
    };
    render(&app, "server.html", ctx)
}

async fn metrics_text(State(app): State<Arc<App>>) -> Response {
    // The sink's counters first: its store is read before the lock is
    // taken, so no await holds it.
    let sink = match &app.sink {
        Some(s) => s.metrics().await,
        None => String::new(),
    };
    let Ok(latest) = app.latest.read() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let connections = &app.connections;
    with_type(
        metrics::render(&latest)
            + &metrics::http(connections)
            + &app
                .publisher
                .as_ref()
                .map(published::metrics)
                .unwrap_or_default()
            + &sink,
        "text/plain; version=0.0.4; charset=utf-8",
    )
}

async fn api_servers(State(app): State<Arc<App>>) -> Response {
    let Ok(latest) = app.latest.read() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let rows: Vec<Row<'_>> = latest.servers.iter().map(|s| row(s, &app)).collect();
    let body = serde_json::json!({
        "rounds": latest.rounds,
        "last_round_us": latest.last_round_us,
        "consensus_us": latest.consensus.map(|(lo, hi)| [lo, hi]),
        "disagreement": latest.disagreement,
        "assumption": latest.assumption,
        "no_consensus": latest.why_none,
        "servers": rows,
    });
    with_type(body.to_string() + "\n", "application/json")
}

#[cfg(test)]
mod tests;
