#!/bin/sh
# CPU used by `tunelab monitor` itself at 1 Hz with 1000 extra processes
# running (sleep 60 ×1000): utime+stime of the monitor from /proc/PID/stat
# over ~8 s, as % of one CPU. Target: < 1%.
set -eu
BIN=${TUNELAB:-target/release/tunelab}
[ -x "$BIN" ] || cargo build --release >/dev/null 2>&1
SECS=${SECS:-8}
HZ=$(getconf CLK_TCK)
pids=""
i=0
while [ $i -lt 1000 ]; do sleep 60 & pids="$pids $!"; i=$((i+1)); done
trap 'kill $pids 2>/dev/null || true' EXIT
echo "processes running: $(ls -d /proc/[0-9]* | wc -l)"
for view in vmstat hogs iostat dirty; do
  "$BIN" monitor $view --interval 1 > /dev/null 2>&1 &
  m=$!
  sleep 1.5   # skip start-up (the first /proc scan)
  t0=$(awk '{print $14+$15}' /proc/$m/stat); s0=$(date +%s.%N)
  sleep "$SECS"
  t1=$(awk '{print $14+$15}' /proc/$m/stat); s1=$(date +%s.%N)
  kill -INT $m; wait $m || true
  awk -v a="$t0" -v b="$t1" -v s0="$s0" -v s1="$s1" -v hz="$HZ" -v v="$view" 'BEGIN {
    pct = (b - a) / hz / (s1 - s0) * 100
    printf "monitor %-6s: %d ticks in %.1f s = %.2f%% of one CPU %s\n", v, b - a, s1 - s0, pct, (pct < 1 ? "(ok < 1%)" : "(OVER 1%)") }'
done
