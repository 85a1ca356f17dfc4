#!/usr/bin/env bash
# Cold build cost of each candidate alone: a one-line crate depending on it
# (features as gnomon would use them), `cargo build --release -j2` into an
# empty target directory, CPU seconds (user + system of cargo and everything
# it ran) and wall seconds. Dependencies come from ~/.cargo/registry
# (fetched first, not timed). Each build is capped at CAP seconds of wall
# time (default 600).
set -euo pipefail
cd "$(dirname "$0")"
cap=${CAP:-600}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cands=(
  'ml-dsa = { version = "0.1.2", default-features = false }'
  'fips204 = { version = "0.5.0", default-features = false, features = ["ml-dsa-44"] }'
  'libcrux-ml-dsa = { version = "0.0.11", default-features = false, features = ["mldsa44"] }'
  'aws-lc-rs = "1.19.0"'
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
  if /usr/bin/time -f "%U %S %e" -o "$d/time" timeout "$cap" nice cargo build --release -j2 --quiet \
       --manifest-path "$d/Cargo.toml" --target-dir "$d/target"; then
    read -r u s e < "$d/time"
    printf '| %s | %.1f | %.1f | %s |\n' "$name" "$(echo "$u + $s" | bc)" "$e" "$load"
  else
    echo "| $name | over the ${cap} s cap or failed | | $load |"
  fi
done
