//! A throwaway PostgreSQL server for store tests: Debian's package
//! (`/usr/lib/postgresql/*/bin`), a fresh cluster in a temp directory,
//! listening only on a Unix socket in that directory, stopped and removed
//! when the guard drops.
//!
//! PostgreSQL refuses to run as root, so as root the cluster belongs to the
//! `postgres` system user (or `nobody`) and every binary is started through
//! `setpriv` as that user; otherwise it runs as the test's own user.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a fresh cluster may take to come up on a loaded machine.
const START_DEADLINE: Duration = Duration::from_secs(90);
/// How long a fast shutdown may take before the server is killed.
const STOP_DEADLINE: Duration = Duration::from_secs(20);

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A running server. Dropping it stops the server and removes its files.
#[derive(Debug)]
pub struct Postgres {
    dir: PathBuf,
    child: Option<Child>,
}

/// The user the cluster runs as: uid, gid, or none to stay as we are.
fn run_as() -> Result<Option<(u32, u32)>, String> {
    if !crate::is_root() {
        return Ok(None);
    }
    let passwd = fs::read_to_string("/etc/passwd").map_err(|e| format!("/etc/passwd: {e}"))?;
    for name in ["postgres", "nobody"] {
        if let Some(line) = passwd.lines().find(|l| l.split(':').next() == Some(name)) {
            let f: Vec<&str> = line.split(':').collect();
            if let (Some(Ok(uid)), Some(Ok(gid))) =
                (f.get(2).map(|s| s.parse()), f.get(3).map(|s| s.parse()))
            {
                return Ok(Some((uid, gid)));
            }
        }
    }
    Err("running as root and neither a postgres nor a nobody user exists".into())
}

/// The newest installed PostgreSQL's bin directory.
fn bin_dir() -> Option<PathBuf> {
    let mut dirs: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let major = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((major, bin))
        })
        .collect();
    dirs.sort();
    dirs.pop().map(|(_, b)| b)
}

fn command(user: Option<(u32, u32)>, program: &Path) -> Command {
    match user {
        None => Command::new(program),
        Some((uid, gid)) => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={gid}"))
                .arg("--clear-groups")
                .arg("--")
                .arg(program);
            c
        }
    }
}

impl Postgres {
    /// Starts a fresh cluster, or says in plain words why it cannot (for
    /// [`crate::skip`]).
    pub fn start() -> Result<Postgres, String> {
        let bin = bin_dir().ok_or(
            "PostgreSQL is not installed (Debian package postgresql; scripts/test-all installs it as root)",
        )?;
        let user = run_as()?;
        if user.is_some() && Command::new("setpriv").arg("--version").output().is_err() {
            return Err("running as root and setpriv (util-linux) is missing".into());
        }
        let dir = std::env::temp_dir().join(format!(
            "gnomon-pg-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // From here on, dropping the guard cleans up whatever was made.
        let mut pg = Postgres { dir, child: None };
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(&pg.dir, Some(uid), Some(gid))
                .map_err(|e| format!("chown {}: {e}", pg.dir.display()))?;
        }
        let data = pg.dir.join("data");
        let out = command(user, &bin.join("initdb"))
            .args([
                "--no-sync",
                "--auth=trust",
                "--username=gnomon",
                "--encoding=UTF8",
            ])
            .args(["--locale=C", "-D"])
            .arg(&data)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("initdb: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let child = command(user, &bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .arg("-k")
            .arg(&pg.dir)
            // No TCP at all: the socket in our own directory is the only way in.
            .args(["-c", "listen_addresses=", "-c", "fsync=off"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                fs::File::create(pg.dir.join("log")).map_err(|e| format!("log file: {e}"))?,
            ))
            .spawn()
            .map_err(|e| format!("postgres: {e}"))?;
        pg.child = Some(child);
        pg.wait_ready(&data)?;
        Ok(pg)
    }

    /// Waits until postmaster.pid says "ready" (PostgreSQL 10+ writes the
    /// state on its last line) and the socket exists.
    fn wait_ready(&mut self, data: &Path) -> Result<(), String> {
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            let ready = fs::read_to_string(data.join("postmaster.pid"))
                .map(|s| s.lines().any(|l| l.trim() == "ready"))
                .unwrap_or(false);
            if ready && self.dir.join(".s.PGSQL.5432").exists() {
                return Ok(());
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                let log = fs::read_to_string(self.dir.join("log")).unwrap_or_default();
                return Err(format!("postgres exited ({status}): {}", log.trim()));
            }
            if Instant::now() > deadline {
                return Err(format!("postgres not ready after {START_DEADLINE:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The URL of the `postgres` database as the superuser `gnomon`, over
    /// the Unix socket.
    pub fn url(&self) -> String {
        format!(
            "postgres://gnomon@localhost/postgres?host={}",
            self.dir.display()
        )
    }

    /// The directory that holds the socket.
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGINT is PostgreSQL's fast shutdown: sessions are ended,
            // nothing is waited for.
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + STOP_DEADLINE;
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}
