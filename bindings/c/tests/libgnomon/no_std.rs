//! The build/verify/chain part of libgnomon compiles without the standard
//! library: `--no-default-features` for a bare-metal target, which has no
//! `std` at all in its sysroot.
//!
//! `cargo check`, not `cargo build`: what this test proves is that nothing
//! in the crate or any dependency reaches for `std`, and rustc resolves
//! every `extern crate` (explicit, or implied by a dependency's `std`
//! feature) and every path while checking. Without `std` for the target
//! that fails there ("can't find crate for `std`"), as does a use of
//! anything the target's `core` lacks (64-bit atomics on this one). Only
//! code generation and linking are skipped, which prove nothing about
//! `std`: cold, the check took 53 s of CPU (user+sys) and the build 69 s,
//! on this 2-core AMD EPYC. What the build also showed, the exported
//! symbols in the `.a`, follows from the same `#[no_mangle]` items the
//! std build exports (tests/abi.rs, tests/c_programs.rs). Seen to fail
//! with an unconditional `extern crate std;` in bindings/c/src/lib.rs.

use std::path::Path;
use std::process::Command;

const TARGET: &str = "thumbv7em-none-eabihf";

#[test]
fn checks_without_std_for_a_bare_metal_target() {
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
            "checks_without_std_for_a_bare_metal_target",
            &format!("the {TARGET} target is not installed (rustup target add {TARGET})"),
        );
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&repo)
        .args(["check", "--locked", "--quiet", "-p", "gnomon-ffi", "--lib"])
        .args(["--no-default-features", "--target", TARGET])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
}
