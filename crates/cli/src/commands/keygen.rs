//! `gnomon keygen`: a new long-term key, in a file or in a PKCS#11 token.

use std::path::PathBuf;
use std::process::ExitCode;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_protocol::Scheme;
use gnomon_server::keyfile::{self, KeyFileError};
use gnomon_server::keys::{random_seed, SecretKey};

use serde_json::json;

use crate::pkcs11::{read_pin, KeyRef, Token, TokenArgs, TokenError};
use crate::words;

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
    /// Print one JSON object (the public key, where it is, exit_code) on
    /// standard output instead of the bare key.
    #[arg(long)]
    json: bool,
}

fn parse_scheme(name: &str) -> Result<Scheme, String> {
    Scheme::by_name(name).ok_or_else(|| {
        let names: Vec<&str> = Scheme::ALL.iter().map(|s| s.name()).collect();
        format!("unknown scheme {name:?} (expected {})", names.join(" or "))
    })
}

/// A key file's failure in words: the system's part without its errno.
pub(crate) fn key_file_words(e: &KeyFileError) -> String {
    match e {
        KeyFileError::Io {
            path,
            action,
            error,
        } => format!("{action} {}: {}", path.display(), words::io(error)),
        other => other.to_string(),
    }
}

/// What was made (or, with --public-only, found).
struct Made {
    public: Vec<u8>,
    scheme: Scheme,
    /// The file written, or the token and key label.
    place: Place,
}

enum Place {
    File(PathBuf),
    Token {
        token: String,
        key: String,
        existing: bool,
    },
}

/// A refusal: the exit code, the JSON kind, the sentence.
type Failure = (u8, &'static str, String);

/// Prints the public key in base64 on stdout, one line, so that scripts can
/// capture it; everything else goes to stderr. Under `--json`, stdout
/// holds one object instead.
pub(crate) fn run(args: Args) -> ExitCode {
    match make(&args) {
        Ok(made) => {
            let b64 = B64.encode(&made.public);
            if args.json {
                let mut v = json!({
                    "public_key": b64,
                    "public_key_hex": hex::encode(&made.public),
                    "scheme": made.scheme.name(),
                });
                match &made.place {
                    Place::File(p) => {
                        v["out"] = json!(p.display().to_string());
                        v["mode"] = json!("0600");
                    }
                    Place::Token {
                        token,
                        key,
                        existing,
                    } => {
                        v["token"] = json!(token);
                        v["key"] = json!(key);
                        v["made"] = json!(!existing);
                    }
                }
                words::print_outcome(v, crate::exit::OK);
            } else {
                println!("{b64}");
            }
            let hex = hex::encode(&made.public);
            match &made.place {
                Place::File(p) => eprintln!(
                    "gnomon keygen: wrote {} (mode 0600); {} public key (hex) {hex}",
                    p.display(),
                    made.scheme.name(),
                ),
                Place::Token {
                    token,
                    key,
                    existing,
                } => eprintln!(
                    "gnomon keygen: {} key {key:?} in token {token:?}; ed25519 public key (hex) {hex}",
                    if *existing { "existing" } else { "made" },
                ),
            }
            ExitCode::SUCCESS
        }
        Err((code, kind, msg)) => {
            eprintln!("gnomon keygen: {msg}");
            if args.json {
                words::print_error(kind, &msg, code);
            }
            ExitCode::from(code)
        }
    }
}

fn make(args: &Args) -> Result<Made, Failure> {
    let usage = |m: &str| (crate::exit::USAGE, "usage", m.to_owned());
    let token_failed = |e: TokenError| (e.exit_code(), "token", e.to_string());
    let token = args.token.resolve().map_err(token_failed)?;
    if token.is_some() && args.out.is_some() {
        return Err(usage(
            "--out writes a key file; --config names a token: which one?",
        ));
    }
    if let Some(key) = token {
        if args.scheme != Scheme::Ed25519 {
            return Err(usage("a token key is Ed25519 only (drop --scheme)"));
        }
        let public = in_token(args, &key).map_err(token_failed)?;
        return Ok(Made {
            public: public.to_vec(),
            scheme: Scheme::Ed25519,
            place: Place::Token {
                token: key.token.clone(),
                key: key.key.clone(),
                existing: args.public_only,
            },
        });
    }
    if args.public_only {
        return Err(usage(
            "--public-only reads a token key: give --pkcs11-module",
        ));
    }
    let Some(out) = args.out.as_deref() else {
        return Err(usage("give --out FILE, or --pkcs11-module for a token key"));
    };
    let seed = random_seed().map_err(|e| {
        (
            crate::exit::OS_ERROR,
            "random",
            format!("cannot read random bytes from the OS: {}", words::io(&e)),
        )
    })?;
    let written = if args.force {
        keyfile::write_replacing_key(out, args.scheme, &seed)
    } else {
        keyfile::write_new_key(out, args.scheme, &seed)
    };
    if let Err(e) = written {
        let mut msg = key_file_words(&e);
        let kind = if matches!(e, KeyFileError::Exists { .. }) {
            msg.push_str("; pass --force to replace it");
            "exists"
        } else {
            "cant_create"
        };
        return Err((crate::exit::CANT_CREATE, kind, msg));
    }
    let key = SecretKey::from_seed(args.scheme, &seed);
    Ok(Made {
        public: key.public().to_vec(),
        scheme: args.scheme,
        place: Place::File(out.to_owned()),
    })
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
