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

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use base64::Engine as _;

mod serve_support;

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
        std::fs::write(dir.join("pin"), format!("{PIN}\n")).unwrap();
        std::fs::write(dir.join("wrong-pin"), "0000\n").unwrap();
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
        Command::new(env!("CARGO_BIN_EXE_gnomon"))
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
    let out = Command::new(env!("CARGO_BIN_EXE_gnomon"))
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
    let mut child = Command::new(env!("CARGO_BIN_EXE_gnomon"))
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
    let query = Command::new(env!("CARGO_BIN_EXE_gnomon"))
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

#[test]
fn every_refusal_says_what_is_wrong() {
    const TEST: &str = "pkcs11_token::every_refusal_says_what_is_wrong";
    let Some((hsm, _turn)) = token(TEST, "errors") else {
        return;
    };
    hsm.keygen("errors", "root");
    let public_only = |module: &str, token: &str, key: &str| {
        Command::new(env!("CARGO_BIN_EXE_gnomon"))
            .args(["keygen", "--public-only", "--pkcs11-module", module])
            .args(["--pkcs11-token", token, "--pkcs11-key", key])
            .output()
            .unwrap()
    };
    let missing = hsm.path("no-such-module.so");
    refused(
        &public_only(&missing, "errors", "root"),
        66,
        "no-such-module.so: no such file",
    );
    let text = hsm.path("pin");
    refused(
        &public_only(&text, "errors", "root"),
        65,
        "is not a PKCS#11 module",
    );
    // A real shared library that is not a PKCS#11 module.
    if let Some(libc) = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/aarch64-linux-gnu/libc.so.6",
    ]
    .iter()
    .find(|p| Path::new(p).exists())
    {
        refused(
            &public_only(libc, "errors", "root"),
            65,
            "C_GetFunctionList",
        );
    }
    refused(
        &public_only(hsm.module(), "no-such-token", "root"),
        66,
        "no token labelled \"no-such-token\"",
    );
    refused(
        &public_only(hsm.module(), "errors", "no-such-key"),
        66,
        "holds no key labelled \"no-such-key\"",
    );

    // Delegating: nothing may be left behind by any refusal.
    let out_dir = hsm.path("errors-out");
    let delegate = |key: &str, pin: &[&str]| {
        let mut args = vec!["delegate", "--out-dir", &out_dir, "--count", "2"];
        args.extend_from_slice(pin);
        hsm.gnomon(&args, "errors", key)
    };
    let wrong = hsm.path("wrong-pin");
    refused(
        &delegate("root", &["--pkcs11-pin-file", &wrong]),
        65,
        "wrong PIN for token \"errors\"",
    );
    refused(&delegate("root", &[]), 64, "GNOMON_PKCS11_PIN");
    let absent = hsm.path("absent-pin");
    refused(
        &delegate("root", &["--pkcs11-pin-file", &absent]),
        66,
        "absent-pin",
    );
    let pin = hsm.path("pin");
    refused(
        &delegate("no-such-key", &["--pkcs11-pin-file", &pin]),
        66,
        "holds no key labelled",
    );
    assert!(!Path::new(&out_dir).exists(), "a refusal wrote {out_dir}");

    // The PIN never on the command line: there is no option for it.
    let out = hsm.gnomon(
        &["delegate", "--out-dir", &out_dir, "--pkcs11-pin", PIN],
        "errors",
        "root",
    );
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    // A key file and a token at once is a usage error.
    let out = hsm.gnomon(
        &["delegate", "--out-dir", &out_dir, "--key-file", &pin],
        "errors",
        "root",
    );
    refused(&out, 64, "cannot be used with");
}

/// The module loaded here, logged in to the token labelled `label`.
fn open_in_process(
    hsm: &Hsm,
    label: &str,
) -> (cryptoki::context::Pkcs11, cryptoki::session::Session) {
    use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
    use cryptoki::session::UserType;
    use cryptoki::types::AuthPin;
    let pkcs11 = Pkcs11::new(&hsm.module).unwrap();
    pkcs11
        .initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK))
        .unwrap();
    let slot = pkcs11
        .get_slots_with_token()
        .unwrap()
        .into_iter()
        .find(|s| pkcs11.get_token_info(*s).unwrap().label().trim_end() == label)
        .unwrap();
    let session = pkcs11.open_rw_session(slot).unwrap();
    session
        .login(UserType::User, Some(&AuthPin::from(PIN.to_owned())))
        .unwrap();
    (pkcs11, session)
}

/// An Ed25519 pair made here, its halves labelled apart; `sign` is the
/// private key's CKA_SIGN.
fn ed25519_pair(session: &cryptoki::session::Session, public: &str, private: &str, sign: bool) {
    use cryptoki::mechanism::Mechanism;
    use cryptoki::object::Attribute;
    session
        .generate_key_pair(
            &Mechanism::EccEdwardsKeyPairGen,
            &[
                Attribute::Token(true),
                Attribute::Label(public.as_bytes().to_vec()),
                Attribute::EcParams(vec![0x06, 0x03, 0x2b, 0x65, 0x70]),
            ],
            &[
                Attribute::Token(true),
                Attribute::Sensitive(true),
                Attribute::Sign(sign),
                Attribute::Label(private.as_bytes().to_vec()),
            ],
        )
        .unwrap();
}

/// The `*.delegation` files and MANIFESTs under `dir`, at any depth.
fn written(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for e in entries.map(Result::unwrap) {
        let p = e.path();
        if p.is_dir() {
            found.extend(written(&p));
        } else {
            found.push(p);
        }
    }
    found
}

/// A token that will not sign, or whose private key under the label is
/// not the public key's other half, fails the run at its first signature,
/// before any file is written, for every host.
#[test]
fn a_token_that_fails_to_sign_leaves_no_files() {
    const TEST: &str = "pkcs11_token::a_token_that_fails_to_sign_leaves_no_files";
    let Some((hsm, _turn)) = token(TEST, "faulty") else {
        return;
    };
    {
        let (_pkcs11, session) = open_in_process(hsm, "faulty");
        ed25519_pair(&session, "nosign", "nosign", false);
        ed25519_pair(&session, "mixed", "spare-private", true);
        ed25519_pair(&session, "spare-public", "mixed", true);
    }
    let pin = hsm.path("pin");
    for (key, code, says) in [
        ("nosign", 70, "C_Sign"),
        (
            "mixed",
            70,
            "does not check against its public key; nothing written",
        ),
    ] {
        let out_dir = hsm.path(&format!("faulty-{key}"));
        let out = hsm.gnomon(
            &[
                "delegate",
                "--out-dir",
                &out_dir,
                "--hosts",
                "a,b",
                "--pkcs11-pin-file",
                &pin,
            ],
            "faulty",
            key,
        );
        refused(&out, code, says);
        assert_eq!(written(Path::new(&out_dir)), Vec::<PathBuf>::new(), "{key}");
    }
}

/// The key made by `gnomon keygen` is sensitive and not extractable:
/// C_GetAttributeValue on its CKA_VALUE is refused (CKR_ATTRIBUTE_SENSITIVE).
/// And a key of another type under the label is refused by name.
#[test]
fn the_private_key_does_not_come_out_and_other_keys_are_refused() {
    use cryptoki::mechanism::Mechanism;
    use cryptoki::object::{Attribute, AttributeInfo, AttributeType, ObjectClass};

    const TEST: &str = "pkcs11_token::the_private_key_does_not_come_out_and_other_keys_are_refused";
    let Some((hsm, _turn)) = token(TEST, "sealed") else {
        return;
    };
    hsm.keygen("sealed", "root");

    let (pkcs11, session) = open_in_process(hsm, "sealed");
    let private = session
        .find_objects(&[
            Attribute::Class(ObjectClass::PRIVATE_KEY),
            Attribute::Label(b"root".to_vec()),
        ])
        .unwrap();
    assert_eq!(private.len(), 1);
    let info = session
        .get_attribute_info(private[0], &[AttributeType::Value])
        .unwrap();
    assert!(
        matches!(info[..], [AttributeInfo::Sensitive]),
        "CKA_VALUE must be refused as sensitive, got {info:?}"
    );
    let flags = session
        .get_attributes(
            private[0],
            &[
                AttributeType::Sensitive,
                AttributeType::Extractable,
                AttributeType::AlwaysSensitive,
                AttributeType::NeverExtractable,
                AttributeType::Token,
                AttributeType::Value,
            ],
        )
        .unwrap();
    for a in &flags {
        match a {
            Attribute::Sensitive(v) | Attribute::AlwaysSensitive(v) => assert!(v, "{a:?}"),
            Attribute::NeverExtractable(v) | Attribute::Token(v) => assert!(v, "{a:?}"),
            Attribute::Extractable(v) => assert!(!v, "{a:?}"),
            Attribute::Value(_) => panic!("the token gave out CKA_VALUE"),
            _ => {}
        }
    }
    assert_eq!(flags.len(), 5, "{flags:?}");

    // An RSA key pair under another label: gnomon must refuse it by type.
    session
        .generate_key_pair(
            &Mechanism::RsaPkcsKeyPairGen,
            &[
                Attribute::Token(true),
                Attribute::ModulusBits(2048.into()),
                Attribute::Label(b"rsa".to_vec()),
            ],
            &[Attribute::Token(true), Attribute::Label(b"rsa".to_vec())],
        )
        .unwrap();
    drop(session);
    drop(pkcs11);
    let pin = hsm.path("pin");
    let out_dir = hsm.path("sealed-out");
    let out = hsm.gnomon(
        &["delegate", "--out-dir", &out_dir, "--pkcs11-pin-file", &pin],
        "sealed",
        "rsa",
    );
    refused(&out, 65, "not an Ed25519 key pair");
    assert!(stderr(&out).contains("CKK_RSA"), "{}", stderr(&out));
    let out = hsm.gnomon(&["keygen", "--public-only"], "sealed", "rsa");
    refused(&out, 65, "not an Ed25519 key pair");
    assert!(!Path::new(&out_dir).exists());
}

/// Each --pkcs11-* option has a key in --config's [pkcs11] table; flags
/// win over it; relative paths are from the file's directory.
#[test]
fn a_config_file_names_the_token_and_the_flags_win() {
    const TEST: &str = "pkcs11_token::a_config_file_names_the_token_and_the_flags_win";
    let Some((hsm, _turn)) = token(TEST, "config") else {
        return;
    };
    let conf = hsm.dir.join("signer.toml");
    std::fs::write(
        &conf,
        format!(
            "[pkcs11]\nmodule = {:?}\ntoken = \"config\"\nkey = \"root\"\npin-file = \"pin\"\n",
            hsm.module()
        ),
    )
    .unwrap();
    let conf = conf.to_str().unwrap();
    let gnomon = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_gnomon"))
            .args(args)
            .output()
            .unwrap()
    };
    let out = gnomon(&["keygen", "--config", conf]);
    assert!(out.status.success(), "keygen: {}", stderr(&out));
    let public = decode(&out.stdout);
    let out = gnomon(&["keygen", "--config", conf, "--public-only"]);
    assert_eq!(decode(&out.stdout), public);
    let out_dir = hsm.path("config-out");
    let out = gnomon(&[
        "delegate",
        "--config",
        conf,
        "--out-dir",
        &out_dir,
        "--count",
        "1",
    ]);
    assert!(out.status.success(), "delegate: {}", stderr(&out));
    assert_eq!(std::fs::read_dir(&out_dir).unwrap().count(), 1);

    // The flag wins: a wrong PIN file named on the command line is used.
    let wrong = hsm.path("wrong-pin");
    let out = gnomon(&[
        "delegate",
        "--config",
        conf,
        "--out-dir",
        &out_dir,
        "--pkcs11-pin-file",
        &wrong,
    ]);
    refused(&out, 65, "wrong PIN");
    let out = gnomon(&[
        "keygen",
        "--config",
        conf,
        "--pkcs11-key",
        "other",
        "--public-only",
    ]);
    refused(&out, 66, "holds no key labelled \"other\"");

    // A misspelt key is an error, not a silent fallback.
    let bad = hsm.dir.join("bad.toml");
    std::fs::write(&bad, "[pkcs11]\npin_file = \"pin\"\n").unwrap();
    let out = gnomon(&["keygen", "--config", bad.to_str().unwrap(), "--public-only"]);
    refused(&out, 64, "pin_file");
    // Labels without a module, and a module without labels.
    let out = gnomon(&["keygen", "--pkcs11-token", "config", "--public-only"]);
    refused(&out, 64, "need --pkcs11-module");
    let out = gnomon(&["keygen", "--pkcs11-module", hsm.module(), "--public-only"]);
    refused(&out, 64, "needs --pkcs11-token");
    // A key file and a token named by the file at once.
    let out = gnomon(&[
        "delegate",
        "--config",
        conf,
        "--key-file",
        &wrong,
        "--out-dir",
        &out_dir,
    ]);
    refused(&out, 64, "which one?");
}

/// A token whose user PIN is locked is named as such, not as a wrong PIN.
/// SoftHSM2 never locks a PIN itself, however often it is wrong, so the
/// token's flags are set in its file as a locking token would set them:
/// CKF_USER_PIN_LOCKED in the CKA_OS_TOKENFLAGS entry of token.object.
#[test]
fn a_locked_pin_is_named() {
    const TEST: &str = "pkcs11_token::a_locked_pin_is_named";
    let Some((hsm, _turn)) = token(TEST, "locked") else {
        return;
    };
    hsm.keygen("locked", "root");
    let mut label = b"locked".to_vec();
    label.resize(32, b' ');
    let object = std::fs::read_dir(hsm.dir.join("tokens"))
        .unwrap()
        .map(|e| e.unwrap().path().join("token.object"))
        .find(|p| {
            std::fs::read(p).is_ok_and(|b| b.windows(label.len()).any(|w| w == label.as_slice()))
        })
        .expect("the token's file");
    let mut bytes = std::fs::read(&object).unwrap();
    // Attribute CKA_OS_TOKENFLAGS (0x8000534b), stored as an unsigned long
    // (type 2), then its 8-byte big-endian value.
    let entry: [u8; 16] = [0, 0, 0, 0, 0x80, 0, 0x53, 0x4b, 0, 0, 0, 0, 0, 0, 0, 2];
    let at = bytes
        .windows(entry.len())
        .position(|w| w == entry)
        .expect("CKA_OS_TOKENFLAGS in token.object (SoftHSM2's file format changed?)")
        + entry.len();
    let flags = u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap());
    bytes[at..at + 8].copy_from_slice(&(flags | 0x0004_0000).to_be_bytes());
    std::fs::write(&object, bytes).unwrap();

    let pin = hsm.path("pin");
    let out_dir = hsm.path("locked-out");
    let out = hsm.gnomon(
        &["delegate", "--out-dir", &out_dir, "--pkcs11-pin-file", &pin],
        "locked",
        "root",
    );
    refused(&out, 65, "is locked");
    assert!(
        stderr(&out).contains("security officer"),
        "{}",
        stderr(&out)
    );
    assert!(!Path::new(&out_dir).exists());
}

/// A module that wraps SoftHSM2 and leaves Ed25519 out of the mechanism
/// list: a real PKCS#11 module, as a token without EdDSA would answer.
const NO_EDDSA_SHIM: &str = r#"
#include <dlfcn.h>
typedef unsigned long ulong;
/* CK_FUNCTION_LIST of PKCS#11 2.40: a CK_VERSION, then 68 functions in the
   standard's order; C_GetMechanismList is the eighth. */
struct list { unsigned char major, minor; void *fn[68]; };
typedef ulong (*mechanisms_t)(ulong, ulong *, ulong *);
static struct list copy;
static mechanisms_t real_mechanisms;
static ulong without_eddsa(ulong slot, ulong *list, ulong *count) {
    ulong rv = real_mechanisms(slot, list, count), kept = 0;
    if (rv != 0 || list == 0) return rv;
    for (ulong i = 0; i < *count; i++)
        /* CKM_EC_EDWARDS_KEY_PAIR_GEN, CKM_EDDSA */
        if (list[i] != 0x1055 && list[i] != 0x1057) list[kept++] = list[i];
    *count = kept;
    return rv;
}
ulong C_GetFunctionList(struct list **out) {
    void *real = dlopen(REAL, RTLD_NOW | RTLD_LOCAL);
    if (real == 0) return 5; /* CKR_GENERAL_ERROR */
    ulong (*get)(struct list **) = (ulong (*)(struct list **))dlsym(real, "C_GetFunctionList");
    struct list *list;
    ulong rv = get(&list);
    if (rv != 0) return rv;
    copy = *list;
    real_mechanisms = (mechanisms_t)copy.fn[7];
    copy.fn[7] = (void *)without_eddsa;
    *out = &copy;
    return 0;
}
"#;

#[test]
fn a_token_without_eddsa_is_refused_by_name() {
    const TEST: &str = "pkcs11_token::a_token_without_eddsa_is_refused_by_name";
    let Some((hsm, _turn)) = token(TEST, "no-eddsa") else {
        return;
    };
    let source = hsm.dir.join("no-eddsa.c");
    let shim = hsm.dir.join("no-eddsa.so");
    std::fs::write(&source, NO_EDDSA_SHIM).unwrap();
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&shim)
        .arg(&source)
        .arg(format!("-DREAL=\"{}\"", hsm.module()))
        .arg("-ldl")
        .output();
    match built {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!("cc: {}", stderr(&out)),
        Err(e) => {
            gnomon_testkit::skip(TEST, &format!("no C compiler (cc: {e}) to build the shim"));
            return;
        }
    }
    let pin = hsm.path("pin");
    let out = Command::new(env!("CARGO_BIN_EXE_gnomon"))
        .args(["keygen", "--pkcs11-module", shim.to_str().unwrap()])
        .args(["--pkcs11-token", "no-eddsa", "--pkcs11-key", "root"])
        .args(["--pkcs11-pin-file", &pin])
        .output()
        .unwrap();
    refused(&out, 65, "does not offer CKM_EC_EDWARDS_KEY_PAIR_GEN");
    // The same token through SoftHSM2 itself holds no key: nothing was made.
    let out = hsm.gnomon(&["keygen", "--public-only"], "no-eddsa", "root");
    refused(&out, 66, "holds no key labelled \"root\"");
}
