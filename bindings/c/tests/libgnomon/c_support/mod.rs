//! What the C program tests share: the libraries built as users build
//! them (the `c-lib` one by scripts/build-libgnomon, the no_std one for this
//! machine), the system's `cc` compiling a test program against the header,
//! a bounded run, and a real `gnomon serve` on loopback.
#![allow(dead_code, unreachable_pub)]

use gnomon_testkit::Reaped;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"))
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

/// `cargo ARGS` in the workspace; it must succeed.
pub fn cargo(args: &[&str]) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = run(Command::new(cargo)
        .current_dir(repo())
        .args(args)
        .args(["--locked", "--quiet"]));
    assert!(
        out.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// target/libgnomon/lib with libgnomon.a and libgnomon.so built as users
/// build them (docs/C.md: scripts/build-libgnomon, the `c-lib` profile):
/// built once per test binary.
///
/// Only gnomon-ffi: its tree is the client's (about 70 crates). Nothing
/// else in CI builds the `gnomon` binary in release (the package test
/// packages the debug one, scripts/test-deb), so building it here too
/// would compile the whole server tree in release for nothing.
pub fn c_lib_dir() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let mut cmd = Command::new(repo().join("scripts/build-libgnomon"));
        cmd.env("CARGO_TARGET_DIR", target_dir());
        gnomon_testkit::cargo_first_on_path(&mut cmd);
        let out = run(&mut cmd);
        assert!(
            out.status.success(),
            "scripts/build-libgnomon: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        target_dir().join("libgnomon/lib")
    })
}

/// The gnomon binary: `GNOMON_BIN` when set (scripts/test-all sets it to
/// what `cargo test --workspace` built), else target/debug/gnomon built
/// once per test binary. Not `cargo build -p gnomon` under a workspace run:
/// built for one package, the binary's dependencies resolve fewer features
/// (no dev-dependencies), so cargo rebuilds about 60 crates (116 s on this
/// 2-core AMD EPYC) and replaces the binary the other tests are running.
pub fn gnomon_bin() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        if let Some(bin) = std::env::var_os("GNOMON_BIN") {
            return PathBuf::from(bin);
        }
        cargo(&["build", "-p", "gnomon"]);
        target_dir().join("debug/gnomon")
    })
}

/// The system C compiler, or None (the caller skips).
pub fn cc() -> Option<&'static str> {
    let ok = Command::new("cc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some("cc")
}

/// The `no_std` static library (`--no-default-features`, the firmware
/// build: its allocator refuses every request) for this machine's target,
/// so that a C program here can run it. Built once per test binary, in
/// target/<host triple>/release, apart from the std build's
/// target/c-lib; about 35 s of CPU from cold on this 2-core AMD EPYC.
pub fn no_std_dir() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = run(Command::new("rustc").arg("-vV"));
        let host = String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
            .expect("rustc -vV names the host");
        cargo(&[
            "build",
            "--release",
            "-p",
            "gnomon-ffi",
            "--lib",
            "--no-default-features",
            "--target",
            &host,
        ]);
        target_dir().join(host).join("release")
    })
}

/// How a program is linked.
#[derive(Clone, Copy, PartialEq)]
pub enum Link {
    Static,
    /// The static library, the program under ASan and UBSan.
    Sanitized,
    Shared,
    /// The no_std static library, unused sections dropped: the sysroot's
    /// `alloc` was built for unwinding and refers to Rust's unwinding
    /// personality, which a no_std build lacks, so only a program that
    /// reaches no allocation links at all (and one that allocated at run
    /// time would reach the panic handler, which spins).
    NoStd,
}

/// The C the test programs are written in: C11 with POSIX sockets.
pub const TESTS_C: &[&str] = &["-std=c11", "-D_DEFAULT_SOURCE"];

/// The C examples/c/query.c promises (its opening comment): strict C99,
/// nothing beyond the standard library, the header included.
pub const EXAMPLE_C: &[&str] = &["-std=c99", "-pedantic"];

/// Compile the test program `source` against the header and the `c-lib`
/// library.
pub fn compile(cc: &str, source: &Path, name: &str, link: Link) -> Result<PathBuf, String> {
    compile_with(cc, source, name, link, c_lib_dir(), TESTS_C)
}

/// Compile `source`, in the C `dialect` says, against the header and the
/// libraries in `lib_dir`; every warning is an error.
pub fn compile_with(
    cc: &str,
    source: &Path,
    name: &str,
    link: Link,
    lib_dir: &Path,
    dialect: &[&str],
) -> Result<PathBuf, String> {
    let out_dir = target_dir().join("c-tests");
    std::fs::create_dir_all(&out_dir).unwrap();
    let exe = out_dir.join(name);
    let mut cmd = Command::new(cc);
    cmd.args(dialect)
        .args(["-Wall", "-Wextra", "-Werror", "-g"])
        .arg("-I")
        .arg(repo().join("bindings/c/include"))
        .arg(source)
        .arg("-o")
        .arg(&exe);
    match link {
        Link::Static | Link::Sanitized => {
            if link == Link::Sanitized {
                cmd.args(["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]);
            }
            cmd.arg(lib_dir.join("libgnomon.a"));
        }
        Link::NoStd => {
            cmd.arg(lib_dir.join("libgnomon.a"))
                .arg("-Wl,--gc-sections");
        }
        Link::Shared => {
            cmd.arg("-L").arg(lib_dir).arg("-lgnomon");
            // DT_RPATH, not RUNPATH: cargo test puts target/debug on
            // LD_LIBRARY_PATH, which outranks a RUNPATH, and a libgnomon.so
            // left there by an older `cargo build` was loaded instead of
            // the one just built (a new error code read "unknown").
            cmd.arg(format!("-Wl,-rpath,{}", lib_dir.display()))
                .arg("-Wl,--disable-new-dtags");
        }
    }
    // What a Rust staticlib needs from the C library on Linux.
    cmd.args(["-lpthread", "-ldl", "-lm"]);
    let out = run(&mut cmd);
    if out.status.success() {
        Ok(exe)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// A running `gnomon serve`; killed when dropped, on every path.
pub struct Serve {
    pub child: Reaped,
    pub addr: SocketAddr,
    pub key_base64: String,
}

impl Serve {
    pub fn start() -> Serve {
        Serve::start_with(|_| {})
    }

    /// A server whose command `setup` adjusts first (a shifted clock).
    pub fn start_with(setup: impl FnOnce(&mut Command)) -> Serve {
        let mut cmd = gnomon_testkit::command(gnomon_bin());
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--workers", "1"])
            .args(["--summary-interval", "0"])
            // This machine's kernel clock may be unsynchronized; the
            // server answers anyway with its radius floor.
            .args(["--clock-unsynchronized", "answer-with-radius"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        setup(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let mut serve = Serve {
            child: child.into(),
            addr: "0.0.0.0:0".parse().unwrap(),
            key_base64: line
                .trim()
                .strip_prefix("public key (base64): ")
                .unwrap_or_else(|| panic!("public key line, not {line:?}"))
                .to_owned(),
        };
        let mut stderr = BufReader::new(serve.child.stderr.take().unwrap());
        // Bounded: the server prints this line or exits (EOF).
        loop {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "server exited before listening"
            );
            if let Some((_, rest)) = line.split_once("listening on udp ") {
                serve.addr = rest.split_whitespace().next().unwrap().parse().unwrap();
                break;
            }
        }
        // Keep draining its log so it never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        serve
    }
}

/// A loopback UDP port nothing listens on: one the kernel just gave out
/// and took back.
pub fn closed_port() -> SocketAddr {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap()
}

pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

pub fn field(stdout: &str, name: &str) -> u64 {
    stdout
        .split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {name}= in {stdout:?}"))
        .parse()
        .unwrap()
}

/// Run `exe` with `args`, bounded: a no_std library that asked its
/// allocator would spin in its panic handler forever.
pub fn run_bounded(exe: &Path, args: &[PathBuf]) -> Output {
    let mut child: Reaped = Command::new(exe)
        .args(args)
        .env("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=0")
        .env("UBSAN_OPTIONS", "print_stacktrace=1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
        .into();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "{} still running after 60 s: spinning in the panic handler?",
            exe.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut out = Output {
        status: child.try_wait().unwrap().unwrap(),
        stdout: Vec::new(),
        stderr: Vec::new(),
    };
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut out.stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut out.stderr)
        .unwrap();
    out
}

/// Compile tests/c/`source` and run it bounded with `args`: it must exit 0
/// having printed "ok …", and UBSan must have said nothing. A C compiler
/// that cannot build with the sanitizers skips the test, saying so.
pub fn run_c_check(
    cc: &str,
    name: &str,
    source: &str,
    link: Link,
    lib_dir: &Path,
    args: &[PathBuf],
) {
    let source = repo().join("bindings/c/tests/c").join(source);
    let exe = match compile_with(cc, &source, name, link, lib_dir, TESTS_C) {
        Ok(exe) => exe,
        Err(e) if link == Link::Sanitized && e.contains("sanitize") => {
            return gnomon_testkit::skip(name, &format!("cc cannot build with ASan/UBSan: {e}"));
        }
        Err(e) => panic!("{name}: {e}"),
    };
    let out = run_bounded(&exe, args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name}: {stdout}{stderr}");
    assert!(stdout.starts_with("ok "), "{stdout}");
    assert!(!stderr.contains("runtime error"), "{stderr}");
}
