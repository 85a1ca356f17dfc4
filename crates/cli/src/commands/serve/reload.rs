//! SIGHUP: load the configuration again, the way `serve` loaded it at start
//! (the file re-read; the flags and GNOMON_* variables given at start keep
//! their precedence), and apply what can change while running.
//!
//! The signal handler only sets a flag (signal-hook, as for SIGTERM); the
//! main loop notices it within one poll and does the work here, on its own
//! thread. Signals that arrive meanwhile set the flag again: a storm of
//! SIGHUPs is at most one reload running and one more queued, never a
//! backlog.

use base64::Engine as _;
use gnomon_server::config::Config;
use gnomon_server::reload::Refusal;
use gnomon_server::Engine;

use super::{engine_config, key_sources};

/// What the running server was started with and what it has applied since.
pub(super) struct Running {
    /// As loaded at start: the restart-only keys keep these values.
    pub(super) started: Config,
    /// As last applied.
    pub(super) applied: Config,
    /// The long-term public keys served.
    pub(super) publics: Vec<gnomon_protocol::LongTermKey>,
    /// What each identity answers, as announced.
    pub(super) served: super::Served,
    /// Whether TCP runs (fixed at start, as its sockets are).
    pub(super) tcp_on: bool,
    /// Where `log.level` is applied.
    pub(super) log_level: super::LevelHandle,
}

/// Reload once; logs the result in one line (plus one per setting that
/// waits for a restart) and counts it.
pub(super) fn reload(args: &super::Args, running: &mut Running, engine: &Engine) {
    let refuse = |reason: Refusal, why: String| {
        log_failure(&why);
        engine.reload_refused(reason);
    };
    let config = match super::load(args) {
        Ok(c) => c,
        Err(e) => return refuse(Refusal::Config, super::failure::config(&e).message),
    };
    // A configuration that names no key, while a configured one is
    // served, is almost always a file caught empty or half-written (an
    // editor or `>` truncates before it writes). Taking the quick-start's
    // ephemeral key would change the public key under every client; to
    // run without the configured keys, restart.
    if config.ephemeral_key() && !running.applied.ephemeral_key() {
        return refuse(
            Refusal::NoKeys,
            format!(
                "{} names no key (no key-file, no offline-dir); a server serving a \
                 configured key never switches to an ephemeral one on reload (restart to \
                 do that); still serving public keys {}",
                args.config
                    .config
                    .as_deref()
                    .map_or("the configuration".to_owned(), |p| p.display().to_string()),
                base64_keys(&running.publics)
            ),
        );
    }
    // An ephemeral key stays the same across reloads: a new one would
    // change the public key under every client.
    let sources = if config.ephemeral_key() {
        None
    } else {
        match key_sources(&config) {
            Ok(s) => Some(s),
            Err(f) => return refuse(Refusal::Keys, f.message),
        }
    };
    // The engine counts its own outcome.
    let publics = match engine.reload(engine_config(&config), sources) {
        Ok(p) => p,
        Err(e) => return log_failure(&super::failure::said(&e)),
    };
    // Before the result is logged: a reload to "warn" is quiet about itself.
    if config.log.level != running.applied.log.level {
        let _ = running
            .log_level
            .reload(super::level_filter(config.log.level));
    }
    // What waits for a restart is compared with what runs (the values at
    // start), not with the last file: it keeps waiting, and is said, at
    // every reload until the process restarts or the file goes back.
    let waiting = running.started.restart_only_differences(&config);
    for key in &waiting {
        tracing::warn!("{key} changed; restart to apply (still running with the old value)");
    }
    let mut changed = running.applied.differences(&config);
    changed.retain(|k| !gnomon_server::config::RESTART_ONLY.contains(&k.as_str()));
    tracing::info!(
        "{}",
        report(&changed, &waiting, publics != running.publics, &publics)
    );
    running.served = super::Served::new(&config, &publics, running.tcp_on);
    running.applied = config;
    running.publics = publics;
}

/// The reload's one line: what it applied, what waits for a restart, and
/// the keys when they changed; never "nothing changed" beside a setting
/// that did and waits.
fn report(
    applied: &[String],
    waiting: &[String],
    keys_changed: bool,
    publics: &[gnomon_protocol::LongTermKey],
) -> String {
    let mut line = "reloaded the configuration and keys; ".to_owned();
    line += &match (applied.is_empty(), waiting.is_empty()) {
        (true, true) => "no setting changed".to_owned(),
        (false, true) => format!("applied {}", applied.join(", ")),
        (true, false) => format!(
            "applied no setting; {} changed and {} for a restart",
            waiting.join(", "),
            if waiting.len() == 1 { "waits" } else { "wait" }
        ),
        (false, false) => format!(
            "applied {}; {} changed and {} for a restart",
            applied.join(", "),
            waiting.join(", "),
            if waiting.len() == 1 { "waits" } else { "wait" }
        ),
    };
    if keys_changed {
        line += &format!("; now serving public keys {}", base64_keys(publics));
    }
    line
}

/// The keys, base64, comma-separated.
fn base64_keys(keys: &[gnomon_protocol::LongTermKey]) -> String {
    let keys: Vec<String> = keys
        .iter()
        .map(|k| base64::engine::general_purpose::STANDARD.encode(k.bytes()))
        .collect();
    keys.join(", ")
}

fn log_failure(why: &str) {
    // One line: a TOML error points at its column over several lines,
    // which a journal would split into unrelated entries.
    let why: Vec<&str> = why
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.contains('|'))
        .collect();
    tracing::error!(
        "reload failed, still running the previous configuration: {}",
        why.join(": ")
    );
}
