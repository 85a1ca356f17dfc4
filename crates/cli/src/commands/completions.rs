//! `gnomon completions SHELL`: the shell's completion script, made from the
//! same command definition as `--help` and the man pages, so a source
//! build completes exactly what it accepts.

use std::process::ExitCode;

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = "Install, for example:\n  \
    gnomon completions bash > ~/.local/share/bash-completion/completions/gnomon\n  \
    gnomon completions zsh > ~/.zfunc/_gnomon      (with fpath+=~/.zfunc in ~/.zshrc)\n  \
    gnomon completions fish > ~/.config/fish/completions/gnomon.fish\n\n\
    The Debian package installs them for bash, zsh and fish already.")]
pub(crate) struct Args {
    /// The shell to complete for: bash, zsh, fish, elvish or powershell.
    // clap_mangen renders a list of possible values as a block that starts
    // with an empty paragraph, which mandoc's lint refuses (as relay's
    // --format): the help names them instead.
    #[arg(value_enum, hide_possible_values = true)]
    shell: clap_complete::Shell,
}

/// Print the script on stdout.
pub(crate) fn run(a: Args) -> ExitCode {
    clap_complete::generate(
        a.shell,
        &mut crate::command(),
        "gnomon",
        &mut std::io::stdout(),
    );
    ExitCode::SUCCESS
}
