//! C programs against libgnomon: examples/c/query.c and tests/c/api.c,
//! compiled by the system's `cc` against include/gnomon.h and the
//! libraries scripts/build-libgnomon makes (the build docs/C.md
//! documents), and tests/c/panic.c against the debug
//! build's static library (its test hook); each run against a real
//! `gnomon serve` on loopback. tests/c/consensus.c and tests/c/ml_dsa.c
//! need no server, and run against the `c-lib` library and the no_std one.
//! tests/c/proof.c is the device of a relayed proof (docs/PROOF.md), on
//! the no_std library, fed bundles `gnomon relay` made against real
//! servers.

use gnomon_testkit::Reaped;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"))
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

/// `cargo ARGS` in the workspace; it must succeed.
fn cargo(args: &[&str]) {
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
fn c_lib_dir() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let mut cmd = Command::new(repo().join("scripts/build-libgnomon"));
        cmd.env("CARGO_TARGET_DIR", target_dir());
        if let Some(cargo) = std::env::var_os("CARGO") {
            // The cargo running these tests, first on the script's PATH.
            let dir = Path::new(&cargo).parent().unwrap().to_path_buf();
            let path = std::env::var_os("PATH").unwrap_or_default();
            let paths = std::iter::once(dir).chain(std::env::split_paths(&path));
            cmd.env("PATH", std::env::join_paths(paths).unwrap());
        }
        let out = run(&mut cmd);
        assert!(
            out.status.success(),
            "scripts/build-libgnomon: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        target_dir().join("libgnomon/lib")
    })
}

/// target/debug/gnomon, built once per test binary.
fn gnomon_bin() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        cargo(&["build", "-p", "gnomon"]);
        target_dir().join("debug/gnomon")
    })
}

/// The system C compiler, or None (the caller skips).
fn cc() -> Option<&'static str> {
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
fn no_std_dir() -> &'static Path {
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
enum Link {
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
const TESTS_C: &[&str] = &["-std=c11", "-D_DEFAULT_SOURCE"];

/// The C examples/c/query.c promises (its opening comment): strict C99,
/// nothing beyond the standard library, the header included.
const EXAMPLE_C: &[&str] = &["-std=c99", "-pedantic"];

/// Compile the test program `source` against the header and the `c-lib`
/// library.
fn compile(cc: &str, source: &Path, name: &str, link: Link) -> Result<PathBuf, String> {
    compile_with(cc, source, name, link, c_lib_dir(), TESTS_C)
}

/// Compile `source`, in the C `dialect` says, against the header and the
/// libraries in `lib_dir`; every warning is an error.
fn compile_with(
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
struct Serve {
    child: Reaped,
    addr: SocketAddr,
    key_base64: String,
}

impl Serve {
    fn start() -> Serve {
        Serve::start_with(|_| {})
    }

    /// A server whose command `setup` adjusts first (a shifted clock).
    fn start_with(setup: impl FnOnce(&mut Command)) -> Serve {
        let mut cmd = Command::new(gnomon_bin());
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
fn closed_port() -> SocketAddr {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap()
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

fn field(stdout: &str, name: &str) -> u64 {
    stdout
        .split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {name}= in {stdout:?}"))
        .parse()
        .unwrap()
}

#[test]
fn query_example_prints_the_servers_time_and_refuses_a_wrong_key() {
    let Some(cc) = cc() else {
        return gnomon_testkit::skip("query_example", "no C compiler (cc) on this machine");
    };
    // Built as its opening comment says it builds: a warning under strict
    // C99 (in it or in the header) fails here.
    let exe = compile_with(
        cc,
        &repo().join("examples/c/query.c"),
        "query",
        Link::Static,
        c_lib_dir(),
        EXAMPLE_C,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let serve = Serve::start();

    let before = now_us();
    let out = run(Command::new(&exe)
        .arg(serve.addr.to_string())
        .arg(&serve.key_base64));
    let after = now_us();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (mid, radius) = (field(&stdout, "midpoint_us"), field(&stdout, "radius_us"));
    // The server read its clock between our two readings; it vouches for
    // mid ± radius, so that interval must meet [before, after].
    assert!(
        mid + radius >= before && mid.saturating_sub(radius) <= after,
        "{stdout}: midpoint {mid} ± {radius} µs, now was {before}..{after}"
    );
    assert!(stdout.contains(" UTC ± "), "{stdout}");

    // The request names the key it expects (SRV): a server holding
    // another key stays silent, so a wrong key is "no answer" (status 3),
    // and the example says a wrong key is one reason.
    let wrong = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let out = run(Command::new(&exe).arg(serve.addr.to_string()).arg(wrong));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("no answer (error 20)") && stderr.contains("is the public key right?"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());

    // A port nothing listens on: the host answers with ICMP "port
    // unreachable", and the example says so, not that the key is wrong.
    let closed = closed_port();
    let out = run(Command::new(&exe).arg(closed.to_string()).arg(wrong));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains(&format!("no server at {closed} (error 24)"))
            && stderr.contains("check the port")
            && !stderr.contains("key"),
        "{stderr}"
    );

    let out = run(Command::new(&exe)
        .arg(serve.addr.to_string())
        .arg("tooshort"));
    assert_eq!(out.status.code(), Some(2));
}

fn api_test(name: &str, link: Link) {
    let Some(cc) = cc() else {
        return gnomon_testkit::skip(name, "no C compiler (cc) on this machine");
    };
    let source = repo().join("bindings/c/tests/c/api.c");
    let exe = match compile(cc, &source, name, link) {
        Ok(exe) => exe,
        Err(e) if link == Link::Sanitized && e.contains("sanitize") => {
            return gnomon_testkit::skip(name, &format!("cc cannot build with ASan/UBSan: {e}"));
        }
        Err(e) => panic!("{name}: {e}"),
    };
    let serve = Serve::start();
    let out = run(Command::new(&exe)
        .arg(serve.addr.to_string())
        .arg(&serve.key_base64)
        // Leak checking needs ptrace, which containers often refuse; the
        // library never hands out memory to free, so leaks are not the
        // question here.
        .env("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=0")
        .env("UBSAN_OPTIONS", "print_stacktrace=1"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name}: {stdout}{stderr}");
    assert!(stdout.starts_with("ok "), "{stdout}");
    // UBSan reports without failing unless told; make sure it said nothing.
    assert!(!stderr.contains("runtime error"), "{stderr}");
}

#[test]
fn c_api_with_the_static_library_under_asan_and_ubsan() {
    api_test("api_sanitized", Link::Sanitized);
}

#[test]
fn c_api_with_the_static_library() {
    api_test("api_static", Link::Static);
}

#[test]
fn c_api_with_the_shared_library() {
    api_test("api_shared", Link::Shared);
}

/// The debug build's libgnomon.a: the one built with this test binary,
/// beside it in target/debug/deps (Cargo builds the library's every crate
/// type for the tests, and leaves the static one there), so no build of
/// its own. Debug builds unwind on panic and have the GNOMON_TEST_PANIC
/// hook (src/ffi.rs).
fn debug_library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for dir in [deps, deps.parent().unwrap()] {
        if dir.join("libgnomon.a").is_file() {
            return dir.to_path_buf();
        }
    }
    panic!("no libgnomon.a in or above {}", deps.display());
}

/// docs/C.md, "Panics": in a build that unwinds, a panic inside any entry
/// point comes back to the C caller as GNOMON_ERR_INTERNAL with no time in
/// its result, and the caller keeps running. Seen to fail (the program
/// killed by SIGABRT, "panic in a function that cannot unwind") with the
/// catch_unwind in ffi.rs::guard removed.
#[test]
fn a_panic_comes_back_to_c_as_the_internal_error() {
    let name = "a_panic_comes_back_to_c_as_the_internal_error";
    let Some(cc) = cc() else {
        return gnomon_testkit::skip(name, "no C compiler (cc) on this machine");
    };
    let source = repo().join("bindings/c/tests/c/panic.c");
    let exe = compile_with(
        cc,
        &source,
        "panic",
        Link::Static,
        &debug_library_dir(),
        TESTS_C,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let serve = Serve::start();
    let out = run(Command::new(&exe)
        .arg(serve.addr.to_string())
        .arg(&serve.key_base64)
        .env_remove("GNOMON_TEST_PANIC"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stdout}{stderr}", out.status);
    assert!(stdout.starts_with("ok "), "{stdout}");
    // The hook really panicked (Rust's panic message), once per call.
    assert!(
        stderr.matches("GNOMON_TEST_PANIC is set").count() >= 8,
        "{stderr}"
    );
}

/// docs/C.md, "Building": the libraries C programs link carry no debug
/// information (the workspace's release profile has it, for the gate and
/// perf, and made them 70 MB and 20 MB). readelf lists `.debug_info`
/// sections in target/release's libraries, and in target/c-lib's
/// libgnomon.a (the standard library's objects) until the script strips
/// them: against either, this fails.
#[test]
fn the_c_lib_build_carries_no_debug_information() {
    let name = "the_c_lib_build_carries_no_debug_information";
    let readelf = Command::new("readelf").arg("--version").output();
    if !readelf.is_ok_and(|o| o.status.success()) {
        return gnomon_testkit::skip(name, "no readelf (binutils) on this machine");
    }
    for lib in ["libgnomon.a", "libgnomon.so"] {
        let path = c_lib_dir().join(lib);
        let out = run(Command::new("readelf").args(["-S", "-W"]).arg(&path));
        let sections = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // A section table was read: the check below cannot pass on no output.
        assert!(sections.contains(".text"), "{sections}");
        assert!(
            !sections.contains(".debug_info"),
            "{} has debug information",
            path.display()
        );
    }
}

/// Run `exe` with `args`, bounded: a no_std library that asked its
/// allocator would spin in its panic handler forever.
fn run_bounded(exe: &Path, args: &[PathBuf]) -> Output {
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

fn consensus_test(name: &str, link: Link, lib_dir: &Path) {
    let Some(cc) = cc() else {
        return gnomon_testkit::skip(name, "no C compiler (cc) on this machine");
    };
    let source = repo().join("bindings/c/tests/c/consensus.c");
    let exe = match compile_with(cc, &source, name, link, lib_dir, TESTS_C) {
        Ok(exe) => exe,
        Err(e) if link == Link::Sanitized && e.contains("sanitize") => {
            return gnomon_testkit::skip(name, &format!("cc cannot build with ASan/UBSan: {e}"));
        }
        Err(e) => panic!("{name}: {e}"),
    };
    let out = run_bounded(&exe, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name}: {stdout}{stderr}");
    assert!(stdout.starts_with("ok "), "{stdout}");
    assert!(!stderr.contains("runtime error"), "{stderr}");
}

/// docs/C.md, "Whom to believe": issue 21's cases, one key given three
/// times, a key contradicting itself, no majority, the quorum and the
/// argument checks, from C, under ASan and UBSan.
#[test]
fn consensus_from_c_under_asan_and_ubsan() {
    consensus_test("consensus_sanitized", Link::Sanitized, c_lib_dir());
}

/// The same program against the no_std build, whose allocator refuses
/// everything: it links (nothing it calls reaches an allocation) and runs
/// to the end (nothing allocated at run time). Seen to fail, at the link,
/// with a `Vec` made inside gnomon_consensus.
#[test]
fn consensus_from_c_in_the_no_std_build_with_no_heap() {
    consensus_test("consensus_no_std", Link::NoStd, no_std_dir());
}

/// The exchange captured from tannerryan/roughtime's ML-DSA-44 server.
fn ml_dsa_vectors() -> [PathBuf; 3] {
    let dir = repo().join("tests/external-vectors/tannerryan-ml-dsa-44");
    ["request.bin", "response.bin", "root-public-key.hex"].map(|f| dir.join(f))
}

fn ml_dsa_test(name: &str, link: Link, lib_dir: &Path) {
    let Some(cc) = cc() else {
        return gnomon_testkit::skip(name, "no C compiler (cc) on this machine");
    };
    let source = repo().join("bindings/c/tests/c/ml_dsa.c");
    let exe = match compile_with(cc, &source, name, link, lib_dir, TESTS_C) {
        Ok(exe) => exe,
        Err(e) if link == Link::Sanitized && e.contains("sanitize") => {
            return gnomon_testkit::skip(name, &format!("cc cannot build with ASan/UBSan: {e}"));
        }
        Err(e) => panic!("{name}: {e}"),
    };
    let out = run_bounded(&exe, &ml_dsa_vectors());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name}: {stdout}{stderr}");
    assert!(stdout.starts_with("ok "), "{stdout}");
    assert!(!stderr.contains("runtime error"), "{stderr}");
}

/// docs/C.md, "Post-quantum keys": a C program verifies the captured
/// ML-DSA-44 exchange with its 1312-byte key (parsed from hex), and gets
/// the codes for a changed byte, a cut response and a key of the wrong
/// length, under ASan and UBSan.
#[test]
fn ml_dsa_answer_verified_from_c_under_asan_and_ubsan() {
    ml_dsa_test("ml_dsa_sanitized", Link::Sanitized, c_lib_dir());
}

/// The same program against the no_std build, whose allocator refuses
/// everything: ML-DSA-44 verification links and runs there without a
/// heap (libcrux-ml-dsa keeps its work on the stack).
#[test]
fn ml_dsa_answer_verified_from_c_in_the_no_std_build_with_no_heap() {
    ml_dsa_test("ml_dsa_no_std", Link::NoStd, no_std_dir());
}

/// docs/NOW.md: tests/c/now.c calls `gnomon_now` against a real `gnomon
/// sync` (measuring a real `gnomon serve`, quorum 1): first "no socket"
/// (GNOMON_ERR_REFUSED) before sync runs, then, polled with a deadline,
/// an interval that contains the true time, the wall clock inside it.
#[test]
fn gnomon_now_reads_a_running_syncs_interval() {
    let name = "gnomon_now_reads_a_running_syncs_interval";
    let Some(cc) = cc() else {
        return gnomon_testkit::skip(name, "no C compiler (cc) on this machine");
    };
    let source = repo().join("bindings/c/tests/c/now.c");
    let exe = compile_with(
        cc,
        &source,
        "now",
        Link::Static,
        &debug_library_dir(),
        TESTS_C,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let serve = Serve::start();
    // A short directory: a socket path holds at most 107 bytes.
    let dir = PathBuf::from(format!("/tmp/gn-c-now-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let list = dir.join("list.json");
    std::fs::write(
        &list,
        format!(
            r#"{{"servers":[{{"name":"one","version":1,"publicKeyType":"ed25519","publicKey":"{}","addresses":[{{"protocol":"udp","address":"{}"}}]}}]}}"#,
            serve.key_base64, serve.addr
        ),
    )
    .unwrap();
    let sock = dir.join("now.sock");
    let out = run(Command::new(&exe).arg(&sock));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.starts_with("error code=24 "), "{stdout}");

    let _sync: Reaped = Command::new(gnomon_bin())
        .args(["sync", "--servers"])
        .arg(&list)
        .arg("--state-dir")
        .arg(dir.join("state"))
        .args(["--quorum", "1", "--min-servers", "1", "--interval", "1h"])
        .arg("--now-socket")
        .arg(&sock)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
        .into();
    let until = Instant::now() + Duration::from_secs(60);
    let (stdout, before, after) = loop {
        let before = now_us();
        let out = run(Command::new(&exe).arg(&sock));
        let after = now_us();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() && field(&stdout, "known") == 2 {
            break (stdout, before, after);
        }
        assert!(Instant::now() < until, "no interval in time: {stdout}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(stdout.starts_with("ok "), "{stdout}");
    // True time (this machine's clock is not stepped) was in
    // [before, after] when sync answered.
    assert!(field(&stdout, "earliest") <= after, "{stdout} {after}");
    assert!(before <= field(&stdout, "latest"), "{stdout} {before}");
    assert_eq!(field(&stdout, "round"), 1, "{stdout}");
    assert_eq!(field(&stdout, "servers"), 1, "{stdout}");
    assert_eq!(field(&stdout, "inside"), 1, "{stdout}");
    assert_eq!(field(&stdout, "drift"), 100, "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// libfaketime, for a server whose clock lies (package libfaketime).
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Servers for a relay, their list (the format `gnomon sync` reads) and
/// their keys as the device pins them: 32 raw bytes each, back to back.
struct Relay {
    _servers: Vec<Serve>,
    dir: PathBuf,
    list: PathBuf,
    keys: Vec<u8>,
}

impl Relay {
    /// One `gnomon serve` per entry of `clocks`, each with its wall clock
    /// shifted by the offset given (libfaketime's "+70"), or real.
    fn start(test: &str, clocks: &[Option<&str>]) -> Relay {
        use base64::Engine as _;
        let dir = target_dir()
            .join("c-tests")
            .join(format!("{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let servers: Vec<Serve> = clocks
            .iter()
            .map(|offset| {
                Serve::start_with(|cmd| {
                    // A 3 s radius (or the kernel's estimate, when
                    // larger): a liar 70 s off is then outside it.
                    cmd.args(["--clock-unsynchronized-radius", "3s"])
                        .args(["--clock-radius-floor", "3s"]);
                    if let Some(o) = offset {
                        cmd.env("LD_PRELOAD", LIBFAKETIME)
                            .env("FAKETIME", o)
                            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
                    }
                })
            })
            .collect();
        let mut keys = Vec::new();
        let entries: Vec<String> = servers
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut key = [0u8; 32];
                let n = base64::engine::general_purpose::STANDARD
                    .decode_slice(&s.key_base64, &mut key)
                    .unwrap();
                assert_eq!(n, 32);
                keys.extend_from_slice(&key);
                format!(
                    r#"{{"name":"s{i}","version":1,"publicKeyType":"ed25519","publicKey":"{}","addresses":[{{"protocol":"udp","address":"{}"}}]}}"#,
                    s.key_base64, s.addr
                )
            })
            .collect();
        let list = dir.join("servers.json");
        std::fs::write(&list, format!(r#"{{"servers":[{}]}}"#, entries.join(","))).unwrap();
        Relay {
            _servers: servers,
            dir,
            list,
            keys,
        }
    }

    /// `gnomon relay` for the device value `device`: the bundle in
    /// `format` and the relay's exit code.
    fn bundle(&self, device: &[u8], format: &str, extra: &[&str]) -> (Vec<u8>, Option<i32>) {
        let hex: String = device.iter().map(|b| format!("{b:02x}")).collect();
        let out_path = self.dir.join(format!("relayed.{format}"));
        let out = run(Command::new(gnomon_bin())
            .args(["relay", "--servers"])
            .arg(&self.list)
            .args(["--device-nonce", &hex, "--out"])
            .arg(&out_path)
            .args(["--format", format, "--timeout", "500ms"])
            // These servers' radius is the kernel's own error estimate on
            // an unsynchronized clock (±16 s here): the default 10 s
            // limit would refuse every honest bundle.
            .args(["--max-radius", "5m"])
            .args(extra));
        assert!(
            out_path.exists(),
            "relay wrote nothing: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        (std::fs::read(&out_path).unwrap(), out.status.code())
    }
}

/// A device value: 32 bytes, different per tag and per run.
fn device_value(tag: u8) -> Vec<u8> {
    let mut v = gnomon_testkit::noise(u64::from(std::process::id()) << 8 | u64::from(tag), 32);
    v[0] = tag;
    v
}

/// What tests/c/proof.c printed.
struct Verdict {
    code: i64,
    has_interval: bool,
    earliest: i64,
    latest: i64,
    agreeing: i64,
    entry: i64,
    stack: i64,
    line: String,
}

/// tests/c/proof.c linked with the no_std library, and checked to call
/// no libc time function: the device has no clock but its elapsed count.
fn device_program() -> Option<PathBuf> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cc = cc()?;
            let source = repo().join("bindings/c/tests/c/proof.c");
            let exe = compile_with(
                cc,
                &source,
                "proof_no_std",
                Link::NoStd,
                no_std_dir(),
                TESTS_C,
            )
            .unwrap_or_else(|e| panic!("proof.c: {e}"));
            let nm = run(Command::new("nm").arg("--undefined-only").arg(&exe));
            assert!(nm.status.success(), "nm: {:?}", nm);
            let undefined = String::from_utf8_lossy(&nm.stdout);
            let time_calls: Vec<&str> = undefined
                .lines()
                .filter_map(|l| l.split_whitespace().last())
                .map(|sym| sym.split('@').next().unwrap())
                .filter(|sym| {
                    [
                        "time",
                        "clock",
                        "clock_gettime",
                        "gettimeofday",
                        "timespec_get",
                        "ftime",
                        "localtime",
                        "localtime_r",
                        "gmtime",
                        "gmtime_r",
                        "mktime",
                        "__clock_gettime64",
                    ]
                    .contains(sym)
                })
                .collect();
            // Seen to fail with a time(NULL) added to proof.c.
            assert!(
                time_calls.is_empty(),
                "the device program calls {time_calls:?}"
            );
            Some(exe)
        })
        .clone()
}

/// Run the device on `bundle` with its value and pinned keys.
fn device_verifies(
    exe: &Path,
    dir: &Path,
    name: &str,
    bundle: &[u8],
    device: &[u8],
    keys: &[u8],
    elapsed_us: u64,
) -> Verdict {
    let files = [("bundle", bundle), ("device", device), ("keys", keys)].map(|(f, bytes)| {
        let p = dir.join(format!("{name}.{f}"));
        std::fs::write(&p, bytes).unwrap();
        p
    });
    let mut args = files.to_vec();
    args.push(PathBuf::from(elapsed_us.to_string()));
    let out = run_bounded(exe, &args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let get = |f: &str| -> i64 {
        stdout
            .split_whitespace()
            .find_map(|w| w.strip_prefix(f)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("{name}: no {f}= in {stdout:?}"))
            .parse()
            .unwrap()
    };
    Verdict {
        code: get("code"),
        has_interval: get("has_interval") == 1,
        earliest: get("earliest"),
        latest: get("latest"),
        agreeing: get("agreeing"),
        entry: get("entry"),
        stack: get("stack"),
        line: stdout.trim().to_owned(),
    }
}

fn real_now_us() -> i64 {
    now_us() as i64
}

/// Offset of the first byte of the top-level SIG value in a framed
/// response: header (12) + message (tag count, offsets, tags, values).
fn signature_offset(resp: &[u8]) -> Option<usize> {
    let msg = resp.get(12..)?;
    let n = u32::from_le_bytes(msg.get(..4)?.try_into().ok()?) as usize;
    let tags = 4 + 4 * (n - 1);
    let values = tags + 4 * n;
    for i in 0..n {
        if msg.get(tags + 4 * i..tags + 4 * i + 4)? == b"SIG\0" {
            let start = if i == 0 {
                0
            } else {
                let at = 4 + 4 * (i - 1);
                u32::from_le_bytes(msg.get(at..at + 4)?.try_into().ok()?) as usize
            };
            return Some(12 + values + start);
        }
    }
    None
}

/// Issue 26's "Done means": a device simulated by tests/c/proof.c (the
/// no_std libgnomon linked into a small C program that calls no libc time
/// function) gets an interval holding the true time from a bundle `gnomon
/// relay` made against three real `gnomon serve` processes, and refuses
/// each tampered bundle with its own code.
#[test]
fn a_c_device_proves_the_true_now_from_a_relayed_bundle_and_refuses_each_tampered_one() {
    use gnomon::GnomonError as E;
    use gnomon_protocol::proof::{Proof, ProofView};
    use serde_json::Value;
    let name = "a_c_device_proves_the_true_now_from_a_relayed_bundle_and_refuses_each_tampered_one";
    let Some(exe) = device_program() else {
        return gnomon_testkit::skip(name, "no C compiler (cc) on this machine");
    };
    let relay = Relay::start("proof-device", &[None, None, None]);
    let dir = &relay.dir;
    let keys = &relay.keys;

    // The good bundle, in the binary form the relay writes for devices.
    let device = device_value(1);
    let made = Instant::now();
    let before = real_now_us();
    let (bundle, code) = relay.bundle(&device, "binary", &[]);
    assert_eq!(code, Some(0));
    // The device's elapsed count since it made its value, a second spare
    // for the program's own start.
    let elapsed = made.elapsed().as_micros() as u64 + 1_000_000;
    let v = device_verifies(&exe, dir, "good", &bundle, &device, keys, elapsed);
    let after = real_now_us();
    assert_eq!(v.code, E::GnomonOk as i64, "{}", v.line);
    assert!(v.has_interval && v.agreeing == 3, "{}", v.line);
    assert!(
        v.earliest <= after && before <= v.latest,
        "{} before {before} after {after}",
        v.line
    );
    // docs/C.md budgets 24 KB of stack for an Ed25519 bundle (19 KB
    // measured): a verifier that grew past it fails here.
    assert!(v.stack > 0 && v.stack < 24 * 1024, "{}", v.line);
    eprintln!("device: {} ({} B bundle)", v.line, bundle.len());

    // Tampered copies, made from the JSON form and turned into the
    // binary one as a relay would write it.
    let (json, code) = relay.bundle(&device, "json", &[]);
    assert_eq!(code, Some(0));
    let good: Value = serde_json::from_slice(&json).unwrap();
    let binary = |doc: &Value| {
        Proof::from_json(doc.to_string().as_bytes())
            .unwrap()
            .to_binary()
    };
    let whole = binary(&good);
    let refused = |case: &str, bundle: &[u8], device: &[u8], keys: &[u8], want: E| {
        let v = device_verifies(&exe, dir, case, bundle, device, keys, 10_000_000);
        assert_eq!(v.code, want as i64, "{case}: {}", v.line);
        assert!(!v.has_interval, "{case}: {}", v.line);
        v
    };
    // Another device's value (a bundle made for another, or replayed).
    refused(
        "wrong_nonce",
        &whole,
        &device_value(2),
        keys,
        E::GnomonErrProofWrongNonce,
    );
    // A bundle made for another value, relabelled with this device's.
    let (theirs, _) = relay.bundle(&device_value(3), "json", &[]);
    let mut theirs: Value = serde_json::from_slice(&theirs).unwrap();
    theirs["deviceNonce"] = good["deviceNonce"].clone();
    refused(
        "replayed",
        &binary(&theirs),
        &device,
        keys,
        E::GnomonErrProofBinding,
    );
    // One server's two answers swapped (entries 1 and 4: the second pass
    // asks in the first's order).
    let mut swapped = good.clone();
    let r = swapped["responses"].as_array_mut().unwrap();
    assert_eq!(r[1]["publicKey"], r[4]["publicKey"]);
    let (a, b) = (r[1]["response"].clone(), r[4]["response"].clone());
    r[1]["response"] = b;
    r[4]["response"] = a;
    let v = refused(
        "swapped",
        &binary(&swapped),
        &device,
        keys,
        E::GnomonErrProofNotForRequest,
    );
    assert_eq!(v.entry, 1, "{}", v.line);
    // A broken link: entries 1 and 2 in the other order.
    let mut reordered = good.clone();
    reordered["responses"].as_array_mut().unwrap().swap(1, 2);
    let v = refused(
        "link",
        &binary(&reordered),
        &device,
        keys,
        E::GnomonErrProofLink,
    );
    assert_eq!(v.entry, 1, "{}", v.line);
    // A forged signature: one bit of the first response's SIG.
    let view = ProofView::parse(&whole).unwrap();
    let resp = view.entries()[0].response;
    let at = whole
        .windows(resp.len())
        .position(|w| w == resp)
        .expect("the response in the bundle");
    let mut forged = whole.clone();
    forged[at + signature_offset(resp).expect("a SIG tag")] ^= 1;
    let v = refused("forged", &forged, &device, keys, E::GnomonErrProofSignature);
    assert_eq!(v.entry, 0, "{}", v.line);
    // An answer from a key the device does not pin.
    refused(
        "unpinned",
        &whole,
        &device,
        &keys[..64],
        E::GnomonErrProofUnknownKey,
    );
    // Trimmed to one server's answers and part of another's.
    let mut trimmed = good.clone();
    let keep: Vec<Value> = trimmed["responses"].as_array().unwrap()[..2].to_vec();
    trimmed["responses"] = Value::Array(keep);
    refused(
        "trimmed",
        &binary(&trimmed),
        &device,
        keys,
        E::GnomonErrProofTooFewKeys,
    );
    // Truncated, and not a bundle at all.
    refused(
        "truncated",
        &whole[..whole.len() - 7],
        &device,
        keys,
        E::GnomonErrProofTruncated,
    );
    let mut magic = whole.clone();
    magic[0] ^= 0xff;
    refused(
        "malformed",
        &magic,
        &device,
        keys,
        E::GnomonErrProofMalformed,
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A minority liar (a server whose clock runs 70 s ahead, under
/// libfaketime): the C device gets the malfeasance code, and the
/// majority's interval, which holds the true time.
#[test]
fn a_c_device_names_a_minority_liar_and_keeps_the_majoritys_interval() {
    use gnomon::GnomonError as E;
    let name = "a_c_device_names_a_minority_liar_and_keeps_the_majoritys_interval";
    if !Path::new(LIBFAKETIME).exists() {
        return gnomon_testkit::skip(
            name,
            &format!("{LIBFAKETIME} missing (package libfaketime)"),
        );
    }
    let Some(exe) = device_program() else {
        return gnomon_testkit::skip(name, "no C compiler (cc) on this machine");
    };
    let relay = Relay::start("proof-liar", &[None, None, Some("+70")]);
    let device = device_value(4);
    let made = Instant::now();
    let before = real_now_us();
    let (bundle, code) = relay.bundle(&device, "binary", &["--all"]);
    assert_eq!(code, Some(3), "the relay sees the lie too");
    let elapsed = made.elapsed().as_micros() as u64 + 1_000_000;
    let v = device_verifies(
        &exe,
        &relay.dir,
        "liar",
        &bundle,
        &device,
        &relay.keys,
        elapsed,
    );
    let after = real_now_us();
    assert!(
        v.code == E::GnomonErrProofLiar as i64 || v.code == E::GnomonErrProofContradiction as i64,
        "{}",
        v.line
    );
    assert!(v.has_interval, "{}", v.line);
    assert!(
        v.earliest <= after && before <= v.latest,
        "{} before {before} after {after}",
        v.line
    );
    let _ = std::fs::remove_dir_all(&relay.dir);
}
