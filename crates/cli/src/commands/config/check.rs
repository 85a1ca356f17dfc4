//! `gnomon config check FILE`: any of gnomon's configuration files,
//! checked by the parser of the command that reads it, so the check never
//! refuses a good file for being another command's (the sync file used to
//! get "unknown field `sync`" from serve's parser).

use std::path::Path;
use std::process::ExitCode;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_server::config::{Config, IdentitySource};
use gnomon_server::keyfile;
use gnomon_server::offline::{format_utc, OfflineStore};
use serde_json::json;

use super::files::{self, Kind};
use super::{ConfigArgs, ConfigFlags};
use crate::commands::delegate::offline_words;
use crate::commands::keygen::key_file_words;
use crate::commands::watch_config::{
    FileLayers, SinkLayer, SinkSettings, WatchLayer, WatchSettings,
};
use crate::exit::{OK, USAGE};
use crate::words;

/// What a file loaded as.
struct Checked {
    kind: Kind,
    /// The effective configuration, as TOML that loads back the same.
    config: String,
    /// Things worth knowing that are not errors.
    notes: Vec<String>,
    /// With --load-keys: one line per key file or delegation directory.
    keys: Vec<String>,
}

pub(super) fn run(file: &Path, load_keys: bool, json_out: bool, flags: ConfigFlags) -> ExitCode {
    match check(file, load_keys, flags) {
        Ok(c) => {
            for line in &c.keys {
                eprintln!("{line}");
            }
            for n in &c.notes {
                eprintln!("gnomon config check: note: {n}");
            }
            if json_out {
                words::print_outcome(
                    json!({
                        "file": file.display().to_string(),
                        "kind": c.kind.name(),
                        "read_by": c.kind.read_by(),
                        "config": c.config,
                        "notes": c.notes,
                        "keys": c.keys,
                    }),
                    OK,
                );
            } else {
                print!("{}", c.config);
            }
            eprintln!(
                "gnomon config check: {}: OK, read by {}",
                file.display(),
                c.kind.read_by().join(" and ")
            );
            ExitCode::SUCCESS
        }
        Err(msg) => {
            eprintln!("gnomon config check: {msg}");
            if json_out {
                words::print_error("config", &msg, USAGE);
            }
            ExitCode::from(USAGE)
        }
    }
}

fn check(file: &Path, load_keys: bool, flags: ConfigFlags) -> Result<Checked, String> {
    let shown = file.display();
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read configuration file {shown}: {}", words::io(&e)))?;
    // Text that is not TOML is left to serve's parser, whose message shows
    // the line and column.
    let doc = text.parse::<toml::Table>().ok();
    let kind = match &doc {
        Some(d) => files::detect(d).map_err(|e| format!("configuration file {shown}: {e}"))?,
        None => Kind::Serve,
    };
    let explain = |message: String| -> String {
        let hints = doc
            .as_ref()
            .map(|d| files::misplaced(d, kind))
            .unwrap_or_default();
        files::with_hints(&message, &hints)
    };
    if kind != Kind::Serve && !flags.given.is_empty() {
        let given: Vec<String> = flags.given.iter().map(|f| format!("--{f}")).collect();
        return Err(format!(
            "{} set gnomon serve's settings, but {shown} is {}",
            given.join(", "),
            kind.described()
        ));
    }
    let not_applied = |command: &str, vars: &str| {
        format!(
            "this shows the file over the defaults; {vars} variables and flags are not \
             applied here (`gnomon {command} --config {shown} --print-config` shows what \
             {command} would run with)"
        )
    };
    match kind {
        Kind::Serve => serve(file, load_keys, flags),
        Kind::Sync => {
            use gnomon_sync::config::{Layer, Settings};
            let layer = Layer::from_toml(&text, file).map_err(|e| explain(e.to_string()))?;
            let settings = Settings::resolve(&layer, &Layer::default());
            // What no one key's parser checks (a plain-HTTP servers-url
            // needs servers-key; the keys load; the threshold fits).
            settings
                .check(&layer)
                .map_err(|e| explain(format!("{shown}: {e}")))?;
            Ok(Checked {
                kind,
                config: settings.to_string(),
                notes: vec![not_applied("sync", "GNOMON_SYNC_*")],
                keys: Vec::new(),
            })
        }
        Kind::Watch => {
            let layers = FileLayers::from_toml(&text, file).map_err(explain)?;
            let has = |t: &str| doc.as_ref().is_some_and(|d| d.contains_key(t));
            let mut config = String::new();
            let mut notes = Vec::new();
            if has("watch") {
                let w = WatchSettings::resolve(&layers.watch, &WatchLayer::default())
                    .map_err(|e| format!("{shown}: [watch]: {e}"))?;
                config.push_str(&w.to_string());
                notes.push(not_applied("watch", "GNOMON_WATCH_*"));
            }
            if has("report-server") {
                let s = SinkSettings::resolve(&layers.sink, &SinkLayer::default());
                // The quota rule always; the accept-keys file only when keys
                // are to be opened, as for serve's key files.
                let mut probe = s.clone();
                if !load_keys {
                    probe.accept_keys = None;
                }
                probe
                    .sink_config(None)
                    .map_err(|e| format!("{shown}: [report-server]: {e}"))?;
                if !config.is_empty() {
                    config.push('\n');
                }
                config.push_str(&s.to_string());
                notes.push(not_applied("report-server", "GNOMON_REPORT_SERVER_*"));
            }
            Ok(Checked {
                kind,
                config,
                notes,
                keys: Vec::new(),
            })
        }
        Kind::Signer => {
            let t = crate::pkcs11::config::load(file).map_err(|e| explain(e.to_string()))?;
            let q = |s: &str| toml::Value::String(s.to_owned()).to_string();
            let mut config = String::from("[pkcs11]\n");
            let paths = [("module", &t.module), ("pin-file", &t.pin_file)];
            let labels = [("token", &t.token), ("key", &t.key)];
            for (key, v) in paths {
                if let Some(p) = v {
                    config.push_str(&format!("{key} = {}\n", q(&p.display().to_string())));
                }
            }
            for (key, v) in labels {
                if let Some(l) = v {
                    config.push_str(&format!("{key} = {}\n", q(l)));
                }
            }
            Ok(Checked {
                kind,
                config,
                notes: vec![format!(
                    "the token is not opened here: `gnomon keygen --config {shown} \
                     --public-only` shows its key's public half"
                )],
                keys: Vec::new(),
            })
        }
    }
}

fn serve(file: &Path, load_keys: bool, flags: ConfigFlags) -> Result<Checked, String> {
    let args = ConfigArgs {
        config: Some(file.to_owned()),
        flags,
    };
    let config = args.load().map_err(|e| e.to_string())?;
    // Everything is checked before anything is printed: a configuration
    // printed in full and then refused reads as accepted at a glance.
    let keys = if load_keys {
        check_keys(&config)?
    } else {
        Vec::new()
    };
    let mut notes = Vec::new();
    if config.ephemeral_key() {
        notes.push(
            "no key-file or offline-dir; `serve` would use an ephemeral key, which is not \
             for production"
                .to_owned(),
        );
    }
    Ok(Checked {
        kind: Kind::Serve,
        config: config.to_string(),
        notes,
        keys,
    })
}

/// Open every identity the way `serve` will and describe each in a line.
fn check_keys(config: &Config) -> Result<Vec<String>, String> {
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    let mut out = Vec::new();
    for id in &config.identities {
        match id {
            IdentitySource::KeyFile(path) => {
                let key = keyfile::load(path).map_err(|e| key_file_words(&e))?;
                out.push(format!(
                    "key file {}: {} public key {}",
                    path.display(),
                    key.scheme().name(),
                    B64.encode(key.public())
                ));
            }
            IdentitySource::OfflineDir(dir, pin) => {
                let store = OfflineStore::load(dir, pin.as_ref().map(|k| k.bytes()))
                    .map_err(|e| offline_words(&e))?;
                let current = store.current(now_us).map_or_else(
                    || "none valid now".to_owned(),
                    |d| format!("current until {}", format_utc(d.maxt_us)),
                );
                let host = store
                    .host()
                    .map_or_else(String::new, |h| format!("host {h}, "));
                out.push(format!(
                    "offline dir {}: {host}{} public key {}, {} delegations, {current}, last expires {}",
                    dir.display(),
                    store.long_term_public.scheme().name(),
                    B64.encode(store.long_term_public.bytes()),
                    store.delegations().len(),
                    format_utc(store.last_expiry_us()),
                ));
            }
        }
    }
    Ok(out)
}
