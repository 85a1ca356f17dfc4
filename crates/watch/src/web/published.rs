//! The published list (`gnomon watch --publish-key`): `/servers.json` and
//! `/servers.json.sig`, exactly the bytes signed; the page's section on
//! it; and its lines of `/metrics`.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::{with_type, App};
use crate::publish::{document::Excluded, Publisher, Publishing, RESULTS};

fn unix_now() -> i64 {
    crate::probe::now_us().div_euclid(1_000_000)
}

/// Why there is nothing to serve, as the body of a 503.
fn nothing(p: &Publisher) -> Response {
    let status = p.status();
    let why = match (&status.latest, &status.failing) {
        (Some(_), _) => "the last list published has expired".to_string(),
        (None, Some((_, why))) => why.clone(),
        (None, None) => "no round has finished yet".to_string(),
    };
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("no current server list to serve: {why}\n"),
    )
        .into_response()
}

pub(super) async fn servers_json(State(app): State<Arc<App>>) -> Response {
    let Some(p) = &app.publisher else {
        return not_publishing();
    };
    match p.current(unix_now()) {
        Some(publication) => with_type(
            String::from_utf8_lossy(&publication.document).into_owned(),
            gnomon_protocol::serverlist::MEDIA_TYPE,
        ),
        None => nothing(p),
    }
}

pub(super) async fn servers_sig(State(app): State<Arc<App>>) -> Response {
    let Some(p) = &app.publisher else {
        return not_publishing();
    };
    match p.current(unix_now()) {
        Some(publication) => with_type(
            String::from_utf8_lossy(&publication.signature).into_owned(),
            "text/plain; charset=utf-8",
        ),
        None => nothing(p),
    }
}

fn not_publishing() -> Response {
    (
        StatusCode::NOT_FOUND,
        "this monitor publishes no server list (gnomon watch --publish-key)\n",
    )
        .into_response()
}

/// The page's section.
#[derive(Serialize)]
pub(super) struct Section {
    key: String,
    fingerprint: String,
    sequence: Option<u64>,
    published: Option<String>,
    expires: Option<String>,
    expired: bool,
    listed: Vec<String>,
    excluded: Vec<Excluded>,
    failing: Option<String>,
    published_count: u64,
}

pub(super) fn section(p: &Publisher) -> Section {
    let Publishing {
        latest,
        results,
        failing,
    } = p.status();
    let utc = gnomon_protocol::signed_list::format_utc;
    Section {
        key: p.key().openssh(),
        fingerprint: p.key().fingerprint(),
        sequence: latest.as_ref().map(|l| l.sequence),
        published: latest.as_ref().map(|l| utc(l.published_unix)),
        expires: latest.as_ref().map(|l| utc(l.expires_unix)),
        expired: latest
            .as_ref()
            .is_some_and(|l| l.expires_unix <= unix_now()),
        listed: latest
            .as_ref()
            .map(|l| l.listed.clone())
            .unwrap_or_default(),
        excluded: latest
            .as_ref()
            .map(|l| l.excluded.clone())
            .unwrap_or_default(),
        failing: failing.map(|(_, why)| why),
        published_count: results.get("ok").copied().unwrap_or(0),
    }
}

/// The publication's metrics.
pub(super) fn metrics(p: &Publisher) -> String {
    let s = p.status();
    let mut o = String::new();
    let mut gauge = |name: &str, help: &str, v: Option<f64>| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge");
        if let Some(v) = v {
            let _ = writeln!(o, "{name} {v}");
        }
    };
    let l = s.latest.as_deref();
    gauge(
        "gnomon_watch_published_sequence",
        "observatory.sequence of the list served at /servers.json",
        l.map(|l| l.sequence as f64),
    );
    gauge(
        "gnomon_watch_published_expiry_timestamp_seconds",
        "When the list served at /servers.json expires (Unix seconds)",
        l.map(|l| l.expires_unix as f64),
    );
    gauge(
        "gnomon_watch_published_servers",
        "Servers the published list holds",
        l.map(|l| l.listed.len() as f64),
    );
    gauge(
        "gnomon_watch_published_excluded",
        "Servers the published list leaves out (lied, silent, ...)",
        l.map(|l| l.excluded.len() as f64),
    );
    gauge(
        "gnomon_watch_publication_failing",
        "1 when the latest attempt to publish failed or found no consensus",
        Some(if s.failing.is_some() { 1.0 } else { 0.0 }),
    );
    let name = "gnomon_watch_publications_total";
    let _ = writeln!(
        o,
        "# HELP {name} Attempts to publish the server list, by result\n# TYPE {name} counter"
    );
    for r in RESULTS {
        let n = s.results.get(r).copied().unwrap_or(0);
        let _ = writeln!(o, "{name}{{result=\"{r}\"}} {n}");
    }
    o
}
