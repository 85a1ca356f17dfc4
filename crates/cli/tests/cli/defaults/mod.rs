//! One source for every default (issue 36): what `--help`, the docs'
//! tables and the commented files of deploy/ say a setting is unless set
//! is what the program uses, as the program itself prints it
//! (`--print-config`, `config check`) or as its command line holds it.
//! `help` holds the help of every subcommand to it, `files` the documents.

mod files;
mod help;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A command's defaults as it prints them: key → value.
pub(super) type Defaults = BTreeMap<String, toml::Value>;

/// What a documented key is, by the program.
#[derive(Debug)]
pub(super) enum Known {
    /// A key with this default.
    Value(toml::Value),
    /// A key unset unless given (its default is words, or it is required).
    Unset,
    /// Not a key at all.
    Unknown,
}

pub(super) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `gnomon ARGS`, which must exit 0: its stdout.
pub(super) fn stdout_of(args: &[&str]) -> String {
    crate::serve_support::gnomon_ok(args)
}

/// Table `name` of a TOML text, every key flat (`tcp.max-connections` for
/// `max-connections` in a `[tcp]` under it).
pub(super) fn table_of(text: &str, name: Option<&str>) -> Defaults {
    fn flat(prefix: &str, t: &toml::Table, out: &mut Defaults) {
        for (k, v) in t {
            match v.as_table() {
                Some(sub) => flat(&format!("{prefix}{k}."), sub, out),
                None => {
                    out.insert(format!("{prefix}{k}"), v.clone());
                }
            }
        }
    }
    let doc: toml::Table = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
    let t = match name {
        Some(n) => doc[n]
            .as_table()
            .unwrap_or_else(|| panic!("no [{n}] in\n{text}")),
        None => &doc,
    };
    let mut out = Defaults::new();
    flat("", t, &mut out);
    out
}

/// `gnomon sync --print-config` with nothing set.
pub(super) fn sync_defaults() -> Defaults {
    table_of(&stdout_of(&["sync", "--print-config"]), Some("sync"))
}

/// `gnomon watch --print-config`'s [watch], given only its two required
/// keys (which are left out: they have no default).
pub(super) fn watch_defaults() -> Defaults {
    let text = stdout_of(&[
        "watch",
        "--servers",
        "/required.json",
        "--listen",
        "127.0.0.1:1",
        "--print-config",
    ]);
    let mut t = table_of(&text, Some("watch"));
    t.remove("servers");
    t.remove("listen");
    t
}

/// `gnomon report-server --print-config`.
pub(super) fn report_server_defaults() -> Defaults {
    table_of(
        &stdout_of(&["report-server", "--print-config"]),
        Some("report-server"),
    )
}

/// serve's: `gnomon config check` of an empty file.
pub(super) fn serve_defaults() -> Defaults {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("gnomon-defaults-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.toml");
    std::fs::write(&empty, "").unwrap();
    let text = stdout_of(&["config", "check", empty.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    table_of(&text, None)
}

/// `key` in `defaults`, among the keys `all` names.
pub(super) fn known(defaults: &Defaults, all: &[String], key: &str) -> Known {
    match defaults.get(key) {
        Some(v) => Known::Value(v.clone()),
        None if all.iter().any(|k| k == key) => Known::Unset,
        None => Known::Unknown,
    }
}

/// A value as a flag or a sentence writes it: `10m`, not `"10m"`.
fn plain(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Array(a) => a.iter().map(plain).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// Whether `said`, a default as a help text or a document writes it, is
/// `v`: as TOML writes it or bare, alone or followed by words of its own
/// (`16777216 (16 MiB)`, `` `auto`: max(1, …) ``, `50/s`), never the start
/// of another value (`1` is not said by `10m`).
pub(super) fn says(said: &str, v: &toml::Value) -> bool {
    let said = said.replace('`', "");
    let said = said.trim();
    // A number is the number however it is written (`1.0` and clap's `1`).
    let first = said.split([' ', ',', ';', '(']).next().unwrap_or("");
    if let (Ok(a), Ok(b)) = (first.parse::<f64>(), plain(v).parse::<f64>()) {
        return a == b;
    }
    [v.to_string(), plain(v)].iter().any(|form| {
        said.strip_prefix(form.as_str()).is_some_and(|rest| {
            rest.is_empty()
                || rest.starts_with([' ', ',', ';', ':', ')', '(', '/'])
                || rest == "."
                || rest.starts_with(". ")
        })
    })
}

/// Whether `said` reads as a value rather than words: a documented
/// default in words ("the number of available cores", "(required)",
/// "Mozilla's roots") is not compared.
pub(super) fn is_a_value(said: &str) -> bool {
    let s = said.trim();
    let first = s.split([' ', ',', ';', ':', '(']).next().unwrap_or("");
    s.starts_with(['`', '"', '['])
        || s.starts_with(|c: char| c.is_ascii_digit())
        || ["true", "false", "off", "on", "auto"].contains(&first)
}

#[test]
fn says_a_value_and_not_the_start_of_another() {
    let v = |t: &str| -> toml::Value {
        format!("x = {t}").parse::<toml::Table>().unwrap()["x"].clone()
    };
    assert!(says("`10m` (1 s..1 d)", &v("\"10m\"")));
    assert!(says("16777216 (16 MiB)", &v("16777216")));
    assert!(says("`auto`: max(1, ⌊(n − 1)/3⌋)", &v("\"auto\"")));
    assert!(says(
        "[\"127.0.0.1:5319\"]. Restart to change.",
        &v("[\"127.0.0.1:5319\"]")
    ));
    assert!(says("50/s", &v("50")));
    assert!(!says("`3s` (1 ms..1 h)", &v("\"5s\"")));
    assert!(!says("10m", &v("1")));
    assert!(!says("1.5", &v("1")));
    assert!(says("1.0", &v("\"1\"")));
    assert!(is_a_value("`5s`") && is_a_value("off") && is_a_value("auto, max(1, n)"));
    assert!(!is_a_value("(required)") && !is_a_value("the number of available cores"));
}
