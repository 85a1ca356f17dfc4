//! The audit page: reports newest first, a page at a time, rendered on the
//! server (minijinja, auto-escaped HTML; no script).

use minijinja::{context, Environment};

use crate::store::{ReportLine, ServerRow};

const TEMPLATE: &str = include_str!("reports.html");

/// The page for `lines` (newest first), naming each accused key by the
/// servers table where the watch knows it and marking the key this monitor
/// judged lying, when it judged one; `newer` and `older` are the cursors
/// of the neighbouring pages, when there are any. `beside_status`: the
/// monitor's status page is at `/`, and the page links back to it.
pub(crate) fn render(
    lines: &[ReportLine],
    servers: &[ServerRow],
    newer: Option<String>,
    older: Option<String>,
    beside_status: bool,
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
                    context! { key => key, names => names, judged => l.judged.contains(key) }
                })
                .collect();
            context! {
                id => l.id,
                received => gnomon_client::format_utc(u64::try_from(l.received_us).unwrap_or(0)),
                verdict => l.verdict,
                size => l.size,
                accused => accused,
                judged => !l.judged.is_empty(),
            }
        })
        .collect();
    env.get_template("reports.html")?.render(context! {
        reports => reports,
        newer => newer,
        older => older,
        beside_status => beside_status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: &str, accused: &[&str], judged: &[&str]) -> ReportLine {
        ReportLine {
            id: id.repeat(64),
            received_us: 1_790_000_000_000_000,
            verdict: "malfeasance".into(),
            size: 100,
            accused: accused.iter().map(|k| k.to_string()).collect(),
            judged: judged.iter().map(|k| k.to_string()).collect(),
        }
    }

    /// The line's cell for `key`: from its `<code>` back to the previous
    /// `<br>` or cell start.
    fn mark_of<'a>(page: &'a str, row_id: &str, key: &str) -> &'a str {
        let row = page
            .split("<tr>")
            .find(|r| r.contains(row_id))
            .unwrap_or_else(|| panic!("no row {row_id}: {page}"));
        row.split("<br>")
            .find(|k| k.contains(&format!("<code>{key}</code>")))
            .unwrap_or_else(|| panic!("no {key} in {row}"))
    }

    #[test]
    fn only_the_judged_key_is_marked_lying() {
        let servers = vec![ServerRow {
            name: "liar".into(),
            public_key: "KEYL".into(),
            addresses: "[]".into(),
            seen_us: 0,
        }];
        let lines = [
            line("a", &["KEYH", "KEYL"], &["KEYL"]),
            line("b", &["KEYP", "KEYQ"], &[]),
        ];
        let page = render(&lines, &servers, None, None, true).unwrap();
        let a = "a".repeat(16);
        assert!(mark_of(&page, &a, "KEYL").contains("LYING"), "{page}");
        assert!(mark_of(&page, &a, "KEYL").contains("liar"), "{page}");
        assert!(!mark_of(&page, &a, "KEYH").contains("LYING"), "{page}");
        // Nobody judged: neither key of the pair is called the liar.
        let b = "b".repeat(16);
        for key in ["KEYP", "KEYQ"] {
            assert!(!mark_of(&page, &b, key).contains("LYING"), "{page}");
        }
        let table = page.split("<table>").nth(1).unwrap();
        assert_eq!(table.matches(">LYING<").count(), 1, "{page}");
        assert!(page.contains("one of these lied"), "{page}");
    }

    #[test]
    fn the_list_links_back_to_the_status_page_only_beside_it() {
        let lines = [line("a", &["K1", "K2"], &[])];
        let beside = render(&lines, &[], None, None, true).unwrap();
        assert!(beside.contains(r#"<a href="/">"#), "{beside}");
        let alone = render(&lines, &[], None, None, false).unwrap();
        assert!(!alone.contains(r#"<a href="/">"#), "{alone}");
    }
}
