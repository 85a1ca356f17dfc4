//! The `[pkcs11]` table of a signing machine's file (`--config`), one key
//! per `--pkcs11-*` option, so that a renewal unit's command line need not
//! repeat the module's path and labels. Flags win over the file.
//!
//! ```toml
//! [pkcs11]
//! module = "/usr/lib/softhsm/libsofthsm2.so"
//! token = "gnomon-root"
//! key = "roughtime-2026"
//! pin-file = "/etc/gnomon-signer/pin"   # relative paths: from this file's directory
//! ```
//!
//! Its own file, not gnomon.toml: the server rejects tables it does not
//! know, and it never needs these. Unknown keys and tables are errors
//! (a misspelt `pin_file` must not fall back to the environment silently).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::TokenError;
use crate::words;

/// Longest file read: four short keys.
const MAX_LEN: u64 = 64 * 1024;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    #[serde(default)]
    pkcs11: Table,
}

/// The keys, each optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct Table {
    pub(crate) module: Option<PathBuf>,
    pub(crate) token: Option<String>,
    pub(crate) key: Option<String>,
    pub(crate) pin_file: Option<PathBuf>,
}

/// Reads `path`'s `[pkcs11]` table; paths in it are taken from the file's
/// directory, as a unit's WorkingDirectory should not change what they name.
pub(crate) fn load(path: &Path) -> Result<Table, TokenError> {
    use std::io::Read as _;
    let fail = |why: String| TokenError::Config {
        path: path.to_owned(),
        why,
    };
    let file = std::fs::File::open(path).map_err(|e| fail(words::io(&e)))?;
    let mut text = String::new();
    file.take(MAX_LEN + 1)
        .read_to_string(&mut text)
        .map_err(|e| fail(words::io(&e)))?;
    if text.len() as u64 > MAX_LEN {
        return Err(fail(format!("longer than {MAX_LEN} bytes")));
    }
    let mut table = parse(&text).map_err(fail)?;
    let base = path.parent().unwrap_or(Path::new("."));
    for p in [&mut table.module, &mut table.pin_file]
        .into_iter()
        .flatten()
    {
        if p.is_relative() {
            *p = base.join(&*p);
        }
    }
    Ok(table)
}

fn parse(text: &str) -> Result<Table, String> {
    toml::from_str::<Doc>(text)
        .map(|d| d.pkcs11)
        .map_err(|e| e.message().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_read_and_nothing_else() {
        let t =
            parse("[pkcs11]\nmodule = \"/m.so\"\ntoken = \"T\"\nkey = \"K\"\npin-file = \"pin\"\n")
                .unwrap();
        assert_eq!(t.module.as_deref(), Some(Path::new("/m.so")));
        assert_eq!(t.token.as_deref(), Some("T"));
        assert_eq!(t.key.as_deref(), Some("K"));
        assert_eq!(t.pin_file.as_deref(), Some(Path::new("pin")));
        assert!(parse("").unwrap().module.is_none());
        let e = parse("[pkcs11]\npin_file = \"pin\"\n").unwrap_err();
        assert!(e.contains("pin_file"), "{e}");
        assert!(parse("[pkcs11]\npin = \"1234\"\n").is_err());
        assert!(parse("[serve]\nkey-file = \"k\"\n").is_err());
    }
}
