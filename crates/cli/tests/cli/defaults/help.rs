//! Every subcommand's `--help` (and so its man page, which is written
//! from the same definition) says each default once, and says the one
//! the code uses: a flag whose value clap defaults is printed by clap, a
//! flag layered over a file says the default its command's
//! `--print-config` prints (sync, watch, report-server) or `config check`
//! prints (serve's keys).

use super::{
    is_a_value, report_server_defaults, says, serve_defaults, stdout_of, sync_defaults,
    watch_defaults, Defaults,
};

/// Every subcommand with its path (`bench load`), parents included.
fn commands() -> Vec<(String, clap::Command)> {
    fn walk(cmd: &clap::Command, prefix: &str, out: &mut Vec<(String, clap::Command)>) {
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let path = format!("{prefix}{}", sub.get_name());
            out.push((path.clone(), sub.clone()));
            walk(sub, &format!("{path} "), out);
        }
    }
    let mut out = Vec::new();
    walk(&gnomon::command(), "", &mut out);
    out
}

fn find<'a>(all: &'a [(String, clap::Command)], path: &str) -> &'a clap::Command {
    &all.iter()
        .find(|(p, _)| p == path)
        .unwrap_or_else(|| panic!("no gnomon {path}"))
        .1
}

/// An argument's own help, short and long.
fn help_of(a: &clap::Arg) -> String {
    let short = a.get_help().map(ToString::to_string).unwrap_or_default();
    let long = a
        .get_long_help()
        .map(ToString::to_string)
        .unwrap_or_default();
    format!("{short} {long}")
}

/// Each `[default: X]` a help text states, X alone.
fn stated(help: &str) -> Vec<String> {
    help.split("[default: ")
        .skip(1)
        .filter_map(|rest| rest.split_once(']').map(|(d, _)| d.trim().to_owned()))
        .collect()
}

/// `now --timeout` said `[default: 2s] [default: 2s]`: its doc comment
/// said what clap prints anyway. No argument whose default clap holds
/// says it again, and no help a user reads says one twice.
#[test]
fn no_default_is_said_twice() {
    for (path, cmd) in commands() {
        for a in cmd.get_arguments() {
            if a.get_default_values().is_empty() || a.is_hide_default_value_set() {
                continue;
            }
            assert!(
                !help_of(a).contains("[default:"),
                "gnomon {path} --{}: clap prints its default; the help says it again",
                a.get_id()
            );
        }
        let mut args: Vec<&str> = path.split(' ').collect();
        args.push("--help");
        let text = stdout_of(&args);
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for (i, _) in flat.match_indices("[default: ") {
            let rest = &flat[i + 1..];
            let next = rest.find(']').map(|end| rest[end + 1..].trim_start());
            assert!(
                !next.is_some_and(|n| n.starts_with("[default: ")),
                "gnomon {path} --help says a default twice:\n{text}"
            );
        }
    }
    let now = stdout_of(&["now", "--help"]);
    assert_eq!(now.matches("[default: 2s]").count(), 1, "{now}");
}

/// The flags of `cmd` that are keys of `defaults` (the key is the long
/// flag) state exactly the printed default; those that are not keys, or
/// are unset by default, may state one in words.
fn held_to(path: &str, cmd: &clap::Command, defaults: &Defaults) -> usize {
    let mut checked = 0;
    for a in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let Some(long) = a.get_long() else { continue };
        let said = stated(&help_of(a));
        let Some(v) = defaults.get(long) else {
            continue;
        };
        assert_eq!(
            said.len(),
            1,
            "gnomon {path} --{long}: the default {v} is not said once in its help: {said:?}"
        );
        assert!(
            says(&said[0], v),
            "gnomon {path} --{long}: the help says [default: {}], --print-config {v}",
            said[0]
        );
        checked += 1;
    }
    checked
}

/// The case: `sync --help`, gnomon-sync(1) and docs/SYNC.md said
/// `chrony-max-radius` defaults to 3 s while the code, `--print-config`
/// and gnomon.toml(5) used 5 s. Every stated default of sync, watch and
/// report-server is what the command prints with nothing set.
#[test]
fn every_default_the_help_states_is_the_one_the_code_prints() {
    let all = commands();
    let sync = sync_defaults();
    assert_eq!(
        held_to("sync", find(&all, "sync"), &sync),
        sync.len(),
        "{sync:?}"
    );
    let help = stdout_of(&["sync", "--help"]);
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("1ms..=1h [default: 5s]"), "{help}");
    let watch = watch_defaults();
    assert_eq!(
        held_to("watch", find(&all, "watch"), &watch),
        watch.len(),
        "{watch:?}"
    );
    let sink = report_server_defaults();
    // accept-keys has no value by default: said in words.
    let n = held_to("report-server", find(&all, "report-server"), &sink);
    assert_eq!(n, sink.len(), "{sink:?}");
}

/// serve's keys come from gnomon-server's table, whose help says
/// `[EXPECTED; default X]`: X is what `config check` prints for an empty
/// file, for every key whose default is a value.
#[test]
fn every_default_serve_states_is_the_one_config_check_prints() {
    let printed = serve_defaults();
    let all = commands();
    for name in ["serve", "config check"] {
        let cmd = find(&all, name);
        let mut checked = 0;
        for spec in gnomon_server::config::KEYS {
            let a = cmd
                .get_arguments()
                .find(|a| a.get_long() == Some(spec.flag))
                .unwrap_or_else(|| panic!("gnomon {name} has no --{}", spec.flag));
            let help = help_of(a);
            let said = help
                .rsplit_once("; default ")
                .and_then(|(_, d)| d.trim().strip_suffix(']'))
                .unwrap_or_else(|| panic!("--{}: no default in {help:?}", spec.flag))
                .trim()
                .to_owned();
            if !is_a_value(&said) {
                continue;
            }
            let v = printed
                .get(spec.key)
                .unwrap_or_else(|| panic!("config check prints no {}", spec.key));
            // A default that depends on the rest of the file is said so.
            let conditional = said.contains(" when ") || said.contains(" with ");
            assert!(
                conditional || says(&said, v),
                "gnomon {name} --{}: the help says default {said}, config check {v}",
                spec.flag
            );
            checked += 1;
        }
        assert!(checked > 30, "{name}: only {checked} defaults compared");
    }
}
