#!/usr/bin/env bash
# ML-DSA-44 candidates: tests (capture, cross-crate agreement, NIST ACVP
# subset), allocations per operation, then ROUNDS runs of the interleaved
# minimum loop (load average logged with each), then the same with
# libcrux-ml-dsa's portable code (LIBCRUX_DISABLE_SIMD256=1: its build script
# otherwise compiles the AVX2 back end in on every x86-64 build, and since the
# script does not watch that variable the portable build needs its own target
# directory). Logs go to results/. Build cost:
# ./build-cost.sh; no_std: ./nostd.sh.
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-3}
tag=${2:-$(date +%H%M%S)}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target} CARGO_INCREMENTAL=0
T=$CARGO_TARGET_DIR
mkdir -p results "$T"
cargo test --release -j2 2>&1 | grep -E "^test |test result" | tee "results/test-$tag.log"
cargo build --release -j2 --bin allocs --bin minloop --quiet
# The allocation counter is the one the Ed25519 signer benchmark uses.
cc -O2 -shared -fPIC -o "$T/count_alloc.so" ../sign-candidates/count_alloc.c -ldl
LD_PRELOAD=$T/count_alloc.so "$T/release/allocs" | tee "results/allocs-$tag.log"
grep -m1 "model name" /proc/cpuinfo | tee "results/cpu-$tag.log"
for r in $(seq "$rounds"); do
    taskset -c 0 "$T/release/minloop" 200 | tee "results/minloop-$tag-$r.log"
done
P=$T-portable
LIBCRUX_DISABLE_SIMD256=1 CARGO_TARGET_DIR=$P cargo build --release -j2 --bin minloop --bin stack --quiet
for r in $(seq "$rounds"); do
    taskset -c 0 "$P/release/minloop" 200 | tee "results/minloop-portable-$tag-$r.log"
done
cargo build --release -j2 --bin stack --quiet
{ echo "libcrux AVX2:"; "$T/release/stack"; echo "libcrux portable:"; "$P/release/stack"; } | tee "results/stack-$tag.log"
