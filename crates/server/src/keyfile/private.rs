//! Secret files on disk, key files and delegation files alike: created
//! mode 0600 without following or replacing anything, made durable, and
//! read only from a regular file that is not a symlink, that group and
//! others cannot access, and that is short UTF-8, checked on the path and
//! again through the open descriptor. Every buffer of the text is wiped
//! when dropped.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use zeroize::Zeroizing;

use super::{format_error, KeyFileError};

/// Files longer than this are not key files (nor delegation files).
pub(crate) const MAX_LEN: u64 = 64 * 1024;

/// Create `path` with mode 0600 and write `bytes`; never follows or
/// replaces an existing entry.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> Result<(), KeyFileError> {
    let io = |action| {
        move |error: io::Error| KeyFileError::Io {
            path: path.to_owned(),
            action,
            error,
        }
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|error| match error.kind() {
            io::ErrorKind::AlreadyExists => KeyFileError::Exists {
                path: path.to_owned(),
            },
            _ => io("creating")(error),
        })?;
    file.write_all(bytes).map_err(io("writing"))?;
    file.sync_all().map_err(io("syncing"))?;
    sync_parent(path);
    Ok(())
}

/// Read a secret file: a regular file, not a symlink, mode without group or
/// other bits, at most [`MAX_LEN`] bytes of UTF-8.
pub(crate) fn read_private(path: &Path) -> Result<Zeroizing<String>, KeyFileError> {
    let io = |action| {
        move |error: io::Error| KeyFileError::Io {
            path: path.to_owned(),
            action,
            error,
        }
    };
    // Checked on the path for a clear message, then again through the open
    // descriptor (O_NOFOLLOW, fstat) so that a swap in between is caught.
    let meta = std::fs::symlink_metadata(path).map_err(io("reading"))?;
    if meta.file_type().is_symlink() {
        return Err(KeyFileError::Symlink {
            path: path.to_owned(),
        });
    }
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|error| match error.raw_os_error() {
            Some(libc::ELOOP) => KeyFileError::Symlink {
                path: path.to_owned(),
            },
            _ => io("opening")(error),
        })?;
    let meta = file.metadata().map_err(io("reading"))?;
    if !meta.is_file() {
        return Err(KeyFileError::NotAFile {
            path: path.to_owned(),
        });
    }
    if meta.mode() & 0o077 != 0 {
        return Err(KeyFileError::Permissions {
            path: path.to_owned(),
            mode: meta.mode(),
        });
    }
    // Allocated once at the most that is read, so the secret text is never
    // moved by a reallocation (which would leave a copy in freed memory),
    // and wiped when dropped.
    let mut bytes = Zeroizing::new(Vec::with_capacity(MAX_LEN as usize + 1));
    file.take(MAX_LEN + 1)
        .read_to_end(&mut bytes)
        .map_err(io("reading"))?;
    if bytes.len() as u64 > MAX_LEN {
        return Err(format_error(
            path,
            0,
            "too long to be a key or delegation file",
        ));
    }
    if std::str::from_utf8(&bytes).is_err() {
        return Err(format_error(path, 0, "not UTF-8 text"));
    }
    let bytes = std::mem::take(&mut *bytes);
    // Checked just above; the conversion keeps the buffer, so nothing is
    // copied.
    Ok(Zeroizing::new(
        String::from_utf8(bytes).unwrap_or_else(|e| unreachable!("{e}")),
    ))
}

/// Make a completed create or rename durable. Best effort: a failure here
/// does not undo the write, and some filesystems refuse to sync directories.
pub(super) fn sync_parent(path: &Path) {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
}
