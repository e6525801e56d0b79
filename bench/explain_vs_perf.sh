#!/bin/bash
# diagnose's explanation vs perf, side by side, on the known-bottleneck C
# workloads of tests/workloads/ (built here with cc), each run once under
# `tunelab diagnose` and once under perf, one after the other:
#
#  * top symbol: tunelab's CPU profile vs `perf record -F 999 -g` +
#    `perf report --no-children --sort sym`: the top symbol of each and its
#    share;
#  * off-CPU: tunelab's blocked time (scheduler switch events) vs
#    `perf sched record` + `perf sched timehist --state`: the workload's
#    time blocked (the "wait time" after a switch out asleep; waits after a
#    preemption are shown apart, as run-queue time), and for the mutex
#    program the share of the worker threads' lifetime spent blocked (what
#    the lock finding reports), from separate runs and from one run seen by
#    both (perf sched records while tunelab diagnoses), with the difference
#    in points;
#  * the findings tunelab raised.
#
# Needs: cc, perf (Debian: linux-perf), root (perf sched), tracefs mounted
# at /sys/kernel/tracing (mounted here when missing). Prints one block per
# workload; figures are single runs on whatever else the machine is doing.
# Usage: bench/explain_vs_perf.sh [SECONDS [WORKLOAD…]]   (default 2 per run,
#        all eight workloads; TUNELAB=path uses that binary, no build)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-2}
shift || true
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(hotspot mutex fsync nanosleep mmap smallwrites yield pipe)
command -v perf >/dev/null || { echo "explain_vs_perf: perf not found (apt-get install linux-perf)" >&2; exit 4; }
command -v cc >/dev/null || { echo "explain_vs_perf: no C compiler (cc)" >&2; exit 4; }
[ -e /sys/kernel/tracing/events/sched ] || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT

if [ -n "${TUNELAB:-}" ]; then TL=$TUNELAB; else
  cargo build -q 2>/dev/null || cargo build
  TL=target/debug/tunelab
fi
for w in "${workloads[@]}"; do
  cc -O2 -g -fno-omit-frame-pointer -pthread -o "$T/wl_$w" "tests/workloads/$w.c"
done

for w in "${workloads[@]}"; do
  echo
  echo "== $w ($secs s)"
  args=("$secs" "$T")
  "$TL" --json diagnose --no-store --startup-runs 0 -- "$T/wl_$w" "${args[@]}" > "$T/tl.json" 2>/dev/null
  perf record -q -F 999 -g -o "$T/perf.data" -- "$T/wl_$w" "${args[@]}" >/dev/null 2>&1
  perf report -q -i "$T/perf.data" --no-children --sort sym --stdio 2>/dev/null \
    | grep -E '^ +[0-9.]+%' | head -3 > "$T/perf.top" || true
  perf sched record -q -o "$T/sched.data" -- "$T/wl_$w" "${args[@]}" >/dev/null 2>&1
  perf sched timehist --state -i "$T/sched.data" 2>/dev/null > "$T/timehist" || true
  : > "$T/timehist_same"
  if [ "$w" = mutex ]; then
    # The same execution seen by both: perf sched records (system-wide)
    # while tunelab diagnoses, so run-to-run noise drops out of the
    # lock-wait comparison.
    perf sched record -q -o "$T/same.data" -- \
      "$TL" --json diagnose --no-store --startup-runs 0 -- "$T/wl_$w" "${args[@]}" > "$T/tl_same.json" 2>/dev/null || true
    perf sched timehist --state -i "$T/same.data" 2>/dev/null > "$T/timehist_same" || true
  fi
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
# perf sched timehist --state: time cpu task wait sch_delay run state, one
# line per switch out of `task`. `wait` is the time from its previous switch
# out to this switch in (wake-up delay included, preemptions included),
# `sch delay` the part of it after the wake-up, `state` the state it left
# in (R: preempted, still runnable). Per thread: [blocked (the wait after a
# switch out in S/D/I…), preempted (after a switch out in R), run, sch delay].
def timehist(path):
    per_tid, last = {}, {}
    for line in open(path):
        f = line.split()
        if len(f) < 7 or not f[2].startswith(comm[:15]):
            continue
        try:
            w, s, r = float(f[3]), float(f[4]), float(f[5])
        except ValueError:
            continue
        tid = f[2].split("[")[-1].split("/")[0]
        v = per_tid.setdefault(tid, [0.0, 0.0, 0.0, 0.0])
        v[1 if last.get(tid) == "R" else 0] += w
        v[2] += r
        v[3] += s
        last[tid] = f[6]
    return per_tid
per_tid = timehist(f"{T}/timehist")
# Blocked only (a switch out asleep), as tunelab's; preemptions apart.
wait = sum(v[0] for v in per_tid.values())
preempted = sum(v[1] for v in per_tid.values())
off = d["offcpu"].get("data", {})
tl_blocked = off.get("blocked_s", 0.0)
perf_blocked = wait / 1e3
print(f"  off-CPU      tunelab blocked {tl_blocked:.3f} s ({off.get('source', 'skipped')})   "
      f"perf sched blocked {perf_blocked:.3f} s   ratio {tl_blocked / perf_blocked if perf_blocked else float('nan'):.2f}   "
      f"(run queue: tunelab {off.get('runqueue_s', 0.0):.3f} s, perf preempted {preempted / 1e3:.3f} s)")
causes = off.get("causes", [])
if causes:
    c = causes[0]
    print(f"  top wait     tunelab: {c['cause']} from {c['caller'] or '-'}: {c['total_s']:.3f} s, longest {c['max_s'] * 1e3:.2f} ms")
def lock_rows(label, per_tid, run):
    # Worker threads only: the main thread (in pthread_join, blocked ~100%
    # of its life) is left out, as the finding does. Like for like with
    # tunelab's lock share: time blocked (switch out asleep → back on a
    # CPU) over the thread's lifetime (blocked + preempted + run).
    workers = {t: v for t, v in per_tid.items() if v[2] > 0 and v[0] < sum(v[:3]) * 0.99}
    life = sum(sum(v[:3]) for v in workers.values())
    if not life:
        return
    blocked = sum(v[0] for v in workers.values()) / life * 100
    old_def = sum(v[0] + v[1] for v in workers.values()) / sum(sum(v) for v in workers.values()) * 100
    lock = [f for f in run["findings"] if f["id"] == "diagnose.user-lock"]
    m = re.search(r"lock ([0-9.]+)% of their time", lock[0]["title"]) if lock else None
    tl = float(m.group(1)) if m else float("nan")
    print(f"  lock wait    {label}: tunelab {tl:.1f}% of thread time   perf sched blocked/lifetime {blocked:.1f}%   "
          f"diff {abs(tl - blocked):.1f} points   (perf wait/(wait+delay+run), preemptions in: {old_def:.1f}%)")
if comm == "wl_mutex":
    lock_rows("separate runs", per_tid, run)
    same = timehist(f"{T}/timehist_same")
    try:
        lock_rows("same run     ", same, json.load(open(f"{T}/tl_same.json")))
    except (OSError, ValueError):
        print("  lock wait    same run: no tunelab output")
print("  findings     " + (", ".join(f["id"] for f in run["findings"]) or "none"))
EOF
done
