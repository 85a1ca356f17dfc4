//! The long-term key inside a PKCS#11 token: `gnomon keygen` makes it there,
//! `gnomon delegate` signs with it there, and the private half never
//! leaves (docs/KEYS.md, "Root key in a PKCS#11 token").
//!
//! Built on `cryptoki` (the Parsec project's wrapper): it loads the
//! vendor's module at run time, so the binary links no vendor code and a
//! machine without a token pays nothing. The key is Ed25519 through the
//! token's own mechanisms, CKM_EC_EDWARDS_KEY_PAIR_GEN and CKM_EDDSA
//! (PKCS#11 3.0; SoftHSM2 has them since 2.6). Tokens are found by
//! label, keys by label: slot numbers move when devices are replugged.

pub(crate) mod config;
mod error;
mod pin;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::error::RvError;
use cryptoki::mechanism::eddsa::{EddsaParams, EddsaSignatureScheme};
use cryptoki::mechanism::{Mechanism, MechanismType};
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::slot::Slot;
use gnomon_protocol::cert::Sign;
use gnomon_protocol::Scheme;

pub(crate) use error::TokenError;
pub(crate) use pin::{read_pin, PIN_ENV};

use error::rv;

/// CKA_EC_PARAMS for edwards25519 as the OID 1.3.101.112 (RFC 8410), which
/// every EdDSA-capable token we know of takes.
const ED25519_OID: &[u8] = &[0x06, 0x03, 0x2b, 0x65, 0x70];
/// The same as PKCS#11 3.0's curve-name PrintableString "edwards25519",
/// for a token that wants the name.
const ED25519_NAME: &[u8] = b"\x13\x0cedwards25519";

/// The token options `keygen` and `delegate` share. Each may come from
/// the `[pkcs11]` table of --config instead (crate::pkcs11::config), so
/// which are present together is checked in [`TokenArgs::resolve`], not
/// by clap.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct TokenArgs {
    /// Keep the long-term key in a PKCS#11 token: the vendor's module, such
    /// as /usr/lib/softhsm/libsofthsm2.so. Needs --pkcs11-token and
    /// --pkcs11-key; the user PIN comes from --pkcs11-pin-file or
    /// GNOMON_PKCS11_PIN, never the command line.
    #[arg(long, value_name = "LIB")]
    pub(crate) pkcs11_module: Option<PathBuf>,
    /// The token's label (as `softhsm2-util --show-slots` or
    /// `pkcs11-tool --list-tokens` print it).
    #[arg(long, value_name = "LABEL")]
    pub(crate) pkcs11_token: Option<String>,
    /// The key pair's label inside the token.
    #[arg(long, value_name = "LABEL")]
    pub(crate) pkcs11_key: Option<String>,
    /// A file holding the token's user PIN (one line). It must be a regular
    /// file of the user gnomon runs as, mode 0600 or 0400: a symlink, another
    /// owner or any group or other access is refused. Without it, the
    /// environment variable GNOMON_PKCS11_PIN.
    #[arg(long, value_name = "FILE")]
    pub(crate) pkcs11_pin_file: Option<PathBuf>,
    /// A TOML file whose [pkcs11] table gives any of module, token, key and
    /// pin-file (the options above; they win over it). docs/KEYS.md.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
}

/// Where the key is: module, token label, key label, and the PIN file if
/// one was named.
#[derive(Debug, Clone)]
pub(crate) struct KeyRef {
    pub(crate) module: PathBuf,
    pub(crate) token: String,
    pub(crate) key: String,
    pub(crate) pin_file: Option<PathBuf>,
}

impl TokenArgs {
    /// The token key named by the flags and the --config file together, or
    /// None when neither names a module. A label or PIN file without a
    /// module, or a module without both labels, is a usage error.
    pub(crate) fn resolve(&self) -> Result<Option<KeyRef>, TokenError> {
        let file = match &self.config {
            Some(path) => config::load(path)?,
            None => config::Table::default(),
        };
        let module = self.pkcs11_module.clone().or(file.module);
        let token = self.pkcs11_token.clone().or(file.token);
        let key = self.pkcs11_key.clone().or(file.key);
        let pin_file = self.pkcs11_pin_file.clone().or(file.pin_file);
        let Some(module) = module else {
            if token.is_some() || key.is_some() || pin_file.is_some() {
                return Err(TokenError::Usage(
                    "--pkcs11-token, --pkcs11-key and --pkcs11-pin-file need \
                     --pkcs11-module (or module in --config's [pkcs11])"
                        .into(),
                ));
            }
            return Ok(None);
        };
        match (token, key) {
            (Some(token), Some(key)) => Ok(Some(KeyRef {
                module,
                token,
                key,
                pin_file,
            })),
            (token, _) => Err(TokenError::Usage(format!(
                "a token key needs {} (a flag, or {} in --config's [pkcs11])",
                if token.is_none() {
                    "--pkcs11-token"
                } else {
                    "--pkcs11-key"
                },
                if token.is_none() { "token" } else { "key" },
            ))),
        }
    }
}

/// An open session on one token.
pub(crate) struct Token {
    session: Session,
    label: String,
}

impl Token {
    /// Loads `module`, finds the token labelled `label`, checks that it can
    /// do Ed25519 and opens a session (read-write when `write`, for keygen).
    pub(crate) fn open(module: &Path, label: &str, write: bool) -> Result<Token, TokenError> {
        // A static musl binary has no dynamic loader: dlopen can only fail,
        // with words that would blame the module.
        if cfg!(all(target_env = "musl", target_feature = "crt-static")) {
            return Err(TokenError::StaticBuild);
        }
        if !module.exists() {
            return Err(TokenError::ModuleMissing(module.to_owned()));
        }
        let pkcs11 = Pkcs11::new(module).map_err(|e| TokenError::NotPkcs11 {
            module: module.to_owned(),
            why: error::load_words(&e),
        })?;
        // OS locking: cryptoki may call from any thread, and the module must
        // not assume it is one.
        pkcs11
            .initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK))
            .map_err(|e| TokenError::module("C_Initialize", label, e))?;
        let slot = find_token(&pkcs11, label)?;
        require_eddsa(
            &pkcs11
                .get_mechanism_list(slot)
                .map_err(|e| TokenError::module("C_GetMechanismList", label, e))?,
            label,
        )?;
        let info = pkcs11
            .get_token_info(slot)
            .map_err(|e| TokenError::module("C_GetTokenInfo", label, e))?;
        // Asked before any C_Login: a locked token's answer to a login is
        // CKR_PIN_LOCKED on most tokens but not all.
        if info.user_pin_locked() {
            return Err(TokenError::PinLocked(label.to_owned()));
        }
        let session = if write {
            pkcs11.open_rw_session(slot)
        } else {
            pkcs11.open_ro_session(slot)
        }
        .map_err(|e| TokenError::module("C_OpenSession", label, e))?;
        Ok(Token {
            session,
            label: label.to_owned(),
        })
    }

    /// Logs in as the user (the PIN is checked by the token, not here).
    pub(crate) fn login(&self, pin: &str) -> Result<(), TokenError> {
        let pin = cryptoki::types::AuthPin::from(pin.to_owned());
        match self.session.login(UserType::User, Some(&pin)) {
            Err(e) if rv(&e) == Some(RvError::UserAlreadyLoggedIn) => Ok(()),
            r => r.map_err(|e| TokenError::module("C_Login", &self.label, e)),
        }
    }

    /// Makes a new Ed25519 key pair labelled `key`: the private half
    /// sensitive and never extractable, both halves on the token (not
    /// session objects). Refuses a label already in use, by any object.
    pub(crate) fn generate(&self, key: &str) -> Result<[u8; 32], TokenError> {
        let any = self
            .session
            .find_objects(&[Attribute::Label(key.as_bytes().to_vec())])
            .map_err(|e| self.fail("C_FindObjects", e))?;
        if !any.is_empty() {
            return Err(TokenError::KeyExists {
                label: key.to_owned(),
                token: self.label.clone(),
            });
        }
        let mut last = None;
        for params in [ED25519_OID, ED25519_NAME] {
            let public = [
                Attribute::Token(true),
                Attribute::Private(false),
                Attribute::Verify(true),
                Attribute::Label(key.as_bytes().to_vec()),
                Attribute::Id(key.as_bytes().to_vec()),
                Attribute::EcParams(params.to_vec()),
            ];
            let private = [
                Attribute::Token(true),
                Attribute::Private(true),
                Attribute::Sensitive(true),
                Attribute::Extractable(false),
                Attribute::Sign(true),
                Attribute::Label(key.as_bytes().to_vec()),
                Attribute::Id(key.as_bytes().to_vec()),
            ];
            match self.session.generate_key_pair(
                &Mechanism::EccEdwardsKeyPairGen,
                &public,
                &private,
            ) {
                Ok((public, _)) => return self.public_of(public, key),
                // A token that wants the curve's name rather than its OID.
                Err(e)
                    if matches!(
                        rv(&e),
                        Some(RvError::CurveNotSupported | RvError::AttributeValueInvalid)
                    ) =>
                {
                    last = Some(e);
                }
                Err(e) => return Err(self.fail("C_GenerateKeyPair", e)),
            }
        }
        Err(self.fail(
            "C_GenerateKeyPair (edwards25519 by OID and by name)",
            last.unwrap_or(cryptoki::error::Error::NotSupported),
        ))
    }

    /// The public key of the pair labelled `key`.
    pub(crate) fn public_key(&self, key: &str) -> Result<[u8; 32], TokenError> {
        let handle = self.one(key, ObjectClass::PUBLIC_KEY)?;
        self.public_of(handle, key)
    }

    /// A signer for the pair labelled `key`, which must be logged in to.
    pub(crate) fn signer(self, key: &str) -> Result<TokenSigner, TokenError> {
        let public = self.public_key(key)?;
        let private = self.one(key, ObjectClass::PRIVATE_KEY)?;
        Ok(TokenSigner {
            session: Mutex::new(self.session),
            private,
            public,
            label: key.to_owned(),
            failure: Mutex::new(None),
        })
    }

    /// The one object of `class` labelled `key`, checked to be an EdDSA key.
    fn one(&self, key: &str, class: ObjectClass) -> Result<ObjectHandle, TokenError> {
        let label = Attribute::Label(key.as_bytes().to_vec());
        let found = self
            .session
            .find_objects(&[Attribute::Class(class), label.clone()])
            .map_err(|e| self.fail("C_FindObjects", e))?;
        let handle = match found.as_slice() {
            [one] => *one,
            [] => {
                // Something else under that label (a secret key, a
                // certificate) is a different mistake from no key at all.
                let other = self
                    .session
                    .find_objects(&[label])
                    .map_err(|e| self.fail("C_FindObjects", e))?;
                return Err(match other.first() {
                    None => TokenError::KeyAbsent {
                        label: key.to_owned(),
                        token: self.label.clone(),
                    },
                    Some(&h) => TokenError::KeyWrongType {
                        label: key.to_owned(),
                        found: format!("{} with no {class}", self.describe(h)),
                    },
                });
            }
            many => {
                return Err(TokenError::KeyWrongType {
                    label: key.to_owned(),
                    found: format!("{} objects of class {class}", many.len()),
                })
            }
        };
        let key_type = self
            .session
            .get_attributes(handle, &[AttributeType::KeyType])
            .map_err(|e| self.fail("C_GetAttributeValue", e))?;
        match key_type.first() {
            Some(Attribute::KeyType(t)) if *t == KeyType::EC_EDWARDS => Ok(handle),
            _ => Err(TokenError::KeyWrongType {
                label: key.to_owned(),
                found: self.describe(handle),
            }),
        }
    }

    /// "a CKO_PRIVATE_KEY of type CKK_RSA", for error messages.
    fn describe(&self, handle: ObjectHandle) -> String {
        let attrs = self
            .session
            .get_attributes(handle, &[AttributeType::Class, AttributeType::KeyType])
            .unwrap_or_default();
        let mut class = "an object".to_owned();
        let mut kind = String::new();
        for a in attrs {
            match a {
                Attribute::Class(c) => class = format!("a {c}"),
                Attribute::KeyType(t) => kind = format!(" of type {t}"),
                _ => {}
            }
        }
        format!("{class}{kind}")
    }

    /// The 32-byte point of an Ed25519 public key object.
    fn public_of(&self, handle: ObjectHandle, key: &str) -> Result<[u8; 32], TokenError> {
        let attrs = self
            .session
            .get_attributes(handle, &[AttributeType::EcPoint])
            .map_err(|e| self.fail("C_GetAttributeValue", e))?;
        let point = attrs.into_iter().find_map(|a| match a {
            Attribute::EcPoint(p) => Some(p),
            _ => None,
        });
        point
            .as_deref()
            .and_then(ed25519_point)
            .ok_or_else(|| TokenError::KeyWrongType {
                label: key.to_owned(),
                found: "a key whose CKA_EC_POINT is not a 32-byte edwards25519 point \
                        (Ed448?)"
                    .to_owned(),
            })
    }

    fn fail(&self, what: &'static str, e: cryptoki::error::Error) -> TokenError {
        TokenError::module(what, &self.label, e)
    }
}

/// The slot holding the token labelled `label`.
fn find_token(pkcs11: &Pkcs11, label: &str) -> Result<Slot, TokenError> {
    let slots = pkcs11
        .get_slots_with_token()
        .map_err(|e| TokenError::module("C_GetSlotList", label, e))?;
    let mut seen = Vec::new();
    let mut found = Vec::new();
    for slot in slots {
        let info = pkcs11
            .get_token_info(slot)
            .map_err(|e| TokenError::module("C_GetTokenInfo", label, e))?;
        // Labels are blank-padded to 32 bytes on the wire.
        let have = info.label().trim_end();
        if have == label {
            found.push(slot);
        } else if info.token_initialized() {
            seen.push(have.to_owned());
        }
    }
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err(TokenError::TokenAbsent {
            label: label.to_owned(),
            seen,
        }),
        _ => Err(TokenError::TokenAmbiguous(label.to_owned())),
    }
}

/// A token that cannot make or use Ed25519 keys is refused before anything
/// is asked of it, so the error names the missing mechanism rather than
/// whatever the first failing call would say.
fn require_eddsa(mechanisms: &[MechanismType], token: &str) -> Result<(), TokenError> {
    for (need, name) in [
        (
            MechanismType::ECC_EDWARDS_KEY_PAIR_GEN,
            "CKM_EC_EDWARDS_KEY_PAIR_GEN",
        ),
        (MechanismType::EDDSA, "CKM_EDDSA"),
    ] {
        if !mechanisms.contains(&need) {
            return Err(TokenError::NoEddsa {
                token: token.to_owned(),
                missing: name,
            });
        }
    }
    Ok(())
}

/// The point in a CKA_EC_POINT: PKCS#11 3.0 says a DER OCTET STRING
/// holding the 32 bytes; some tokens give the bare 32 bytes.
fn ed25519_point(value: &[u8]) -> Option<[u8; 32]> {
    match value {
        [0x04, 0x20, point @ ..] if point.len() == 32 => point.try_into().ok(),
        point if point.len() == 32 => point.try_into().ok(),
        _ => None,
    }
}

/// Signs DELEs with a token's private key.
///
/// [`Sign::sign_into`] cannot fail, but a token can (unplugged, session
/// gone, a signature that does not check): the first failure is kept and
/// the signature left zero, and [`TokenSigner::check`] hands the failure
/// back before anything signed is written.
pub(crate) struct TokenSigner {
    // Session is Send but not Sync; one signature at a time anyway.
    session: Mutex<Session>,
    private: ObjectHandle,
    public: [u8; 32],
    label: String,
    failure: Mutex<Option<TokenError>>,
}

impl std::fmt::Debug for TokenSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenSigner({:?})", self.label)
    }
}

impl TokenSigner {
    /// The key's public half.
    pub(crate) fn public(&self) -> [u8; 32] {
        self.public
    }

    /// The first failure of any signature so far.
    pub(crate) fn check(&self) -> Result<(), TokenError> {
        match self.failure.lock().map(|mut f| f.take()) {
            Ok(None) => Ok(()),
            Ok(Some(e)) => Err(e),
            Err(_) => Err(TokenError::BadSignature(self.label.clone())),
        }
    }

    fn sign(&self, signed: &[u8], context_len: usize) -> Result<[u8; 64], TokenError> {
        let session = self
            .session
            .lock()
            .map_err(|_| TokenError::BadSignature(self.label.clone()))?;
        // Pure Ed25519 (no context parameter): the message is the whole of
        // context ‖ DELE, as the Roughtime versions sign it.
        let mechanism = Mechanism::Eddsa(EddsaParams::new(EddsaSignatureScheme::Pure));
        let sig = session
            .sign(&mechanism, self.private, signed)
            .map_err(|e| TokenError::module("C_Sign", &self.label, e))?;
        // A token holding a different private key under the label than the
        // public key says would make delegations no client accepts.
        let (context, message) = signed.split_at(context_len);
        match <[u8; 64]>::try_from(sig.as_slice()) {
            Ok(sig) if Scheme::Ed25519.verify(&self.public, context, message, &sig) => Ok(sig),
            _ => Err(TokenError::BadSignature(self.label.clone())),
        }
    }
}

impl Sign for TokenSigner {
    fn scheme(&self) -> Scheme {
        Scheme::Ed25519
    }

    fn sign_into(&self, signed: &[u8], context_len: usize, out: &mut [u8]) {
        match self.sign(signed, context_len) {
            Ok(sig) => out[..64].copy_from_slice(&sig),
            Err(e) => {
                out[..64].fill(0);
                if let Ok(mut slot) = self.failure.lock() {
                    slot.get_or_insert(e);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_without_eddsa_is_refused_by_name() {
        let rsa_only = [
            MechanismType::RSA_PKCS_KEY_PAIR_GEN,
            MechanismType::RSA_PKCS,
        ];
        let e = require_eddsa(&rsa_only, "T").unwrap_err();
        assert!(e.to_string().contains("CKM_EC_EDWARDS_KEY_PAIR_GEN"), "{e}");
        let gen_only = [MechanismType::ECC_EDWARDS_KEY_PAIR_GEN];
        let e = require_eddsa(&gen_only, "T").unwrap_err();
        assert!(e.to_string().contains("CKM_EDDSA"), "{e}");
        assert_eq!(e.exit_code(), crate::exit::DATA_ERR);
        let both = [
            MechanismType::ECC_EDWARDS_KEY_PAIR_GEN,
            MechanismType::EDDSA,
        ];
        assert!(require_eddsa(&both, "T").is_ok());
    }

    // SoftHSM2 never locks a PIN however often it is wrong, so the locked
    // case is met here, as the return value a locking token gives.
    #[test]
    fn pin_failures_are_told_apart() {
        use cryptoki::context::Function;
        use cryptoki::error::Error;
        let e = TokenError::module(
            "C_Login",
            "T",
            Error::Pkcs11(RvError::PinLocked, Function::Login),
        );
        assert!(matches!(e, TokenError::PinLocked(_)));
        assert!(e.to_string().contains("locked"), "{e}");
        let e = TokenError::module(
            "C_Login",
            "T",
            Error::Pkcs11(RvError::PinIncorrect, Function::Login),
        );
        assert!(matches!(e, TokenError::WrongPin(_)));
        let e = TokenError::module(
            "C_Sign",
            "T",
            Error::Pkcs11(RvError::DeviceRemoved, Function::Sign),
        );
        assert_eq!(
            e.to_string(),
            "C_Sign: the module answered CKR_DEVICE_REMOVED (a PKCS#11 return value: \
             the token's documentation or its log says why)"
        );
    }

    #[test]
    fn points_are_read_wrapped_or_bare() {
        let p = [7u8; 32];
        let mut der = vec![0x04, 0x20];
        der.extend_from_slice(&p);
        assert_eq!(ed25519_point(&der), Some(p));
        assert_eq!(ed25519_point(&p), Some(p));
        assert_eq!(ed25519_point(&der[..33]), None);
        assert_eq!(ed25519_point(&[0x04, 0x39, 1, 2]), None);
    }
}
