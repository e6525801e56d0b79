#!/bin/bash
# diagnose's explanation vs perf, side by side, on the known-bottleneck C
# workloads of tests/workloads/ (built here with cc), each run once under
# `tunelab diagnose` and once under perf, one after the other:
#
#  * top symbol: tunelab's CPU profile vs `perf record -F 999 -g` +
#    `perf report --no-children --sort sym`: the top symbol of each and its
#    share;
#  * off-CPU: tunelab's blocked time (scheduler switch events) vs
#    `perf sched record` + `perf sched timehist`: the workload's total time
#    off CPU ("wait time" of its tasks) and the share of its threads' time
#    spent waiting (what the mutex finding reports), with the difference in
#    points;
#  * the findings tunelab raised.
#
# Needs: cc, perf (Debian: linux-perf), root (perf sched), tracefs mounted
# at /sys/kernel/tracing (mounted here when missing). Prints one block per
# workload; figures are single runs on whatever else the machine is doing.
# Usage: bench/explain_vs_perf.sh [SECONDS]   (default 2 per run)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-2}
command -v perf >/dev/null || { echo "explain_vs_perf: perf not found (apt-get install linux-perf)" >&2; exit 4; }
command -v cc >/dev/null || { echo "explain_vs_perf: no C compiler (cc)" >&2; exit 4; }
[ -e /sys/kernel/tracing/events/sched ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT

cargo build -q 2>/dev/null || cargo build
TL=target/debug/tunelab
for w in hotspot mutex fsync nanosleep mmap smallwrites yield pipe; do
  cc -O2 -g -fno-omit-frame-pointer -pthread -o "$T/wl_$w" "tests/workloads/$w.c"
done

for w in hotspot mutex fsync nanosleep mmap smallwrites yield pipe; do
  echo
  echo "== $w ($secs s)"
  args=("$secs" "$T")
  "$TL" --json diagnose --no-store --startup-runs 0 -- "$T/wl_$w" "${args[@]}" > "$T/tl.json" 2>/dev/null
  perf record -q -F 999 -g -o "$T/perf.data" -- "$T/wl_$w" "${args[@]}" >/dev/null 2>&1
  perf report -q -i "$T/perf.data" --no-children --sort sym --stdio 2>/dev/null \
    | grep -E '^ +[0-9.]+%' | head -3 > "$T/perf.top" || true
  perf sched record -q -o "$T/sched.data" -- "$T/wl_$w" "${args[@]}" >/dev/null 2>&1
  perf sched timehist -i "$T/sched.data" 2>/dev/null > "$T/timehist" || true
  python3 - "$T" "wl_$w" <<'EOF'
import json, re, sys
T, comm = sys.argv[1], sys.argv[2]
run = json.load(open(f"{T}/tl.json"))
d = run["run"]["diagnosis"]
prof = d["profile"].get("data", {})
syms = prof.get("symbols", [])
tl_top = (syms[0]["symbol"], syms[0]["percent"]) if syms else ("-", 0.0)
perf_top = ("-", 0.0)
for line in open(f"{T}/perf.top"):
    m = re.match(r"\s+([0-9.]+)%\s+\[[.k]\]\s+(\S+)", line)
    if m:
        perf_top = (m.group(2), float(m.group(1)))
        break
print(f"  top symbol   tunelab {tl_top[0]} {tl_top[1]:.1f}%   perf {perf_top[0]} {perf_top[1]:.1f}%   "
      f"same: {'yes' if tl_top[0] == perf_top[0] else 'no'}   share diff {abs(tl_top[1] - perf_top[1]):.1f} points")
# perf sched timehist: time cpu task wait sch_delay run
wait = sch = runt = 0.0
per_tid = {}
for line in open(f"{T}/timehist"):
    f = line.split()
    if len(f) < 6 or not f[2].startswith(comm[:15]):
        continue
    try:
        w, s, r = float(f[3]), float(f[4]), float(f[5])
    except ValueError:
        continue
    wait += w; sch += s; runt += r
    tid = f[2].split("[")[-1].split("/")[0]
    per_tid.setdefault(tid, [0.0, 0.0, 0.0])
    for i, v in enumerate((w, s, r)):
        per_tid[tid][i] += v
off = d["offcpu"].get("data", {})
tl_blocked = off.get("blocked_s", 0.0)
perf_blocked = wait / 1e3
print(f"  off-CPU      tunelab blocked {tl_blocked:.3f} s ({off.get('source', 'skipped')})   "
      f"perf sched blocked {perf_blocked:.3f} s   ratio {tl_blocked / perf_blocked if perf_blocked else float('nan'):.2f}")
causes = off.get("causes", [])
if causes:
    c = causes[0]
    print(f"  top wait     tunelab: {c['cause']} from {c['caller'] or '-'}: {c['total_s']:.3f} s, longest {c['max_s'] * 1e3:.2f} ms")
if comm == "wl_mutex" and per_tid:
    # Share of the worker threads' time spent waiting: the main thread
    # (pid == tid, in pthread_join) left out, as the finding does.
    workers = {t: v for t, v in per_tid.items() if v[2] > 0 and v[0] < sum(v) * 0.99}
    tot = sum(sum(v) for v in workers.values())
    perf_share = sum(v[0] for v in workers.values()) / tot * 100 if tot else 0
    lock = [f for f in run["findings"] if f["id"] == "diagnose.user-lock"]
    m = re.search(r"lock ([0-9.]+)% of their time", lock[0]["title"]) if lock else None
    tl_share = float(m.group(1)) if m else float("nan")
    print(f"  lock wait    tunelab {tl_share:.1f}% of thread time   perf sched {perf_share:.1f}% (worker threads' wait / (wait+delay+run))   "
          f"diff {abs(tl_share - perf_share):.1f} points")
print("  findings     " + (", ".join(f["id"] for f in run["findings"]) or "none"))
EOF
done
