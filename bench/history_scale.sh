#!/bin/sh
# How the store's read commands grow with the number of stored runs (issue 31).
#
# For each N: a fresh SQLite store of N synthetic nightly runs of one experiment
# (io.record-size write_throughput, 5 samples each, ±1% spread and a small wobble
# between runs) on 4 boards, with ONE planted step: from run 0.8·N on, the value is
# 10% lower and kernel.release changes. The runs are written as `tunelab export`
# JSON files (chunks of CHUNK runs) and stored with `tunelab import`, then timed:
#   history   tunelab --json history io.record-size    (change points over all N)
#   runs      tunelab runs                              (lists all N)
#   report    tunelab report --machine board1 --machine board2 -o X.html
#             (a device comparison that selects the newest run of each board)
#   compare   tunelab compare last~1 last
# Each cell is WALL/CPU seconds of one command (median of REPS): wall-clock time and
# the CPU time (user + system) it used — on a shared machine the wall time also holds
# the time other processes had the CPUs, the CPU time does not. The history's
# change points are checked: exactly one, at 0.8·N (± 1%), else the row says MISSED.
# The table prints N vs seconds, so the growth with N is visible; the issue's target
# is history < 2 s at 10,000 runs and < 20 s at 100,000 on its 2-core VM.
#
# Usage: bench/history_scale.sh [N ...]     (default: 1000 2000 10000 100000)
#   env: TUNELAB=path/to/tunelab  CHUNK=5000 (runs per import file)  REPS=1
#        KEEP=1 keeps the stores (their directory is printed) for profiling
#        PG=postgres://USER:PASS@HOST  the same on PostgreSQL: a fresh database
#        history_scale_N (owner USER) per N, made and dropped with createdb/dropdb
#        as the postgres user (root needed for that)
# Needs python3 (writes the JSON and reads the history's JSON).
set -eu
TL=${TUNELAB:-}
if [ -z "$TL" ]; then
    for c in "${CARGO_TARGET_DIR:-target}/release/tunelab" target/release/tunelab \
        "${CARGO_TARGET_DIR:-target}/debug/tunelab"; do
        [ -x "$c" ] && TL=$c && break
    done
    [ -z "$TL" ] && TL=$(command -v tunelab || true)
fi
[ -n "$TL" ] && [ -x "$TL" ] || { echo "tunelab binary not found (set TUNELAB=)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 4; }
CHUNK=${CHUNK:-5000}
REPS=${REPS:-1}
[ $# -gt 0 ] || set -- 1000 2000 10000 100000

WORK=$(mktemp -d "${TMPDIR:-/tmp}/history-scale.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then
    echo "stores kept in $WORK" >&2
else
    trap 'rm -rf "$WORK"' EXIT INT TERM
fi

# Median wall-clock seconds of REPS runs of a command (its output discarded;
# "{rep}" in an argument becomes the repetition's number).
timeit() {
    python3 - "$REPS" "$@" <<'EOF'
import os, resource, subprocess, sys, time, statistics
reps = int(sys.argv[1]); cmd = sys.argv[2:]
ts, cs = [], []
for k in range(reps):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    p = subprocess.run([c.replace("{rep}", str(k)) for c in cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ts.append(time.monotonic() - t)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cs.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    if p.returncode not in (0, 5):
        sys.stderr.write(p.stderr.decode(errors="replace"))
        print("FAIL"); sys.exit(0)
print("%.2f/%.2f" % (statistics.median(ts), statistics.median(cs)))
EOF
}

where="SQLite in $WORK"
[ -z "${PG:-}" ] || where="PostgreSQL at $PG"
echo "store: $where; tunelab $TL; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %10s %12s %12s %12s %12s  %s\n' runs import_s history_s runs_s report_s compare_s change_points
for N in "$@"; do
    D="$WORK/$N"
    mkdir -p "$D"
    python3 - "$N" "$CHUNK" "$D" <<'EOF'
import datetime, json, math, random, statistics, sys
t0 = datetime.datetime(2015, 1, 1)
n, chunk, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = random.Random(31)
step = int(n * 0.8)
def summary(xs):
    s = sorted(xs); m = statistics.median(s); mean = sum(s) / len(s)
    sd = statistics.stdev(s)
    half = 2.776 * sd / math.sqrt(len(s))
    return {"n": len(s), "median": m, "mean": mean, "trimmed_mean": mean, "stddev": sd,
            "cv": sd / mean, "min": s[0], "max": s[-1], "ci95_low": m - half,
            "ci95_high": m + half}
runs = []
for i in range(n):
    base = 50e6 * (0.9 if i >= step else 1.0) * (1 + 0.01 * math.sin(i * 2.3))
    samples = [base * (1 + rng.uniform(-0.01, 0.01)) for _ in range(5)]
    started = (t0 + datetime.timedelta(hours=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
    host = "board%d" % (1 + i % 4)
    runs.append({
        "schema": "tunelab.run/1", "id": "%08d-%s" % (i, host), "label": "nightly",
        "status": "complete", "started": started, "finished": started,
        "tool_version": "bench", "argv": ["tunelab", "run", "io.record-size"],
        "environment": {"host.name": host,
                        "kernel.release": "6.6.0" if i >= step else "6.1.0"},
        "results": [{"experiment": "io.record-size", "params": {"record": 65536},
                     "metrics": [{"name": "write_throughput", "unit": "B/s",
                                  "better": "higher", "samples": samples,
                                  "summary": summary(samples)}],
                     "elapsed_s": 1.0}]})
for k in range(0, n, chunk):
    with open("%s/runs-%07d.json" % (out, k), "w") as f:
        json.dump(runs[k:k + chunk], f)
EOF
    if [ -n "${PG:-}" ]; then
        owner=$(python3 -c "import sys, urllib.parse; print(urllib.parse.urlparse(sys.argv[1]).username)" "$PG")
        su postgres -c "dropdb --if-exists history_scale_$N && createdb -O $owner history_scale_$N"
        export TUNELAB_DB="$PG/history_scale_$N"
    else
        export TUNELAB_DB="$D/results.db"
    fi
    t0=$(date +%s.%N)
    for f in "$D"/runs-*.json; do
        "$TL" import "$f" >/dev/null 2>"$D/import.err" || { cat "$D/import.err" >&2; exit 1; }
    done
    t1=$(date +%s.%N)
    imp=$(python3 -c "print('%.3f' % ($t1 - $t0))")
    hist=$(timeit "$TL" --json history io.record-size)
    cps=$("$TL" --json history io.record-size 2>/dev/null | python3 -c "
import json, sys
n = $N; want = int(n * 0.8)
h = json.load(sys.stdin)
idx = [c['index'] for s in h['series'] for c in s['changes']]
ok = len(idx) == 1 and abs(idx[0] - want) <= max(1, n // 100)
print(('found ' if ok else 'MISSED ') + 'at ' + (','.join(map(str, idx)) or 'none') + ' (planted %d)' % want)")
    runs=$(timeit "$TL" runs)
    report=$(timeit "$TL" report --machine board1 --machine board2 -o "$D/report-{rep}.html")
    compare=$(timeit "$TL" compare last~1 last)
    printf '%-8s %10s %12s %12s %12s %12s  %s\n' "$N" "$imp" "$hist" "$runs" "$report" "$compare" "$cps"
    [ "${KEEP:-0}" = 1 ] || rm -rf "$D"
    if [ -n "${PG:-}" ] && [ "${KEEP:-0}" != 1 ]; then su postgres -c "dropdb history_scale_$N"; fi
done
