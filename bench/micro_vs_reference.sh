#!/usr/bin/env bash
# Compare tunelab's lmbench-class experiments with the reference tools on
# this machine, interleaved in one run (the machine may be noisy: only the
# ratios measured side by side mean anything).
#
#   ipc.pipe round_trip          vs  perf bench sched pipe        (usecs/op)
#   sched.messaging (defaults)   vs  perf bench sched messaging   (Total time)
#   mem.bandwidth kernel=copy    vs  mbw -t0 (memcpy)             (MiB/s, bytes once)
#
# Usage: bench/micro_vs_reference.sh [ROUNDS]   (default 3)
# Needs: perf (linux-perf), mbw, python3. Env: CARGO_TARGET_DIR, MBW_MIB (256).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
MIB=${MBW_MIB:-256}
PIPE_LOOPS=${PIPE_LOOPS:-300000}
for t in perf mbw python3; do
    command -v "$t" >/dev/null || { echo "missing $t (apt-get install -y linux-perf mbw)" >&2; exit 4; }
done
cargo build --release --quiet
TL="${CARGO_TARGET_DIR:-target}/release/tunelab"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

tl() { # experiment, then args: prints the median of every metric as name=value
    "$TL" run "$@" --json --no-store --quiet-check 0 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
for r in d["results"]:
    for m in r["metrics"]:
        print(m["name"], *m["samples"])'
}

for r in $(seq 1 "$ROUNDS"); do
    echo "round $r/$ROUNDS ..." >&2
    perf bench sched pipe -l "$PIPE_LOOPS" 2>/dev/null | awk '/usecs\/op/ {print $1}' >>"$OUT/perf_pipe"
    tl ipc.pipe -p test=latency --warmup 1 --trials 5 \
        | awk '$1=="round_trip" {for (i=2;i<=NF;i++) print $i*1e6}' >>"$OUT/tl_pipe"
    for _ in 1 2 3; do
        perf bench sched messaging 2>/dev/null | awk '/Total time/ {print $3}' >>"$OUT/perf_msg"
    done
    tl sched.messaging --warmup 1 --trials 3 \
        | awk '$1=="total_time" {for (i=2;i<=NF;i++) print $i}' >>"$OUT/tl_msg"
    mbw -q -t0 -n 5 "$MIB" 2>/dev/null | awk '/^AVG/ {for (i=1;i<=NF;i++) if ($i=="Copy:") print $(i+1)}' >>"$OUT/mbw"
    tl mem.bandwidth -p kernel=copy -p threads=1 -p sweep=no -p size="${MIB}M" --warmup 1 --trials 5 \
        | awk '$1=="bandwidth" {for (i=2;i<=NF;i++) print $i/1048576}' >>"$OUT/tl_copy"
done

python3 - "$OUT" <<'PY'
import statistics as st, sys, os
d = sys.argv[1]
def med(name):
    v = [float(x) for x in open(os.path.join(d, name)).read().split()]
    if not v:
        sys.exit(f"no samples for {name}")
    return st.median(v), len(v)
rows = [
    ("ipc.pipe round trip (us/op)", "tl_pipe", "perf bench sched pipe", "perf_pipe"),
    ("sched.messaging total (s)", "tl_msg", "perf bench sched messaging", "perf_msg"),
    ("mem.bandwidth copy (MiB/s)", "tl_copy", "mbw -t0", "mbw"),
]
print(f"{'measure':30} {'tunelab':>12} {'n':>3} {'reference':>12} {'n':>3}  ratio  verdict   (reference)")
bad = 0
for name, t, ref, r in rows:
    (a, na), (b, nb) = med(t), med(r)
    ratio = a / b
    ok = abs(ratio - 1) <= 0.10
    bad += not ok
    print(f"{name:30} {a:12.4g} {na:3} {b:12.4g} {nb:3}  {ratio:5.3f}  {'within 10%' if ok else 'OUTSIDE 10%':10} ({ref})")
sys.exit(1 if bad else 0)
PY
