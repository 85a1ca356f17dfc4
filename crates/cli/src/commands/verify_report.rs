//! `gnomon verify-report`.

use std::process::ExitCode;

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> ExitCode {
    eprintln!("gnomon verify-report: not built yet");
    ExitCode::from(64)
}
