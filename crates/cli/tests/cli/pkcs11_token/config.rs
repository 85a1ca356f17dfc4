//! The token named by a `--config` file, and the renewal unit's drop-in
//! that uses one.

use std::fs::Permissions;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Stdio};

use super::{decode, refused, stderr, token};

/// Each --pkcs11-* option has a key in --config's [pkcs11] table; flags
/// win over it; relative paths are from the file's directory.
#[test]
fn a_config_file_names_the_token_and_the_flags_win() {
    const TEST: &str = "pkcs11_token::config::a_config_file_names_the_token_and_the_flags_win";
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
        gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
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

    // The file's pin-file is checked as the flag's is: made readable by
    // its group, it is refused with the fix, naming the resolved path.
    let pin = hsm.dir.join("pin");
    std::fs::set_permissions(&pin, Permissions::from_mode(0o640)).unwrap();
    let out = gnomon(&["delegate", "--config", conf, "--out-dir", &out_dir]);
    std::fs::set_permissions(&pin, Permissions::from_mode(0o600)).unwrap();
    refused(&out, 66, &format!("run `chmod 600 {}`", pin.display()));

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

/// deploy/gnomon-delegate-pkcs11.conf is the renewal unit's command with
/// `--config` in place of `--key-file`, nothing else; run as written (paths
/// moved into the test's directory) with deploy/gnomon-signer.toml as
/// written (its module moved to where SoftHSM2 is), it signs 14 days of
/// windows for two hosts in the token. Where `systemd-analyze` exists, the
/// unit with the drop-in verifies.
#[test]
fn the_renewal_units_token_drop_in_runs_as_written() {
    const TEST: &str = "pkcs11_token::config::the_renewal_units_token_drop_in_runs_as_written";
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let read = |name: &str| std::fs::read_to_string(deploy.join(name)).unwrap();
    let (unit, drop_in, signer) = (
        read("gnomon-delegate.service"),
        read("gnomon-delegate-pkcs11.conf"),
        read("gnomon-signer.toml"),
    );
    let exec_starts = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix("ExecStart="))
            .map(str::to_owned)
            .collect()
    };
    let (in_unit, in_drop_in) = (exec_starts(&unit), exec_starts(&drop_in));
    assert_eq!(in_unit.len(), 1, "{in_unit:?}");
    // An empty ExecStart= first: a drop-in's command otherwise adds to the
    // unit's, which a oneshot service would run both of.
    assert_eq!(in_drop_in.len(), 2, "{in_drop_in:?}");
    assert_eq!(in_drop_in[0], "");
    assert_eq!(
        in_drop_in[1],
        in_unit[0].replace(
            "--key-file /etc/gnomon-signer/root.key",
            "--config /etc/gnomon-signer/signer.toml"
        ),
        "the drop-in must change only where the key comes from"
    );

    // The example's own token and key labels.
    let label = |key: &str| -> String {
        let line = signer
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("no {key} in gnomon-signer.toml"));
        line.trim_matches('"').to_owned()
    };
    let Some((hsm, _turn)) = token(TEST, &label("token")) else {
        return;
    };
    let etc = hsm.dir.join("renewal-etc");
    std::fs::create_dir_all(&etc).unwrap();
    let module = label("module");
    std::fs::write(
        etc.join("signer.toml"),
        signer.replace(&module, hsm.module()),
    )
    .unwrap();
    std::fs::copy(hsm.dir.join("pin"), etc.join("pin")).unwrap();
    let conf = etc.join("signer.toml");
    let conf = conf.to_str().unwrap();
    let out = gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(["keygen", "--config", conf])
        .output()
        .unwrap();
    assert!(out.status.success(), "keygen: {}", stderr(&out));
    let public = String::from_utf8_lossy(&out.stdout).trim().to_owned();

    let fleet = hsm.dir.join("renewal-fleet");
    let exe = env!("CARGO_BIN_EXE_gnomon");
    let moved = |text: &str| {
        text.replace("/usr/local/bin/gnomon", exe)
            .replace("/etc/gnomon-signer/signer.toml", conf)
            .replace("/var/lib/gnomon-signer/fleet", fleet.to_str().unwrap())
    };
    let words: Vec<String> = moved(&in_drop_in[1])
        .replace("$GNOMON_FLEET_HOSTS", "ams-1,fra-1")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let out = gnomon_testkit::command(&words[0])
        .args(&words[1..])
        .env_remove("GNOMON_PKCS11_PIN")
        .output()
        .unwrap();
    assert!(out.status.success(), "{words:?}: {}", stderr(&out));
    assert!(
        stderr(&out).contains(&public),
        "delegate names another key than the token's {public}: {}",
        stderr(&out)
    );
    // 14 days of cover from windows of 2 days, one a day: 13 windows, as
    // with the key file (fleet::the_renewal_unit_runs_as_written_and_verifies).
    for host in ["ams-1", "fra-1"] {
        let windows = std::fs::read_dir(fleet.join(host))
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().ends_with(".delegation")
            })
            .count();
        assert_eq!(windows, 13, "{host}");
    }

    let analyze = Command::new("systemd-analyze")
        .arg("--version")
        .stdout(Stdio::null())
        .status();
    if !analyze.is_ok_and(|s| s.success()) {
        gnomon_testkit::skip(
            TEST,
            "no systemd-analyze: the drop-in's syntax was not verified",
        );
        return;
    }
    // systemd reads a drop-in only from a unit directory it searches.
    let units = hsm.dir.join("renewal-units");
    std::fs::create_dir_all(units.join("gnomon-delegate.service.d")).unwrap();
    for (from, to) in [
        ("gnomon-delegate.service", "gnomon-delegate.service"),
        ("gnomon-delegate.timer", "gnomon-delegate.timer"),
        (
            "gnomon-delegate-pkcs11.conf",
            "gnomon-delegate.service.d/pkcs11.conf",
        ),
    ] {
        std::fs::write(units.join(to), moved(&read(from))).unwrap();
    }
    let verify = Command::new("systemd-analyze")
        .env("SYSTEMD_UNIT_PATH", format!("{}:", units.display()))
        .arg("verify")
        .arg(units.join("gnomon-delegate.service"))
        .arg(units.join("gnomon-delegate.timer"))
        .output()
        .unwrap();
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
}
