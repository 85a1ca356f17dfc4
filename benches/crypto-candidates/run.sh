#!/usr/bin/env bash
# Run both builds (sha2 0.10 default, then sha2 0.10 + `asm`) and print a
# markdown table. Logs go to results/. ~2 min per build on 2 cores once compiled.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p results
ARGS=(--warm-up-time 1 --measurement-time 3 --noplot)
tag=${1:-$(date +%H%M%S)}
cargo bench --bench crypto -- "${ARGS[@]}" | tee "results/default-$tag.log"
CARGO_TARGET_DIR=target/asm cargo bench --bench crypto --features sha2-asm -- "${ARGS[@]}" \
  | tee "results/asm-$tag.log"
python3 summarize.py "results/default-$tag.log" "results/asm-$tag.log"
