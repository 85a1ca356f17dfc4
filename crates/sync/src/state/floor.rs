//! Clearing the floor (`gnomon sync --clear-floor`) with a service
//! perhaps running on the same directory.
//!
//! A running service holds the floor in memory and saves it after every
//! round, so a floor removed from the file alone would come back at the
//! next save. A clear is therefore recorded as well as done: the state's
//! `floor_clears` grows by one, and a service that finds the file's count
//! above its own takes the file's floor (none, or what a round proved
//! since) in place of its own ([`guard`]). Both sides read and write under
//! an exclusive lock on `sync-state.lock`: the service from before it
//! decides a round's floor until the state is saved, the clear from its
//! read to its write, so neither slips between the other's two steps.
//!
//! Only sync's own user and root can hold the lock: the file is mode 0600
//! and owned by the directory's owner, and it is taken only in a
//! directory that passes [`Store::trust`]. Anyone else holding it could
//! stall the rounds.
//!
//! ```text
//!  gnomon sync --clear-floor ──lock──▶ read, floor removed, floor_clears + 1, save ──unlock
//!  Service::round ──lock (guard)──▶ file's floor_clears > ours? take its floor ─▶ … ─▶ save ──unlock
//! ```

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

use super::{me, Loaded, State, Store};

/// The lock's file in the state directory.
pub const LOCK_FILE: &str = "sync-state.lock";

/// The lock, held until dropped (closing the file releases it).
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

/// What a clear removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cleared {
    /// The floor that was in the file, Unix µs (`None`: there was none).
    pub floor_us: Option<i64>,
    /// The local clock when it was proven, when the file said.
    pub proven_at_us: Option<i64>,
    /// The file's `floor_clears` now.
    pub clears: u64,
}

impl Store {
    /// Wait for the lock and take it.
    pub fn lock(&self) -> io::Result<Lock> {
        let path = self.path(LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let m = file.metadata()?;
        if !m.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not a regular file", path.display()),
            ));
        }
        let owner = std::fs::metadata(self.dir())?.uid();
        if m.uid() != owner {
            // Made by root (an operator's --clear-floor) for a service
            // that runs as the directory's owner: that user must be able
            // to open it.
            if me() != 0 {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "{} is owned by uid {}, not the directory's owner ({owner})",
                        path.display(),
                        m.uid()
                    ),
                ));
            }
            std::os::unix::fs::fchown(&file, Some(owner), None)?;
        }
        file.lock()?;
        Ok(Lock { _file: file })
    }

    /// Remove the floor from the state file, under the lock, and count
    /// the clear. `Ok(None)`: there is no state file, so no floor.
    pub fn clear_floor(&self) -> Result<Option<Cleared>, String> {
        let _lock = self
            .lock()
            .map_err(|e| format!("cannot lock the state: {e}"))?;
        let mut s = match self.peek() {
            Loaded::Ok(s) => s,
            Loaded::Missing => return Ok(None),
            Loaded::Warning(w) => return Err(w),
        };
        s.floor_clears += 1;
        let cleared = Cleared {
            floor_us: s.floor_us.take(),
            proven_at_us: s.floor_proven_at_us.take(),
            clears: s.floor_clears,
        };
        self.save(&s)
            .map_err(|e| format!("cannot save the state: {e}"))?;
        Ok(Some(cleared))
    }
}

/// The file's state when its floor was cleared after `mine` was loaded or
/// last took a clear: its floor is to be held instead. `None` when it was
/// not, or the file cannot tell (missing, unreadable).
pub fn cleared_since(store: &Store, mine: &State) -> Option<State> {
    match store.peek() {
        Loaded::Ok(s) if s.floor_clears > mine.floor_clears => Some(*s),
        _ => None,
    }
}

/// Before `state`'s floor is decided and saved: the lock (held until the
/// save), and a floor cleared meanwhile taken into `state`, said in
/// `log`. Nothing in a directory that fails [`Store::trust`]: its floor
/// is not believed, so its clears are not either, and a lock file there
/// could be anyone's.
pub fn guard(store: &Store, state: &mut State, log: &dyn Fn(&str)) -> Option<Lock> {
    store.trust().ok()?;
    let lock = match store.lock() {
        Ok(l) => Some(l),
        Err(e) => {
            log(&format!(
                "warning: cannot lock the state ({e}): a floor cleared meanwhile may be \
                 written back"
            ));
            None
        }
    };
    if let Some(file) = cleared_since(store, state) {
        let utc = |us: Option<i64>| {
            us.map_or("none".into(), |us| {
                gnomon_client::format_utc(us.max(0) as u64)
            })
        };
        log(&format!(
            "the floor was cleared (gnomon sync --clear-floor): {} is no longer held; the \
             floor is now {}",
            utc(state.floor_us),
            utc(file.floor_us)
        ));
        state.floor_us = file.floor_us;
        state.floor_proven_at_us = file.floor_proven_at_us;
        state.floor_clears = file.floor_clears;
    }
    lock
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;

    fn store(name: &str) -> Store {
        let d =
            std::env::temp_dir().join(format!("gnomon-sync-floor-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        Store::open(&d).unwrap()
    }

    fn floored(us: i64) -> State {
        State {
            floor_us: Some(us),
            floor_proven_at_us: Some(us + 5),
            ..State::default()
        }
    }

    /// A service that loaded a floor, a clear, then the service's next
    /// round: it takes the cleared floor and saves that, not its own; a
    /// second round changes nothing more.
    #[test]
    fn a_running_service_takes_a_clear_instead_of_writing_its_floor_back() {
        let s = store("adopt");
        s.save(&floored(4_102_444_800_000_000)).unwrap();
        let Loaded::Ok(mut mine) = s.load() else {
            panic!("no state")
        };
        assert_eq!(s.clear_floor().unwrap(), {
            Some(Cleared {
                floor_us: Some(4_102_444_800_000_000),
                proven_at_us: Some(4_102_444_800_000_005),
                clears: 1,
            })
        });
        let said = Mutex::new(Vec::new());
        let log = |l: &str| said.lock().unwrap().push(l.to_string());
        let lock = guard(&s, &mut mine, &log);
        assert!(lock.is_some());
        assert_eq!((mine.floor_us, mine.floor_proven_at_us), (None, None));
        assert_eq!(mine.floor_clears, 1);
        s.save(&mine).unwrap();
        drop(lock);
        let said = said.into_inner().unwrap();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("2100-01-01T00:00:00"), "{said:?}");
        // Taken once: a floor raised since is the service's own.
        mine.floor_us = Some(7);
        let again = Mutex::new(Vec::<String>::new());
        guard(&s, &mut mine, &|l: &str| {
            again.lock().unwrap().push(l.into())
        });
        assert_eq!(mine.floor_us, Some(7));
        assert!(again.lock().unwrap().is_empty());
        // Nothing to clear in a directory without a state.
        let empty = store("empty");
        assert_eq!(empty.clear_floor(), Ok(None));
        let _ = std::fs::remove_dir_all(empty.dir());
        let _ = std::fs::remove_dir_all(s.dir());
    }

    /// A clear waits while a round holds the lock, and completes once it
    /// is released: it is never lost between the round's read and save.
    #[test]
    fn a_clear_waits_for_the_round_holding_the_lock() {
        let s = store("wait");
        s.save(&floored(99)).unwrap();
        let held = s.lock().unwrap();
        let (tx, rx) = mpsc::channel();
        let clearer = Arc::new(s.clone());
        let c = clearer.clone();
        std::thread::spawn(move || tx.send(c.clear_floor()).unwrap());
        // A clear that ignored the lock finishes in microseconds.
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
        // Meanwhile the round saves what it holds …
        s.save(&floored(100)).unwrap();
        drop(held);
        // … and the clear then removes that, not an older copy.
        let cleared = rx.recv_timeout(Duration::from_secs(30)).unwrap().unwrap();
        assert_eq!(cleared.map(|c| c.floor_us), Some(Some(100)));
        let Loaded::Ok(now) = s.peek() else {
            panic!("no state")
        };
        assert_eq!((now.floor_us, now.floor_clears), (None, 1));
        let _ = std::fs::remove_dir_all(s.dir());
    }

    /// The lock file: mode 0600, never a planted link; an untrusted
    /// directory is neither locked nor believed about clears.
    #[test]
    fn the_lock_is_private_and_an_untrusted_directory_gets_none() {
        use std::os::unix::fs::PermissionsExt;
        let s = store("private");
        drop(s.lock().unwrap());
        let m = std::fs::metadata(s.path(LOCK_FILE)).unwrap();
        assert_eq!(m.mode() & 0o777, 0o600);
        std::fs::remove_file(s.path(LOCK_FILE)).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", s.path(LOCK_FILE)).unwrap();
        assert!(s.lock().is_err());
        std::fs::remove_file(s.path(LOCK_FILE)).unwrap();

        s.save(&floored(5)).unwrap();
        let mut mine = floored(5);
        s.clear_floor().unwrap();
        std::fs::set_permissions(s.dir(), std::fs::Permissions::from_mode(0o770)).unwrap();
        assert!(guard(&s, &mut mine, &|_: &str| {}).is_none());
        assert_eq!(
            mine.floor_us,
            Some(5),
            "a clear believed from an untrusted directory"
        );
        let _ = std::fs::remove_dir_all(s.dir());
    }
}
