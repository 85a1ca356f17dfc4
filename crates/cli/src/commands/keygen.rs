//! `gnomon keygen`: a new long-term key file.

use std::path::PathBuf;
use std::process::ExitCode;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_protocol::Scheme;
use gnomon_server::keyfile::{self, KeyFileError};
use gnomon_server::keys::{random_seed, SecretKey};

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Where to write the key (created with mode 0600).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Replace an existing file at FILE (the old key is lost).
    #[arg(long)]
    force: bool,
    /// Signature scheme: ed25519, or ml-dsa-44 for the experimental
    /// post-quantum version 0x90000001 (TCP only; docs/PQ.md).
    #[arg(long, value_name = "SCHEME", default_value = "ed25519", value_parser = parse_scheme)]
    scheme: Scheme,
}

fn parse_scheme(name: &str) -> Result<Scheme, String> {
    Scheme::by_name(name).ok_or_else(|| {
        let names: Vec<&str> = Scheme::ALL.iter().map(|s| s.name()).collect();
        format!("unknown scheme {name:?} (expected {})", names.join(" or "))
    })
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
        keyfile::write_replacing_key(&args.out, args.scheme, &seed)
    } else {
        keyfile::write_new_key(&args.out, args.scheme, &seed)
    };
    if let Err(e) = written {
        eprintln!("gnomon keygen: {e}");
        if matches!(e, KeyFileError::Exists { .. }) {
            eprintln!("gnomon keygen: pass --force to replace it");
        }
        return ExitCode::from(crate::exit::CANT_CREATE);
    }
    let key = SecretKey::from_seed(args.scheme, &seed);
    println!("{}", B64.encode(key.public()));
    eprintln!(
        "gnomon keygen: wrote {} (mode 0600); {} public key (hex) {}",
        args.out.display(),
        args.scheme.name(),
        hex::encode(key.public())
    );
    ExitCode::SUCCESS
}
