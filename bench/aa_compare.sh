#!/usr/bin/env bash
# A/A calibration of `tunelab compare`: the same experiment N times with
# nothing changed, every pair compared (`compare A B --json`), and the rate
# of "improved"/"regressed" metric verdicts — all of them false — with a
# Wilson 95% CI, per experiment. Two orders, each in its own database:
# back to back (A A A … then the next experiment) and interleaved (one run
# of each experiment per round). Three rules side by side:
#   calibrated  compare as shipped: the between-run floor learned from the
#               other runs of the point in the database
#   default     compare --no-history: the stated default floor
#   run CI only the former rule (the runs' own bootstrap CI and the ±noise
#               threshold), recomputed from the same JSON for contrast
# Then a real change: mem.bandwidth threads=1 pinned to one CPU that a busy
# loop also holds (about half the CPU), compared with the back-to-back runs;
# its verdict must be "regressed".
#
#   bench/aa_compare.sh                        # N=6, TRIALS=10, both orders
#   NOISE=1 bench/aa_compare.sh                # with a CPU busy loop + dd writing
#   ORDER=interleaved N=8 bench/aa_compare.sh
#   EXPS='ipc.pipe test=latency;sched.messaging groups=5' bench/aa_compare.sh
#   DOC=docs/calibration.md NOISE=1 bench/aa_compare.sh   # also update the page
#   FIXTURE=tests/fixtures/aa bench/aa_compare.sh  # also keep the runs' samples
#
# With FIXTURE, each experiment's back-to-back runs are written there as
# `NAME.json` (experiment, parameters, and per metric the samples of every
# run; no host facts): the A/A fixtures tests/aa_calibration.rs judges.
# With DOC, the output replaces what stands between the page's
# `<!-- aa_compare:begin -->` and `<!-- aa_compare:end -->` lines.
# Everything runs in a scratch directory made here (databases, the
# experiments' targets, the noise file), removed at the end with the noise
# processes: the user's store is not touched.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/docblock.sh
[ -z "${DOC:-}" ] || docblock_check "$DOC" aa_compare
N=${N:-6}
TRIALS=${TRIALS:-10}
ORDER=${ORDER:-both}
NOISE=${NOISE:-0}
SHIFT=${SHIFT:-1}
BIN=${TUNELAB:-${CARGO_TARGET_DIR:-target}/release/tunelab}
EXPS=${EXPS:-ipc.pipe test=latency;io.file-read size=16M;mem.bandwidth kernel=copy threads=1 size=64M sweep=no}
[ -x "$BIN" ] || { echo "no binary at $BIN: cargo build --release first (or set TUNELAB)"; exit 2; }
[ "$N" -ge 2 ] || { echo "N=$N: at least 2 runs are needed for a pair"; exit 2; }
case $ORDER in backtoback | interleaved | both) ;; *) echo "ORDER=$ORDER: backtoback, interleaved or both"; exit 2 ;; esac
command -v python3 >/dev/null || { echo "python3 missing: apt-get install -y python3"; exit 4; }
work=$(mktemp -d /tmp/aa-compare.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/target"
IFS=';' read -r -a exps <<<"$EXPS"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

if [ "$NOISE" = 1 ]; then
  (while :; do :; done) &
  pids+=($!)
  (while :; do dd if=/dev/zero of="$work/noise" bs=1M count=128 conv=fsync status=none; done) &
  pids+=($!)
  echo "noise: a busy loop (pid ${pids[0]}) and dd writing 128 MiB files (pid ${pids[1]})" >&2
fi

# run ORDER-DB EXPERIMENT-AND-PARAMS [wrapper…]: one stored run; its id goes to ORDER.ids
run() {
  local db=$1 spec=$2
  shift 2
  local name=${spec%% *} args=()
  for kv in ${spec#"$name"}; do args+=(-p "$kv"); done
  "$@" "$BIN" run "$name" "${args[@]}" --trials "$TRIALS" --quiet-check 0 --db "$work/$db.db" \
    --target "$work/target" --json 2>>"$work/$db.err" >"$work/last.json" ||
    { echo "run of $spec failed:"; tail -5 "$work/$db.err"; exit 1; }
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$work/last.json" >>"$work/$db.ids"
  mv "$work/last.json" "$work/$db-$(tail -1 "$work/$db.ids").json"
  printf '%s\t%s\n' "$spec" "$(tail -1 "$work/$db.ids")" >>"$work/$db.map"
}

if [ "$ORDER" != interleaved ]; then
  for e in "${exps[@]}"; do for ((i = 1; i <= N; i++)); do
    echo "back to back: $e ($i/$N)" >&2
    run backtoback "$e"
  done; done
fi
if [ "$ORDER" != backtoback ]; then
  for ((i = 1; i <= N; i++)); do for e in "${exps[@]}"; do
    echo "interleaved: round $i/$N, $e" >&2
    run interleaved "$e"
  done; done
fi

shift_spec="mem.bandwidth kernel=copy threads=1 size=64M sweep=no"
shift_db=$([ "$ORDER" = interleaved ] && echo interleaved || echo backtoback)
if [ "$SHIFT" = 1 ] && command -v taskset >/dev/null && grep -q "^$shift_spec" "$work/$shift_db.map" 2>/dev/null; then
  echo "real change: $shift_spec pinned to CPU 0 beside a busy loop on CPU 0" >&2
  (taskset -c 0 sh -c 'while :; do :; done') &
  hog=$!
  pids+=("$hog")
  run "$shift_db" "$shift_spec" taskset -c 0
  kill "$hog" 2>/dev/null || true
  printf 'shift\t%s\n' "$(tail -1 "$work/$shift_db.ids")" >>"$work/$shift_db.map"
fi
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

if [ -n "${FIXTURE:-}" ] && [ -f "$work/backtoback.map" ]; then
  mkdir -p "$FIXTURE"
  python3 - "$work" "$FIXTURE" "$NOISE" "$load_before" <<'PY'
import datetime, json, sys
work, dest, noise, load = sys.argv[1:5]
rows = [l.rstrip("\n").split("\t") for l in open(f"{work}/backtoback.map")]
for spec in dict.fromkeys(s for s, _ in rows if s != "shift"):
    runs = [json.load(open(f"{work}/backtoback-{i}.json")) for s, i in rows if s == spec]
    first = runs[0]["results"][0]
    out = {
        "about": f"A/A: {len(runs)} back-to-back runs of `{spec}` on a 2-CPU VM, "
                 f"{datetime.date.today()}, load average {load}, noise process {'on' if noise == '1' else 'off'} "
                 "(bench/aa_compare.sh FIXTURE=…)",
        "experiment": first["experiment"],
        "params": first["params"],
        "metrics": [{"name": m["name"], "unit": m["unit"], "better": m["better"],
                     "runs": [r["results"][0]["metrics"][k]["samples"] for r in runs]}
                    for k, m in enumerate(first["metrics"])],
    }
    name = spec.split()[0]
    with open(f"{dest}/{name}.json", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {dest}/{name}.json", file=sys.stderr)
PY
fi

python3 - "$work" "$BIN" "$N" "$TRIALS" "$NOISE" "$load_before" "$load_after" "$(nproc)" "${DOC:-}" "$shift_spec" <<'PY'
import json, math, subprocess, sys, datetime
work, binary, n, trials, noise, lb, la, cpus, doc, shift_spec = sys.argv[1:11]

def compare(db, a, b, *extra):
    out = subprocess.run([binary, "compare", a, b, "--json", "--db", f"{work}/{db}.db", *extra],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"compare {a} {b} failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)

def metrics(c):
    return [m for p in c["pairs"] for m in p["metrics"]]

def old_rule(m, noise):
    # The former verdict: the runs' own CI excludes 1 and the ratio is beyond the threshold.
    lo, hi, r = m.get("run_ci95_low"), m.get("run_ci95_high"), m["ratio"]
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return False
    if lo >= 1 - noise and hi <= 1 + noise:
        return False
    return (lo > 1 and r > 1 + noise) or (hi < 1 and r < 1 - noise)

def wilson(k, n):
    if n == 0:
        return (0.0, 1.0)
    z, p = 1.96, k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, c - h), min(1.0, c + h))

def rate(k, n):
    lo, hi = wilson(k, n)
    return f"{k}/{n} ({100 * k / n:.1f}%)" if n else "–", f"{100 * lo:.1f}–{100 * hi:.1f}%"

lines = []
say = lines.append
now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
say(f"A/A calibration of `compare`, {now}: {n} runs per experiment, {trials} trials each, "
    f"{cpus} CPUs, load average {lb} before and {la} after, "
    f"noise process {'on (busy loop + dd writing)' if noise == '1' else 'off'}.")
say("")
say("| order | experiment | metric verdicts | false, calibrated | 95% CI | false, default floor | 95% CI | false, run CI only | 95% CI | suspect |")
say("|---|---|---|---|---|---|---|---|---|---|")
totals = [0, 0, 0, 0]
for order in ("backtoback", "interleaved"):
    try:
        rows = [l.rstrip("\n").split("\t") for l in open(f"{work}/{order}.map")]
    except FileNotFoundError:
        continue
    for spec in dict.fromkeys(s for s, _ in rows if s != "shift"):
        ids = [i for s, i in rows if s == spec][:int(n)]
        tot = cal = dflt = old = sus = 0
        for x in range(len(ids)):
            for y in range(x + 1, len(ids)):
                c = compare(order, ids[x], ids[y])
                d = compare(order, ids[x], ids[y], "--no-history")
                for m, md in zip(metrics(c), metrics(d)):
                    tot += 1
                    cal += m["verdict"] in ("improved", "regressed")
                    dflt += md["verdict"] in ("improved", "regressed")
                    old += old_rule(m, c["noise"])
                    sus += m["suspect"]
        totals = [a + b for a, b in zip(totals, (tot, cal, dflt, old))]
        say(f"| {'back to back' if order == 'backtoback' else 'interleaved'} | {spec} | {tot} | "
            f"{' | '.join(rate(cal, tot))} | {' | '.join(rate(dflt, tot))} | {' | '.join(rate(old, tot))} | {sus} |")
tot, cal, dflt, old = totals
say(f"| all | | {tot} | {' | '.join(rate(cal, tot))} | {' | '.join(rate(dflt, tot))} | {' | '.join(rate(old, tot))} | |")
say("")
say("'suspect': metric verdicts on trials the validity guard flagged (counted above all the same).")
for order in ("backtoback", "interleaved"):
    try:
        rows = [l.rstrip("\n").split("\t") for l in open(f"{work}/{order}.map")]
    except FileNotFoundError:
        continue
    shifted = [i for s, i in rows if s == "shift"]
    base = [i for s, i in rows if s == shift_spec]
    if shifted and base:
        c = compare(order, base[-1], shifted[0])
        say("")
        say(f"Real change ({order.replace('backtoback', 'back to back')}): {shift_spec} pinned to one CPU "
            "that a busy loop also holds, against the last unpinned run:")
        for m in metrics(c):
            label = m["verdict"] + (" (suspect)" if m["suspect"] else "")
            say(f"- {m['name']}: {m['ratio']:.3f}× (95% CI {m['ci95_low']:.3f}–{m['ci95_high']:.3f}), "
                f"{label}; {m['basis']}")
text = "\n".join(lines) + "\n"
print(text, end="")
if doc:
    open(f"{work}/doc", "w").write(text)
PY
[ -z "${DOC:-}" ] || docblock "$DOC" aa_compare "$work/doc"
