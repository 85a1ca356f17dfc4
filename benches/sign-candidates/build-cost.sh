#!/usr/bin/env bash
# Cold build cost of each candidate alone: a one-line crate depending on it,
# `cargo build --release` into an empty target directory, CPU seconds
# (user + system of cargo and everything it ran) and wall seconds.
# Dependencies come from ~/.cargo/registry (fetched first, not timed).
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cands=(
  'ed25519-dalek = { version = "2.2", default-features = false, features = ["fast", "zeroize", "hazmat"] }'
  'aws-lc-rs = "1.19.0"'
  'aws-lc-sys = "0.47.0"'
  'ring = "0.17.14"'
  'graviola = "0.4.4"'
  'ed25519-compact = { version = "2.6.1", default-features = false }'
)
echo "| crate | CPU s (user+sys) | wall s | load before |"
echo "|---|---:|---:|---|"
for dep in "${cands[@]}"; do
  name=${dep%% *}
  d="$work/$name"
  mkdir -p "$d/src"
  printf '[package]\nname = "cost"\nversion = "0.0.0"\nedition = "2021"\n[workspace]\n[dependencies]\n%s\n' "$dep" > "$d/Cargo.toml"
  : > "$d/src/lib.rs"
  (cd "$d" && cargo fetch --quiet)
  load=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -f "%U %S %e" -o "$d/time" nice cargo build --release --quiet --manifest-path "$d/Cargo.toml" --target-dir "$d/target"
  read -r u s e < "$d/time"
  printf '| %s | %.1f | %.1f | %s |\n' "$name" "$(echo "$u + $s" | bc)" "$e" "$load"
done
