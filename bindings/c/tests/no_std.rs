//! The build/verify/chain part of libgnomon builds without the standard
//! library: `--no-default-features` for a bare-metal target, which has no
//! `std` at all, so anything reaching for it fails to compile or link.

use std::path::Path;
use std::process::Command;

const TARGET: &str = "thumbv7em-none-eabihf";

#[test]
fn builds_without_std_for_a_bare_metal_target() {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l == TARGET)
        });
    if !installed {
        return gnomon_testkit::skip(
            "builds_without_std_for_a_bare_metal_target",
            &format!("the {TARGET} target is not installed (rustup target add {TARGET})"),
        );
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&repo)
        .args(["build", "--locked", "--quiet", "-p", "gnomon-ffi", "--lib"])
        .args(["--no-default-features", "--target", TARGET])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo.join("target"));
    let lib = target.join(TARGET).join("debug/libgnomon.a");
    let symbols = Command::new("nm").arg("-g").arg(&lib).output();
    let Ok(symbols) = symbols else {
        return gnomon_testkit::skip("builds_without_std_for_a_bare_metal_target", "no nm");
    };
    let symbols = String::from_utf8_lossy(&symbols.stdout);
    for f in [
        "gnomon_build_request",
        "gnomon_verify",
        "gnomon_chain_nonce",
        "gnomon_check_chain",
    ] {
        assert!(
            symbols.contains(&format!(" T {f}")),
            "{f} missing from {}",
            lib.display()
        );
    }
    // The std-only entry points are not there.
    assert!(
        !symbols.contains(" T gnomon_query"),
        "gnomon_query in the no_std build"
    );
}
