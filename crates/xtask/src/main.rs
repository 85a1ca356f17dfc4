//! Build-time tasks that read gnomon's CLI definition but do not belong in
//! the `gnomon` binary.
//!
//!     cargo run -p xtask -- dist DIR
//!
//! writes DIR/man1/gnomon.1 and one page per subcommand (gnomon-serve.1,
//! gnomon-config-check.1, ...), DIR/man5/gnomon.toml.5 (the configuration
//! file, from the key tables the programs parse with), and
//! DIR/completions/{gnomon.bash, _gnomon, gnomon.fish}. Everything comes from `gnomon::command()`, the definition
//! the binary parses with, so a flag added there is in the pages and the
//! completions of the next package without anyone editing them.
//! scripts/package-deb installs the result; crates/xtask/tests/dist.rs
//! renders and loads it.

use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod config_page;
mod sections;

use clap_complete::Shell;
use clap_mangen::roff::{roman, Roff};
use clap_mangen::Man;

const USAGE: &str =
    "usage: xtask dist DIR   (man pages in DIR/man1 and DIR/man5, completions in DIR/completions)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = match args.as_slice() {
        [cmd, dir] if cmd == "dist" => PathBuf::from(dir),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(64);
        }
    };
    match dist(&out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask dist {}: {e}", out.display());
            ExitCode::FAILURE
        }
    }
}

fn dist(out: &Path) -> io::Result<()> {
    let man_dir = out.join("man1");
    let man5_dir = out.join("man5");
    let comp_dir = out.join("completions");
    fs::create_dir_all(&man_dir)?;
    fs::create_dir_all(&man5_dir)?;
    fs::create_dir_all(&comp_dir)?;

    // `help` is not a page of its own: each page already is the help.
    let mut cmd = gnomon::command().disable_help_subcommand(true);
    // Sets every subcommand's display name to "gnomon-serve" etc., which
    // names the pages.
    cmd.build();
    let mut pages = Vec::new();
    collect(&cmd, &mut pages);
    let names: Vec<String> = pages.iter().map(page_name).collect();
    let source = format!("gnomon {}", cmd.get_version().unwrap_or_default());
    let date = page_date()?;
    for page in &pages {
        let man = Man::new(page.clone())
            .source(source.clone())
            .date(date.clone())
            .manual("gnomon manual");
        write_page(man, page, &names, &man_dir)?;
    }
    fs::write(
        man5_dir.join("gnomon.toml.5"),
        config_page::render(&source, &date),
    )?;

    for (shell, file) in [
        (Shell::Bash, "gnomon.bash"),
        (Shell::Zsh, "_gnomon"),
        (Shell::Fish, "gnomon.fish"),
    ] {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut gnomon::command(), "gnomon", &mut buf);
        fs::write(comp_dir.join(file), buf)?;
    }
    Ok(())
}

/// Every visible command, parents before children.
fn collect(cmd: &clap::Command, into: &mut Vec<clap::Command>) {
    // `--help` ends with the command's exit codes; a page has its own EXIT
    // STATUS section (sections.rs), so the help's copy is left out of it.
    let own_codes = cmd
        .get_after_help()
        .is_some_and(|h| h.to_string().starts_with("Exit codes:"));
    into.push(if own_codes {
        cmd.clone().after_help(None::<&str>)
    } else {
        cmd.clone()
    });
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        collect(sub, into);
    }
}

fn page_name(cmd: &clap::Command) -> String {
    cmd.get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_owned()
}

/// The pages' date: SOURCE_DATE_EPOCH when set (the reproducible-builds
/// convention; scripts/package-deb sets it to the commit's time), so the
/// same commit gives byte-identical pages; today otherwise.
fn page_date() -> io::Result<String> {
    let secs = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v.trim().parse::<u64>().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("SOURCE_DATE_EPOCH {v:?} is not whole seconds"),
            )
        })?,
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(io::Error::other)?
            .as_secs(),
    };
    let stamp = gnomon_client::format_utc(secs.saturating_mul(1_000_000));
    Ok(stamp[..10].to_owned())
}

/// clap_mangen's page, plus ENVIRONMENT, FILES, EXIT STATUS, EXAMPLES
/// (sections.rs) and SEE ALSO linking the family: the generated SUBCOMMANDS
/// section names the children but nothing leads back up or across.
fn write_page(man: Man, cmd: &clap::Command, all: &[String], dir: &Path) -> io::Result<()> {
    let name = page_name(cmd);
    let name = name.as_str();
    let mut buf = Vec::new();
    man.render(&mut buf)?;

    let mut extra = Roff::default();
    sections::environment(cmd, &mut extra);
    sections::files(name, &mut extra);
    sections::exit_status(name, &mut extra);
    sections::examples(name, &mut extra);
    // The top page leads to every page; a subcommand's to the top, its
    // parents and its children.
    let see: Vec<&String> = all
        .iter()
        .filter(|n| *n != name)
        .filter(|n| {
            name == "gnomon"
                || *n == "gnomon"
                || name.starts_with(&format!("{n}-"))
                || n.starts_with(&format!("{name}-"))
        })
        .collect();
    let mut refs: Vec<String> = see.iter().map(|n| format!("{n}(1)")).collect();
    if matches!(
        name,
        "gnomon" | "gnomon-serve" | "gnomon-config" | "gnomon-config-check"
    ) {
        refs.push("gnomon.toml(5)".into());
    }
    if !refs.is_empty() {
        extra.control("SH", ["SEE ALSO"]);
        extra.text([roman(refs.join(", "))]);
    }
    // The main page already defines the apostrophe string that every
    // rendering starts with; the extra sections go on without repeating it.
    let preamble = Roff::default().render();
    let extra = extra.render();
    buf.extend_from_slice(extra.strip_prefix(&preamble).unwrap_or(&extra).as_bytes());

    let mut f = fs::File::create(dir.join(format!("{name}.1")))?;
    f.write_all(&buf)?;
    f.flush()
}
