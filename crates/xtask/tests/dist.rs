//! `xtask dist` writes man pages that render and name every subcommand and
//! flag, and completion scripts that the real shells load and complete with.
//! The shells and the man renderers are Debian packages scripts/test-all
//! installs; a test whose tool is missing says so (gnomon_testkit::skip).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A directory under target/tmp for one test, removed when the test ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("xtask-dist-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `xtask dist` into a fresh directory.
fn dist(test: &str) -> Scratch {
    let dir = Scratch::new(test);
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("dist")
        .arg(&dir.0)
        .env("SOURCE_DATE_EPOCH", "1767225600")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The text of one section of a rendered page: from its heading to the
/// next heading (a line that starts in the first column).
fn section_of(text: &str, heading: &str) -> String {
    let start = text
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no {heading}\n{text}"));
    let body = &text[start + heading.len() + 2..];
    let end = body
        .lines()
        .position(|l| l.chars().next().is_some_and(|c| !c.is_whitespace()))
        .unwrap_or(body.lines().count());
    body.lines().take(end).collect::<Vec<_>>().join("\n")
}

/// Every visible command with the name of its page: gnomon, gnomon-serve,
/// gnomon-config-check, ...
fn commands() -> Vec<(String, clap::Command)> {
    fn walk(cmd: &clap::Command, into: &mut Vec<(String, clap::Command)>) {
        let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_owned();
        into.push((name, cmd.clone()));
        for sub in cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        {
            walk(sub, into);
        }
    }
    let mut cmd = gnomon::command();
    cmd.build();
    let mut all = Vec::new();
    walk(&cmd, &mut all);
    all
}

/// The page as plain text, wide enough that no flag is broken across lines.
/// Terminal renderers embolden by overstriking (`x\bx`); keep the last char.
fn render(page: &Path) -> String {
    let out = if have("mandoc") {
        Command::new("mandoc")
            .args(["-T", "ascii", "-O", "width=400"])
            .arg(page)
            .output()
            .unwrap()
    } else {
        Command::new("groff")
            .args([
                "-man", "-T", "ascii", "-r", "LL=400n", "-r", "HY=0", "-P", "-cbu",
            ])
            .arg(page)
            .output()
            .unwrap()
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut text = String::new();
    for c in String::from_utf8(out.stdout).unwrap().chars() {
        if c == '\u{8}' {
            text.pop();
        } else {
            text.push(c);
        }
    }
    text
}

#[test]
fn man_pages_name_every_subcommand_and_every_flag() {
    if !have("mandoc") && !have("groff") {
        gnomon_testkit::skip(
            "man_pages_name_every_subcommand_and_every_flag",
            "neither mandoc nor groff is installed (apt-get install mandoc)",
        );
        return;
    }
    let dir = dist("man");
    let man1 = dir.0.join("man1");
    let all = commands();
    let mut expected: Vec<String> = all.iter().map(|(n, _)| format!("{n}.1")).collect();
    let mut found: Vec<String> = std::fs::read_dir(&man1)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    expected.sort();
    found.sort();
    assert_eq!(found, expected, "one page per command, no other");
    assert!(
        expected.contains(&"gnomon-serve.1".to_owned()),
        "{expected:?}"
    );

    for (name, cmd) in &all {
        let page = man1.join(format!("{name}.1"));
        let text = render(&page);
        assert!(
            text.contains(&format!("{name} - ")),
            "{name}: NAME line\n{text}"
        );
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            assert!(
                text.contains(&format!("{name}-{}(1)", sub.get_name())),
                "{name} does not lead to its subcommand {}\n{text}",
                sub.get_name()
            );
        }
        // In the body, not only the synopsis: each flag with its help.
        let body = text
            .split_once("\nDESCRIPTION\n")
            .unwrap_or_else(|| panic!("{name}: no DESCRIPTION\n{text}"))
            .1;
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(long) = arg.get_long() {
                assert!(
                    body.contains(&format!("--{long}")),
                    "{name}: --{long} missing\n{text}"
                );
            }
        }
        if name != "gnomon" {
            assert!(text.contains("gnomon(1)"), "{name}: SEE ALSO\n{text}");
        }
        for section in [
            "\nENVIRONMENT\n",
            "\nFILES\n",
            "\nEXIT STATUS\n",
            "\nEXAMPLES\n",
        ] {
            assert!(text.contains(section), "{name}: no{section}{text}");
        }
        // Every variable a flag reads is in ENVIRONMENT, by name.
        let env = section_of(&text, "ENVIRONMENT");
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(var) = arg.get_env() {
                let var = var.to_str().unwrap();
                assert!(env.contains(var), "{name}: {var} not in ENVIRONMENT\n{env}");
            }
        }
    }

    // EXIT STATUS is the program's table: all of it on gnomon(1), the
    // rows that concern a command on its page.
    let codes_on = |page: &str| -> Vec<u8> {
        let text = render(&man1.join(format!("{page}.1")));
        let status = section_of(&text, "EXIT STATUS");
        gnomon::exit::TABLE
            .iter()
            .map(|s| s.code)
            .filter(|c| {
                status.lines().any(|l| {
                    l.trim_start().starts_with(&format!("{c} ")) || l.trim() == c.to_string()
                })
            })
            .collect()
    };
    let every: Vec<u8> = gnomon::exit::TABLE.iter().map(|s| s.code).collect();
    assert_eq!(codes_on("gnomon"), every);
    assert_eq!(codes_on("gnomon-query"), [0, 1, 2, 3, 64, 70, 73]);
    assert_eq!(codes_on("gnomon-serve"), [0, 64, 70, 71]);
    assert_eq!(codes_on("gnomon-sync"), [0, 1, 4, 5, 64, 70, 71]);

    // The serve page is the operator's reference: every flag, each with the
    // environment variable that sets it too.
    let serve = all.iter().find(|(n, _)| n == "gnomon-serve").unwrap();
    let text = render(&man1.join("gnomon-serve.1"));
    let flags: Vec<_> = serve
        .1
        .get_arguments()
        .filter_map(|a| a.get_long())
        .collect();
    assert!(flags.len() > 40, "{flags:?}");
    for arg in serve.1.get_arguments() {
        if let Some(env) = arg.get_env() {
            let env = env.to_str().unwrap();
            assert!(text.contains(env), "gnomon-serve: {env} missing");
        }
    }
    assert!(text.contains("/etc/gnomon/gnomon.toml"), "FILES\n{text}");

    if have("mandoc") {
        // Errors and warnings, not style (long lines are clap's help text).
        let out = Command::new("mandoc")
            .args(["-T", "lint", "-W", "warning"])
            .args(expected.iter().map(|p| man1.join(p)))
            .arg(dir.0.join("man5/gnomon.toml.5"))
            .output()
            .unwrap();
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && report.trim().is_empty(),
            "mandoc -T lint:\n{report}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Runs `script` in a shell with the completion file as its last argument
/// (`$1` in bash and zsh, `$argv[-1]` in fish).
fn shell(sh: &str, flags: &[&str], file: &Path, script: &str) -> String {
    let out = Command::new(sh)
        .args(flags)
        .arg("-c")
        .arg(script)
        .arg(sh)
        .arg(file)
        .env("HOME", file.parent().unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{sh}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// What bash offers for the words typed so far (the last may be partial),
/// asked the way readline asks: COMP_WORDS, COMP_CWORD and the function
/// that `complete -p gnomon` names.
fn bash_complete(file: &Path, words: &[&str]) -> Vec<String> {
    let script = format!(
        r#"source "$1" || exit 1
spec=$(complete -p gnomon) || exit 1
fn=$(printf '%s\n' "$spec" | sed -n 's/.*-F \([^ ]*\).*/\1/p')
[ -n "$fn" ] || exit 1
COMP_WORDS=({words})
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
COMP_LINE="${{COMP_WORDS[*]}}"
COMP_POINT=${{#COMP_LINE}}
"$fn" gnomon "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\n' "${{COMPREPLY[@]}}""#,
        words = words
            .iter()
            .map(|w| format!("'{w}'"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    shell("bash", &["--noprofile", "--norc"], file, &script)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completion_completes_subcommands_and_flags() {
    if !have("bash") {
        gnomon_testkit::skip(
            "bash_completion_completes_subcommands_and_flags",
            "bash is not installed",
        );
        return;
    }
    let dir = dist("bash");
    let file = dir.0.join("completions/gnomon.bash");
    assert_eq!(bash_complete(&file, &["gnomon", "se"]), ["serve"]);
    assert_eq!(
        bash_complete(&file, &["gnomon", "serve", "--key-f"]),
        ["--key-file"]
    );
    let subs = bash_complete(&file, &["gnomon", ""]);
    for (name, _) in commands().iter().skip(1) {
        let top = name.trim_start_matches("gnomon-");
        if !top.contains('-') || top == "verify-report" {
            assert!(subs.iter().any(|s| s == top), "{top} not in {subs:?}");
        }
    }
    assert_eq!(bash_complete(&file, &["gnomon", "config", "ch"]), ["check"]);
}

/// The completion script `file` for `sh`, written and syntax-checked
/// (`zsh -n`, `fish --no-execute` parse without running), or None after
/// recording the skip when the shell is not installed.
fn checked_script(test: &str, sh: &str, check: &str, file: &str) -> Option<(Scratch, PathBuf)> {
    if !have(sh) {
        gnomon_testkit::skip(
            test,
            &format!("{sh} is not installed (apt-get install {sh})"),
        );
        return None;
    }
    let dir = dist(sh);
    let path = dir.0.join("completions").join(file);
    let out = Command::new(sh).arg(check).arg(&path).output().unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{sh} {check}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some((dir, path))
}

#[test]
fn zsh_completion_loads_and_registers() {
    let test = "zsh_completion_loads_and_registers";
    let Some((_dir, file)) = checked_script(test, "zsh", "-n", "_gnomon") else {
        return;
    };
    // compinit with a private dump file; sourcing registers the function
    // for the command through compdef, as fpath loading would.
    let out = shell(
        "zsh",
        &["-f"],
        &file,
        r#"autoload -Uz compinit && compinit -u -d "$HOME/zcompdump" && source "$1" && print -r -- "$_comps[gnomon]" && whence -w _gnomon"#,
    );
    assert_eq!(out, "_gnomon\n_gnomon: function\n");
}

#[test]
fn fish_completion_completes_subcommands() {
    let test = "fish_completion_completes_subcommands";
    let Some((_dir, file)) = checked_script(test, "fish", "--no-execute", "gnomon.fish") else {
        return;
    };
    let out = shell(
        "fish",
        &["--no-config"],
        &file,
        r#"source $argv[-1]; complete -C "gnomon se"; complete -C "gnomon serve --key-f""#,
    );
    let words: Vec<&str> = out.lines().map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(words, ["serve", "--key-file"], "{out}");
}

/// gnomon.toml(5) lists every key of every table the programs read, with
/// the variable that sets it, in the sections the tables name.
#[test]
fn the_configuration_page_lists_every_key() {
    if !have("mandoc") && !have("groff") {
        gnomon_testkit::skip(
            "the_configuration_page_lists_every_key",
            "neither mandoc nor groff is installed (apt-get install mandoc)",
        );
        return;
    }
    let dir = dist("man5");
    let text = render(&dir.0.join("man5/gnomon.toml.5"));
    assert!(text.contains("gnomon.toml - "), "NAME\n{text}");
    for spec in gnomon_server::config::KEYS {
        let (table, key) = spec.key.split_once('.').unwrap_or(("", spec.key));
        let section = if table.is_empty() {
            section_of(&text, "TOP-LEVEL KEYS")
        } else {
            section_of(&text, &format!("THE [{table}] TABLE"))
        };
        assert!(
            section.contains(&format!("{key} = ")),
            "{}: missing\n{section}",
            spec.key
        );
        assert!(
            section.contains(spec.env),
            "{}: {} missing",
            spec.key,
            spec.env
        );
    }
    let sync = section_of(&text, "THE [sync] TABLE");
    for (key, ..) in gnomon_sync::config::KEYS {
        assert!(
            sync.contains(&format!("{key} = ")),
            "[sync] {key} missing\n{sync}"
        );
    }
    for (table, keys) in [
        ("pkcs11", &["module", "token", "key", "pin-file"][..]),
        (
            "watch",
            &["servers", "listen", "database", "interval", "sink"][..],
        ),
        (
            "report-server",
            &["listen", "database", "max-body", "retention"][..],
        ),
    ] {
        let section = section_of(&text, &format!("THE [{table}] TABLE"));
        for key in keys {
            assert!(
                section.contains(&format!("{key} = ")),
                "[{table}] {key} missing\n{section}"
            );
        }
        assert!(
            !section.contains("config = "),
            "[{table}] names the file in itself"
        );
    }
}
