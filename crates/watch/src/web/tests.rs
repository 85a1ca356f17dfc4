//! The status page as rendered from a fixed state at a fixed time.

use std::sync::{Arc, RwLock};

use super::*;
use crate::state::Verdict;

const T0: i64 = 1_790_000_000_000_000;

fn app_with(servers: Vec<Status>, round_at: i64) -> Arc<App> {
    let mut latest = Latest::default();
    latest.apply(servers, Verdict::default(), round_at);
    App::new(
        Arc::new(RwLock::new(latest)),
        view::Limits::default(),
        None,
        None,
        None,
    )
}

fn status(name: &str, checked_at_us: i64) -> Status {
    Status {
        name: name.into(),
        address: "192.0.2.1:2002".into(),
        checked_at_us,
        up: true,
        radius_us: Some(3_000_000),
        ..Status::default()
    }
}

fn html(app: &App, now_us: i64, reports: bool) -> String {
    let latest = app.latest.read().unwrap();
    status_html(app, &latest, now_us, reports).unwrap()
}

#[test]
fn ago_reads_at_a_glance() {
    assert_eq!(ago(T0 + 12_400_000, T0), "12 s ago");
    assert_eq!(ago(T0 + 600_000_000, T0), "10 min ago");
    assert_eq!(ago(T0 + 3 * 3_600_000_000, T0), "3 h ago");
    assert_eq!(ago(T0 + 3 * 86_400_000_000, T0), "3 days ago");
    assert_eq!(ago(T0 - 5_000_000, T0), "just now");
}

#[test]
fn each_server_says_how_long_ago_it_was_checked() {
    let app = app_with(
        vec![status("alpha", T0), status("beta", T0 - 95_000_000)],
        T0 + 2_000_000,
    );
    let page = html(&app, T0 + 12_000_000, false);
    let row = |name: &str| {
        page.split("<tr id=")
            .find(|r| r.contains(&format!(">{name}</a>")))
            .unwrap_or_else(|| panic!("no row for {name}: {page}"))
    };
    assert!(row("alpha").contains("checked 12 s ago"), "{page}");
    assert!(row("beta").contains("checked 107 s ago"), "{page}");
    assert!(page.contains("(10 s ago)"), "the round's age: {page}");
}

#[test]
fn the_status_page_links_the_reports_only_when_the_sink_runs() {
    let app = app_with(vec![status("alpha", T0)], T0);
    assert!(html(&app, T0, true).contains(r#"<a href="/reports">"#));
    assert!(!html(&app, T0, false).contains(r#"href="/reports""#));
}

#[test]
fn the_page_refreshes_its_live_parts_and_is_whole_without_script() {
    let app = app_with(vec![status("alpha", T0)], T0);
    let page = html(&app, T0, false);
    // The script swaps what is marked live, by id, for the same part of a
    // fresh copy of the page: both parts must be there and marked.
    for id in ["summary", "servers"] {
        assert!(page.contains(&format!(r#"id="{id}" data-live"#)), "{page}");
    }
    assert!(page.contains("<script>") && page.contains("fetch(location.href"));
    // Everything is in the HTML as served: the table needs no script.
    assert!(
        page.contains(">alpha</a>") && page.contains("± 3.00 s"),
        "{page}"
    );
}
