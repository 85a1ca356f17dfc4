//! What can go wrong with a token, in words an operator can act on.

use std::fmt;
use std::path::PathBuf;

use cryptoki::error::{Error, RvError};

use crate::exit::{CANT_CREATE, DATA_ERR, NO_INPUT, SOFTWARE, USAGE};
use crate::words;

/// A token operation that failed.
#[derive(Debug)]
pub(crate) enum TokenError {
    /// The options do not fit together.
    Usage(String),
    /// The --config file cannot be read or is not a `[pkcs11]` table.
    Config { path: PathBuf, why: String },
    /// This gnomon is the static (musl) build, which cannot load modules.
    StaticBuild,
    /// `--pkcs11-module` names no file.
    ModuleMissing(PathBuf),
    /// The file is there but does not load as a PKCS#11 module.
    NotPkcs11 { module: PathBuf, why: String },
    /// No token with this label (the labels seen, to spot a typo).
    TokenAbsent { label: String, seen: Vec<String> },
    /// Two slots hold tokens with this label: which one would be a guess.
    TokenAmbiguous(String),
    /// The token cannot make or use Ed25519 keys.
    NoEddsa {
        token: String,
        missing: &'static str,
    },
    /// Neither `--pkcs11-pin-file` nor `GNOMON_PKCS11_PIN`.
    NoPin,
    /// The PIN file cannot be read, is not a regular file, or holds no PIN.
    PinFile { path: PathBuf, why: String },
    /// The PIN file is owned by another user than the effective one, or
    /// group or others have some access to it (crate::pkcs11::pin).
    PinFileAccess {
        path: PathBuf,
        owner: u32,
        mode: u32,
        euid: u32,
    },
    /// C_Login said the PIN is wrong.
    WrongPin(String),
    /// The user PIN is locked (too many wrong tries): only the security
    /// officer can unlock it.
    PinLocked(String),
    /// No key with this label.
    KeyAbsent { label: String, token: String },
    /// A key with this label, but not an Ed25519 key pair.
    KeyWrongType { label: String, found: String },
    /// `keygen` would have added a second key under a label in use.
    KeyExists { label: String, token: String },
    /// Any other failure the module reported.
    Module { what: &'static str, error: Error },
    /// The module signed, but what it returned does not check against the
    /// key's public half.
    BadSignature(String),
}

impl TokenError {
    /// The exit status (crate::exit) this failure ends `gnomon` with.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            TokenError::ModuleMissing(_)
            | TokenError::TokenAbsent { .. }
            | TokenError::KeyAbsent { .. }
            | TokenError::PinFile { .. }
            | TokenError::PinFileAccess { .. } => NO_INPUT,
            TokenError::NoPin | TokenError::Usage(_) | TokenError::Config { .. } => USAGE,
            TokenError::KeyExists { .. } => CANT_CREATE,
            TokenError::NotPkcs11 { .. }
            | TokenError::TokenAmbiguous(_)
            | TokenError::NoEddsa { .. }
            | TokenError::WrongPin(_)
            | TokenError::PinLocked(_)
            | TokenError::KeyWrongType { .. } => DATA_ERR,
            TokenError::Module { .. } | TokenError::BadSignature(_) | TokenError::StaticBuild => {
                SOFTWARE
            }
        }
    }

    /// Wraps a module's failure of `what`, naming the PIN cases apart:
    /// they are the ones an operator meets.
    pub(crate) fn module(what: &'static str, token: &str, error: Error) -> TokenError {
        match rv(&error) {
            Some(RvError::PinIncorrect) => TokenError::WrongPin(token.to_owned()),
            Some(RvError::PinLocked) => TokenError::PinLocked(token.to_owned()),
            _ => TokenError::Module { what, error },
        }
    }
}

/// Why a file does not load as a PKCS#11 module, without the wrapping of
/// the loader crate: the dynamic loader's reason, or the missing entry
/// point.
pub(crate) fn load_words(error: &Error) -> String {
    match error {
        Error::LibraryLoading(e) => format!("the dynamic loader refused it ({e})"),
        Error::MissingSymbol(name) => format!("it has no {name} function"),
        other => words::strip_os_error(&other.to_string()),
    }
}

/// A return value by its name in the PKCS#11 standard (`CKR_PIN_INCORRECT`),
/// the name a token's documentation and log use, rather than the loader
/// crate's paragraph about it.
fn ckr_name(rv: &RvError) -> String {
    let mut out = String::from("CKR");
    for c in format!("{rv:?}").chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// The PKCS#11 return value inside `error`, if it is one.
pub(crate) fn rv(error: &Error) -> Option<RvError> {
    match error {
        Error::Pkcs11(rv, _) => Some(*rv),
        _ => None,
    }
}

impl fmt::Display for TokenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenError::Usage(why) => f.write_str(why),
            TokenError::Config { path, why } => write!(f, "{}: {why}", path.display()),
            TokenError::StaticBuild => f.write_str(
                "this gnomon is the fully static build, which cannot load a \
                 PKCS#11 module (no dynamic loader): sign with a dynamically \
                 linked gnomon (the Debian package, or cargo build)",
            ),
            TokenError::ModuleMissing(p) => {
                write!(f, "PKCS#11 module {}: no such file", p.display())
            }
            TokenError::NotPkcs11 { module, why } => write!(
                f,
                "{} is not a PKCS#11 module (the vendor's .so, such as \
                 /usr/lib/softhsm/libsofthsm2.so): {why}",
                module.display()
            ),
            TokenError::TokenAbsent { label, seen } if seen.is_empty() => write!(
                f,
                "no token labelled {label:?}: the module shows no token at all \
                 (is the device plugged in, or, for SoftHSM2, does SOFTHSM2_CONF \
                 name the right config?)"
            ),
            TokenError::TokenAbsent { label, seen } => write!(
                f,
                "no token labelled {label:?}; the module shows {}",
                seen.iter()
                    .map(|s| format!("{s:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            TokenError::TokenAmbiguous(label) => write!(
                f,
                "more than one token is labelled {label:?}; give each its own label"
            ),
            TokenError::NoEddsa { token, missing } => write!(
                f,
                "token {token:?} does not offer {missing}: it cannot hold an Ed25519 \
                 root key (gnomon needs CKM_EC_EDWARDS_KEY_PAIR_GEN and CKM_EDDSA)"
            ),
            TokenError::NoPin => write!(
                f,
                "the token's user PIN is needed: give --pkcs11-pin-file FILE or set \
                 GNOMON_PKCS11_PIN (never on the command line)"
            ),
            TokenError::PinFile { path, why } => {
                write!(f, "PIN file {}: {why}", path.display())
            }
            TokenError::PinFileAccess {
                path,
                owner,
                mode,
                euid,
            } => {
                let p = path.display();
                let (mut wrong, mut fix) = (Vec::new(), Vec::new());
                if owner != euid {
                    wrong.push(format!(
                        "it is owned by uid {owner}, not uid {euid} that gnomon runs as"
                    ));
                    fix.push(format!("`chown {euid} {p}`"));
                }
                if mode & 0o077 != 0 {
                    wrong.push("its mode gives group or others access to the token's PIN".into());
                    fix.push(format!("`chmod 600 {p}`"));
                }
                write!(
                    f,
                    "PIN file {p} (owner uid {owner}, mode {mode:04o}) refused: {}; \
                     run {} (and check who else may have read it)",
                    wrong.join(", and "),
                    fix.join(" and "),
                )
            }
            TokenError::WrongPin(token) => write!(
                f,
                "wrong PIN for token {token:?} (each wrong try may count towards \
                 locking it)"
            ),
            TokenError::PinLocked(token) => write!(
                f,
                "the user PIN of token {token:?} is locked (too many wrong tries); \
                 its security officer must unlock it"
            ),
            TokenError::KeyAbsent { label, token } => {
                write!(f, "token {token:?} holds no key labelled {label:?}")
            }
            TokenError::KeyWrongType { label, found } => write!(
                f,
                "key {label:?} is {found}, not an Ed25519 key pair \
                 (CKK_EC_EDWARDS on edwards25519)"
            ),
            TokenError::KeyExists { label, token } => write!(
                f,
                "token {token:?} already holds a key labelled {label:?}; not \
                 replacing it (pick another --pkcs11-key, or delete the old key \
                 with the token's own tools if it is truly unwanted)"
            ),
            TokenError::Module { what, error } => match error {
                Error::Pkcs11(rv, _) => write!(
                    f,
                    "{what}: the module answered {} (a PKCS#11 return value: the \
                     token's documentation or its log says why)",
                    ckr_name(rv)
                ),
                other => write!(f, "{what}: {}", words::strip_os_error(&other.to_string())),
            },
            TokenError::BadSignature(label) => write!(
                f,
                "the token's signature with key {label:?} does not check against \
                 its public key; nothing written"
            ),
        }
    }
}

impl std::error::Error for TokenError {}
