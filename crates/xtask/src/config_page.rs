//! gnomon.toml(5): the configuration file's page, written from the tables
//! the programs parse with (gnomon-server's `KEYS`, gnomon-sync's `KEYS`,
//! and the flags of `watch` and `report-server`, whose file keys are their
//! long flags), so a key added to the program is on the page of the next
//! package without anyone editing it.

use std::collections::BTreeMap;

use clap_mangen::roff::{bold, italic, roman, Roff};

/// One key as the page lists it.
struct Key {
    name: String,
    help: String,
    expected: String,
    default: String,
    env: String,
}

fn key_list(out: &mut Roff, keys: &[Key]) {
    for k in keys {
        out.control("TP", []);
        out.text([
            bold(k.name.clone()),
            roman(" = "),
            italic(k.expected.clone()),
        ]);
        let mut line = format!("{}.", k.help.trim_end_matches('.'));
        if !k.default.is_empty() {
            line.push_str(&format!(" Default: {}.", k.default));
        }
        if !k.env.is_empty() {
            line.push_str(&format!(" Environment: {}.", k.env));
        }
        out.text([roman(line)]);
    }
}

/// The server's keys, grouped by table: `tcp.enable` is `enable` in `[tcp]`.
fn server_tables() -> BTreeMap<&'static str, Vec<Key>> {
    let mut tables: BTreeMap<&str, Vec<Key>> = BTreeMap::new();
    for spec in gnomon_server::config::KEYS {
        let (table, name) = spec.key.split_once('.').unwrap_or(("", spec.key));
        tables.entry(table).or_default().push(Key {
            name: name.to_owned(),
            help: spec.help.to_owned(),
            expected: spec.expected.to_owned(),
            default: spec.default.to_owned(),
            env: format!("{} (flag --{})", spec.env, spec.flag),
        });
    }
    tables
}

/// The keys of a command's table: its flags that have a GNOMON_PREFIX_*
/// variable, but not the one that names the file itself.
fn flag_keys(cmd: &clap::Command, prefix: &str) -> Vec<Key> {
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| {
            let env = a.get_env()?.to_str()?;
            if !env.starts_with(prefix) || env.ends_with("_CONFIG") {
                return None;
            }
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            // "… [default: X]" in the help is the default.
            let (help, default) = match help.split_once(" [default: ") {
                Some((h, d)) => (h.to_owned(), d.trim_end_matches(']').to_owned()),
                None => (help, String::new()),
            };
            let expected = a
                .get_value_names()
                .and_then(|v| v.first().map(|n| n.to_string()))
                .unwrap_or_else(|| "true or false".into());
            Some(Key {
                name: a.get_long()?.to_owned(),
                help: help.split_whitespace().collect::<Vec<_>>().join(" "),
                expected,
                default,
                env: env.to_owned(),
            })
        })
        .collect()
}

/// The `[pkcs11]` table of `keygen` and `delegate` --config: one key per
/// `--pkcs11-*` flag, named without the prefix.
fn pkcs11_keys(cmd: &clap::Command) -> Vec<Key> {
    cmd.get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            let name = long.strip_prefix("pkcs11-")?;
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            Some(Key {
                name: name.to_owned(),
                help: help.split_whitespace().collect::<Vec<_>>().join(" "),
                expected: a
                    .get_value_names()
                    .and_then(|v| v.first().map(|n| n.to_string()))
                    .unwrap_or_default(),
                default: String::new(),
                // Flags only: a variable naming a token would outlive the
                // command that meant it (the PIN's is the exception).
                env: String::new(),
            })
        })
        .collect()
}

/// The page, in roff.
pub(crate) fn render(source: &str, date: &str) -> String {
    let mut r = Roff::default();
    r.control("TH", ["GNOMON.TOML", "5", date, source, "gnomon manual"]);
    r.control("SH", ["NAME"]);
    r.text([roman(
        "gnomon.toml - configuration of the gnomon Roughtime server and tools",
    )]);
    r.control("SH", ["SYNOPSIS"]);
    r.text([bold("/etc/gnomon/gnomon.toml")]);
    r.control("SH", ["DESCRIPTION"]);
    r.text([roman(
        "A TOML file. gnomon serve reads it with --config (GNOMON_CONFIG); gnomon \
         config check checks it without starting the server. Keys outside a table \
         come first; the others are in the tables named below. Each key can also be \
         set by a flag (the key with dots as dashes: tcp.max-connections is \
         --tcp-max-connections) or an environment variable; flags win over the \
         environment, which wins over the file. A list given by a flag or a variable \
         replaces the file's list; in a variable, items are separated by commas.",
    )]);
    r.control("PP", []);
    r.text([roman(
        "Durations are an integer and a unit: 500ms, 3s, 5m, 12h, 7d. Relative paths \
         are relative to the file's directory. Unknown keys and values out of range \
         are errors that name the key and the range. SIGHUP reloads the file.",
    )]);
    for (table, keys) in server_tables() {
        let title = if table.is_empty() {
            "TOP-LEVEL KEYS".to_owned()
        } else {
            format!("THE [{table}] TABLE")
        };
        r.control("SH", [title.as_str()]);
        key_list(&mut r, &keys);
    }

    r.control("SH", ["THE [sync] TABLE"]);
    r.text([roman(
        "Read by gnomon sync --config (GNOMON_SYNC_CONFIG), from a file of its own: a \
         [sync] table and nothing else. Each key is also a flag of gnomon sync and a \
         GNOMON_SYNC_* variable, which win over the file.",
    )]);
    let cli = gnomon::command();
    let sync_cmd = cli.find_subcommand("sync").expect("sync is a subcommand");
    // The variable is the flag's own, not one derived from the key's name.
    let env_of = |name: &str| {
        sync_cmd
            .get_arguments()
            .find(|a| a.get_long() == Some(name))
            .and_then(|a| a.get_env())
            .and_then(|e| e.to_str())
            .unwrap_or_default()
            .to_owned()
    };
    // The defaults as the code has them (what --print-config prints), not
    // a second copy that could say otherwise.
    let sync: Vec<Key> = gnomon_sync::config::KEYS
        .iter()
        .map(|(name, expected, _, help)| Key {
            name: (*name).to_owned(),
            help: (*help).to_owned(),
            expected: (*expected).to_owned(),
            default: gnomon_sync::config::default_of(name)
                .map(|d| d.toml())
                .unwrap_or_default(),
            env: env_of(name),
        })
        .collect();
    key_list(&mut r, &sync);

    for (table, sub, prefix) in [
        ("watch", "watch", "GNOMON_WATCH_"),
        ("report-server", "report-server", "GNOMON_REPORT_SERVER_"),
    ] {
        let title = format!("THE [{table}] TABLE");
        r.control("SH", [title.as_str()]);
        r.text([roman(format!(
            "Read by gnomon {sub} --config from a file with [watch] and [report-server] \
             tables (gnomon watch --sink reads the limits of its sink from the second). \
             Each key is also a flag of gnomon {sub} and a {prefix}* variable, which win \
             over the file."
        ))]);
        let cmd = cli
            .find_subcommand(sub)
            .expect("watch and report-server are subcommands");
        key_list(&mut r, &flag_keys(cmd, prefix));
    }

    r.control("SH", ["THE [pkcs11] TABLE"]);
    r.text([roman(
        "Read by gnomon keygen --config and gnomon delegate --config, on the signing \
         machine, from a file of its own (not gnomon.toml, which the server reads and \
         which may not hold this table): where the long-term key is when it lives in a \
         PKCS#11 token. Each key is also a flag of the same name (module is \
         --pkcs11-module), which wins over the file. There is no key for the PIN itself (pin-file, or GNOMON_PKCS11_PIN).",
    )]);
    let delegate = cli
        .find_subcommand("delegate")
        .expect("delegate is a subcommand");
    key_list(&mut r, &pkcs11_keys(delegate));

    r.control("SH", ["FILES"]);
    r.control("TP", []);
    r.text([bold("/etc/gnomon/gnomon.toml")]);
    r.text([roman(
        "The server's configuration as packaged: every key, its default and range, \
         commented.",
    )]);
    r.control("SH", ["SEE ALSO"]);
    r.text([roman(
        "gnomon(1), gnomon-serve(1), gnomon-config-check(1), gnomon-sync(1), \
         gnomon-watch(1), gnomon-report-server(1)",
    )]);
    r.render()
}
