//! The sections clap_mangen does not write: ENVIRONMENT, FILES, EXIT STATUS
//! and EXAMPLES. The environment and the exit codes come from the program
//! (the clap definition and `gnomon::exit::TABLE`), so they cannot drift;
//! the files and examples are written here, one entry per page.

use clap_mangen::roff::{bold, roman, Roff};

/// `gnomon-bench-load` → `bench load`; `gnomon` → ``.
fn command_path(page: &str) -> String {
    page.strip_prefix("gnomon")
        .unwrap_or(page)
        .trim_start_matches('-')
        .replace('-', " ")
}

/// The exit codes that `page`'s command can return.
pub(crate) fn exit_rows(page: &str) -> Vec<&'static gnomon::exit::Status> {
    gnomon::exit::rows_for(&command_path(page))
}

/// ENVIRONMENT: every variable a flag of this command reads.
pub(crate) fn environment(cmd: &clap::Command, out: &mut Roff) {
    out.control("SH", ["ENVIRONMENT"]);
    let vars: Vec<(String, String)> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| {
            let env = a.get_env()?.to_str()?.to_owned();
            Some((env, a.get_long().unwrap_or(a.get_id().as_str()).to_owned()))
        })
        .collect();
    if vars.is_empty() && cmd.has_subcommands() {
        out.text([roman(
            "The subcommands read their own (GNOMON_* for serve, GNOMON_SYNC_* for sync, \
             GNOMON_WATCH_* for watch, GNOMON_REPORT_SERVER_* for report-server); each \
             one's page lists them.",
        )]);
        return;
    }
    if vars.is_empty() {
        out.text([roman("None: every setting of this command is a flag.")]);
        return;
    }
    out.text([roman(
        "Each variable sets the flag of the same meaning; a flag given on the \
         command line wins over its variable.",
    )]);
    for (env, long) in vars {
        out.control("TP", []);
        out.text([bold(env)]);
        out.text([roman("As "), bold(format!("--{long}")), roman(".")]);
    }
}

/// FILES: what the command reads or writes without being told on the
/// command line, or what it writes where it is told.
pub(crate) fn files(page: &str, out: &mut Roff) {
    out.control("SH", ["FILES"]);
    let entries: &[(&str, &str)] = match page {
        "gnomon" | "gnomon-serve" | "gnomon-config" | "gnomon-config-check" => &[
            (
                "/etc/gnomon/gnomon.toml",
                "The configuration the packaged units use (gnomon.toml(5)): every key, its \
                 default and range, commented. The long-term key or the offline delegations \
                 go beside it, in /etc/gnomon.",
            ),
            (
                "/etc/gnomon/servers.json",
                "The server list the packaged gnomon-sync units read.",
            ),
            (
                "/var/lib/gnomon",
                "gnomon sync's state: the proven floor, the last chain, the list cache and \
                 malfeasance reports.",
            ),
        ],
        "gnomon-sync" => &[
            (
                "/var/lib/gnomon",
                "The state directory (--state-dir): the proven floor, the last chain, the \
                 list cache and malfeasance reports. It must be writable by nobody but the \
                 user running gnomon sync, or nothing in it is believed.",
            ),
            (
                "/etc/gnomon/servers.json",
                "The server list the packaged units pass to --servers.",
            ),
        ],
        "gnomon-keygen" => &[(
            "FILE (--out)",
            "The new long-term key, created with mode 0600; an existing file is kept \
             unless --force is given.",
        )],
        "gnomon-delegate" => &[(
            "DIR (--out-dir)",
            "One *.delegation file per window (per host with --hosts, in a directory \
             each) and MANIFEST, which lists them all with their online keys.",
        )],
        "gnomon-query" => &[(
            "FILE (--save-request, --save-response, --report-out)",
            "Written only when asked: the raw bytes of the verified exchange, for \
             gnomon inspect, and the malfeasance report of a sequence that proves a lie.",
        )],
        "gnomon-watch" | "gnomon-report-server" => &[(
            "sqlite:PATH (--database)",
            "The history and the reports, created and migrated on first start; a \
             postgres:// URL keeps them in PostgreSQL instead.",
        )],
        _ => &[],
    };
    if entries.is_empty() {
        out.text([roman(
            "None: the command reads and writes only the files named on its command line.",
        )]);
    }
    for (path, what) in entries {
        out.control("TP", []);
        out.text([bold(*path)]);
        out.text([roman(*what)]);
    }
}

/// EXIT STATUS: the rows of the one table that apply to this command.
pub(crate) fn exit_status(page: &str, out: &mut Roff) {
    out.control("SH", ["EXIT STATUS"]);
    let lead = if page == "gnomon" {
        "Every command exits with a code from this table:"
    } else {
        "The codes this command returns (gnomon(1) has every command's):"
    };
    out.text([roman(lead)]);
    for s in exit_rows(page) {
        out.control("TP", []);
        out.text([bold(s.code.to_string())]);
        if page == "gnomon" {
            out.text([roman(format!("{} ({})", s.meaning, s.commands))]);
        } else {
            out.text([roman(s.meaning)]);
        }
    }
}

/// EXAMPLES: a few command lines a new user would type.
pub(crate) fn examples(page: &str, out: &mut Roff) {
    const KEY: &str = "iBVjxg/1j7y1+kQUTBYdTabxCppesU/07D4PMDJk2WA=";
    let q = format!("gnomon query time.example.net --key {KEY}");
    let owned: Vec<(&str, String)> = match page {
        "gnomon" | "gnomon-query" => vec![
            ("Ask one server:", q.clone()),
            (
                "Keep the exchange and check it again offline:",
                format!("{q} --save-request req.bin --save-response resp.bin"),
            ),
            (
                "Run the measurement sequence over a server list:",
                "gnomon query --servers servers.json --all --json".into(),
            ),
        ]
        .into_iter()
        .chain((page == "gnomon").then(|| {
            (
                "Try a server: an ephemeral key on 127.0.0.1:5319.",
                "gnomon serve".to_owned(),
            )
        }))
        .collect(),
        "gnomon-serve" => vec![
            (
                "Try it: an ephemeral key on 127.0.0.1:5319.",
                "gnomon serve".into(),
            ),
            (
                "As the packaged unit runs it:",
                "gnomon serve --config /etc/gnomon/gnomon.toml".into(),
            ),
        ],
        "gnomon-keygen" => vec![(
            "A long-term key, its public half on standard output:",
            "gnomon keygen --out /etc/gnomon/gnomon.key".into(),
        )],
        "gnomon-delegate" => vec![(
            "Two weeks of delegations for two hosts, made where the key is kept:",
            "gnomon delegate --key-file root.key --out-dir fleet --hosts a,b --cover 14d".into(),
        )],
        "gnomon-config" | "gnomon-config-check" => vec![(
            "Check a configuration and the keys it names before a restart:",
            "gnomon config check --load-keys /etc/gnomon/gnomon.toml".into(),
        )],
        "gnomon-sync" => vec![
            (
                "Set the clock once at boot:",
                "gnomon sync --once --set-clock --servers /etc/gnomon/servers.json".into(),
            ),
            (
                "Check that this machine's clock is inside the consensus:",
                "gnomon sync --check --servers /etc/gnomon/servers.json".into(),
            ),
        ],
        "gnomon-watch" => vec![(
            "A status page for the servers of a list, with history:",
            "gnomon watch --servers servers.json --listen 127.0.0.1:9320 --database sqlite:watch.db"
                .into(),
        )],
        "gnomon-verify-report" => vec![(
            "Check a malfeasance report:",
            "gnomon verify-report report.json".into(),
        )],
        "gnomon-report-server" => vec![(
            "Accept reports on loopback, behind a TLS proxy:",
            "gnomon report-server --listen 127.0.0.1:8080 --database sqlite:reports.db".into(),
        )],
        "gnomon-inspect" => vec![
            (
                "Decode a saved response and verify it against its request:",
                format!("gnomon inspect resp.bin --key {KEY} --request req.bin"),
            ),
            (
                "Decode a message given as hex:",
                "gnomon inspect --hex 524f55474854494d...".into(),
            ),
        ],
        "gnomon-bench" | "gnomon-bench-load" => vec![(
            "A minute of 20,000 requests a second against a local server:",
            format!(
                "gnomon bench load 127.0.0.1:5319 --key {KEY} --rate 20000 \
                 --duration 1m --timeout 500ms"
            ),
        )],
        "gnomon-bench-null-server" => vec![(
            "The do-nothing baseline, for 30 seconds:",
            "gnomon bench null-server --listen 127.0.0.1:5320 --duration 30s".into(),
        )],
        "gnomon-health" => vec![(
            "A container's HEALTHCHECK:",
            "gnomon health --url http://127.0.0.1:9319/health".into(),
        )],
        "gnomon-now" => vec![
            (
                "The time now as gnomon sync proves it, whatever the wall clock says:",
                "gnomon now".into(),
            ),
            (
                "In a script: go on only when the time is proven past a date (exit 4 when not):",
                "gnomon now --at-least 2027-01-01T00:00:00Z".into(),
            ),
        ],
        _ => vec![],
    };
    out.control("SH", ["EXAMPLES"]);
    if owned.is_empty() {
        out.text([roman(format!(
            "See the pages of the subcommands; gnomon {} --help lists them.",
            command_path(page)
        ))]);
    }
    for (i, (what, line)) in owned.into_iter().enumerate() {
        // A paragraph break straight after the heading is one mandoc warns
        // about.
        if i > 0 {
            out.control("PP", []);
        }
        out.text([roman(what)]);
        out.control("RS", ["4"]);
        out.control("nf", []);
        out.text([bold(line)]);
        out.control("fi", []);
        out.control("RE", []);
    }
}
