#!/usr/bin/env bash
# Ed25519 signers for the per-batch SREP signature: allocations per
# signature, ROUNDS runs of the interleaved minimum loop (the figures
# docs/COST.md quotes), then ROUNDS criterion runs (load average logged with
# each). Logs go to results/. Build-cost figures: ./build-cost.sh.
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-3}
tag=${2:-$(date +%H%M%S)}
mkdir -p results target
cargo build --release --bin allocs --bin minloop --quiet
cc -O2 -shared -fPIC -o target/count_alloc.so count_alloc.c -ldl
LD_PRELOAD=$PWD/target/count_alloc.so target/release/allocs | tee "results/allocs-$tag.log"
for r in $(seq "$rounds"); do
    taskset -c 0 target/release/minloop 300 | tee "results/minloop-$tag-$r.log"
done
for r in $(seq "$rounds"); do
    { echo "round $r: $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
      taskset -c 0 cargo bench --bench sign -- --warm-up-time 1 --measurement-time 3 --noplot
      echo "after: load $(cut -d' ' -f1-3 /proc/loadavg)"; } | tee "results/sign-$tag-$r.log"
done
grep -h "^round\|time:\|^ed25519_sign_100B/" results/sign-"$tag"-*.log
