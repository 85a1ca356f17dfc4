//! A `[sync]` table read from a TOML file into a [`Layer`]: unknown keys
//! refused, each value checked by the parser its flag uses.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::{
    parse_chrony_max_radius, parse_chrony_sock, parse_count, parse_drift_ppm, parse_group,
    parse_interval, parse_jitter, parse_list_refresh, parse_list_timeout, parse_max_liars,
    parse_max_offset, parse_max_radius, parse_metrics, parse_now_socket, parse_report_url,
    parse_retries, parse_servers_key, parse_servers_url, parse_socket_mode, parse_threshold,
    parse_timeout, IntOrText, Layer, NowSocket,
};

/// A file that does not load.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    sync: Option<FileTable>,
}

/// Values as TOML types them; checked by the same parsers as flags.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileTable {
    servers: Option<String>,
    state_dir: Option<String>,
    interval: Option<String>,
    jitter: Option<i64>,
    min_servers: Option<i64>,
    quorum: Option<i64>,
    max_liars: Option<IntOrText>,
    max_radius: Option<String>,
    max_offset: Option<String>,
    timeout: Option<String>,
    retries: Option<i64>,
    report: Option<bool>,
    report_url: Option<String>,
    chrony_sock: Option<String>,
    chrony_max_radius: Option<String>,
    servers_url: Option<OneOrMany>,
    servers_key: Option<OneOrMany>,
    servers_threshold: Option<i64>,
    list_refresh: Option<String>,
    list_timeout: Option<String>,
    list_ca: Option<String>,
    metrics: Option<String>,
    now_socket: Option<String>,
    now_socket_group: Option<String>,
    now_socket_mode: Option<String>,
    now_drift_ppm: Option<i64>,
}

impl Layer {
    /// The `[sync]` table of a TOML file; relative paths are relative to
    /// the file's directory.
    pub fn from_file(path: &Path) -> Result<Layer, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError(format!(
                "cannot read configuration file {}: {}",
                path.display(),
                unreadable(&e)
            ))
        })?;
        Layer::from_toml(&text, path)
    }

    /// As [`Layer::from_file`], from the text; `path` names it.
    pub fn from_toml(text: &str, path: &Path) -> Result<Layer, ConfigError> {
        let doc: FileDoc = toml::from_str(text).map_err(|e| {
            ConfigError(format!(
                "{}: {}{}",
                path.display(),
                e.to_string().trim_end(),
                misplaced(text, path)
            ))
        })?;
        let t = doc.sync.unwrap_or_default();
        let bad = |key: &str, why: String| {
            ConfigError(format!("{}: [sync] {key}: {why}", path.display()))
        };
        let base = path.parent().unwrap_or(Path::new(""));
        let in_file = |p: String| base.join(p);
        let int = |key: &str, v: Option<i64>, f: fn(&str) -> Result<i64, String>| {
            v.map(|i| f(&i.to_string()).map_err(|e| bad(key, e)))
                .transpose()
        };
        let dur = |key: &str, v: Option<String>, f: fn(&str) -> Result<Duration, String>| {
            v.map(|s| f(&s).map_err(|e| bad(key, e))).transpose()
        };
        Ok(Layer {
            servers: t.servers.map(in_file),
            state_dir: t.state_dir.map(in_file),
            interval: dur("interval", t.interval, parse_interval)?,
            jitter: int("jitter", t.jitter, |s| parse_jitter(s).map(i64::from))?.map(|v| v as u8),
            min_servers: int("min-servers", t.min_servers, |s| {
                parse_count(s).map(|v| v as i64)
            })?
            .map(|v| v as usize),
            quorum: int("quorum", t.quorum, |s| parse_count(s).map(|v| v as i64))?
                .map(|v| v as usize),
            max_liars: t
                .max_liars
                .map(|v| parse_max_liars(&v.text()).map_err(|e| bad("max-liars", e)))
                .transpose()?,
            max_radius: dur("max-radius", t.max_radius, parse_max_radius)?,
            max_offset: dur("max-offset", t.max_offset, parse_max_offset)?,
            timeout: dur("timeout", t.timeout, parse_timeout)?,
            retries: int("retries", t.retries, |s| parse_retries(s).map(i64::from))?
                .map(|v| v as u32),
            report: t.report,
            report_url: t
                .report_url
                .map(|u| parse_report_url(&u).map_err(|e| bad("report-url", e)))
                .transpose()?,
            chrony_sock: t
                .chrony_sock
                .map(|p| parse_chrony_sock(&p).map_err(|e| bad("chrony-sock", e)))
                .transpose()?
                .map(|p| base.join(p)),
            chrony_max_radius: dur(
                "chrony-max-radius",
                t.chrony_max_radius,
                parse_chrony_max_radius,
            )?,
            servers_url: t
                .servers_url
                .map(|v| {
                    v.items()
                        .iter()
                        .map(|u| parse_servers_url(u).map_err(|e| bad("servers-url", e)))
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()?,
            // A key file is relative to the file's directory, as every
            // path of it; a key line is taken as it is.
            servers_key: t
                .servers_key
                .map(|v| {
                    v.items()
                        .iter()
                        .map(|k| {
                            parse_servers_key(k)
                                .map_err(|e| bad("servers-key", e))
                                .map(|k| key_in(base, k))
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()?,
            servers_threshold: int("servers-threshold", t.servers_threshold, |s| {
                parse_threshold(s).map(|v| v as i64)
            })?
            .map(|v| v as usize),
            list_refresh: dur("list-refresh", t.list_refresh, parse_list_refresh)?,
            list_timeout: dur("list-timeout", t.list_timeout, parse_list_timeout)?,
            list_ca: t.list_ca.map(in_file),
            metrics: t
                .metrics
                .map(|a| parse_metrics(&a).map_err(|e| bad("metrics", e)))
                .transpose()?,
            now_socket: t
                .now_socket
                .map(|p| parse_now_socket(&p).map_err(|e| bad("now-socket", e)))
                .transpose()?
                .map(|n| NowSocket(n.0.map(|p| base.join(p)))),
            now_socket_group: t
                .now_socket_group
                .map(|g| parse_group(&g).map_err(|e| bad("now-socket-group", e)))
                .transpose()?,
            now_socket_mode: t
                .now_socket_mode
                .map(|m| parse_socket_mode(&m).map_err(|e| bad("now-socket-mode", e)))
                .transpose()?,
            now_drift_ppm: int("now-drift-ppm", t.now_drift_ppm, |s| {
                parse_drift_ppm(s).map(i64::from)
            })?
            .map(|v| v as u32),
        })
    }
}

/// A key that may be written once or as an array (`servers-url`,
/// `servers-key`: one per monitor).
#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn items(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// A `servers-key` of the file: a key line as it is, a path joined to
/// the file's directory.
fn key_in(base: &Path, key: String) -> String {
    if super::keys::looks_like_key(&key) {
        key
    } else {
        base.join(key).display().to_string()
    }
}

/// Why a file could not be read, in words a user acts on: the common
/// kinds named, anything else without its `(os error N)`.
pub(crate) fn unreadable(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::NotFound => "it does not exist".into(),
        K::PermissionDenied => "permission denied".into(),
        K::IsADirectory => "it is a directory".into(),
        _ => {
            let text = e.to_string();
            match text.find(" (os error ") {
                Some(at) => text[..at].to_owned(),
                None => text,
            }
        }
    }
}

/// What the parser cannot say about a file it refused: a sync key written
/// above `[sync]` belongs in it, and a file with other tables is another
/// command's (`gnomon config check` tells which). Empty when neither.
fn misplaced(text: &str, path: &Path) -> String {
    let Ok(doc) = text.parse::<toml::Table>() else {
        return String::new();
    };
    let mut out = String::new();
    for (name, value) in &doc {
        if value.is_table() {
            if name != "sync" {
                out.push_str(&format!(
                    "\n[{name}] is not a table of gnomon sync's file: `gnomon config check {}` \
                     says which command reads it",
                    path.display()
                ));
            }
        } else if super::KEYS.iter().any(|k| k.0 == name) {
            out.push_str(&format!(
                "\n`{name}` belongs in [sync], not the top level (above the first [table])"
            ));
        }
    }
    out
}

#[cfg(test)]
mod wording_tests {
    use super::*;

    #[test]
    fn a_key_above_its_table_and_another_commands_table_are_told() {
        let p = Path::new("/etc/gnomon/sync.toml");
        let e = Layer::from_toml("servers = \"l.json\"\n[sync]\n", p)
            .unwrap_err()
            .0;
        assert!(
            e.contains("`servers` belongs in [sync], not the top level"),
            "{e}"
        );
        let e = Layer::from_toml("[watch]\nservers = \"l.json\"\n", p)
            .unwrap_err()
            .0;
        assert!(
            e.contains("[watch] is not a table of gnomon sync's file")
                && e.contains("gnomon config check /etc/gnomon/sync.toml"),
            "{e}"
        );
        let e = Layer::from_file(Path::new("/nonexistent/sync.toml"))
            .unwrap_err()
            .0;
        assert_eq!(
            e,
            "cannot read configuration file /nonexistent/sync.toml: it does not exist"
        );
    }
}
