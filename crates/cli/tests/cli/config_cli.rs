//! `gnomon keygen`, `gnomon delegate` and `gnomon config check` as a user
//! runs them, and every example file in deploy/ checked by the binary.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_server::config::{Config, Overrides, KEYS};
use gnomon_server::keyfile;
use gnomon_server::offline::{parse_utc, OfflineStore};

/// A scratch directory under cargo's per-target temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "config-cli-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The binary with no GNOMON_* variable inherited from the test's caller.
fn gnomon() -> Command {
    let mut cmd = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"));
    for spec in KEYS {
        cmd.env_remove(spec.env);
    }
    cmd.env_remove("GNOMON_CONFIG");
    cmd
}

fn run(cmd: &mut Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().unwrap();
    (
        status.code().unwrap_or(-1),
        String::from_utf8(stdout).unwrap(),
        String::from_utf8(stderr).unwrap(),
    )
}

fn keygen(dir: &Scratch, name: &str) -> (PathBuf, [u8; 32]) {
    let path = dir.path(name);
    let (code, out, err) = run(gnomon().args(["keygen", "--out"]).arg(&path));
    assert_eq!(code, 0, "{err}");
    let public: [u8; 32] = B64.decode(out.trim_end()).unwrap().try_into().unwrap();
    (path, public)
}

#[test]
fn keygen_prints_one_line_and_the_file_loads_back() {
    let dir = Scratch::new();
    let path = dir.path("lt.key");
    let (code, out, err) = run(gnomon().args(["keygen", "--out"]).arg(&path));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "{out:?}");
    assert!(out.ends_with('\n'));
    let public = B64.decode(out.trim_end()).unwrap();
    assert_eq!(public, keyfile::load(&path).unwrap().public());
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn keygen_never_overwrites_without_force() {
    let dir = Scratch::new();
    let (path, first) = keygen(&dir, "k");
    let (code, out, err) = run(gnomon().args(["keygen", "--out"]).arg(&path));
    assert_eq!(code, 73, "{err}");
    assert!(out.is_empty());
    assert!(
        err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(keyfile::load(&path).unwrap().public(), first);
    let (code, out, err) = run(gnomon().args(["keygen", "--force", "--out"]).arg(&path));
    assert_eq!(code, 0, "{err}");
    let second = B64.decode(out.trim_end()).unwrap();
    assert_ne!(second, first);
    assert_eq!(keyfile::load(&path).unwrap().public().to_vec(), second);
}

#[test]
fn loose_or_linked_key_files_are_refused_with_the_fix() {
    let dir = Scratch::new();
    let (path, _) = keygen(&dir, "k");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, _, err) = run(gnomon()
        .args(["delegate", "--key-file"])
        .arg(&path)
        .arg("--out-dir")
        .arg(dir.path("d")));
    assert_ne!(code, 0);
    assert!(err.contains("0644"), "{err}");
    assert!(
        err.contains(&format!("chmod 600 {}", path.display())),
        "{err}"
    );
    assert!(
        !dir.path("d").exists(),
        "nothing is made from a refused key"
    );

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = dir.path("link");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let (code, _, err) = run(gnomon()
        .args(["delegate", "--key-file"])
        .arg(&link)
        .arg("--out-dir")
        .arg(dir.path("d")));
    assert_ne!(code, 0);
    assert!(
        err.contains("symbolic link") && err.contains("link"),
        "{err}"
    );
}

#[test]
fn delegate_then_the_loader_picks_the_window_valid_now() {
    let dir = Scratch::new();
    let (key, public) = keygen(&dir, "lt.key");
    let out_dir = dir.path("deleg");
    let (code, out, err) = run(gnomon()
        .args(["delegate", "--key-file"])
        .arg(&key)
        .arg("--out-dir")
        .arg(&out_dir)
        .args([
            "--start",
            "2030-01-01T00:00:00Z",
            "--validity",
            "2d",
            "--step",
            "1d",
        ])
        .args(["--count", "3"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(out.contains("20300102T000000Z.delegation\t2030-01-02T00:00:00Z\t2030-01-04T00:00:00Z"));
    assert!(err.contains(&B64.encode(public)), "{err}");
    let dir_mode = std::fs::metadata(&out_dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(dir_mode, 0o700);
    // No file in the directory holds the long-term seed.
    let seed = B64.encode(keyfile::load(&key).unwrap().seed());
    for entry in std::fs::read_dir(&out_dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(!text.contains(&seed));
    }

    let store = OfflineStore::load(&out_dir, Some(&public)).unwrap();
    let t0 = parse_utc("2030-01-01T00:00:00Z").unwrap();
    let hour = 3_600_000_000;
    let pick = |t: u64| {
        store
            .current(t)
            .and_then(|d| d.source.clone())
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
    };
    assert_eq!(pick(t0 - 1), None);
    assert_eq!(
        pick(t0 + hour).as_deref(),
        Some("20300101T000000Z.delegation")
    );
    assert_eq!(
        pick(t0 + 25 * hour).as_deref(),
        Some("20300102T000000Z.delegation")
    );
    assert_eq!(
        pick(t0 + 95 * hour).as_deref(),
        Some("20300103T000000Z.delegation")
    );
    assert_eq!(pick(t0 + 97 * hour), None);
    assert_eq!(store.last_expiry_us(), t0 + 96 * hour);

    // Delegations from another long-term key are refused before anything is
    // written into a directory that already has this key's.
    let (other, _) = keygen(&dir, "other.key");
    let (code, out, err) = run(gnomon()
        .args(["delegate", "--key-file"])
        .arg(&other)
        .arg("--out-dir")
        .arg(&out_dir)
        .args(["--start", "2031-01-01T00:00:00Z", "--count", "1"]));
    assert_eq!(code, 65, "{err}");
    assert!(out.is_empty() && err.contains("nothing written"), "{err}");
    assert_eq!(std::fs::read_dir(&out_dir).unwrap().count(), 3);

    // Running the same windows again clashes and writes nothing.
    let (code, _, err) = run(gnomon()
        .args(["delegate", "--key-file"])
        .arg(&key)
        .arg("--out-dir")
        .arg(&out_dir)
        .args(["--start", "2030-01-02T00:00:00Z", "--count", "5"]));
    assert_eq!(code, 73, "{err}");
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(std::fs::read_dir(&out_dir).unwrap().count(), 3);
}

#[test]
fn delegate_refuses_windows_with_gaps_and_bad_times() {
    let dir = Scratch::new();
    let (key, _) = keygen(&dir, "k");
    let base = |extra: &[&str]| {
        let mut c = gnomon();
        c.args(["delegate", "--key-file"])
            .arg(&key)
            .arg("--out-dir")
            .arg(dir.path("d"))
            .args(extra);
        run(&mut c)
    };
    let (code, _, err) = base(&["--validity", "1d", "--step", "2d"]);
    assert_eq!(code, 64);
    assert!(err.contains("gaps"), "{err}");
    let (code, _, err) = base(&["--start", "yesterday"]);
    assert_eq!(code, 64);
    assert!(err.contains("2026-05-01T00:00:00Z"), "{err}");
    let (code, _, err) = base(&["--validity", "2 days"]);
    assert_eq!(code, 64);
    assert!(err.contains("36h"), "{err}");
    assert!(!dir.path("d").exists());
}

#[test]
fn every_deploy_file_passes_config_check() {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let mut checked = 0;
    for entry in std::fs::read_dir(&deploy).unwrap() {
        let path = entry.unwrap().path();
        // gnomon-sync.toml is `gnomon sync`'s, checked by sync_cli;
        // gnomon-watch.toml is watch's and report-server's, checked by
        // watch_cli; gnomon-signer.toml is keygen's and delegate's
        // `--config`, used as written by pkcs11_token's renewal test.
        if path.extension().is_none_or(|e| e != "toml")
            || path.file_name().is_some_and(|n| {
                n == "gnomon-sync.toml" || n == "gnomon-watch.toml" || n == "gnomon-signer.toml"
            })
        {
            continue;
        }
        let (code, out, err) = run(gnomon().args(["config", "check"]).arg(&path));
        assert_eq!(code, 0, "{}: {err}", path.display());
        // What it prints is the configuration the file loads as.
        let loaded = Config::load(Some(&path), &Overrides::new()).unwrap();
        let printed = Config::from_toml(&out, Path::new("/printed.toml"), &Overrides::new());
        assert_eq!(printed.unwrap(), loaded, "{}", path.display());
        checked += 1;
    }
    assert!(checked >= 1, "no *.toml in {}", deploy.display());
}

#[test]
fn config_errors_name_key_origin_and_range_and_exit_64() {
    let dir = Scratch::new();
    let file = dir.path("g.toml");
    std::fs::write(&file, "# comment\n[tcp]\nmax-connections = 0\n").unwrap();
    let (code, out, err) = run(gnomon().args(["config", "check"]).arg(&file));
    assert_eq!(code, 64);
    assert!(out.is_empty());
    assert!(err.contains(&format!("{}:3", file.display())), "{err}");
    assert!(
        err.contains("`tcp.max-connections`") && err.contains("1..=1000000"),
        "{err}"
    );

    std::fs::write(&file, "[tcp]\nmax-conections = 5\n").unwrap();
    let (code, _, err) = run(gnomon().args(["config", "check"]).arg(&file));
    assert_eq!(code, 64);
    assert!(
        err.contains("max-conections") && err.contains("max-connections"),
        "{err}"
    );

    std::fs::write(&file, "").unwrap();
    let (code, _, err) = run(gnomon()
        .args(["config", "check"])
        .arg(&file)
        .env("GNOMON_GREASE", "0.9"));
    assert_eq!(code, 64);
    assert!(err.contains("environment variable GNOMON_GREASE"), "{err}");
    assert!(
        err.contains("`grease`") && err.contains("0.0..=0.5"),
        "{err}"
    );

    let (code, _, err) = run(gnomon()
        .args(["config", "check", "--max-queue-delay", "5"])
        .arg(&file));
    assert_eq!(code, 64);
    assert!(
        err.contains("flag --max-queue-delay") && err.contains("1ms..=1m"),
        "{err}"
    );

    let (code, _, err) = run(gnomon()
        .args(["config", "check"])
        .arg(dir.path("none.toml")));
    assert_eq!(code, 64);
    assert!(err.contains("none.toml"), "{err}");
}

#[test]
fn flags_override_environment_override_file() {
    let dir = Scratch::new();
    let file = dir.path("g.toml");
    std::fs::write(&file, "batch-size = 8\nworkers = 2\n[tcp]\nenable = true\n").unwrap();
    let (code, out, err) = run(gnomon()
        .args(["config", "check", "--workers", "5", "--tcp-enable=false"])
        .arg(&file)
        .env("GNOMON_BATCH_SIZE", "9")
        .env("GNOMON_WORKERS", "3")
        .env("GNOMON_LISTEN", "127.0.0.1:1,[::1]:2"));
    assert_eq!(code, 0, "{err}");
    let c = Config::from_toml(&out, Path::new("/p.toml"), &Overrides::new()).unwrap();
    assert_eq!(c.batch_size.get(), 9);
    assert_eq!(c.workers.get(), 5);
    assert!(!c.tcp.enable);
    let listen: Vec<String> = c.listen.addrs().iter().map(|a| a.to_string()).collect();
    assert_eq!(listen, ["127.0.0.1:1", "[::1]:2"]);
    assert!(err.contains("ephemeral"), "{err}");
}

#[test]
fn config_check_can_open_the_keys_it_names() {
    let dir = Scratch::new();
    let (key, public) = keygen(&dir, "lt.key");
    let (code, _, err) = run(gnomon()
        .args(["delegate", "--key-file"])
        .arg(&key)
        .arg("--out-dir")
        .arg(dir.path("deleg"))
        .args(["--count", "2"]));
    assert_eq!(code, 0, "{err}");
    let file = dir.path("g.toml");
    std::fs::write(&file, "key-file = \"lt.key\"\noffline-dir = \"deleg\"\n").unwrap();
    let (code, out, err) = run(gnomon().args(["config", "check", "--load-keys"]).arg(&file));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("key-file"),
        "the configuration is printed: {out}"
    );
    assert!(
        err.contains(&format!("public key {}", B64.encode(public))),
        "{err}"
    );
    assert!(err.contains("2 delegations, current until"), "{err}");

    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let (code, out, err) = run(gnomon().args(["config", "check", "--load-keys"]).arg(&file));
    assert_eq!(code, 64);
    assert!(err.contains("chmod 600"), "{err}");
    // Refused before anything is printed: no configuration that looks
    // accepted above the error.
    assert_eq!(out, "", "nothing on stdout when the keys fail");
    // Without --load-keys only the file is checked.
    let (code, _, _) = run(gnomon().args(["config", "check"]).arg(&file));
    assert_eq!(code, 0);
}

#[test]
fn a_pinned_offline_key_refuses_another_identitys_delegations() {
    let dir = Scratch::new();
    let (key, public) = keygen(&dir, "lt.key");
    let (_, other) = keygen(&dir, "other.key");
    let (code, _, err) = run(gnomon()
        .args(["delegate", "--key-file"])
        .arg(&key)
        .arg("--out-dir")
        .arg(dir.path("deleg")));
    assert_eq!(code, 0, "{err}");
    // A configuration of `dirs` offline directories, all pinned to `k`.
    let pinned = |k: &[u8; 32], dirs: usize| {
        let file = dir.path(&format!("pinned{dirs}.toml"));
        let list = vec!["\"deleg\""; dirs].join(", ");
        let text = format!(
            "offline-dir = [{list}]\noffline-public-key = [\"{}\"]\n",
            B64.encode(k)
        );
        std::fs::write(&file, text).unwrap();
        file
    };
    let (code, _, err) = run(gnomon()
        .args(["config", "check", "--load-keys"])
        .arg(pinned(&public, 1)));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(gnomon()
        .args(["config", "check", "--load-keys"])
        .arg(pinned(&other, 1)));
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("not the expected"), "{err}");
    assert!(err.contains(&B64.encode(other)), "{err}");
    // The server itself refuses to start with it: a clear load error, not
    // an identity silently served under the wrong key.
    let mut child = gnomon()
        .args(["serve", "--listen", "127.0.0.1:0", "--offline-dir"])
        .arg(dir.path("deleg"))
        .args(["--offline-public-key", &B64.encode(other)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map(gnomon_testkit::Reaped)
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("gnomon serve started with a delegation under the wrong key");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(64), "{err}");
    assert!(err.contains("not the expected"), "{err}");
    // One key for two directories (or two for one) is a configuration error.
    let (code, _, err) = run(gnomon().args(["config", "check"]).arg(pinned(&public, 2)));
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("one public key per offline-dir"), "{err}");
}
