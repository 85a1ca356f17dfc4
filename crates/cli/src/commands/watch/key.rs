//! The key `gnomon watch` signs its published list with: an unencrypted
//! OpenSSH ed25519 private key file (`ssh-keygen -t ed25519 -N ''`), or a
//! key inside a PKCS#11 token (crate::pkcs11) that signs the SSHSIG
//! signed data with CKM_EDDSA. Problems with the key are found at start,
//! with what to do; a token that fails later is the publisher's to count.

use std::path::Path;

use gnomon_protocol::cert::Sign;
use gnomon_protocol::KeyPair;
use gnomon_watch::publish::Signer;
use zeroize::Zeroizing;

use crate::commands::watch_config::TokenKey;
use crate::exit::{DATA_ERR, NO_INPUT};
use crate::pkcs11::{read_pin, Token, TokenArgs, TokenSigner};
use crate::words;

/// A private key file larger than this is not an OpenSSH ed25519 key.
const MAX_KEY_FILE: u64 = 64 * 1024;

/// The publishing key, and its comment (the key file's; the token key's
/// label).
#[derive(Debug)]
pub(crate) enum PublishKey {
    File(KeyPair),
    Token(TokenSigner),
}

impl Signer for PublishKey {
    fn public(&self) -> [u8; 32] {
        match self {
            PublishKey::File(k) => k.public(),
            PublishKey::Token(t) => t.public(),
        }
    }

    fn sign(&self, data: &[u8]) -> Result<[u8; 64], String> {
        let mut out = [0u8; 64];
        match self {
            PublishKey::File(k) => k.sign_into(data, 0, &mut out),
            PublishKey::Token(t) => {
                // No context: SSHSIG's signed data is the whole message.
                t.sign_into(data, 0, &mut out);
                t.check().map_err(|e| {
                    format!(
                        "the token key cannot sign: {e}; check that the token is present and \
                         its PIN still valid"
                    )
                })?;
            }
        }
        Ok(out)
    }
}

/// A key that cannot be used: the exit code and words.
pub(crate) type KeyFailure = (u8, String);

/// The key file at `path`, and its comment.
pub(crate) fn load_file(path: &Path) -> Result<(PublishKey, String), KeyFailure> {
    let shown = path.display();
    let unreadable = |e: &std::io::Error| {
        (
            NO_INPUT,
            format!(
                "cannot read the publishing key {shown}: {}; give an OpenSSH ed25519 private key \
                 (ssh-keygen -t ed25519 -N '' -f FILE)",
                words::io(e)
            ),
        )
    };
    let meta = std::fs::metadata(path).map_err(|e| unreadable(&e))?;
    if !meta.is_file() || meta.len() > MAX_KEY_FILE {
        return Err((
            DATA_ERR,
            format!(
                "the publishing key {shown} is not an OpenSSH private key file (a regular file \
                 of a few hundred bytes); make one with ssh-keygen -t ed25519 -N '' -f FILE"
            ),
        ));
    }
    let text = Zeroizing::new(std::fs::read(path).map_err(|e| unreadable(&e))?);
    let key = ssh_key::PrivateKey::from_openssh(&*text).map_err(|e| {
        if let ssh_key::Error::AlgorithmUnknown | ssh_key::Error::AlgorithmUnsupported { .. } = e {
            return (
                DATA_ERR,
                format!(
                    "the publishing key {shown} is not an Ed25519 key, and lists are signed \
                     with Ed25519: make one with ssh-keygen -t ed25519 -N '' -f FILE"
                ),
            );
        }
        (
            DATA_ERR,
            format!(
                "the publishing key {shown} is not an OpenSSH private key ({e}); give the \
                 private half as ssh-keygen -t ed25519 -N '' writes it (-----BEGIN OPENSSH \
                 PRIVATE KEY-----), not the .pub"
            ),
        )
    })?;
    if key.is_encrypted() {
        return Err((
            DATA_ERR,
            format!(
                "the publishing key {shown} is encrypted with a passphrase, and a service \
                 cannot type it; remove the passphrase on a copy kept for this monitor \
                 (ssh-keygen -p -N '' -f COPY), or keep the key in a token (--pkcs11-module)"
            ),
        ));
    }
    let Some(pair) = key.key_data().ed25519() else {
        return Err((
            DATA_ERR,
            format!(
                "the publishing key {shown} is a {} key; lists are signed with Ed25519: make \
                 one with ssh-keygen -t ed25519 -N '' -f FILE",
                key.algorithm()
            ),
        ));
    };
    let seed = Zeroizing::new(pair.private.to_bytes());
    let comment = key.comment().to_string();
    Ok((PublishKey::File(KeyPair::from_seed(&seed)), comment))
}

/// The key in a token, logged in with the PIN of `GNOMON_PKCS11_PIN` or
/// the PIN file; its comment is its label.
pub(crate) fn load_token(t: &TokenKey) -> Result<(PublishKey, String), KeyFailure> {
    let fail = |e: crate::pkcs11::TokenError| (e.exit_code(), e.to_string());
    // Checked as delegate checks its own (module, labels, PIN file).
    let args = TokenArgs {
        pkcs11_module: Some(t.module.clone()),
        pkcs11_token: Some(t.token.clone()),
        pkcs11_key: Some(t.key.clone()),
        pkcs11_pin_file: t.pin_file.clone(),
        config: None,
    };
    let key = args
        .resolve()
        .map_err(fail)?
        .ok_or_else(|| (crate::exit::USAGE, "no token module given".to_string()))?;
    let pin = read_pin(key.pin_file.as_deref()).map_err(fail)?;
    let token = Token::open(&key.module, &key.token, false).map_err(fail)?;
    token.login(&pin).map_err(fail)?;
    let signer = token.signer(&key.key).map_err(fail)?;
    Ok((PublishKey::Token(signer), key.key))
}
