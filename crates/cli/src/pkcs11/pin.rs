//! The token's user PIN: from a file or the environment, never the command
//! line (where `ps` and shell history would show it).

use std::path::Path;

use zeroize::Zeroizing;

use super::TokenError;

/// The environment variable read when no PIN file is given.
pub(crate) const PIN_ENV: &str = "GNOMON_PKCS11_PIN";

/// Longest PIN file read: PINs are short, and a large file is a mistake.
const MAX_PIN_FILE: u64 = 4096;

/// The PIN from `file` if given, else from GNOMON_PKCS11_PIN. A file's one
/// trailing newline is not part of the PIN (editors add one).
pub(crate) fn read_pin(file: Option<&Path>) -> Result<Zeroizing<String>, TokenError> {
    let text = match file {
        Some(path) => read_file(path)?,
        None => match std::env::var(PIN_ENV) {
            Ok(v) => Zeroizing::new(v),
            Err(std::env::VarError::NotPresent) => return Err(TokenError::NoPin),
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(TokenError::PinFile {
                    path: PIN_ENV.into(),
                    why: "not valid UTF-8".into(),
                })
            }
        },
    };
    let pin = text
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&text);
    if pin.is_empty() {
        return Err(TokenError::PinFile {
            path: file.map_or_else(|| PIN_ENV.into(), Path::to_path_buf),
            why: "empty".into(),
        });
    }
    Ok(Zeroizing::new(pin.to_owned()))
}

fn read_file(path: &Path) -> Result<Zeroizing<String>, TokenError> {
    use std::io::Read as _;
    let fail = |why: String| TokenError::PinFile {
        path: path.to_owned(),
        why,
    };
    let file = std::fs::File::open(path).map_err(|e| fail(e.to_string()))?;
    let mut text = Zeroizing::new(String::new());
    file.take(MAX_PIN_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|e| fail(e.to_string()))?;
    if text.len() as u64 > MAX_PIN_FILE {
        return Err(fail(format!("longer than {MAX_PIN_FILE} bytes")));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expose(p: &Zeroizing<String>) -> &str {
        p.as_str()
    }

    fn pin_of(text: &str) -> Result<Zeroizing<String>, TokenError> {
        let dir = std::env::temp_dir().join(format!("gnomon-pin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("pin-{}", text.len()));
        std::fs::write(&path, text).unwrap();
        let r = read_pin(Some(&path));
        let _ = std::fs::remove_file(&path);
        r
    }

    #[test]
    fn a_pin_file_loses_one_trailing_newline_only() {
        assert_eq!(expose(&pin_of("1234\n").unwrap()), "1234");
        assert_eq!(expose(&pin_of("1234\r\n").unwrap()), "1234");
        assert_eq!(expose(&pin_of("12 34").unwrap()), "12 34");
        assert_eq!(expose(&pin_of("1234\n\n").unwrap()), "1234\n");
        assert!(matches!(pin_of("\n"), Err(TokenError::PinFile { .. })));
    }

    #[test]
    fn a_missing_pin_file_is_named() {
        let e = read_pin(Some(Path::new("/nonexistent/pin"))).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/pin"), "{e}");
    }
}
