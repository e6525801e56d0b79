#!/usr/bin/env bash
# Default `run io.record-size` on a 20 MB/s device (issue 24): does it finish
# within 4 minutes with n >= 3 for every point, and how far off is the ETA?
#
#   sudo bench/slow_device.sh [TUNELAB]       (default: target/debug/tunelab)
#
# The device is tunelab's own filesystem lab (`--fs ext4`: a loop-mounted
# image) throttled with `--throttle` (a cgroup blkio limit; cgroup v1 limits
# direct I/O, which is io.record-size's default mode). The progress lines go
# to a pipe, as in a log or a serial console: each says the time elapsed and
# what is left. The script timestamps them, and once the run is over prints,
# per line, the ETA against the time that was really left and their ratio,
# then the run's length and the trials of every point. Needs root and jq.
# RATE (bytes/s, default 20000000) and ARGS (extra run arguments) override.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/debug/tunelab}
rate=${RATE:-20000000}
[ "$(id -u)" = 0 ] || { echo "slow_device: needs root (loop device, cgroup)" >&2; exit 3; }
command -v jq >/dev/null || { echo "slow_device: needs jq" >&2; exit 4; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TUNELAB_DB=$work/results.db
t0=$(date +%s.%N)
# shellcheck disable=SC2086
"$bin" run io.record-size --fs ext4 --fs-size 256M --throttle "read=$rate,write=$rate" \
  --target "$work" --json ${ARGS:-} 2> >(while IFS= read -r l; do
    printf '%s %s\n' "$(date +%s.%N)" "$l"; done >"$work/stderr") >"$work/run.json"
t1=$(date +%s.%N)
sleep 0.2
echo "== progress lines (t = seconds since start; ETA vs the time really left)"
awk -v t0="$t0" -v t1="$t1" '
  function secs(s,   m, h) {
    if (s ~ /h/) { split(s, a, "h"); sub("m", "", a[2]); return a[1] * 3600 + a[2] * 60 }
    if (s ~ /m/) { split(s, a, "m"); sub("s", "", a[2]); return a[1] * 60 + a[2] }
    sub("s", "", s); return s + 0
  }
  {
    t = $1 - t0; line = substr($0, index($0, " ") + 1)
    if (match(line, /(about|at most) [0-9hms]+ left/)) {
      eta = substr(line, RSTART, RLENGTH); split(eta, w, " ")
      v = secs(w[1] == "about" ? w[2] : w[3]); real = t1 - $1
      ratio = real > 0 ? v / real : 0
      printf "t=%6.1f  eta=%7.1f s  really left=%7.1f s  ratio=%5.2f  %s\n", t, v, real, ratio, w[1]
      if (w[1] == "about" && real > 5) { n++; if (ratio > worst) worst = ratio; if (ratio > 0 && 1 / ratio > worst) worst = 1 / ratio }
    } else printf "t=%6.1f  %s\n", t, line
  }
  END { if (n) printf "worst ETA factor (lines with > 5 s left): %.2f over %d lines\n", worst, n }
' "$work/stderr"
echo "== run"
awk -v a="$t0" -v b="$t1" 'BEGIN { printf "elapsed %.1f s\n", b - a }'
jq -r '.results[] | "record=\(.params.record) size=\(.params.size) n=\(.metrics[0].summary.n) took=\(.elapsed_s | floor) s stop=\(.metrics[0].summary.stop_reason) write=\(.metrics[0].summary.median / 1e6 | floor) MB/s read=\(.metrics[2].summary.median / 1e6 | floor) MB/s"' "$work/run.json"
jq -r '[.results[] | .metrics[0].summary.n] | "min n over points: \(min)"' "$work/run.json"
