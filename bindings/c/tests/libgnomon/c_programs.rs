//! C programs against libgnomon: examples/c/query.c and tests/c/api.c,
//! compiled by the system's `cc` against include/gnomon.h and the
//! libraries scripts/build-libgnomon makes (the build docs/C.md
//! documents), and tests/c/panic.c against the debug
//! build's static library (its test hook); each run against a real
//! `gnomon serve` on loopback. tests/c/consensus.c and tests/c/ml_dsa.c
//! need no server, and run against the `c-lib` library and the no_std one.
//! tests/c/proof.c, the device of a relayed proof: tests/libgnomon/proof_device/.

use crate::c_support;

use c_support::*;
use gnomon_testkit::Reaped;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
/// hook (src/args.rs).
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
/// sync` (measuring a real `gnomon serve`, quorum 1, no liar assumed of
/// its list of one): first "no socket"
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
        // One server cannot outvote the one liar assumed by default
        // (three must answer): trusted here, as the test's only source.
        .args(["--max-liars", "0"])
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
