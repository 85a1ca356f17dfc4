//! What survives a restart, in `--state-dir`:
//!
//! - `sync-state.json`: the floor (the last proven time), the last round's
//!   summary, the servers excluded for lying;
//! - `sync-chain.json`: the last round's chain of exchanges, in the
//!   malfeasance-report format (`gnomon verify-report` reads it), so a
//!   report can cite them after a restart;
//! - `sync-servers.json`: the last server list that loaded;
//! - `sync-reports/`: the malfeasance reports written.
//!
//! Every file is written whole: a temporary file in the same directory,
//! fsync, rename over the old one, fsync of the directory. A reader sees
//! the old file or the new one, never half of either, even across a power
//! loss. A missing or unreadable state is a warning and a fresh start,
//! never a crash; a corrupt file is kept aside for whoever investigates.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The state file's name.
pub const STATE_FILE: &str = "sync-state.json";
/// The last chain's file.
pub const CHAIN_FILE: &str = "sync-chain.json";
/// The list cache.
pub const LIST_CACHE: &str = "sync-servers.json";
/// Reports.
pub const REPORTS_DIR: &str = "sync-reports";

/// Larger files are not ours: refused unread.
const MAX_FILE: u64 = 16 << 20;
const FORMAT: u32 = 1;

/// The state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// Format version.
    #[serde(default)]
    pub format: u32,
    /// The last proven time, Unix µs.
    pub floor_us: Option<i64>,
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
    /// Names of servers outside the consensus, with why.
    pub outside: Vec<String>,
    /// Names of servers that did not answer.
    pub unreachable: Vec<String>,
    /// The report written, if any.
    pub report: Option<String>,
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
    /// The state as saved.
    Ok(State),
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
            let mut b = fs::DirBuilder::new();
            b.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o750);
            b.create(dir)?;
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
        let bytes = match read_bounded(&path) {
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
            Ok(s) if s.format == FORMAT => Loaded::Ok(s),
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

    /// Write `bytes` as `name` in the directory, atomically.
    pub fn write(&self, name: &str, bytes: &[u8]) -> io::Result<PathBuf> {
        let path = self.path(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        write_atomic(&path, bytes)?;
        Ok(path)
    }

    /// Read `name` (bounded).
    pub fn read(&self, name: &str) -> io::Result<Vec<u8>> {
        read_bounded(&self.path(name))
    }
}

/// Read a whole file of at most 16 MiB: a list or state larger than that
/// is not one of ours.
pub(crate) fn read_bounded(path: &Path) -> io::Result<Vec<u8>> {
    let f = File::open(path)?;
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

/// Temporary file, fsync, rename, fsync of the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = File::create(&tmp)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("gnomon-sync-state-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn saves_loads_and_survives_corruption() {
        let d = dir("roundtrip");
        let store = Store::open(&d).unwrap();
        assert!(matches!(store.load(), Loaded::Missing));
        let s = State {
            floor_us: Some(1_800_000_000_000_000),
            ..State::default()
        };
        store.save(&s).unwrap();
        match store.load() {
            Loaded::Ok(l) => assert_eq!(l.floor_us, s.floor_us),
            other => panic!("{other:?}"),
        }
        fs::write(store.path(STATE_FILE), b"{\"floor_us\": tru").unwrap();
        match store.load() {
            Loaded::Warning(w) => assert!(w.contains("corrupt"), "{w}"),
            other => panic!("{other:?}"),
        }
        assert!(store.path("sync-state.json.corrupt").exists());
        // No temporary file is left behind.
        let names: Vec<String> = fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains(".tmp-")), "{names:?}");
        let _ = fs::remove_dir_all(&d);
    }
}
