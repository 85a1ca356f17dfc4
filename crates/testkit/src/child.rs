//! A child process (`gnomon serve`, `watch`, `report-server`, …) that
//! cannot outlive its test: killed and reaped when dropped, a panicking
//! test's too; the command that starts one with only the `GNOMON_*`
//! variables its test sets; and a copy of a binary that any user may run,
//! for tests that start gnomon as another user from a clone under a
//! directory only its owner may enter.

use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Mutex;

/// `program` as a command with every `GNOMON_*` variable of the test's own
/// environment removed: a caller who exported one (an operator of an
/// unsynchronized test host, say) must not change what the test checks.
/// Variables the test sets on the command afterwards are passed as set.
pub fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(program);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("GNOMON_") {
            c.env_remove(name);
        }
    }
    c
}

/// Puts the cargo running these tests (`CARGO`) first on `command`'s PATH,
/// for the scripts tests run that call cargo themselves
/// (scripts/build-static, scripts/build-libgnomon).
pub fn cargo_first_on_path(command: &mut Command) -> &mut Command {
    if let Some(cargo) = std::env::var_os("CARGO") {
        let dir = Path::new(&cargo).parent().unwrap().to_path_buf();
        let path = std::env::var_os("PATH").unwrap_or_default();
        let paths = std::iter::once(dir).chain(std::env::split_paths(&path));
        command.env("PATH", std::env::join_paths(paths).unwrap());
    }
    command
}

/// A copy of the binary at `path` that every user may reach and run
/// (mode 0755 in a directory of its own under the system's temporary
/// directory), made once per binary and process. Tests that start gnomon
/// as another user (`setpriv`, `chroot --userspec`, a uid set on the
/// command) run this copy: the clone may sit under a directory only its
/// owner may enter (/root, a `mktemp -d`), where that user cannot reach the
/// original.
pub fn runnable_by_anyone(path: &Path) -> PathBuf {
    static MADE: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());
    let mut made = MADE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, copy)) = made.iter().find(|(from, _)| from == path) {
        return copy.clone();
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!(
        "gnomon-test-bin-{}-{}",
        std::process::id(),
        made.len()
    ));
    // A stale directory of a recycled pid: replaced.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let copy = dir.join(path.file_name().expect("a binary's file name"));
    // Copied by cp(1), not by this process: a file this process held open
    // for writing would be inherited by whatever another test thread forks
    // meanwhile, and until that child's exec closes it, running the copy
    // fails with ETXTBSY ("Text file busy", seen in a loaded run).
    let copied = Command::new("cp")
        .arg("--")
        .arg(path)
        .arg(&copy)
        .status()
        .unwrap_or_else(|e| panic!("cp {}: {e}", path.display()));
    assert!(
        copied.success(),
        "cp {} {}: {copied}",
        path.display(),
        copy.display()
    );
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    made.push((path.to_path_buf(), copy.clone()));
    copy
}

/// A [`Child`] killed (SIGKILL) and waited for on drop; everything else
/// goes through to the child.
#[derive(Debug)]
pub struct Reaped(pub Child);

impl Reaped {
    /// Spawns `command`; panics with the command when it cannot start.
    pub fn spawn(command: &mut Command) -> Reaped {
        match command.spawn() {
            Ok(c) => Reaped(c),
            Err(e) => panic!("cannot start {command:?}: {e}"),
        }
    }
}

impl Reaped {
    /// [`Child::wait_with_output`], with the guard kept until the child has
    /// exited: a test that fails while reading still leaves no process.
    pub fn wait_with_output(mut self) -> std::io::Result<std::process::Output> {
        use std::io::Read;
        let stdout = self.0.stdout.take();
        let stderr = self.0.stderr.take();
        let errors = std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut e) = stderr {
                let _ = e.read_to_end(&mut v);
            }
            v
        });
        let mut out = Vec::new();
        if let Some(mut o) = stdout {
            o.read_to_end(&mut out)?;
        }
        let status = self.0.wait()?;
        let err = errors.join().unwrap_or_default();
        Ok(std::process::Output {
            status,
            stdout: out,
            stderr: err,
        })
    }
}

impl From<Child> for Reaped {
    fn from(c: Child) -> Reaped {
        Reaped(c)
    }
}

impl Deref for Reaped {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        // Already gone is fine: kill fails, wait returns its status.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_with_output_reads_both_pipes_and_the_status() {
        let child = Reaped::spawn(
            Command::new("sh")
                .args(["-c", "echo out; echo err >&2; exit 3"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped()),
        );
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
    }

    #[test]
    fn a_dropped_child_is_killed_and_reaped() {
        let child = Reaped::spawn(Command::new("sleep").arg("600"));
        let proc_dir = PathBuf::from(format!("/proc/{}", child.id()));
        assert!(proc_dir.exists());
        drop(child);
        // Reaped, not a zombie: its /proc entry is gone with it.
        assert!(
            !proc_dir.exists(),
            "{} outlived its guard",
            proc_dir.display()
        );
    }

    #[test]
    fn a_panicking_test_leaves_no_child_behind() {
        let (sent, got) = std::sync::mpsc::channel();
        let outcome = std::thread::spawn(move || {
            let child = Reaped::spawn(Command::new("sleep").arg("600"));
            sent.send(child.id()).unwrap();
            panic!("the test fails");
        })
        .join();
        assert!(outcome.is_err());
        let pid = got.recv().unwrap();
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "pid {pid} left behind"
        );
    }

    #[test]
    fn commands_carry_no_gnomon_variable_of_the_callers() {
        // This test binary's own environment is the caller's: whatever
        // GNOMON_* it has (test-all exports GNOMON_SKIP_LOG) must not pass.
        let out = command("env").env("GNOMON_MEANT", "1").output().unwrap();
        let env = String::from_utf8_lossy(&out.stdout);
        let passed: Vec<&str> = env.lines().filter(|l| l.starts_with("GNOMON_")).collect();
        assert_eq!(passed, ["GNOMON_MEANT=1"], "{env}");
    }

    #[test]
    fn the_copy_is_runnable_by_anyone() {
        use std::os::unix::fs::PermissionsExt;
        let copy = runnable_by_anyone(Path::new("/bin/true"));
        for p in [copy.as_path(), copy.parent().unwrap()] {
            let mode = std::fs::metadata(p).unwrap().permissions().mode();
            assert_eq!(mode & 0o555, 0o555, "{}: {mode:o}", p.display());
        }
        assert_eq!(
            runnable_by_anyone(Path::new("/bin/true")),
            copy,
            "made once"
        );
        assert!(Command::new(&copy).status().unwrap().success());
    }
}
