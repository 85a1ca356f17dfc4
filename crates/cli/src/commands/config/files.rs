//! Which gnomon configuration file a TOML file is, and where a key that
//! sits in the wrong place belongs.
//!
//! gnomon reads four files, each with its own tables: serve's
//! (deploy/gnomon.toml: top-level keys and [clock], [online-key], [tcp],
//! [log], [limit]), sync's ([sync]), watch's and report-server's ([watch],
//! [report-server]) and the signing machine's ([pkcs11], for keygen and
//! delegate). Each parser refuses what it does not know, which is right,
//! but says only "unknown field": a key written above its table, or a
//! table given to the wrong command, deserves the place it belongs.

use gnomon_server::config::KEYS;

/// One of the files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Serve,
    Sync,
    Watch,
    Signer,
}

impl Kind {
    /// The JSON name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Serve => "serve",
            Kind::Sync => "sync",
            Kind::Watch => "watch",
            Kind::Signer => "signer",
        }
    }

    /// The commands that read it, as their `--config`.
    pub(crate) fn read_by(self) -> &'static [&'static str] {
        match self {
            Kind::Serve => &["gnomon serve"],
            Kind::Sync => &["gnomon sync"],
            Kind::Watch => &["gnomon watch", "gnomon report-server"],
            Kind::Signer => &["gnomon keygen", "gnomon delegate"],
        }
    }

    /// The file in deploy/ that shows every key.
    fn example(self) -> &'static str {
        match self {
            Kind::Serve => "deploy/gnomon.toml",
            Kind::Sync => "deploy/gnomon-sync.toml",
            Kind::Watch => "deploy/gnomon-watch.toml",
            Kind::Signer => "deploy/gnomon-signer.toml",
        }
    }

    /// "the file of gnomon sync (deploy/gnomon-sync.toml)".
    pub(crate) fn described(self) -> String {
        format!(
            "the file of {} ({})",
            self.read_by().join(" and "),
            self.example()
        )
    }
}

/// `[watch]`'s keys (crate::commands::watch_config reads them; a test
/// holds the two together).
pub(crate) const WATCH_KEYS: &[&str] = &[
    "servers",
    "listen",
    "database",
    "interval",
    "concurrency",
    "timeout",
    "burst",
    "max-liars",
    "report",
    "expiry-warning",
    "warn-radius",
    "sink",
    "publish-key",
    "publish-expiry",
    "publish-name",
    "publish-url",
    "publish-window",
    "pkcs11-module",
    "pkcs11-token",
    "pkcs11-key",
    "pkcs11-pin-file",
    "servers-url",
    "servers-key",
    "servers-threshold",
];

/// `[report-server]`'s keys.
pub(crate) const REPORT_SERVER_KEYS: &[&str] = &[
    "listen",
    "database",
    "max-body",
    "rate",
    "max-connections",
    "accept-keys",
    "quota-per-source",
    "quota",
    "retention",
    "rate-table",
];

/// `[pkcs11]`'s keys (crate::pkcs11::config).
pub(crate) const PKCS11_KEYS: &[&str] = &["module", "token", "key", "pin-file"];

/// A place keys live: a table of a file, or (`None`) its top level.
struct Place {
    kind: Kind,
    table: Option<&'static str>,
    keys: Vec<&'static str>,
}

fn places() -> Vec<Place> {
    let mut out = vec![Place {
        kind: Kind::Serve,
        table: None,
        keys: KEYS
            .iter()
            .filter(|k| !k.key.contains('.'))
            .map(|k| k.key)
            .collect(),
    }];
    for spec in KEYS {
        let Some((table, key)) = spec.key.split_once('.') else {
            continue;
        };
        match out.iter_mut().find(|p| p.table == Some(table)) {
            Some(p) => p.keys.push(key),
            None => out.push(Place {
                kind: Kind::Serve,
                table: Some(table),
                keys: vec![key],
            }),
        }
    }
    out.push(Place {
        kind: Kind::Sync,
        table: Some("sync"),
        keys: gnomon_sync::config::KEYS.iter().map(|k| k.0).collect(),
    });
    for (table, keys) in [("watch", WATCH_KEYS), ("report-server", REPORT_SERVER_KEYS)] {
        out.push(Place {
            kind: Kind::Watch,
            table: Some(table),
            keys: keys.to_vec(),
        });
    }
    out.push(Place {
        kind: Kind::Signer,
        table: Some("pkcs11"),
        keys: PKCS11_KEYS.to_vec(),
    });
    out
}

/// Which file `doc` is, by its tables and top-level keys: serve's unless a
/// table of another file is there. Two files' tables in one are refused,
/// naming which command reads each.
pub(crate) fn detect(doc: &toml::Table) -> Result<Kind, String> {
    let places = places();
    let tables: Vec<(Kind, String)> = doc
        .iter()
        .filter(|(_, v)| v.is_table())
        .filter_map(|(name, _)| {
            let p = places.iter().find(|p| p.table == Some(name.as_str()))?;
            Some((p.kind, format!("[{name}]")))
        })
        .collect();
    let mut seen: Vec<(Kind, String)> = Vec::new();
    let mut note = |kind: Kind, shown: String| {
        if !seen.iter().any(|(k, _)| *k == kind) {
            seen.push((kind, shown));
        }
    };
    for (kind, shown) in &tables {
        note(*kind, shown.clone());
    }
    for (name, _) in doc.iter().filter(|(_, v)| !v.is_table()) {
        let serve_key = places
            .iter()
            .any(|p| p.kind == Kind::Serve && p.table.is_none() && p.keys.contains(&name.as_str()));
        // A key that the file's other tables take (`listen` above [watch])
        // is misplaced there, not serve's: the hints say where it goes.
        let theirs = tables.iter().any(|(k, _)| {
            places
                .iter()
                .any(|p| p.kind == *k && p.keys.contains(&name.as_str()))
        });
        if serve_key && !theirs {
            note(Kind::Serve, format!("`{name}`"));
        }
    }
    match seen.as_slice() {
        [] => Ok(Kind::Serve),
        [(kind, _)] => Ok(*kind),
        many => Err(format!(
            "it holds the settings of more than one file: {}; give each command its own file",
            many.iter()
                .map(|(k, shown)| format!("{shown} is for {}", k.described()))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Where `key` is valid, other than `here`: same file first.
fn elsewhere<'a>(places: &'a [Place], kind: Kind, here: Option<&str>, key: &str) -> Vec<&'a Place> {
    let mut found: Vec<&Place> = places
        .iter()
        .filter(|p| p.table != here && p.keys.contains(&key))
        .collect();
    found.sort_by_key(|p| p.kind != kind);
    if found.iter().any(|p| p.kind == kind) {
        found.retain(|p| p.kind == kind);
    }
    found
}

fn table_name(table: Option<&str>) -> String {
    table.map_or_else(
        || "the top level (above the first [table])".to_owned(),
        |t| format!("[{t}]"),
    )
}

/// One sentence per key of `doc` (a file of `kind`) that is not valid
/// where it is but is valid in another place: "`max-frame` belongs in
/// [tcp], not the top level".
pub(crate) fn misplaced(doc: &toml::Table, kind: Kind) -> Vec<String> {
    let places = places();
    let mut hints = Vec::new();
    let mut look = |table: Option<&str>, key: &str| {
        let valid_here = places
            .iter()
            .any(|p| p.kind == kind && p.table == table && p.keys.contains(&key));
        if valid_here {
            return;
        }
        let found = elsewhere(&places, kind, table, key);
        let Some(first) = found.first() else {
            return;
        };
        let hint = if first.kind == kind {
            let names: Vec<String> = found.iter().map(|p| table_name(p.table)).collect();
            format!(
                "`{key}` belongs in {}, not {}",
                names.join(" or "),
                table_name(table)
            )
            .replace("belongs in the top level", "belongs at the top level")
        } else {
            let names: Vec<String> = found
                .iter()
                .map(|p| format!("{} of {}", table_name(p.table), p.kind.described()))
                .collect();
            format!(
                "`{key}` is not a key of {} in this file; it belongs in {}",
                table_name(table),
                names.join(", or ")
            )
        };
        hints.push(hint);
    };
    for (name, value) in doc {
        match value.as_table() {
            Some(inner) if places.iter().any(|p| p.table == Some(name.as_str())) => {
                for key in inner.keys() {
                    look(Some(name.as_str()), key);
                }
            }
            Some(_) => {}
            None => look(None, name),
        }
    }
    hints
}

/// The hints for a file of `kind` whose text is `text` (none when it is
/// not TOML): for a command's own `--config` refusal.
pub(crate) fn hints_for(text: &str, kind: Kind) -> Vec<String> {
    text.parse::<toml::Table>()
        .map(|doc| misplaced(&doc, kind))
        .unwrap_or_default()
}

/// `message` with the hints it does not already carry, one a line.
pub(crate) fn with_hints(message: &str, hints: &[String]) -> String {
    let mut out = message.trim_end().to_owned();
    for h in hints {
        if !out.contains(h.as_str()) {
            out.push('\n');
            out.push_str(h);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    #[test]
    fn each_file_is_told_by_its_tables() {
        assert_eq!(
            detect(&doc("listen = [\"127.0.0.1:1\"]\n[tcp]\nenable = true")),
            Ok(Kind::Serve)
        );
        assert_eq!(detect(&doc("")), Ok(Kind::Serve));
        assert_eq!(detect(&doc("[sync]\nservers = \"l.json\"")), Ok(Kind::Sync));
        assert_eq!(detect(&doc("[report-server]\nrate = 1")), Ok(Kind::Watch));
        assert_eq!(detect(&doc("[pkcs11]\ntoken = \"t\"")), Ok(Kind::Signer));
        let e = detect(&doc("workers = 2\n[sync]\ninterval = \"1m\"")).unwrap_err();
        assert!(
            e.contains("[sync] is for the file of gnomon sync")
                && e.contains("`workers` is for the file of gnomon serve"),
            "{e}"
        );
        // `listen` above [watch] is watch's key out of place, not serve's.
        assert_eq!(
            detect(&doc("listen = \"127.0.0.1:1\"\n[watch]\n")),
            Ok(Kind::Watch)
        );
    }

    /// The keys a parser accepts, as its refusal of an unknown one lists
    /// them ("expected one of `a`, `b`").
    fn accepted(refusal: &str) -> Vec<String> {
        let (_, list) = refusal.split_once("expected").expect(refusal);
        list.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_key_lists_are_the_parsers() {
        use crate::commands::watch_config::FileLayers;
        let p = std::path::Path::new("/x.toml");
        for (table, keys) in [("watch", WATCH_KEYS), ("report-server", REPORT_SERVER_KEYS)] {
            let e =
                FileLayers::from_toml(&format!("[{table}]\ngnomon-probe = 1\n"), p).unwrap_err();
            let mut want: Vec<&str> = keys.to_vec();
            let mut got = accepted(&e);
            want.sort_unstable();
            got.sort_unstable();
            assert_eq!(got, want, "[{table}]");
        }
        let e = crate::pkcs11::config::load(std::path::Path::new("/nonexistent")).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        let dir = std::env::temp_dir().join(format!("gnomon-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("signer.toml");
        std::fs::write(&f, "[pkcs11]\ngnomon-probe = 1\n").unwrap();
        let e = crate::pkcs11::config::load(&f).unwrap_err().to_string();
        let _ = std::fs::remove_dir_all(&dir);
        let mut got = accepted(&e);
        got.sort_unstable();
        let mut want = PKCS11_KEYS.to_vec();
        want.sort_unstable();
        assert_eq!(got, want);
    }

    #[test]
    fn a_key_in_the_wrong_place_is_told_its_table() {
        let h = misplaced(&doc("max-frame = 2048"), Kind::Serve);
        assert_eq!(
            h,
            ["`max-frame` belongs in [tcp], not the top level (above the first [table])"]
        );
        let h = misplaced(&doc("[tcp]\nworkers = 2"), Kind::Serve);
        assert_eq!(
            h,
            ["`workers` belongs at the top level (above the first [table]), not [tcp]"]
        );
        let h = misplaced(&doc("servers = \"l.json\"\n[sync]\n"), Kind::Sync);
        assert_eq!(
            h,
            ["`servers` belongs in [sync], not the top level (above the first [table])"]
        );
        // Valid only in another file: which file too.
        let h = misplaced(&doc("[tcp]\nmodule = \"m.so\""), Kind::Serve);
        assert_eq!(
            h,
            [
                "`module` is not a key of [tcp] in this file; it belongs in [pkcs11] of the file \
              of gnomon keygen and gnomon delegate (deploy/gnomon-signer.toml)"
            ]
        );
        let h = misplaced(&doc("listen = \"127.0.0.1:1\"\n[watch]\n"), Kind::Watch);
        assert_eq!(
            h,
            ["`listen` belongs in [watch] or [report-server], not the top level (above the first [table])"]
        );
        // Valid where it is, or valid nowhere: nothing to add.
        assert!(misplaced(&doc("[tcp]\nmax-frame = 2048\nbogus = 1"), Kind::Serve).is_empty());
    }
}
