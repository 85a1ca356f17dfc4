//! The token's user PIN: from a file or the environment, never the command
//! line (where `ps` and shell history would show it).
//!
//! A PIN file is as secret as a key file, and is refused as ssh and gpg
//! refuse a private key others can reach: it must be a regular file (a
//! symbolic link is not followed), owned by the user gnomon runs as (its
//! effective uid; root too reads only a file root owns), with no group or
//! other permission bits. Every PIN file (`--pkcs11-pin-file`, `pin-file`
//! in `--config`'s `[pkcs11]`, for keygen and delegate alike) is read here,
//! by [`read_pin`], and checked through the opened descriptor (O_NOFOLLOW,
//! then fstat), so nothing can be swapped in between the check and the
//! read.

use std::fs::{File, Metadata};
use std::io::Read as _;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::Path;

use rustix::fs::{Mode, OFlags};
use zeroize::Zeroizing;

use super::TokenError;
use crate::words;

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

/// The text of the PIN file at `path`, once it has passed [`private`].
fn read_file(path: &Path) -> Result<Zeroizing<String>, TokenError> {
    let fail = |why: String| TokenError::PinFile {
        path: path.to_owned(),
        why,
    };
    // O_NOFOLLOW: a symbolic link is refused, not followed (see
    // docs/KEYS.md); O_NONBLOCK: a FIFO put there must not hang the run
    // before fstat refuses it.
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(rustix::io::Errno::LOOP)
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) =>
        {
            return Err(fail(
                "is a symbolic link, which is not followed: a PIN file must be a \
                 regular file (point --pkcs11-pin-file, or pin-file in --config, \
                 at the file itself)"
                    .into(),
            ))
        }
        Err(e) => return Err(fail(words::io(&std::io::Error::from(e)))),
    };
    let meta = file.metadata().map_err(|e| fail(words::io(&e)))?;
    private(path, &meta, rustix::process::geteuid().as_raw())?;
    // Allocated once at the most that is read, so the PIN is never moved by
    // a reallocation (which would leave a copy in freed memory).
    let mut text = Zeroizing::new(String::with_capacity(MAX_PIN_FILE as usize + 1));
    file.take(MAX_PIN_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|e| fail(words::io(&e)))?;
    if text.len() as u64 > MAX_PIN_FILE {
        return Err(fail(format!("longer than {MAX_PIN_FILE} bytes")));
    }
    Ok(text)
}

/// A regular file owned by `euid` that group and others cannot access at
/// all, or why not. `meta` is the opened file's (fstat), never the path's.
fn private(path: &Path, meta: &Metadata, euid: u32) -> Result<(), TokenError> {
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else {
            "not a regular file"
        };
        return Err(TokenError::PinFile {
            path: path.to_owned(),
            why: format!("is {what}; a PIN file must be a regular file"),
        });
    }
    let mode = meta.mode() & 0o7777;
    if meta.uid() != euid || mode & 0o077 != 0 {
        return Err(TokenError::PinFileAccess {
            path: path.to_owned(),
            owner: meta.uid(),
            mode,
            euid,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::PathBuf;

    use super::*;

    fn expose(p: &Zeroizing<String>) -> &str {
        p.as_str()
    }

    /// A directory of this test's own, empty.
    fn dir(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gnomon-pin-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// `text` in a new file of `dir`, with `mode`.
    fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    fn pin_of(text: &str) -> Result<Zeroizing<String>, TokenError> {
        let dir = dir(&format!("text-{}", text.len()));
        let r = read_pin(Some(&write(&dir, "pin", text, 0o600)));
        let _ = std::fs::remove_dir_all(&dir);
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

    #[test]
    fn group_or_world_access_is_refused_with_the_fix() {
        let dir = dir("modes");
        let path = write(&dir, "pin", "1234\n", 0o600);
        for bad in [0o644, 0o640, 0o604, 0o620, 0o602, 0o660, 0o666, 0o610] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(bad)).unwrap();
            let e = read_pin(Some(&path)).unwrap_err();
            assert!(
                matches!(e, TokenError::PinFileAccess { mode, .. } if mode == bad),
                "{bad:o}: {e:?}"
            );
            let msg = e.to_string();
            assert!(msg.contains(&path.display().to_string()), "{msg}");
            assert!(msg.contains(&format!("mode {bad:04o}")), "{msg}");
            assert!(msg.contains("group or others"), "{msg}");
            assert!(
                msg.contains(&format!("chmod 600 {}", path.display())),
                "{msg}"
            );
            // The owner is right, so chown is not part of the fix.
            assert!(!msg.contains("chown"), "{msg}");
        }
        for good in [0o600, 0o400] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(good)).unwrap();
            assert_eq!(expose(&read_pin(Some(&path)).unwrap()), "1234", "{good:o}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Chowning to another uid needs root: without it, this half skips
    /// (saying so) and the owner rule is checked by
    /// `the_owner_must_be_the_effective_uid` alone.
    #[test]
    fn a_file_of_another_uid_is_refused_even_for_root() {
        const TEST: &str = "pkcs11::pin::tests::a_file_of_another_uid_is_refused_even_for_root";
        if !gnomon_testkit::is_root() {
            gnomon_testkit::skip(TEST, "needs root (chown to uid 65534)");
            return;
        }
        let dir = dir("owner");
        let path = write(&dir, "pin", "1234\n", 0o600);
        // Root's own file is fine.
        assert_eq!(expose(&read_pin(Some(&path)).unwrap()), "1234");
        std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
        let e = read_pin(Some(&path)).unwrap_err();
        assert!(
            matches!(
                e,
                TokenError::PinFileAccess {
                    owner: 65534,
                    euid: 0,
                    mode: 0o600,
                    ..
                }
            ),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(msg.contains("owned by uid 65534"), "{msg}");
        assert!(msg.contains("not uid 0"), "{msg}");
        assert!(
            msg.contains(&format!("chown 0 {}", path.display())),
            "{msg}"
        );
        assert!(!msg.contains("chmod"), "{msg}");
        // Both wrong: both fixes.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let msg = read_pin(Some(&path)).unwrap_err().to_string();
        assert!(
            msg.contains(&format!(
                "`chown 0 {p}` and `chmod 600 {p}`",
                p = path.display()
            )),
            "{msg}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The owner rule itself, with the euid given: runs as any user.
    #[test]
    fn the_owner_must_be_the_effective_uid() {
        let dir = dir("euid");
        let path = write(&dir, "pin", "1234\n", 0o600);
        let meta = std::fs::metadata(&path).unwrap();
        let mine = meta.uid();
        assert!(private(&path, &meta, mine).is_ok());
        let other = mine.wrapping_add(1);
        let e = private(&path, &meta, other).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("owned by uid {mine}, not uid {other}")),
            "{msg}"
        );
        assert!(msg.contains("mode 0600"), "{msg}");
        assert!(
            msg.contains(&format!("chown {other} {}", path.display())),
            "{msg}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_symlink_is_refused_even_to_a_good_file() {
        let dir = dir("symlink");
        let real = write(&dir, "real", "1234\n", 0o600);
        let link = dir.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let msg = read_pin(Some(&link)).unwrap_err().to_string();
        assert!(msg.contains(&link.display().to_string()), "{msg}");
        assert!(msg.contains("symbolic link"), "{msg}");
        assert!(msg.contains("at the file itself"), "{msg}");
        assert_eq!(expose(&read_pin(Some(&real)).unwrap()), "1234");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_or_fifo_is_refused_without_blocking() {
        let dir = dir("kinds");
        let msg = read_pin(Some(&dir)).unwrap_err().to_string();
        assert!(msg.contains("is a directory"), "{msg}");
        let fifo = dir.join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            Mode::RUSR | Mode::WUSR,
            0,
        )
        .unwrap();
        // Without O_NONBLOCK this open would wait for a writer forever.
        let msg = read_pin(Some(&fifo)).unwrap_err().to_string();
        assert!(msg.contains("is a FIFO"), "{msg}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
