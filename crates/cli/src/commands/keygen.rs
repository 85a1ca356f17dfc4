//! `gnomon keygen`: a new long-term key file.

use std::path::PathBuf;
use std::process::ExitCode;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_protocol::KeyPair;
use gnomon_server::keyfile::{self, KeyFileError};
use gnomon_server::keys::random_seed;

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Where to write the key (created with mode 0600).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Replace an existing file at FILE (the old key is lost).
    #[arg(long)]
    force: bool,
}

/// Prints the public key in base64 on stdout, one line, so that scripts can
/// capture it; everything else goes to stderr.
pub(crate) fn run(args: Args) -> ExitCode {
    let seed = match random_seed() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("gnomon keygen: cannot read random bytes from the OS: {e}");
            return ExitCode::from(crate::exit::OS_ERROR);
        }
    };
    let written = if args.force {
        keyfile::write_replacing(&args.out, &seed)
    } else {
        keyfile::write_new(&args.out, &seed)
    };
    if let Err(e) = written {
        eprintln!("gnomon keygen: {e}");
        if matches!(e, KeyFileError::Exists { .. }) {
            eprintln!("gnomon keygen: pass --force to replace it");
        }
        return ExitCode::from(crate::exit::CANT_CREATE);
    }
    let public = KeyPair::from_seed(&seed).public();
    println!("{}", B64.encode(public));
    eprintln!(
        "gnomon keygen: wrote {} (mode 0600); public key (hex) {}",
        args.out.display(),
        hex::encode(public)
    );
    ExitCode::SUCCESS
}
