//! The audit page: reports newest first, a page at a time, rendered on the
//! server (minijinja, auto-escaped HTML; no script).

use minijinja::{context, Environment};

use crate::store::{ReportLine, ServerRow};

const TEMPLATE: &str = include_str!("reports.html");

/// The page for `lines` (newest first), naming each accused key by the
/// servers table where the watch knows it; `newer` and `older` are the
/// cursors of the neighbouring pages, when there are any.
pub(crate) fn render(
    lines: &[ReportLine],
    servers: &[ServerRow],
    newer: Option<String>,
    older: Option<String>,
) -> Result<String, minijinja::Error> {
    let mut env = Environment::new();
    env.add_template("reports.html", TEMPLATE)?;
    let reports: Vec<minijinja::Value> = lines
        .iter()
        .map(|l| {
            let accused: Vec<minijinja::Value> = l
                .accused
                .iter()
                .map(|key| {
                    let names: Vec<&str> = servers
                        .iter()
                        .filter(|s| &s.public_key == key)
                        .map(|s| s.name.as_str())
                        .collect();
                    context! { key => key, names => names }
                })
                .collect();
            context! {
                id => l.id,
                received => gnomon_client::format_utc(u64::try_from(l.received_us).unwrap_or(0)),
                verdict => l.verdict,
                size => l.size,
                accused => accused,
            }
        })
        .collect();
    env.get_template("reports.html")?.render(context! {
        reports => reports,
        newer => newer,
        older => older,
    })
}
