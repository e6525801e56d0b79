#!/bin/sh
# Guest side of the board lab's diagnose steps (copied to /wl/check.sh):
#   check.sh NAME EXPECTED FORBIDDEN SECONDS [ARGS...]
# runs `tunelab diagnose -- /wl/NAME SECONDS ARGS`, prints the findings and
# tunelab's own CPU line, and fails when the EXPECTED finding id (an ERE of
# ids without the "diagnose." prefix, "" for none) is missing, a FORBIDDEN
# one is there, or the user-lock finding names a C library function.
# EXPECTED as ID=WORD also wants WORD on that finding's line (the
# program's own function a finding must name).
# The spinner prints its own share of a CPU (cpu_pct=, getrusage): with
# MIN_CPU set it must keep at least that %, and with MAX_OWN set tunelab's
# own CPU over the interval (its report line) must stay at most that % of
# one CPU.
n=$1 want=$2 not=$3 secs=$4
shift 4
out=/tmp/dx-$n.txt
tunelab diagnose --no-store --startup-runs 0 -- /wl/$n "$secs" "$@" >$out 2>&1
s=$?
grep -E "^\\[|tunelab's own CPU|cpu_pct=|held|who ran|caller|from " $out | head -n 20
# With TUNELAB_DIAGNOSE_COST set, where tunelab's own CPU went (stderr).
grep "^tunelab cost:" $out
ok=1
[ $s = 0 ] || { echo "diagnose exit $s"; ok=0; }
word=
case $want in *=*) word=${want#*=} want=${want%%=*} ;; esac
if [ -n "$want" ] && ! grep -qE "\\(diagnose\\.($want)\\)" $out; then echo "missing: $want"; ok=0; fi
if [ -n "$word" ] && ! grep -E "\\(diagnose\\.($want)\\)" $out | grep -qF "$word"; then
  echo "$want does not name $word"; ok=0
fi
if [ -n "$not" ] && grep -qE "\\(diagnose\\.($not)\\)" $out; then echo "false finding: $not"; ok=0; fi
if grep -E "\\(diagnose\\.user-lock\\)" $out | grep -qE "critical section in _|from __lll|from ___pthread"; then
  echo "user-lock names a C library function"; ok=0
fi
if [ -n "${MIN_CPU:-}" ]; then
  got=$(sed -n 's/.*cpu_pct=\([0-9.]*\).*/\1/p' $out | head -n 1)
  awk -v g="${got:-0}" -v m="$MIN_CPU" 'BEGIN { exit !(g >= m) }' ||
    { echo "the program got ${got:-?}% of a CPU under diagnose (want >= $MIN_CPU%)"; ok=0; }
fi
if [ -n "${MAX_OWN:-}" ]; then
  own=$(grep "tunelab's own CPU time over the interval" $out | sed -n 's/.*(\([0-9.]*\)% of one CPU).*/\1/p' | head -n 1)
  awk -v o="${own:-999}" -v m="$MAX_OWN" 'BEGIN { exit !(o <= m) }' ||
    { echo "tunelab used ${own:-?}% of one CPU (want <= $MAX_OWN%)"; ok=0; }
fi
# On a failure: the profile's summary (what a missing hot spot rests on)
# and the end of the report.
[ $ok = 1 ] || { sed -n '/^== CPU profile/,/^== /p' $out | head -n 12; tail -n 40 $out; }
rm -f $out
[ $ok = 1 ]
