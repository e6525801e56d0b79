#!/usr/bin/env bash
# Binary size and start-up cost of `tunelab --version`, side by side with
# /bin/true as the floor, measured by hyperfine in one run.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-target}/release/tunelab
size=$(stat -c %s "$bin")
printf 'release binary: %s bytes (%.1f MiB; limit 10 MiB)\n' "$size" "$(echo "$size/1048576" | bc -l)"
command -v hyperfine >/dev/null || { echo "hyperfine missing: apt-get install -y hyperfine"; exit 1; }
hyperfine -N --warmup 20 --runs 200 --export-json /tmp/tunelab-startup.json "$bin --version" "/bin/true" >/dev/null
python3 - <<'PY'
import json
r = json.load(open("/tmp/tunelab-startup.json"))["results"]
t, base = r[0]["mean"], r[1]["mean"]
print(f"tunelab --version: {t*1e3:.2f} ms mean; /bin/true: {base*1e3:.2f} ms; ratio {t/base:.2f}x")
PY
