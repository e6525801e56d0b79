#!/bin/bash
# The diagnose rules judged on programs written after their thresholds were
# frozen (tests/workloads/unseen/*.c: set 1, then set 2 written on
# 2026-11-25 and judged before any rule was changed for it), each
# diagnosed for SECONDS while the noise generator (tests/workloads/noise.c) runs: prints the expected
# finding, the findings raised and the top off-CPU cause. Nothing here was
# used to set a threshold; docs/diagnose-findings.md records the results.
# Usage: bench/explain_unseen.sh [SECONDS]   (default 2; TUNELAB=path uses
#        that binary, no build)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-2}
command -v cc >/dev/null || { echo "explain_unseen: no C compiler (cc)" >&2; exit 4; }
T=$(mktemp -d)
noise=
cleanup() { [ -n "$noise" ] && kill -9 -- "-$noise" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
if [ -n "${TUNELAB:-}" ]; then TL=$TUNELAB; else
  cargo build -q 2>/dev/null || cargo build
  TL=target/debug/tunelab
fi
cc -O2 -o "$T/noise" tests/workloads/noise.c
# Each program names the finding it should get on its first lines
# ("expect: diagnose.x"); a new program dropped into the folder is judged too.
for src in tests/workloads/unseen/*.c; do
  w=$(basename "$src" .c)
  want=$(grep -o -m1 'expect: diagnose\.[a-z-]*' "$src" | cut -d' ' -f2)
  [ -n "$want" ] || { echo "explain_unseen: $src names no 'expect: diagnose.…'" >&2; exit 2; }
  cc -O2 -g -fno-omit-frame-pointer -pthread -o "$T/$w" "$src"
  setsid "$T/noise" "$T" & noise=$!
  disown "$noise"  # no "Killed" line from the shell when it is stopped
  sleep 0.3
  "$TL" --json diagnose --no-store --startup-runs 0 -- "$T/$w" "$secs" "$T" > "$T/out.json" 2>/dev/null || true
  kill -9 -- "-$noise" 2>/dev/null || kill -9 "$noise" 2>/dev/null || true
  noise=
  python3 - "$w" "$want" "$T/out.json" <<'PY'
import json, sys
w, want, path = sys.argv[1], sys.argv[2], sys.argv[3]
v = json.load(open(path))
ids = [f["id"] for f in v["findings"]]
d = v["run"]["diagnosis"]
rq = next((f["value"] for r in d["resources"].get("data", {}).get("rows", []) if r["kind"] == "cpu"
           for f in r["saturation"] if f["name"] == "runnable per CPU"), 0.0)
extra = [i for i in ids if i != want and not (i == "diagnose.cpu-starvation" and rq >= 1.0)]
print(f"== {w}: expected {want}: {'FOUND' if want in ids else 'MISSING'}; "
      f"other findings {extra or 'none'} (machine run queue {rq:.1f}/CPU)")
for f in v["findings"]:
    print("   ", f["title"])
for c in d["offcpu"].get("data", {}).get("causes", [])[:2]:
    print(f"    off-CPU: {c['cause']} from {c['caller'] or '-'}: {c['total_s']:.3f} s")
PY
done
