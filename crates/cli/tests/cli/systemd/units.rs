//! deploy/'s units, and the XDP drop-in with them, under
//! `systemd-analyze verify`.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::tempdir;

#[test]
fn the_units_pass_systemd_analyze_verify() {
    let analyze = Path::new("/usr/bin/systemd-analyze");
    if !analyze.exists() {
        gnomon_testkit::skip(
            "the_units_pass_systemd_analyze_verify",
            "systemd-analyze is not installed (apt: systemd)",
        );
        return;
    }
    let dir = tempdir("units");
    let said = verify_units(analyze, &dir);
    // Unknown keys and unparsable values are warnings with exit 0: any
    // word about our units is a failure.
    assert!(!said.contains("gnomon."), "{said}");
    let _ = std::fs::remove_dir_all(dir);
}

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// `systemd-analyze verify` of deploy/'s gnomon.socket and gnomon.service
/// (naming the binary under test, whose existence verify checks) copied
/// into `dir`, which is also searched for drop-ins; what it said.
fn verify_units(analyze: &Path, dir: &Path) -> String {
    let service = std::fs::read_to_string(deploy().join("gnomon.service"))
        .unwrap()
        .replace("/usr/local/bin/gnomon", env!("CARGO_BIN_EXE_gnomon"));
    std::fs::write(dir.join("gnomon.service"), service).unwrap();
    std::fs::copy(deploy().join("gnomon.socket"), dir.join("gnomon.socket")).unwrap();
    let out = Command::new(analyze)
        .env("SYSTEMD_UNIT_PATH", format!("{}:", dir.display()))
        .args(["verify", "--man=no"])
        .arg(dir.join("gnomon.socket"))
        .arg(dir.join("gnomon.service"))
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    said
}

/// deploy/gnomon-xdp.conf, read as systemd reads a drop-in (from a unit
/// directory it searches, beside the unit), verifies: a misspelt key or an
/// unknown capability name is a failure here, not at an operator's restart.
#[test]
fn the_xdp_drop_in_verifies_with_the_unit() {
    let analyze = Path::new("/usr/bin/systemd-analyze");
    if !analyze.exists() {
        gnomon_testkit::skip(
            "the_xdp_drop_in_verifies_with_the_unit",
            "systemd-analyze is not installed (apt: systemd)",
        );
        return;
    }
    let dir = tempdir("xdp-units");
    std::fs::create_dir_all(dir.join("gnomon.service.d")).unwrap();
    let drop_in = std::fs::read_to_string(deploy().join("gnomon-xdp.conf")).unwrap();
    // What the path needs (docs/OPERATIONS.md, "The AF_XDP path").
    for needed in [
        "CAP_NET_ADMIN",
        "CAP_BPF",
        "CAP_NET_RAW",
        "LimitMEMLOCK=",
        "RestrictAddressFamilies=AF_XDP",
        "SystemCallFilter=bpf",
        "GNOMON_XDP=",
    ] {
        assert!(drop_in.contains(needed), "the drop-in lacks {needed}");
    }
    std::fs::write(dir.join("gnomon.service.d/xdp.conf"), drop_in).unwrap();
    let said = verify_units(analyze, &dir);
    assert!(
        !said.contains("gnomon") && !said.contains("xdp.conf"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
