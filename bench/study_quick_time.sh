#!/usr/bin/env bash
# How long `tunelab study quick` takes, per key issue and in total, and
# whether its verdicts and CI widths stay the same: N runs of the current
# binary, or N interleaved pairs of a baseline binary and the current one
# (B N B N …, so a noisy machine hits both alike). Prints each run's total
# and per-step seconds, the medians, the verdicts of every run against the
# first run's, and the median relative 95% CI width of each judged metric.
#
#   bench/study_quick_time.sh                      # 3 runs of target/debug/tunelab
#   BASELINE=/tmp/old-tunelab bench/study_quick_time.sh
#   RUNS=5 TUNELAB=target/release/tunelab bench/study_quick_time.sh
#   DOC=docs/study.md bench/study_quick_time.sh   # also put the output in the docs page
#
# With DOC, the output replaces what stands between the page's
# `<!-- study_quick_time:begin -->` and `<!-- study_quick_time:end -->` lines.
#
# Every run measures in a scratch directory and stores in a scratch
# database made here (removed at the end): the user's store is not touched.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/docblock.sh
[ -z "${DOC:-}" ] || docblock_check "$DOC" study_quick_time
RUNS=${RUNS:-3}
NEW=${TUNELAB:-${CARGO_TARGET_DIR:-target}/debug/tunelab}
BASE=${BASELINE:-}
PROFILE=${PROFILE:-quick}
[ -x "$NEW" ] || { echo "no binary at $NEW: cargo build first (or set TUNELAB)"; exit 2; }
[ -z "$BASE" ] || [ -x "$BASE" ] || { echo "BASELINE=$BASE is not an executable"; exit 2; }
command -v python3 >/dev/null || { echo "python3 missing: apt-get install -y python3"; exit 4; }
work=$(mktemp -d /tmp/study-time.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/target"

one() { # label binary index
  local out="$work/$1-$3.json" t0 t1
  t0=$(date +%s.%N)
  "$2" --json --db "$work/$1-$3.db" study "$PROFILE" --target "$work/target" >"$out" 2>"$work/$1-$3.err" ||
    { echo "$1 run $3 failed (exit $?):"; tail -5 "$work/$1-$3.err"; exit 1; }
  t1=$(date +%s.%N)
  echo "$t0 $t1" >"$work/$1-$3.wall"
  printf '%s run %d: %.1f s wall\n' "$1" "$3" "$(echo "$t1 - $t0" | bc -l)" >&2
}

# Each binary's own points per key issue (the baseline runs its built-in
# profile, as it was): they map the run's results onto the key issues.
[ -z "$BASE" ] || "$BASE" study "$PROFILE" --dry-run >"$work/baseline.plan"
"$NEW" study "$PROFILE" --dry-run >"$work/new.plan"
toml=profiles/$PROFILE.toml
[ -f "$PROFILE" ] && toml=$PROFILE

for i in $(seq 1 "$RUNS"); do
  [ -z "$BASE" ] || one baseline "$BASE" "$i"
  one new "$NEW" "$i"
done

python3 - "$work" "$RUNS" "${BASE:+baseline}" "$PROFILE" "$(nproc) CPUs, load average before $(cut -d' ' -f1-3 /proc/loadavg)" "${DOC:-}" "$(basename "$NEW")${BASE:+ vs $BASE}" "$toml" <<'PY'
import json, re, statistics, sys, tomllib
work, runs, base, profile, machine, doc, bins, toml = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7], sys.argv[8]
labels = ([base] if base else []) + ["new"]

# Judged metrics per key issue and the points they read (`where`).
criteria = {i["name"]: [(c["metric"], c.get("where", {})) for c in i.get("criteria", [])]
            for i in tomllib.load(open(toml, "rb"))["issue"]}

def points(label):
    # "name: experiment (N points) …" per key issue, from --dry-run.
    out = []
    for line in open(f"{work}/{label}.plan"):
        m = re.match(r"(.*): \S+ \((\d+) points\)", line)
        if m:
            out.append((m.group(1), int(m.group(2))))
    return out

def load(label, i):
    run = json.load(open(f"{work}/{label}-{i}.json"))
    t0, t1 = map(float, open(f"{work}/{label}-{i}.wall").read().split())
    issues = run["study"]["issues"]
    # Relative 95% CI width (high - low) / median of each judged metric, the
    # widest over the points a criterion reads.
    widths, at = {}, 0
    for name, n in points(label):
        for r in run["results"][at:at + n]:
            for metric, where in criteria.get(name, []):
                if any(str(r["params"].get(k)) != str(v) for k, v in where.items()):
                    continue
                for m in r["metrics"]:
                    s = m["summary"]
                    if m["name"] == metric and s["n"] >= 2 and s["median"]:
                        w = (s["ci95_high"] - s["ci95_low"]) / abs(s["median"])
                        key = f"{name} · {metric}"
                        widths[key] = max(w, widths.get(key, 0.0))
        at += n
    # Where each key issue's time went: measured trials (the validity
    # guard times each), warm-up trials (not timed one by one: their count
    # times the median measured trial, an estimate) and the rest (prepare,
    # calibration, files, curves, finish).
    split, at = {}, 0
    for name, n in points(label):
        measured = warm = 0.0
        for r in run["results"][at:at + n]:
            t = [c["seconds"] for c in r["validity"]["trials"]]
            w = max((len(m.get("warmup", [])) for m in r["metrics"]), default=0)
            w -= r["validity"].get("warmup_discarded", 0)
            measured += sum(t)
            warm += w * statistics.median(t) if t else 0.0
        split[name] = (measured, warm)
        at += n
    return {"wall": t1 - t0, "issues": issues, "widths": widths, "split": split}

data = {l: [load(l, i) for i in range(1, runs + 1)] for l in labels}
lines = []
say = lines.append
say(f"`study {profile}`, {runs} run(s) per binary, interleaved; {machine}")
say("")
names = [i["name"] for i in data[labels[0]][0]["issues"]]
head = "| key issue | " + " | ".join(f"{l} run {i} s" for l in labels for i in range(1, runs + 1)) + " | " + " | ".join(f"{l} median s" for l in labels) + " |"
say(head)
say("|" + "---|" * (head.count("|") - 1))
def secs(run, name):
    for i in run["issues"]:
        if i["name"] == name:
            return i.get("seconds") or 0.0
    return float("nan")
for n in names + ["total (sum of steps)", "wall clock"]:
    row = []
    for l in labels:
        vals = []
        for run in data[l]:
            if n == "wall clock":
                v = run["wall"]
            elif n.startswith("total"):
                v = sum(i.get("seconds") or 0.0 for i in run["issues"])
            else:
                v = secs(run, n)
            vals.append(v)
        row.append((vals, statistics.median(vals)))
    cells = [f"{v:.1f}" for vals, _ in row for v in vals] + [f"**{m:.1f}**" for _, m in row]
    say(f"| {n} | " + " | ".join(cells) + " |")
say("")
say("Where the time went (medians over the runs; warm-up estimated as its trial count times the median measured trial):")
say("")
say("| key issue | " + " | ".join(f"{l}: measured trials · warm-up · rest, s" for l in labels) + " |")
say("|---|" + "---|" * len(labels))
for n in names:
    cells = []
    for l in labels:
        m = [r["split"].get(n, (0, 0))[0] for r in data[l]]
        w = [r["split"].get(n, (0, 0))[1] for r in data[l]]
        rest = [secs(r, n) - sum(r["split"].get(n, (0, 0))) for r in data[l]]
        cells.append(f"{statistics.median(m):.1f} · {statistics.median(w):.1f} · {statistics.median(rest):.1f}")
    say(f"| {n} | " + " | ".join(cells) + " |")
say("")
# Verdicts: every run against the first run of the first binary.
ref = {i["name"]: i["verdict"] for i in data[labels[0]][0]["issues"]}
changed = []
for l in labels:
    for k, run in enumerate(data[l], 1):
        for i in run["issues"]:
            if ref.get(i["name"]) != i["verdict"]:
                changed.append(f"{l} run {k}: {i['name']} {i['verdict']} (first run: {ref.get(i['name'])})")
say("| key issue | " + " | ".join(f"{l} verdicts, run by run" for l in labels) + " |")
say("|---|" + "---|" * len(labels))
for n in names:
    cells = []
    for l in labels:
        cells.append(" ".join(next((i["verdict"].upper() for i in r["issues"] if i["name"] == n), "—") for r in data[l]))
    say(f"| {n} | " + " | ".join(cells) + " |")
say("")
say("verdicts identical in every run" if not changed else "verdicts that differ from the first run: " + "; ".join(changed))
say("")
# CI widths of the judged metrics, median over the runs of each binary.
judged = sorted(set().union(*(r["widths"].keys() for l in labels for r in data[l])))
say("| key issue · judged metric | " + " | ".join(f"{l}: relative 95% CI width, median (each run)" for l in labels) + " |")
say("|---|" + "---|" * len(labels))
for key in judged:
    cells = []
    for l in labels:
        w = [r["widths"][key] for r in data[l] if key in r["widths"]]
        cells.append(f"{100 * statistics.median(w):.1f}% ({', '.join(f'{100 * x:.0f}' for x in w)})" if w else "—")
    say(f"| {key} | " + " | ".join(cells) + " |")
text = "\n".join(lines)
print(text)
if doc:
    open(f"{work}/doc", "w").write(f"Output of `bench/study_quick_time.sh` ({bins}):\n\n{text}\n")
PY
[ -z "${DOC:-}" ] || docblock "$DOC" study_quick_time "$work/doc"
