//! Starting the built `gnomon serve` and reading what it announces.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};

use base64::Engine as _;

/// A started server, up to its "listening on udp" line.
pub struct Started {
    /// Killed and reaped when dropped: a failing test leaves no server.
    pub child: gnomon_testkit::Reaped,
    /// The first UDP address it listens on.
    pub addr: SocketAddr,
    /// The long-term public key it printed.
    pub public: [u8; 32],
    /// Where /metrics and /health are served, if it said.
    pub metrics: Option<SocketAddr>,
    /// The rest of its stderr.
    pub stderr: BufReader<ChildStderr>,
    /// Everything it logged up to "listening".
    pub startup: Vec<String>,
}

/// `gnomon serve` on 127.0.0.1, any port, two workers (unless `extra`
/// says), no summary lines,
/// then `extra` (and whatever `setup` adds: environment); its public key
/// and addresses read from what it prints.
pub fn start_serve(extra: &[&str], setup: impl FnOnce(&mut Command)) -> Started {
    start_serve_via(&[], "127.0.0.1:0", extra, setup)
}

/// [`start_serve`] listening on `listen`, started through `wrapper` (such as
/// `ip netns exec NAME`, which execs the server in place: the child is the
/// server itself) when it is not empty.
pub fn start_serve_via(
    wrapper: &[&str],
    listen: &str,
    extra: &[&str],
    setup: impl FnOnce(&mut Command),
) -> Started {
    start_serve_command(gnomon_via(wrapper), listen, extra, setup)
}

/// [`start_serve`] of another build of gnomon (the static one).
pub fn start_serve_bin(bin: &Path, extra: &[&str], setup: impl FnOnce(&mut Command)) -> Started {
    start_serve_command(gnomon_testkit::command(bin), "127.0.0.1:0", extra, setup)
}

fn start_serve_command(
    cmd: Command,
    listen: &str,
    extra: &[&str],
    setup: impl FnOnce(&mut Command),
) -> Started {
    let mut cmd = serve_command(cmd, listen, extra);
    setup(&mut cmd);
    let mut child = gnomon_testkit::Reaped::spawn(&mut cmd);
    let stderr = BufReader::new(child.stderr.take().unwrap());
    Started::read(child, stderr)
}

/// `cmd` (the built gnomon, see [`gnomon_via`]) with the arguments of
/// [`start_serve_via`], stdout and stderr piped.
pub fn serve_command(mut cmd: Command, listen: &str, extra: &[&str]) -> Command {
    // A flag may be given once: `extra` may choose its own worker count.
    let workers: &[&str] = if extra.contains(&"--workers") {
        &[]
    } else {
        &["--workers", "2"]
    };
    cmd.args(["serve", "--listen", listen, "--summary-interval", "0"])
        .args(workers)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// The public key a spawned server prints first on stdout.
pub fn read_public(child: &mut Child) -> [u8; 32] {
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let b64 = line
        .trim()
        .strip_prefix("public key (base64): ")
        .unwrap_or_else(|| panic!("public key line, not {line:?}"));
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap()
        .try_into()
        .unwrap()
}

impl Started {
    /// Read a spawned server's public key (stdout) and its log (`stderr`,
    /// perhaps partly read already) up to "listening on udp".
    pub fn read(
        child: impl Into<gnomon_testkit::Reaped>,
        mut stderr: BufReader<ChildStderr>,
    ) -> Started {
        // Guarded at once: a server that says something unexpected is
        // still killed when the assertion below ends the test.
        let mut child: gnomon_testkit::Reaped = child.into();
        let public = read_public(&mut child);
        let mut line = String::new();
        let mut startup = Vec::new();
        let mut metrics = None;
        let addr = loop {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "server exited before listening: {startup:?}"
            );
            startup.push(line.clone());
            if let Some((_, r)) = line.split_once("metrics on http://") {
                metrics = r.split('/').next().and_then(|a| a.parse().ok());
            }
            if let Some(rest) = line.split_once("listening on udp ").map(|(_, r)| r) {
                break rest.split_whitespace().next().unwrap().parse().unwrap();
            }
        };
        Started {
            child,
            addr,
            public,
            metrics,
            stderr,
            startup,
        }
    }
}

/// The built `gnomon`, run through `wrapper` (such as `ip netns exec
/// NAME`) when it is not empty; with none of the caller's `GNOMON_*`
/// variables either way.
pub fn gnomon_via(wrapper: &[&str]) -> Command {
    let exe = env!("CARGO_BIN_EXE_gnomon");
    match wrapper.split_first() {
        Some((first, rest)) => {
            let mut c = gnomon_testkit::command(first);
            c.args(rest).arg(exe);
            c
        }
        None => gnomon_testkit::command(exe),
    }
}

/// The built `gnomon` as a path another user may run (a copy, when the
/// clone lies under a directory only its owner may enter).
pub fn gnomon_for_anyone() -> PathBuf {
    gnomon_testkit::runnable_by_anyone(Path::new(env!("CARGO_BIN_EXE_gnomon")))
}

/// A long-term key made by `gnomon keygen` in `dir`, and `count` offline
/// delegations from it made by `gnomon delegate` (starting now): the key
/// file, the delegations directory and the public key.
pub fn keygen_and_delegate(dir: &Path, count: u32) -> (PathBuf, PathBuf, [u8; 32]) {
    let (key, public) = keygen(dir);
    let delegations = dir.join("delegations");
    delegate(&key, &delegations, count);
    (key, delegations, public)
}

/// `count` offline delegations from the key file `key` into `out` by
/// `gnomon delegate` (starting now).
pub fn delegate(key: &Path, out: &Path, count: u32) {
    gnomon_ok(&[
        "delegate",
        "--key-file",
        key.to_str().unwrap(),
        "--out-dir",
        out.to_str().unwrap(),
        "--count",
        &count.to_string(),
    ]);
}

/// An empty directory for one test's files under the test target's scratch
/// space, named `name` and the test process.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `gnomon keygen --scheme ml-dsa-44 --out path`: its 1312-byte public key.
pub fn keygen_ml_dsa(path: &Path) -> Vec<u8> {
    let out = gnomon_ok(&[
        "keygen",
        "--scheme",
        "ml-dsa-44",
        "--out",
        path.to_str().unwrap(),
    ]);
    assert_eq!(out.lines().count(), 1, "{out:?}");
    base64::engine::general_purpose::STANDARD
        .decode(out.trim_end())
        .unwrap()
}

/// An ML-DSA-44 root made by `gnomon keygen` in `dir` and `count` offline
/// delegations from it by `gnomon delegate` (the way a server gets an
/// ML-DSA-44 identity beside its Ed25519 key: `--offline-dir`): the
/// delegations' directory and the root's public key.
pub fn ml_dsa_delegations(dir: &Path, count: u32) -> (PathBuf, Vec<u8>) {
    let root = dir.join("pq.key");
    let public = keygen_ml_dsa(&root);
    let delegations = dir.join("pq-delegations");
    delegate(&root, &delegations, count);
    (delegations, public)
}

/// Run the built `gnomon` with `args`; it must succeed. Its stdout.
pub fn gnomon_ok(args: &[&str]) -> String {
    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gnomon {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A long-term key made by `gnomon keygen` in `dir`: its file and public key.
pub fn keygen(dir: &Path) -> (PathBuf, [u8; 32]) {
    let key = dir.join("root.key");
    let public = keygen_at(&key);
    (key, public)
}

/// The repository's root (deploy/, scripts/, target/).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Run `cmd` to its end; its output.
pub fn run(cmd: &mut Command) -> std::process::Output {
    cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

/// A long-term key made by `gnomon keygen` at `path`: its public key.
pub fn keygen_at(path: &Path) -> [u8; 32] {
    let b64 = gnomon_ok(&["keygen", "--out", path.to_str().unwrap()]);
    base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .unwrap()
        .try_into()
        .unwrap()
}

/// A child's log lines, read on a thread of their own and handed over on
/// a channel, so that a test waits for one with a bound and never blocks
/// on a pipe.
pub struct LogLines {
    lines: std::sync::mpsc::Receiver<String>,
    /// Every line received so far.
    pub seen: Vec<String>,
}

impl LogLines {
    /// Read `stderr` until it ends.
    pub fn read(stderr: ChildStderr) -> LogLines {
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        LogLines {
            lines,
            seen: Vec::new(),
        }
    }

    /// The first line not yet waited for that contains `needle`, waiting
    /// at most `peer::PATIENCE` (less if the child exits) for it.
    pub fn wait(&mut self, needle: &str) -> String {
        let deadline = std::time::Instant::now() + peer::PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(_) => panic!("no log line with {needle:?}: {:#?}", self.seen),
            }
        }
    }

    /// Every line, once the child has exited (its stderr then ends).
    pub fn all(mut self) -> Vec<String> {
        self.seen.extend(self.lines.iter());
        self.seen
    }
}

pub mod peer;
