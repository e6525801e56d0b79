#!/bin/sh
# The cost of observing: a program that spins on one thread
# (tests/workloads/spin.c) for 2 s and 10 s, alone and under
# `tunelab diagnose --`, in one run, side by side:
#   - the spinner's own share of a CPU (getrusage user+system over its wall
#     time, printed by the spinner itself: "spin cpu_pct=…");
#   - tunelab's own CPU time over the interval, % of one CPU, and the budget
#     it was held to (both from diagnose's own line in its report).
#
#   bench/diagnose_cost.sh
#
# Environment: TUNELAB (default target/release/tunelab, else tunelab on PATH),
# SPIN (a prebuilt spinner; default: built from tests/workloads/spin.c with
# CC, default cc), SECS (default "2 10"), CHECK=1 to exit 1 unless the
# spinner keeps >= MIN_CPU % (default 95) of a CPU under diagnose and
# tunelab stays <= MAX_OWN % (default 5) of one CPU. The board lab runs it
# on the guest with the static binary and a prebuilt SPIN.
set -eu
here=$(cd "$(dirname "$0")/.." 2>/dev/null && pwd || pwd)
BIN=${TUNELAB:-}
if [ -z "$BIN" ]; then
  if [ -x "$here/target/release/tunelab" ]; then BIN=$here/target/release/tunelab; else BIN=tunelab; fi
fi
SECS=${SECS:-2 10}
MIN_CPU=${MIN_CPU:-95}
MAX_OWN=${MAX_OWN:-5}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/diagnose-cost.XXXXXX")
trap 'rm -rf "$scratch"' EXIT INT TERM
SPIN=${SPIN:-}
if [ -z "$SPIN" ]; then
  SPIN=$scratch/spin
  "${CC:-cc}" -O2 -o "$SPIN" "$here/tests/workloads/spin.c" ||
    { echo "cannot build tests/workloads/spin.c (set CC or SPIN)" >&2; exit 4; }
fi
cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc 2>/dev/null || echo "?")
echo "diagnose's cost on $(uname -m), $cpus CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $BIN"
printf '%-6s %-16s %-18s %-16s %s\n' run "spinner alone" "spinner diagnosed" "tunelab's own" "budget"
bad=0
for s in $SECS; do
  alone=$("$SPIN" "$s" | sed -n 's/.*cpu_pct=\([0-9.]*\).*/\1/p')
  "$BIN" diagnose --no-store --startup-runs 0 -- "$SPIN" "$s" >"$scratch/out" 2>&1 ||
    { echo "diagnose failed:" >&2; tail -n 20 "$scratch/out" >&2; exit 1; }
  under=$(sed -n 's/.*cpu_pct=\([0-9.]*\).*/\1/p' "$scratch/out" | head -n 1)
  line=$(grep "tunelab's own CPU time over the interval" "$scratch/out" | head -n 1)
  own=$(echo "$line" | sed -n 's/.*(\([0-9.]*\)% of one CPU).*/\1/p')
  budget=$(echo "$line" | sed -n 's/.*budget \([0-9.]*\)% of one CPU.*/\1/p')
  printf '%-6s %-16s %-18s %-16s %s\n' "${s} s" "${alone:-?}% of a CPU" \
    "${under:-?}% of a CPU" "${own:-?}% of one CPU" "${budget:-?}%"
  # TUNELAB_DIAGNOSE_COST set: where tunelab's own CPU went, by thread and
  # by reader.
  if [ -n "${TUNELAB_DIAGNOSE_COST:-}" ]; then
    sed -n "s/.*tunelab's own CPU over the interval by thread[^:]*: \([^;]*\);.*/  by thread: \1/p" "$scratch/out" | head -n 1
    grep "^tunelab cost:" "$scratch/out" | sed 's/^/  /'
  fi
  if [ "${CHECK:-0}" = 1 ]; then
    ok=$(awk -v u="${under:-0}" -v o="${own:-999}" -v m="$MIN_CPU" -v x="$MAX_OWN" \
      'BEGIN { print (u >= m && o <= x) ? 1 : 0 }')
    [ "$ok" = 1 ] || { echo "  FAIL: want >= $MIN_CPU% for the spinner, <= $MAX_OWN% for tunelab"; bad=1; }
  fi
done
exit $bad
