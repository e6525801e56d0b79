#!/usr/bin/env bash
# Issue 42's scale probes, measured in one run on this machine:
#   - `remote --inventory` over N unreachable hosts (half refusing on
#     loopback, half on a loopback port that never answers): wall time, the
#     causes in the error column, and how long the first SIGTERM takes to end
#     it (during the probe, and with ssh connections open);
#   - `diagnose --for 20s`: how long the first SIGINT takes to end it;
#   - `runs` with an imported run whose label is at the cap (200 characters);
#   - importing one run at the result cap (5000 results): peak RSS (GNU
#     time), then `show` of it; and one past the cap (refused);
#   - the first SIGTERM during an import of many runs: time to exit, runs kept.
#
#   bench/bounds_scale.sh [TUNELAB]    (default target/release/tunelab)
#   env: HOSTS=10000 PARALLEL=64 RUNS=5000
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-target/release/tunelab}")
hosts=${HOSTS:-10000}
parallel=${PARALLEL:-64}
nruns=${RUNS:-5000}
[ -x /usr/bin/time ] || { echo "bounds_scale: needs /usr/bin/time (apt-get install time)" >&2; exit 4; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TUNELAB_DB=$work/a.db
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc -l; }

# Wait for pid $1 after SIGTERM, print the seconds it took.
term_latency() {
  local t0
  kill -TERM "$1"
  t0=$(now)
  wait "$1" 2>/dev/null || true
  printf '%.2f' "$(since "$t0")"
}

# Half the hosts refuse (127.0.0.x port 1), half never answer: a loopback
# listener whose accept queue is full (never accepted) drops their SYNs, as
# a firewall does (TEST-NET addresses are refused at once by some sandboxed
# networks, so they would not test the wait). -F /dev/null: no ssh
# configuration redirects the hosts, so the in-process probe decides.
python3 - >"$work/hole.port" <<'PY' &
import socket, sys, time
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(0)
fill = []
for _ in range(3):
    c = socket.socket(); c.setblocking(False)
    try: c.connect(l.getsockname())
    except BlockingIOError: pass
    fill.append(c)
print(l.getsockname()[1], flush=True)
time.sleep(3600)
PY
hole=$!
trap 'kill $hole 2>/dev/null; rm -rf "$work"' EXIT
while [ ! -s "$work/hole.port" ]; do sleep 0.1; done
hport=$(cat "$work/hole.port")
{ echo "[fleet]"
  for i in $(seq 1 "$hosts"); do
    if [ $((i % 2)) = 0 ]; then echo "h$i ansible_host=127.0.$((i / 250 % 250)).$((1 + i % 250)) ansible_port=1"
    else echo "h$i ansible_host=127.0.0.1 ansible_port=$hport"; fi
  done; } >"$work/inv.ini"
t0=$(now)
"$bin" --json remote --inventory "$work/inv.ini" --parallel "$parallel" --no-store --allow-dynamic \
  -o "-F /dev/null" -- run ipc.pipe >"$work/remote.json" 2>"$work/remote.err" || true
printf 'remote --inventory, %d unreachable hosts (half refusing, half never answering; --parallel %d): %.1f s\n' \
  "$hosts" "$parallel" "$(since "$t0")"
python3 - "$work/remote.json" <<'PY'
import json, sys, collections
hosts = json.load(open(sys.argv[1]))["hosts"]
causes = collections.Counter()
for h in hosts:
    e = h.get("error") or ""
    causes["refused" if "refused" in e else "no answer" if "no answer" in e else "unreachable" if "unreachable" in e else "EMPTY" if not e else "other"] += 1
print("  %d rows, %d unreachable; error column by cause: %s" % (
    len(hosts), sum(h["status"] == "unreachable" for h in hosts), dict(causes)))
PY
"$bin" remote --inventory "$work/inv.ini" --parallel "$parallel" --no-store --allow-dynamic -o "-F /dev/null" \
  -- run ipc.pipe >/dev/null 2>&1 &
pid=$!
sleep 1
printf 'remote: first SIGTERM during the probe ended it in %s s\n' "$(term_latency $pid)"
# Connections in progress: an ssh stand-in that hangs (as over a dead link).
printf '#!/bin/sh\nexec sleep 600\n' >"$work/ssh" && chmod 755 "$work/ssh"
TUNELAB_SSH=$work/ssh "$bin" remote --parallel 64 --no-store --allow-dynamic $(seq -f 'h%g' 1 1000) \
  -- run ipc.pipe >/dev/null 2>&1 &
pid=$!
sleep 2
printf 'remote: first SIGTERM with 64 connections open ended it in %s s (stand-ins left: %s)\n' \
  "$(term_latency $pid)" "$(pgrep -c -f "^sleep 600$" || true)"

# diagnose --for 20s: time from SIGINT to exit (the interval is stored).
"$bin" diagnose --for 20s >/dev/null 2>&1 &
pid=$!
sleep 3
kill -INT "$pid"; t0=$(now); wait "$pid" 2>/dev/null || true
printf 'diagnose --for 20s: first SIGINT ended it in %.2f s; stored: %s\n' "$(since "$t0")" \
  "$("$bin" runs --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["status"])')"

"$bin" run ipc.pipe --trials 2 --warmup 0 --quiet-check 0 --trial-time 1ms >/dev/null 2>&1
"$bin" export last --format json >"$work/one.json"
python3 - "$work" "$nruns" <<'PY'
import json, sys
work, n = sys.argv[1], int(sys.argv[2])
run = json.load(open(f"{work}/one.json"))
def with_id(i):
    r = dict(run); r["id"] = "20260101-000000-%06x" % i; return r
lab = with_id(1); lab["label"] = "l|" * 100
json.dump(lab, open(f"{work}/label.json", "w"))
big = with_id(2); big["results"] = [run["results"][0]] * 5000
json.dump(big, open(f"{work}/cap.json", "w"))
over = with_id(3); over["results"] = [run["results"][0]] * 5001
json.dump(over, open(f"{work}/over.json", "w"))
json.dump([with_id(10 + i) for i in range(n)], open(f"{work}/many.json", "w"))
PY
"$bin" import "$work/label.json" >/dev/null 2>&1
t0=$(now); "$bin" runs >/dev/null; printf 'runs with a label at the cap (200 characters): %.2f s\n' "$(since "$t0")"

rss() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
printf 'import of one run at the result cap (%s MiB JSON): peak RSS %s MiB\n' \
  "$(($(stat -c %s "$work/cap.json") >> 20))" "$(($(rss "$bin" import "$work/cap.json") / 1024))"
printf 'show of it: peak RSS %s MiB\n' "$(($(rss "$bin" show last) / 1024))"
if "$bin" import "$work/over.json" >/dev/null 2>"$work/over.err"; then echo "past the cap: IMPORTED (wrong)"; else
  printf 'past the cap: refused (exit %s): %s\n' "$?" "$(tail -1 "$work/over.err" | cut -c1-160)"; fi

before=$("$bin" runs --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
"$bin" import "$work/many.json" >/dev/null 2>&1 &
pid=$!
sleep 1
printf 'import of %d runs: first SIGTERM ended it in %s s; ' "$nruns" "$(term_latency $pid)"
after=$("$bin" runs --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
echo "runs stored before $before, after $after"
