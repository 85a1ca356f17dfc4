//! Picking up new delegation files without a signal.
//!
//! The key thread calls [`OfflineStore::rescan`] every few seconds. A scan
//! lists the directory and stats each `*.delegation` file; only a file that
//! is new, or whose inode, size or modification time changed since it was
//! last read, is read and checked again (with every check of
//! [`OfflineStore::load`]). A file that fails (half-copied, corrupt, signed
//! by another long-term key, readable by others) is skipped and reported
//! once per version of the file, and retried when it changes; the server
//! goes on with what it has. A scan only adds and replaces: a file that
//! disappears keeps its delegation until the next full load (SIGHUP), so a
//! directory emptied by mistake, or caught in the middle of a sync, does
//! not take the server down.

use std::collections::HashMap;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{Delegation, OfflineError, OfflineStore, EXTENSION};
use crate::keyfile::read_private;

/// What a file looked like: device, inode, size, modification time (ns).
/// `None` when it could not be stat'ed.
pub(super) type Stamp = Option<(u64, u64, u64, i128)>;

/// The stamp of each file as last read.
pub(super) type Seen = HashMap<PathBuf, Stamp>;

/// What one scan found.
#[derive(Debug, Default)]
pub struct Rescan {
    /// Files read and taken (new, or changed and still valid).
    pub taken: Vec<PathBuf>,
    /// Files read and refused, with why; each version of a file once.
    pub rejected: Vec<OfflineError>,
    /// The directory could not be listed (reported every scan it fails).
    pub unreadable: Option<OfflineError>,
}

/// The `*.delegation` files in `dir` (not hidden ones), sorted.
pub(super) fn listing(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let hidden = name.as_deref().is_some_and(|n| n.starts_with('.'));
        if !hidden && path.extension().is_some_and(|e| e == EXTENSION) {
            paths.push(path);
        }
    }
    paths.sort();
    Ok(paths)
}

/// `path`'s stamp, without following a symlink (the reader refuses those).
pub(super) fn stamp(path: &Path) -> Stamp {
    let m = std::fs::symlink_metadata(path).ok()?;
    let mtime = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
    Some((m.dev(), m.ino(), m.len(), mtime))
}

impl OfflineStore {
    /// Read the directory's new and changed files; see the module doc.
    pub fn rescan(&mut self) -> Rescan {
        let mut report = Rescan::default();
        let paths = match listing(&self.dir) {
            Ok(p) => p,
            Err(error) => {
                report.unreadable = Some(OfflineError::ReadDir {
                    dir: self.dir.clone(),
                    error,
                });
                return report;
            }
        };
        for path in paths {
            // Stamped before reading: a write that lands during the read
            // changes the stamp, and the next scan reads the file again.
            let now = stamp(&path);
            if self.seen.get(&path) == Some(&now) {
                continue;
            }
            self.seen.insert(path.clone(), now);
            match self.check(&path) {
                Ok(d) => {
                    self.delegations
                        .retain(|old| old.source.as_deref() != Some(&path));
                    self.delegations.push(d);
                    self.delegations.sort_by_key(|d| (d.mint_us, d.maxt_us));
                    report.taken.push(path);
                }
                Err(e) => report.rejected.push(e),
            }
        }
        report
    }

    /// Read and check one file as [`OfflineStore::load`] does, against
    /// this store's long-term key and host.
    fn check(&self, path: &Path) -> Result<Delegation, OfflineError> {
        let d = Delegation::decode(&read_private(path)?, path)?;
        if let (Some(found), Some(other)) = (&d.host, self.host()) {
            if found != other {
                return Err(OfflineError::MixedHosts {
                    path: path.to_owned(),
                    expected: other.to_owned(),
                    found: found.clone(),
                });
            }
        }
        if d.long_term_public != self.long_term_public {
            return Err(OfflineError::WrongLongTermKey {
                path: path.to_owned(),
                expected: self.long_term_public.bytes().to_vec(),
                found: d.long_term_public.bytes().to_vec(),
            });
        }
        Ok(d)
    }
}
