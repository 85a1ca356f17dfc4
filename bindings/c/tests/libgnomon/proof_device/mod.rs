//! Issue 26's "Done means" for the C verifier: tests/c/proof.c is the
//! device of a relayed proof (docs/PROOF.md), linked with the no_std
//! libgnomon and calling no libc time function, fed bundles `gnomon relay`
//! made against real `gnomon serve` processes on loopback.
//!
//! Here the relay, the device program and its verdict, shared; the tests
//! by what they try: `tampered` (the true now from a good bundle, and each
//! tampered one refused with its own code) and `voters` (liars, too few
//! answering, and two keys of one server).

use crate::c_support;

use c_support::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

mod tampered;
mod voters;

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
        let out = run(gnomon_testkit::command(gnomon_bin())
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
    answering: i64,
    needed: i64,
    max_liars: i64,
    pinned: i64,
    entry: i64,
    stack: i64,
    line: String,
}

/// tests/c/proof.c linked with the no_std library, and checked to call
/// no libc time function: the device has no clock but its elapsed count.
/// The device program for a test whose liars run under libfaketime, or
/// `None` after saying (in the skip list) what is missing.
fn liar_device(name: &str) -> Option<PathBuf> {
    if !Path::new(LIBFAKETIME).exists() {
        gnomon_testkit::skip(
            name,
            &format!("{LIBFAKETIME} missing (package libfaketime)"),
        );
        return None;
    }
    let exe = device_program();
    if exe.is_none() {
        gnomon_testkit::skip(name, "no C compiler (cc) on this machine");
    }
    exe
}

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
    device_verifies_with(exe, dir, name, bundle, device, keys, elapsed_us, &[])
}

/// [`device_verifies`] with proof.c's optional arguments: each key's
/// server id ("0,7,7", through `gnomon_verify_proof_any_key`) and the
/// policy's max_liars.
#[allow(clippy::too_many_arguments)]
fn device_verifies_with(
    exe: &Path,
    dir: &Path,
    name: &str,
    bundle: &[u8],
    device: &[u8],
    keys: &[u8],
    elapsed_us: u64,
    extra: &[&str],
) -> Verdict {
    let files = [("bundle", bundle), ("device", device), ("keys", keys)].map(|(f, bytes)| {
        let p = dir.join(format!("{name}.{f}"));
        std::fs::write(&p, bytes).unwrap();
        p
    });
    let mut args = files.to_vec();
    args.push(PathBuf::from(elapsed_us.to_string()));
    args.extend(extra.iter().map(PathBuf::from));
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
        answering: get("answering"),
        needed: get("needed"),
        max_liars: get("max_liars"),
        pinned: get("pinned"),
        entry: get("entry"),
        stack: get("stack"),
        line: stdout.trim().to_owned(),
    }
}

fn real_now_us() -> i64 {
    now_us() as i64
}
