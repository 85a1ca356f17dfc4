//! The audit page: reports by accused server, rendered on the server
//! (minijinja, auto-escaped HTML; no script).

use minijinja::{context, Environment};

use crate::store::{ReportSummary, ServerRow};

const TEMPLATE: &str = include_str!("reports.html");

/// The page for `lines` (sorted by accused key), naming each key by the
/// servers table where the watch knows it.
pub(crate) fn render(
    lines: &[ReportSummary],
    servers: &[ServerRow],
) -> Result<String, minijinja::Error> {
    let mut env = Environment::new();
    env.add_template("reports.html", TEMPLATE)?;
    let mut groups: Vec<minijinja::Value> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let key = &lines[i].accused;
        let end = lines[i..]
            .iter()
            .position(|l| &l.accused != key)
            .map_or(lines.len(), |n| i + n);
        let names: Vec<&str> = servers
            .iter()
            .filter(|s| &s.public_key == key)
            .map(|s| s.name.as_str())
            .collect();
        let reports: Vec<minijinja::Value> = lines[i..end]
            .iter()
            .map(|l| {
                context! {
                    id => l.id,
                    received => gnomon_client::format_utc(u64::try_from(l.received_us).unwrap_or(0)),
                    verdict => l.verdict,
                }
            })
            .collect();
        groups.push(context! { key => key, names => names, reports => reports });
        i = end;
    }
    env.get_template("reports.html")?
        .render(context! { groups => groups, total => lines.len() })
}
