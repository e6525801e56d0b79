#!/usr/bin/env bash
# A/A calibration of `tune`: SWEEPS sweeps of a knob that has no effect on
# the workload (vm.dirty_expire_centisecs under io.file-read: cached reads
# that write nothing), at the default trial count and at --trials 3, each
# judged against the live value as tune judges it. Any "significantly
# better" is a false verdict; the target is none in at least 19 of 20
# sweeps. Prints winners found / SWEEPS per setting with a 95% CI (Wilson)
# of the false-winner rate, and the rounds each sweep ran.
#
#   sudo bench/aa_tune.sh                           # 20 + 20 sweeps, target/release/tunelab
#   sudo NOISE=1 bench/aa_tune.sh                   # with a busy loop and disk noise running
#   sudo SWEEPS=5 TUNELAB=target/debug/tunelab bench/aa_tune.sh
#   sudo NOISE=1 DOC=docs/tuning.md bench/aa_tune.sh  # also put the output in the docs page
#
# With DOC, the output replaces what stands between the page's
# `<!-- aa_tune:begin -->` and `<!-- aa_tune:end -->` lines.
# NOISE=1 starts, for the whole run, one shell busy loop (a CPU) and a
# writer that rewrites a 64 MiB file with fdatasync in the scratch
# directory (disk noise); both are stopped and removed at the end. Runs go
# to a scratch database and target made here: the user's store is not
# touched. The knob is restored by tune itself after every sweep.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/docblock.sh
[ -z "${DOC:-}" ] || docblock_check "$DOC" aa_tune
SWEEPS=${SWEEPS:-20}
BIN=${TUNELAB:-${CARGO_TARGET_DIR:-target}/release/tunelab}
KNOB=${KNOB:-vm.dirty_expire_centisecs}
EXP=${EXP:-io.file-read}
PARAMS=${PARAMS:--p size=16M}
[ -x "$BIN" ] || { echo "no binary at $BIN: cargo build --release first (or set TUNELAB)"; exit 2; }
[ "$(id -u)" = 0 ] || { echo "tune changes $KNOB: run as root (sudo)"; exit 3; }
work=$(mktemp -d /tmp/aa-tune.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/target"
live=$(cat /proc/sys/vm/dirty_expire_centisecs)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# Two values beside the live one (tune adds the live value as an arm).
values="$((live / 2)),$((live * 2))"
[ "$KNOB" = vm.dirty_expire_centisecs ] || values=${VALUES:?set VALUES for another knob}

load="none"
if [ "${NOISE:-0}" = 1 ]; then
  (while :; do :; done) &
  pids+=($!)
  (while :; do dd if=/dev/zero of="$work/noise" bs=1M count=64 conv=fdatasync status=none; done) &
  pids+=($!)
  load="a shell busy loop (one CPU) and a 64 MiB dd rewrite with fdatasync in a loop (disk)"
  sleep 1
fi

sweep() { # label, extra flags…
  local label=$1; shift
  local found=0 rounds=()
  for i in $(seq 1 "$SWEEPS"); do
    out="$work/$label-$i.txt"
    # shellcheck disable=SC2086
    "$BIN" --db "$work/aa.db" tune "$KNOB" --values "$values" -e "$EXP" $PARAMS \
      --target "$work/target" --quiet-check 0 "$@" >"$out" 2>"$work/$label-$i.err" ||
      { echo "$label sweep $i failed (exit $?):"; tail -5 "$work/$label-$i.err"; exit 1; }
    # The winner line starts "KNOB=V is …"; "no value is …" is no winner.
    if grep -q "^$KNOB=.* is significantly better than the live value" "$out"; then
      found=$((found + 1))
    fi
    rounds+=("$("$BIN" --db "$work/aa.db" --json show last | python3 -c \
      'import json,sys; r=json.load(sys.stdin)["results"]; print(min(len(x["metrics"][0]["samples"]) for x in r))')")
  done
  python3 - "$label" "$found" "$SWEEPS" "${rounds[*]}" <<'PY'
import math, sys
label, k, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
z = 1.959964
p = k / n
den = 1 + z * z / n
mid = (p + z * z / (2 * n)) / den
half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
rs = sorted(int(r) for r in rounds)
print(f"| {label} | {k} / {n} | {100*max(0, mid-half):.1f}–{100*min(1, mid+half):.1f}% "
      f"| {rs[0]}–{rs[-1]} (median {rs[len(rs)//2]}) | {'yes' if n - k >= math.ceil(0.95 * n) else 'NO'} |")
PY
}

{
  echo "A/A check of tune: $KNOB (no effect: $EXP $PARAMS reads a cached file and writes nothing)"
  echo "values $values plus the live value $live; $SWEEPS sweeps per setting"
  echo "machine: $(nproc) CPUs, kernel $(uname -r); load during the sweeps: $load"
  echo "binary: $(basename "$(dirname "$BIN")")/$(basename "$BIN"); date: $(date -u +%Y-%m-%d)"
  echo
  echo "| setting | sweeps with a winner | 95% CI of the false-winner rate | rounds per sweep | ≥ 19 of 20 without |"
  echo "|---|---|---|---|---|"
  sweep "default trials"
  sweep "--trials 3" --trials 3
  echo
  echo "load average (1, 5, 15 min): $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after"
} | tee "$work/report.txt"

if [ -n "${DOC:-}" ]; then
  { echo '```text'; cat "$work/report.txt"; echo '```'; } >"$work/doc"
  docblock "$DOC" aa_tune "$work/doc"
fi
