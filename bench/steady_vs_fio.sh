#!/bin/sh
# flash.steady-state vs fio's steady-state detection (--ss) on the same file system,
# in one run, alternating: both write 64 KiB O_DIRECT blocks sequentially into a file
# of SIZE (wrapping) until their steady-state rule holds, and report the steady rate.
#
#   tunelab  flash.steady-state size=SIZE chunk=64K window=1s windows=10 range=0.25
#            slope=0.1 min_written=MIN: the mean rate of the 10 steady windows.
#   fio      --rw=write --bs=64k --direct=1 --size=SIZE --time_based --runtime=MAX
#            --ss=bw_slope:10% --ss_dur=10s --ss_ramp=RAMP: fio's mean bandwidth
#            over its run (bw_bytes), and whether the criterion was attained.
# fio's slope criterion is a share of the mean per second over ss_dur; tunelab's is the
# fitted change across its windows (docs/flash.md). Per round: ratio = tunelab / fio
# steady rate; the median ratio over ROUNDS is printed. A card with a write cache
# makes fio's whole-run mean include the burst (it has no cache figure): read its
# ratio with that in mind; tunelab prints its cache and burst separately.
#
#   bench/steady_vs_fio.sh [TARGET_DIR]     (default: a directory under /var/tmp)
# Environment: SIZE (default 256M), ROUNDS (3), MAX (120 s), RAMP (5 s), MIN (64M),
#   RANGE (0.25: tunelab's range=), TUNELAB (default target/debug/tunelab).
set -eu
dir=${1:-/var/tmp/tunelab-ssfio}
SIZE=${SIZE:-256M} ROUNDS=${ROUNDS:-3} MAX=${MAX:-120} RAMP=${RAMP:-5} MIN=${MIN:-64M} RANGE=${RANGE:-0.25}
TUNELAB=${TUNELAB:-target/debug/tunelab}
for t in fio jq "$TUNELAB"; do
  command -v "$t" >/dev/null 2>&1 || [ -x "$t" ] || { echo "needs $t" >&2; exit 4; }
done
mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work" "$dir/fio.dat"' EXIT INT TERM
echo "round  tunelab_MB/s  fio_MB/s  ratio  fio_attained  tunelab_cache_MiB"
ratios=""
r=1
while [ "$r" -le "$ROUNDS" ]; do
  # A device that never settles within MAX (noisy virtual disks do) is a
  # result too: the round says so and the next one runs.
  if "$TUNELAB" run flash.steady-state --target "$dir" --no-store --quiet-check 0 --json \
    -p size="$SIZE" -p chunk=64K -p min_written="$MIN" -p max_time="${MAX}s" -p range="$RANGE" \
    >"$work/t.json" 2>"$work/t.err"; then
    t=$(jq '[.results[0].metrics[] | select(.name=="steady_rate") | .summary.median][0]' "$work/t.json")
    c=$(jq '[.results[0].metrics[] | select(.name=="cache_bytes") | .summary.median][0]' "$work/t.json")
  elif grep -q "no steady state" "$work/t.err"; then
    echo "round $r: tunelab: $(grep -o 'no steady state[^:]*' "$work/t.err")" >&2
    t=nan c=nan
  else
    cat "$work/t.err" >&2; exit 1
  fi
  fio --name=ss --filename="$dir/fio.dat" --rw=write --bs=64k --direct=1 --size="$SIZE" \
    --time_based --runtime="$MAX" --ss=bw_slope:10% --ss_dur=10s --ss_ramp="$RAMP" \
    --output-format=json >"$work/f.json" 2>"$work/f.err" || { cat "$work/f.err" >&2; exit 1; }
  f=$(jq '.jobs[0].write.bw_bytes' "$work/f.json")
  a=$(jq -r '.jobs[0].steadystate.attained // 0' "$work/f.json")
  if [ "$t" = nan ]; then
    printf '%5d  %12s  %8.2f  %5s  %12s  %17s\n' "$r" "no steady" "$(echo "$f" | awk '{print $1/1e6}')" - "$a" -
  else
    ratio=$(echo "$t $f" | awk '{printf "%.3f", $1/$2}')
    echo "$r $t $f $ratio $a $c" | awk '{printf "%5d  %12.2f  %8.2f  %5s  %12s  %17.1f\n", $1, $2/1e6, $3/1e6, $4, $5, $6/1048576}'
    ratios="$ratios $ratio"
  fi
  r=$((r + 1))
done
[ -n "$ratios" ] || { echo "no round reached tunelab's steady state: no ratio (raise MAX, or RANGE on a noisy disk)"; exit 0; }
echo "$ratios" | tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "median ratio tunelab/fio: %.3f over %d rounds\n", m, NR}'
