//! What survives a restart, in `--state-dir`:
//!
//! - `sync-state.json`: the floor (the last proven time), the last round's
//!   summary, the servers excluded for lying;
//! - `sync-chain.json`: the last round's chain of exchanges, in the
//!   malfeasance-report format (`gnomon verify-report` reads it), so a
//!   report can cite them after a restart;
//! - `sync-servers.json`: the last server list that loaded, and beside it
//!   `sync-servers.meta.json`, where that list came from (the list
//!   module reads and writes both);
//! - `sync-reports/`: the malfeasance reports written;
//! - `sync-state.lock`: held while the floor is read and saved ([`floor`]).
//!
//! Every file is written whole: a temporary file in the same directory,
//! created exclusively under a random name (never following a symbolic
//! link planted there), fsync, rename over the old one, fsync of the
//! directory. A reader sees the old file or the new one, never half of
//! either, even across a power loss. Files are read without following a
//! symbolic link either: only the directory itself, which the operator
//! names, may be one. A missing or unreadable state is a warning and a
//! fresh start, never a crash; a corrupt file is kept aside for whoever
//! investigates.
//!
//! What is read back is believed only as far as the directory is private
//! ([`Store::trust`]): owned by the user running sync (or root) and
//! writable by nobody else, as ssh asks of `~/.ssh`.

use std::collections::BTreeMap;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

pub mod floor;

/// The state file's name.
pub const STATE_FILE: &str = "sync-state.json";
/// The last chain's file.
pub const CHAIN_FILE: &str = "sync-chain.json";
/// The list cache.
pub const LIST_CACHE: &str = "sync-servers.json";
/// Where the list cache came from (the list module's `Record`).
pub const LIST_META: &str = "sync-servers.meta.json";
/// Reports.
pub const REPORTS_DIR: &str = "sync-reports";

/// Larger files are not ours: refused unread.
const MAX_FILE: u64 = 16 << 20;
const FORMAT: u32 = 1;
/// Mode of every file written: the service's group may read (reports),
/// nobody else.
const FILE_MODE: u32 = 0o640;
/// Mode of the directories created.
const DIR_MODE: u32 = 0o750;

/// The state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// Format version.
    #[serde(default)]
    pub format: u32,
    /// The last proven time, Unix µs.
    pub floor_us: Option<i64>,
    /// The local clock at the end of the round that proved the floor,
    /// Unix µs; absent from files written before it was kept.
    #[serde(default)]
    pub floor_proven_at_us: Option<i64>,
    /// How many times the floor was cleared (`gnomon sync
    /// --clear-floor`): a running service that finds the file's count
    /// above its own takes the file's floor instead of writing its own
    /// back ([`floor`]).
    #[serde(default)]
    pub floor_clears: u64,
    /// The last round.
    pub last: Option<LastRound>,
    /// Servers excluded for lying, until they agree again.
    #[serde(default)]
    pub excluded: Vec<Excluded>,
}

/// The last round, for `--status` and the log.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastRound {
    /// Local clock at the end of the round, Unix µs.
    pub at_us: i64,
    /// Whether a consensus with the quorum was reached.
    pub ok: bool,
    /// Consensus interval of offsets (server − local), µs.
    pub offset_low_us: Option<i64>,
    /// Upper end.
    pub offset_high_us: Option<i64>,
    /// Names of agreeing servers.
    pub agreeing: Vec<String>,
    /// Names of servers outside the consensus (in files of older
    /// versions, each with why in parentheses).
    pub outside: Vec<String>,
    /// Names of servers that did not answer.
    pub unreachable: Vec<String>,
    /// Why each server of `outside` is outside, by name; names stay plain
    /// in the lists so that a script can compare them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outside_because: BTreeMap<String, String>,
    /// Why a server of `unreachable` was not asked (its backoff), by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unreachable_because: BTreeMap<String, String>,
    /// The report written, if any.
    pub report: Option<String>,
    /// The assumption the round ran under, and why there was no
    /// consensus when there was none (absent in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assumption: Option<String>,
    /// Why there was no consensus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_consensus: Option<String>,
}

/// A server excluded for lying.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Excluded {
    /// Its name in the list.
    pub name: String,
    /// Its long-term key, base64: names may change, keys identify.
    pub public_key: String,
    /// Local clock when it was excluded, Unix µs.
    pub since_us: i64,
}

/// How loading went.
#[derive(Debug)]
pub enum Loaded {
    /// The state as saved (boxed: it is far larger than the other arms).
    Ok(Box<State>),
    /// None yet (first run).
    Missing,
    /// Unreadable or corrupt: the warning to print; a fresh state is used.
    Warning(String),
}

/// The state directory.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// `dir`, created (mode 0750) when missing.
    pub fn open(dir: &Path) -> io::Result<Store> {
        if !dir.is_dir() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE)
                .create(dir)?;
        }
        Ok(Store {
            dir: dir.to_owned(),
        })
    }

    /// The directory, for reading only (`--status` on a missing directory).
    pub fn at(dir: &Path) -> Store {
        Store {
            dir: dir.to_owned(),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of `name` in the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Whether what the directory holds may be believed: it must be owned
    /// by the user running sync (or root) and writable by nobody else.
    /// Anyone else who can write it could plant a list cache together
    /// with a matching provenance record. `Err` says why not, in words.
    /// The directory itself may be a symbolic link (the operator names
    /// it); its target is what is checked.
    pub fn trust(&self) -> Result<(), String> {
        let m = fs::metadata(&self.dir)
            .map_err(|e| format!("the state directory {}: {e}", self.dir.display()))?;
        if !m.is_dir() {
            return Err(format!(
                "the state directory {} is not a directory",
                self.dir.display()
            ));
        }
        private(&m).map_err(|why| format!("the state directory {} {why}", self.dir.display()))
    }

    /// The saved state. A corrupt file is renamed `sync-state.json.corrupt`
    /// (replacing an older one) so the next save does not destroy it.
    pub fn load(&self) -> Loaded {
        self.load_with(true)
    }

    /// As [`Store::load`], changing nothing (`--status`).
    pub fn peek(&self) -> Loaded {
        self.load_with(false)
    }

    fn load_with(&self, keep_aside: bool) -> Loaded {
        let path = self.path(STATE_FILE);
        let bytes = match read_nofollow(&path).map(|(b, _)| b) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Loaded::Missing,
            Err(e) => {
                return Loaded::Warning(format!(
                    "cannot read {}: {e}; starting without a floor",
                    path.display()
                ))
            }
        };
        match serde_json::from_slice::<State>(&bytes) {
            Ok(s) if s.format == FORMAT => Loaded::Ok(Box::new(s)),
            Ok(s) => Loaded::Warning(format!(
                "{}: format {} is not {FORMAT}; starting without a floor",
                path.display(),
                s.format
            )),
            Err(e) => {
                let aside = self.path(&format!("{STATE_FILE}.corrupt"));
                let kept = keep_aside && fs::rename(&path, &aside).is_ok();
                Loaded::Warning(format!(
                    "{} is corrupt ({e}); starting without a floor{}",
                    path.display(),
                    if kept {
                        format!(" (kept as {})", aside.display())
                    } else {
                        String::new()
                    }
                ))
            }
        }
    }

    /// Save the state.
    pub fn save(&self, state: &State) -> io::Result<()> {
        let mut s = state.clone();
        s.format = FORMAT;
        let mut text = serde_json::to_vec_pretty(&s).map_err(io::Error::other)?;
        text.push(b'\n');
        write_atomic(&self.path(STATE_FILE), &text)
    }

    /// Write `bytes` as `name` in the directory, atomically. `name` may
    /// name a subdirectory (`sync-reports/report-1.json`): each one is
    /// created (mode 0750) when missing, and refused, never followed,
    /// when it is a symbolic link or not a directory.
    pub fn write(&self, name: &str, bytes: &[u8]) -> io::Result<PathBuf> {
        let rel = Path::new(name);
        if rel.file_name().is_none() || !rel.components().all(|c| matches!(c, Component::Normal(_)))
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name:?} is not a plain name in the state directory"),
            ));
        }
        let mut at = self.dir.clone();
        if let Some(parent) = rel.parent() {
            for c in parent.components() {
                at.push(c);
                real_dir(&at)?;
            }
        }
        let path = self.path(name);
        write_atomic(&path, bytes)?;
        Ok(path)
    }

    /// Read `name` (bounded), not following a symbolic link.
    pub fn read(&self, name: &str) -> io::Result<Vec<u8>> {
        read_nofollow(&self.path(name)).map(|(b, _)| b)
    }

    /// Read `name` as [`Store::read`] does, and only when the file is as
    /// private as the directory must be ([`Store::trust`]): a regular
    /// file of the user running sync (or root) that nobody else may
    /// write. The error says why in words.
    pub fn read_trusted(&self, name: &str) -> io::Result<Vec<u8>> {
        let path = self.path(name);
        let (bytes, m) = read_nofollow(&path)?;
        private(&m).map_err(|why| {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{} {why}", path.display()),
            )
        })?;
        Ok(bytes)
    }
}

/// The user sync runs as (its effective uid).
fn me() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Owned by us or root, and writable by nobody else: the rule ssh applies
/// to `~/.ssh`. The error completes "the state directory X ...".
fn private(m: &Metadata) -> Result<(), String> {
    let (owner, me) = (m.uid(), me());
    if owner != me && owner != 0 {
        return Err(format!(
            "is owned by uid {owner}, neither the uid gnomon sync runs as ({me}) nor root"
        ));
    }
    let mode = m.mode() & 0o7777;
    if mode & 0o002 != 0 {
        return Err(format!("is writable by everyone (mode {mode:04o})"));
    }
    if mode & 0o020 != 0 {
        return Err(format!("is writable by its group (mode {mode:04o})"));
    }
    Ok(())
}

/// `path` as a real directory: created (mode 0750) when missing; a
/// symbolic link or anything else is an error, never followed.
fn real_dir(path: &Path) -> io::Result<()> {
    let check = |m: Metadata| {
        if m.file_type().is_symlink() {
            Err(not_followed(path))
        } else if m.is_dir() {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a directory", path.display()),
            ))
        }
    };
    match fs::symlink_metadata(path) {
        Ok(m) => check(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            match fs::DirBuilder::new().mode(DIR_MODE).create(path) {
                Ok(()) => Ok(()),
                // Made meanwhile: whatever it is must pass the check.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    check(fs::symlink_metadata(path)?)
                }
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

fn not_followed(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{} is a symbolic link; not followed", path.display()),
    )
}

/// Read a file of the state directory: not through a symbolic link
/// (O_NOFOLLOW), only a regular file (a planted FIFO must not block the
/// start: O_NONBLOCK), at most 16 MiB. With its metadata, from the file
/// opened.
pub(crate) fn read_nofollow(path: &Path) -> io::Result<(Vec<u8>, Metadata)> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                not_followed(path)
            } else {
                e
            }
        })?;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not a regular file", path.display()),
        ));
    }
    Ok((bounded(f)?, m))
}

/// Read a whole file of at most 16 MiB: a list or state larger than that
/// is not one of ours.
pub(crate) fn read_bounded(path: &Path) -> io::Result<Vec<u8>> {
    bounded(File::open(path)?)
}

fn bounded(f: File) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    f.take(MAX_FILE + 1).read_to_end(&mut out)?;
    if out.len() as u64 > MAX_FILE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {MAX_FILE} bytes"),
        ));
    }
    Ok(out)
}

/// Temporary file, fsync, rename, fsync of the directory. The temporary
/// file is created exclusively (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0640)
/// under a random name: nothing planted under the name it picks is
/// opened or followed, and the rename replaces whatever is at `path`
/// (a symbolic link included) without following it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_named(path, bytes, &mut random_suffix)
}

/// [`write_atomic`] with the temporary names' suffixes from `suffix`
/// (random but for the tests).
fn write_atomic_named(
    path: &Path,
    bytes: &[u8],
    suffix: &mut dyn FnMut() -> io::Result<String>,
) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let (tmp, mut f) = create_temp(dir, &name.to_string_lossy(), suffix)?;
    let result = (|| {
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        // The rename is durable once the directory is.
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// How many names are tried before giving up: a clash of 64 random bits
/// is somebody planting files, not chance.
const TEMP_TRIES: usize = 16;

/// `dir/.NAME.tmp-SUFFIX`, created new; a name taken is passed over.
fn create_temp(
    dir: &Path,
    name: &str,
    suffix: &mut dyn FnMut() -> io::Result<String>,
) -> io::Result<(PathBuf, File)> {
    for _ in 0..TEMP_TRIES {
        let tmp = dir.join(format!(".{name}.tmp-{}", suffix()?));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "{TEMP_TRIES} temporary names for {name} in {} were all taken",
            dir.display()
        ),
    ))
}

/// 16 hex digits from the system's random source.
fn random_suffix() -> io::Result<String> {
    let mut b = [0u8; 8];
    getrandom::getrandom(&mut b)
        .map_err(|e| io::Error::other(format!("no random bytes for a temporary name: {e}")))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

#[cfg(test)]
mod tests;
