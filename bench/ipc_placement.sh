#!/usr/bin/env bash
# ipc.pipe round trips of test=latency against test=both, interleaved in one
# run (issue 11.3: with the default placement, cpu=same, both measure the
# same round trip; when placement was left to the scheduler they differed
# 2x). Prints each round's medians and the ratio of the medians of all
# rounds. A timing comparison: it belongs here, not in the test suite.
#
#   bench/ipc_placement.sh [TUNELAB]    (default target/release/tunelab)
#   env: ROUNDS=5 TRIALS=9
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-target/release/tunelab}")
rounds=${ROUNDS:-5}
trials=${TRIALS:-9}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
one() { # test -> median round trip (s)
  "$bin" run ipc.pipe --target "$work" --trials "$trials" --warmup 1 --quiet-check 0 \
    --no-store --json -p "test=$1" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["results"][0]
m=[m for m in r["metrics"] if m["name"]=="round_trip"][0]; print(m["summary"]["median"])'
}
lat=() both=()
for i in $(seq "$rounds"); do
  # Alternate the order so a drift of the machine hits both sides alike.
  if [ $((i % 2)) = 1 ]; then a=$(one latency); b=$(one both); else b=$(one both); a=$(one latency); fi
  lat+=("$a") both+=("$b")
  printf 'round %d: latency %.3g s  both %.3g s\n' "$i" "$a" "$b"
done
python3 - "${lat[*]}" "${both[*]}" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
ma, mb = statistics.median(a), statistics.median(b)
print(f"median round trip: test=latency {ma:.3g} s, test=both {mb:.3g} s, ratio {ma / mb:.2f}")
PY
