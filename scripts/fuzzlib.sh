# Sourced by scripts/fuzz-smoke and scripts/fuzz: enters fuzz/, sets up the
# toolchain for cargo-fuzz and installs it into ~/.cargo/bin when missing.
#
# Only the stable toolchain is assumed. cargo-fuzz passes unstable rustc
# flags (sanitizer coverage, -Z options); RUSTC_BOOTSTRAP=1 lets stable
# accept them. No sanitizer: the fuzzed crates keep unsafe code to the
# audited syscall module, which the targets do not call, so ASan would find
# nothing that a panic or overflow check does not, and it doubles the build
# time. Overflow checks and debug assertions stay on.
cd "$(dirname "${BASH_SOURCE[0]}")/../fuzz"
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
export PATH="$HOME/.cargo/bin:$PATH"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    # A debug build of the tool installs in a third of the time and only
    # spawns cargo and the fuzzer, so its speed does not matter.
    cargo install cargo-fuzz --locked --version 0.13.2 --debug
fi

# The corpus directories of target $1 that exist: the minimised corpus kept
# in git (corpus/), then the generated seeds (seeds/). Both are only read by
# a run; new inputs go to a directory named first on the command line.
fuzz_inputs() {
    local d
    for d in "corpus/$1" "seeds/$1"; do
        if [ -d "$d" ]; then echo "$d"; fi
    done
}

# Prints the panic and libFuzzer's summary from log $1, without dictionary
# entries, stack frames or the input's Debug dump, then the failing input in
# base64 (CI does not keep fuzz/artifacts).
fuzz_report_crash() {
    grep -v '^"' "$1" |
        sed -e '/^stack backtrace:/,/^note: Some details/d' -e '/^Stack backtrace:/,$d' \
            -e '/^Output of `std::fmt::Debug`:/,/^Reproduce with:/{/^Reproduce with:/!d}' |
        grep -v '^WARNING: Failed to find function' | tail -n 40
    local artifact
    artifact="$(sed -n 's/.*Test unit written to //p' "$1" | tail -n 1)"
    if [ -n "$artifact" ] && [ -f "$artifact" ]; then
        echo "failing input ($artifact), base64:"
        base64 -w 0 "$artifact"
        echo
    fi
}
