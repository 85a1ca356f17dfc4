//! The long-term key inside a real PKCS#11 token (SoftHSM2, Debian's
//! `softhsm2`): `gnomon keygen` makes it there, `gnomon delegate` signs
//! with it there, a server answers from those delegations and a client
//! checks the answers against the token's public key; every refusal says
//! what is wrong; and the private key does not come out.
//!
//! Every test skips, saying so, where SoftHSM2 is not installed
//! (scripts/test-all installs it with the hostile-conditions packages).
//! All tests share one SoftHSM2 configuration whose token directory is a
//! temporary one, each with a token of its own label.

use crate::serve_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use base64::Engine as _;

mod config;
mod refusals;
mod token_objects;
mod watch_key;

use serve_support::Started;

const PIN: &str = "4711-pin";
const SO_PIN: &str = "so-secret";

/// Where Debian and others put the module.
const MODULES: &[&str] = &[
    "/usr/lib/softhsm/libsofthsm2.so",
    "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/local/lib/softhsm/libsofthsm2.so",
];

/// The shared SoftHSM2 setup: the module, and a directory holding the
/// config, the token directory and the PIN file.
struct Hsm {
    module: PathBuf,
    dir: PathBuf,
}

/// SoftHSM2, set up once for the whole binary, or why not.
fn hsm() -> Result<&'static Hsm, &'static str> {
    static HSM: OnceLock<Result<Hsm, &'static str>> = OnceLock::new();
    HSM.get_or_init(|| {
        let module = MODULES
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .ok_or("SoftHSM2 is not installed (apt-get install softhsm2): no libsofthsm2.so")?;
        if Command::new("softhsm2-util")
            .arg("--version")
            .output()
            .is_err()
        {
            return Err("SoftHSM2 is not installed (apt-get install softhsm2): no softhsm2-util");
        }
        remove_leftovers();
        let dir = std::env::temp_dir().join(format!("gnomon-pkcs11-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("tokens")).unwrap();
        let conf = dir.join("softhsm2.conf");
        std::fs::write(
            &conf,
            format!(
                "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n",
                dir.join("tokens").display()
            ),
        )
        .unwrap();
        write_pin(&dir.join("pin"), &format!("{PIN}\n"));
        write_pin(&dir.join("wrong-pin"), "0000\n");
        // Set before any test spawns or loads anything (every test comes
        // through here first), so nothing reads the environment meanwhile;
        // the in-process checks load the module too and read it then.
        std::env::set_var("SOFTHSM2_CONF", &conf);
        std::env::remove_var("GNOMON_PKCS11_PIN");
        Ok(Hsm { module, dir })
    })
    .as_ref()
    .map_err(|e| *e)
}

/// A PIN file as gnomon accepts one: created mode 0600 (a plain
/// `std::fs::write` leaves it 0644 under the usual umask, which is refused).
fn write_pin(path: &Path, text: &str) {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .unwrap();
}

/// No test knows it is the last to use the shared directory, so it is
/// left behind; the next run removes those of runs that have ended.
fn remove_leftovers() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name();
        let pid = name.to_str().and_then(|n| n.strip_prefix("gnomon-pkcs11-"));
        if pid.is_some_and(|p| !Path::new("/proc").join(p).exists()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The tests take turns: SoftHSM2 reads every token in its directory on
/// each C_Initialize and C_GetTokenInfo, and one made or rewritten by
/// another test meanwhile fails those (CKR_GENERAL_ERROR). A module may
/// also be initialised once per process at a time, for the tests that
/// load it themselves.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The shared setup with a fresh token labelled `label`, and this test's
/// turn with it; or None after saying why the test is skipped.
fn token(test: &str, label: &str) -> Option<(&'static Hsm, std::sync::MutexGuard<'static, ()>)> {
    let hsm = match hsm() {
        Ok(h) => h,
        Err(why) => {
            gnomon_testkit::skip(test, why);
            return None;
        }
    };
    let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new("softhsm2-util")
        .args(["--init-token", "--free", "--label", label])
        .args(["--pin", PIN, "--so-pin", SO_PIN])
        .output()
        .unwrap();
    assert!(out.status.success(), "softhsm2-util: {out:?}");
    Some((hsm, turn))
}

impl Hsm {
    fn module(&self) -> &str {
        self.module.to_str().unwrap()
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_owned()
    }

    /// `gnomon ARGS --pkcs11-module M --pkcs11-token T --pkcs11-key K`.
    fn gnomon(&self, args: &[&str], token: &str, key: &str) -> Output {
        gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
            .args(args)
            .args(["--pkcs11-module", self.module()])
            .args(["--pkcs11-token", token, "--pkcs11-key", key])
            .output()
            .unwrap()
    }

    /// `gnomon keygen` in the token, with the PIN file: the public key.
    fn keygen(&self, token: &str, key: &str) -> [u8; 32] {
        let pin = self.path("pin");
        let out = self.gnomon(&["keygen", "--pkcs11-pin-file", &pin], token, key);
        assert!(out.status.success(), "keygen: {}", stderr(&out));
        decode(&out.stdout)
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn decode(stdout: &[u8]) -> [u8; 32] {
    base64::engine::general_purpose::STANDARD
        .decode(String::from_utf8_lossy(stdout).trim())
        .unwrap()
        .try_into()
        .unwrap()
}

/// The exit status and the stderr, which must contain `needle`.
fn refused(out: &Output, code: i32, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
}

#[test]
fn delegations_signed_in_the_token_are_served_and_verify() {
    const TEST: &str = "pkcs11_token::delegations_signed_in_the_token_are_served_and_verify";
    let Some((hsm, _turn)) = token(TEST, "serve") else {
        return;
    };
    let public = hsm.keygen("serve", "root");

    // The public key again, from the token, without a PIN.
    let out = hsm.gnomon(&["keygen", "--public-only"], "serve", "root");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(decode(&out.stdout), public);

    // A second keygen under the same label keeps the first key.
    let pin = hsm.path("pin");
    let out = hsm.gnomon(&["keygen", "--pkcs11-pin-file", &pin], "serve", "root");
    refused(&out, 73, "already holds a key labelled \"root\"");
    let out = hsm.gnomon(&["keygen", "--public-only"], "serve", "root");
    assert_eq!(decode(&out.stdout), public);

    // Two hosts, with the PIN from the environment this time.
    let dir = hsm.path("serve-out");
    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args([
            "delegate",
            "--out-dir",
            &dir,
            "--hosts",
            "a,b",
            "--count",
            "2",
        ])
        .args(["--pkcs11-module", hsm.module(), "--pkcs11-token", "serve"])
        .args(["--pkcs11-key", "root"])
        .env("GNOMON_PKCS11_PIN", PIN)
        .output()
        .unwrap();
    assert!(out.status.success(), "delegate: {}", stderr(&out));
    assert!(stderr(&out).contains("the key never left its token"));
    let manifest = std::fs::read_to_string(Path::new(&dir).join("MANIFEST")).unwrap();
    assert!(manifest.contains(&base64::engine::general_purpose::STANDARD.encode(public)));
    for host in ["a", "b"] {
        let files = std::fs::read_dir(Path::new(&dir).join(host))
            .unwrap()
            .count();
        assert_eq!(files, 2, "host {host}");
    }

    // Renewal as the timer in deploy/ runs it: --start continue --cover.
    let out = hsm.gnomon(
        &[
            "delegate",
            "--out-dir",
            &dir,
            "--hosts",
            "a,b",
            "--start",
            "continue",
            "--cover",
            "5d",
            "--pkcs11-pin-file",
            &pin,
        ],
        "serve",
        "root",
    );
    assert!(out.status.success(), "renewal: {}", stderr(&out));
    let files = std::fs::read_dir(Path::new(&dir).join("a"))
        .unwrap()
        .count();
    assert!(files > 2, "renewal added windows: {files}");

    // Host a's server, which never sees the token, answers; the client
    // checks its answer against the token's public key.
    let host_a = format!("{dir}/a");
    let mut child = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(["serve", "--listen", "127.0.0.1:0", "--workers", "1"])
        .args(["--summary-interval", "0", "--offline-dir", &host_a])
        .args(["--clock-unsynchronized", "answer-with-radius"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr_pipe = std::io::BufReader::new(child.stderr.take().unwrap());
    let server = Started::read(child, stderr_pipe);
    assert_eq!(server.public, public);
    let key = base64::engine::general_purpose::STANDARD.encode(public);
    let query = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args([
            "query",
            &server.addr.to_string(),
            "--key",
            &key,
            "--udp-only",
        ])
        .output()
        .unwrap();
    let mut child = server.child;
    let _ = child.kill();
    let _ = child.wait();
    assert!(query.status.success(), "query: {}", stderr(&query));
}
