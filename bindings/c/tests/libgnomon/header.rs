//! include/gnomon.h is what cbindgen makes of the crate today.
//!
//! The header is checked in so C users (and packagers) have it without
//! running a Rust tool; this test regenerates it and fails on any
//! difference. `GNOMON_BLESS=1 cargo test -p gnomon-ffi --test libgnomon -- header`
//! rewrites it after a change to the exported functions or types.

use std::path::Path;

#[test]
fn checked_in_header_is_what_cbindgen_generates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen parses the crate")
        .write(&mut generated);
    let generated = String::from_utf8(generated).expect("UTF-8 header");
    let path = dir.join("include/gnomon.h");
    if std::env::var_os("GNOMON_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/gnomon.h is out of date with the Rust; regenerate it with\n  \
         GNOMON_BLESS=1 cargo test -p gnomon-ffi --test libgnomon -- header\n--- generated:\n{generated}"
    );
}
