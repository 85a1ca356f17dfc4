//! `gnomon keygen`: a new long-term key, in a file or in a PKCS#11 token.

use std::path::PathBuf;
use std::process::ExitCode;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_protocol::Scheme;
use gnomon_server::keyfile::{self, KeyFileError};
use gnomon_server::keys::{random_seed, SecretKey};

use crate::pkcs11::{read_pin, KeyRef, Token, TokenArgs, TokenError};

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Where to write the key (created with mode 0600).
    #[arg(long, value_name = "FILE", conflicts_with = "pkcs11_module")]
    out: Option<PathBuf>,
    /// Replace an existing file at FILE (the old key is lost).
    #[arg(long, requires = "out")]
    force: bool,
    /// Signature scheme: ed25519, or ml-dsa-44 for the experimental
    /// post-quantum version 0x90000001 (TCP only; docs/PQ.md). A token key
    /// is always ed25519.
    #[arg(long, value_name = "SCHEME", default_value = "ed25519", value_parser = parse_scheme)]
    scheme: Scheme,
    #[command(flatten)]
    token: TokenArgs,
    /// Make nothing: print the public key of the existing token key
    /// (--pkcs11-key). Needs no PIN unless the token hides public objects.
    #[arg(long, conflicts_with = "out")]
    public_only: bool,
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
    let token = match args.token.resolve() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("gnomon keygen: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    if token.is_some() && args.out.is_some() {
        eprintln!("gnomon keygen: --out writes a key file; --config names a token: which one?");
        return ExitCode::from(crate::exit::USAGE);
    }
    if let Some(key) = token {
        if args.scheme != Scheme::Ed25519 {
            eprintln!("gnomon keygen: a token key is Ed25519 only (drop --scheme)");
            return ExitCode::from(crate::exit::USAGE);
        }
        return match in_token(&args, &key) {
            Ok(public) => {
                println!("{}", B64.encode(public));
                eprintln!(
                    "gnomon keygen: {} key {:?} in token {:?}; ed25519 public key (hex) {}",
                    if args.public_only { "existing" } else { "made" },
                    key.key,
                    key.token,
                    hex::encode(public)
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("gnomon keygen: {e}");
                ExitCode::from(e.exit_code())
            }
        };
    }
    if args.public_only {
        eprintln!("gnomon keygen: --public-only reads a token key: give --pkcs11-module");
        return ExitCode::from(crate::exit::USAGE);
    }
    let Some(out) = args.out.as_deref() else {
        eprintln!("gnomon keygen: give --out FILE, or --pkcs11-module for a token key");
        return ExitCode::from(crate::exit::USAGE);
    };
    let seed = match random_seed() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("gnomon keygen: cannot read random bytes from the OS: {e}");
            return ExitCode::from(crate::exit::OS_ERROR);
        }
    };
    let written = if args.force {
        keyfile::write_replacing_key(out, args.scheme, &seed)
    } else {
        keyfile::write_new_key(out, args.scheme, &seed)
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
        out.display(),
        args.scheme.name(),
        hex::encode(key.public())
    );
    ExitCode::SUCCESS
}

/// Makes the key pair in the token (or, with --public-only, finds it) and
/// returns its public key.
fn in_token(args: &Args, key: &KeyRef) -> Result<[u8; 32], TokenError> {
    let token = Token::open(&key.module, &key.token, !args.public_only)?;
    if args.public_only {
        // Public objects are readable without logging in; log in only when
        // a PIN was given, for tokens that keep even those private.
        if key.pin_file.is_some() || std::env::var_os(crate::pkcs11::PIN_ENV).is_some() {
            token.login(&read_pin(key.pin_file.as_deref())?)?;
        }
        return token.public_key(&key.key);
    }
    token.login(&read_pin(key.pin_file.as_deref())?)?;
    token.generate(&key.key)
}
