#!/usr/bin/env bash
# Compare sched.latency with cyclictest (Debian rt-tests) on this machine,
# interleaved in one run: every round measures both (the order alternates
# between rounds), so slow drifts of a noisy machine hit both sides alike.
# Only ratios measured side by side mean anything.
#
# Same workload on both sides: one SCHED_FIFO thread per CPU at PRIO (95),
# pinned, memory locked, clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) on a
# 1 ms period for DUR seconds, /dev/cpu_dma_latency held at 0:
#   cyclictest -S -d 0 -m -N -p PRIO -i 1000 -D DUR --policy=fifo -h 2000000 --json
#     (-S = one thread per CPU, pinned; -d 0: every thread on the same 1 ms
#      period (-S alone gives thread i a period of 1 ms + i x 500 us);
#      PM QoS 0 is cyclictest's default)
#   tunelab run sched.latency -p period=1ms -p duration=DURs -p priority=PRIO
#     -p cpu_dma_latency=0 -p causes=C --trials 1 --warmup 0
#     twice per round: C = auto (the default: spikes explained) and C = off,
#     so the cost of explaining spikes is the difference between the two.
# Figures over all threads' samples together: mean (cyclictest's JSON avg
# per thread, weighted by its cycles), p99 (cyclictest: from its 1 ns
# histogram, overflows beyond 2 ms counted above it; tunelab: HDR, 3
# significant digits) and max. ratio = tunelab / cyclictest per round; the
# median of the per-round ratios is the verdict: PASS within +-10% for mean,
# p99 and max (issue 44), for both causes=auto and causes=off; min, p50 and
# m<1ms (the mean of the wake-ups under 1 ms, both tools binned alike in
# 2 us bins) are printed, not judged: they show a constant offset on the
# wake-up path, if any, apart from the host's stalls, which decide a short
# run's mean and max. 
#
# Runs of 20 s by default: on a VM whose host stops its virtual CPUs now
# and then (steal), one such stall is one sample as long as the stall, and
# in a 3 s run whether one fell in it decides the run's mean and max (the
# ratio then swings by the stall, not by either tool); 20 s runs hold
# several, so both tools see the host alike. The runs of a round
# still share the same minute. Each round's 1-minute load average is
# printed beside it; on a busy machine say so, do not judge.
#
# Even 20 s runs do not settle the mean on such a VM: the host's stalls
# (~100 ms, counted as steal in /proc/stat) come a few per run, each adds
# 2.5 µs to a 40,000-wake-up mean, and their count is a Poisson variable
# of the host (6 +- 2.5 a run here), so two runs of the same tool differ
# by 20-40% in mean. The script therefore prints, per run, the wake-ups of
# 1 ms or more and the steal the kernel counted, and a mean outside 10%
# passes only "apart from host stalls": the tool's own path (m<1ms) within
# 10% and its stalls no more frequent than cyclictest's (exact test of two
# Poisson rates over all rounds, p >= 0.05). That is said as such.
#
# Each round also runs cyclictest a second time (A/A): the ratio of
# cyclictest to itself is what this machine's drift alone gives. Where a
# round of the A/A is outside 10% on a figure, a tunelab ratio outside 10%
# on it is UNDECIDED, not FAIL: the machine cannot resolve 10% there in
# this many rounds (run more, or on a quieter machine). The four runs of a
# round go in the orders of a 4x4 Latin square.
#
# Usage: bench/latency_vs_cyclictest.sh [ROUNDS]   (default 3, at least 3)
# Exit: 0 every judged figure PASS; 1 a FAIL; 6 no FAIL but UNDECIDED ones;
# 2 bad usage, 3 not root, 4 a missing tool.
# Needs: root, cyclictest (apt-get install -y rt-tests), python3.
# Env: DUR (seconds per side and round, default 20), PRIO (95), TUNELAB (use
# this binary instead of building a release one), DOC=docs/performance.md
# (also write the summary, with the date and load, between that page's
# latency_vs_cyclictest:begin/end markers).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/docblock.sh
[ -z "${DOC:-}" ] || docblock_check "$DOC" latency_vs_cyclictest
ROUNDS=${1:-3}
if [ "$ROUNDS" -lt 3 ]; then
    echo "need at least 3 rounds (got $ROUNDS)" >&2
    exit 2
fi
DUR=${DUR:-20}
PRIO=${PRIO:-95}
# cyclictest -N: values in ns (its µs mode truncates every sample to whole
# µs, 0.5 µs low on average); the histogram then has 1 ns bins, 2 ms of
# them (16 MB per thread), overflows counted above.
HIST_NS=2000000
for t in cyclictest python3; do
    command -v "$t" >/dev/null || { echo "missing $t (apt-get install -y rt-tests python3)" >&2; exit 4; }
done
[ "$(id -u)" = 0 ] || { echo "needs root (SCHED_FIFO, mlockall, /dev/cpu_dma_latency)" >&2; exit 3; }
if [ -n "${TUNELAB:-}" ]; then
    TL=$TUNELAB
else
    cargo build --release --quiet
    TL="${CARGO_TARGET_DIR:-target}/release/tunelab"
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
mkdir "$OUT/target"

# Host steal (ms, all CPUs) while a run lasts: the host's stalls of the
# virtual CPUs, which both tools see as wake-ups of ~100 ms.
steal() { awk -v hz="$(getconf CLK_TCK)" '/^cpu /{printf "%d\n", $9 * 1000 / hz}' /proc/stat; }
stolen() { # file command...
    local f=$1 s0; shift
    s0=$(steal)
    "$@"
    echo $(($(steal) - s0)) >"$f"
}
ct() { # round
    cyclictest -S -d 0 -m -N -p "$PRIO" -i 1000 -D "$DUR" --policy=fifo -q -h "$HIST_NS" \
        --json="$OUT/ct$1.json" >/dev/null 2>"$OUT/ct$1.err" \
        || { cat "$OUT/ct$1.err" >&2; exit 1; }
}
tl() { # round causes
    "$TL" run sched.latency --target "$OUT/target" -p period=1ms -p "duration=${DUR}s" \
        -p "priority=$PRIO" -p cpu_dma_latency=0 -p "causes=$2" \
        --trials 1 --warmup 0 --quiet-check 0 --no-store --json \
        >"$OUT/tl-$2-$1.json" 2>"$OUT/tl$1.err" || { cat "$OUT/tl$1.err" >&2; exit 1; }
}

# One run of a round by name: ct, aa (cyclictest again: the A/A run), auto, off.
one() { # round name
    case $2 in
    ct) stolen "$OUT/steal-ct-$1" ct "$1" ;;
    aa) stolen "$OUT/steal-aa-$1" ct "aa$1" ;;
    *) stolen "$OUT/steal-$2-$1" tl "$1" "$2" ;;
    esac
}
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq 1 "$ROUNDS"); do
    # A Latin square over four rounds: each run takes each place once.
    case $((r % 4)) in
    1) order="ct auto off aa" ;;
    2) order="auto aa ct off" ;;
    3) order="off ct aa auto" ;;
    0) order="aa off auto ct" ;;
    esac
    for name in $order; do one "$r" "$name"; done
    cut -d' ' -f1 /proc/loadavg >"$OUT/load$r"
    echo "round $r done" >&2
done
META="$(date -u '+%Y-%m-%d %H:%M UTC'), $("$TL" --version 2>/dev/null || echo tunelab) ($(basename "$(dirname "$TL")") build), $(cyclictest --help 2>&1 | head -1 | tr -d '\n' | cut -c1-40), kernel $(uname -r), $(nproc) CPUs, load average $LOAD_BEFORE before, $(cut -d' ' -f1-3 /proc/loadavg) after; $ROUNDS rounds of ${DUR} s per run"

echo "$META"
status=0
python3 - "$OUT" "$ROUNDS" "${DOC:+$OUT/doc}" "$META" <<'PY' || status=$?
import json, math, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
stalls = {}  # path -> (wake-ups of 1 ms or more, all wake-ups)

def cyclictest(path):
    d = json.load(open(path))
    hist, cycles, wsum, mx = {}, 0, 0.0, 0.0
    for t in d["thread"].values():
        n = t["cycles"]
        cycles += n
        wsum += t["avg"] * n
        mx = max(mx, t["max"])
        for k, v in t["histogram"].items():
            hist[int(k)] = hist.get(int(k), 0) + v
    # Samples beyond the histogram (overflows) sit above every bucket.
    def pct(q):
        rank, seen = q * cycles, 0
        for us in sorted(hist):
            seen += hist[us]
            if seen >= rank:
                return us
        return 2000000
    mn = min(t["min"] for t in d["thread"].values())
    # As tunelab's buckets: 2 µs bins below 1 ms, at their midpoints.
    bins = {}
    for ns, n in hist.items():
        if ns < 1000000:
            bins[ns // 2000] = bins.get(ns // 2000, 0) + n
    stalls[path] = (cycles - sum(bins.values()), cycles)
    return (wsum / cycles * 1e-9, pct(0.99) * 1e-9, mx * 1e-9, mn * 1e-9, pct(0.5) * 1e-9,
            bulk_mean(bins))

def bulk_mean(bins):
    # Mean of the wake-ups under 1 ms (2 µs bins, midpoints): the bulk
    # without the host's stalls, where a constant offset would show.
    n = sum(bins.values())
    return sum((i * 2000 + 1000) * c for i, c in bins.items()) / n * 1e-9 if n else float("nan")

def tunelab(path):
    d = json.load(open(path))
    m = {x["name"]: x["samples"][0] for x in d["results"][0]["metrics"]}
    bins, n = {}, 0
    for h in d["results"][0]["histograms"]:
        for b in h["buckets"]:
            n += b["count"]
            if b["high"] is not None and b["high"] <= 1e-3 + 1e-12:
                i = round(b["low"] / 2e-6)
                bins[i] = bins.get(i, 0) + b["count"]
    stalls[path] = (n - sum(bins.values()), n)
    return (m["lat_mean"], m["lat_p99"], m["lat_max"], m["lat_min"], m["lat_p50"],
            bulk_mean(bins))

names = ["mean", "p99", "max", "min", "p50", "m<1ms"]
judged = ("mean", "p99", "max")
ratios = {(c, n): [] for c in ("auto", "off") for n in names}
f = lambda v: "/".join(f"{x*1e6:.1f}" for x in v)
header = (f"{'round':>5} | {'load':>5} | {'cyclictest mean/p99/max/min/p50/m<1ms (µs)':>44} | "
          f"{'tunelab causes=auto':>40} | {'tunelab causes=off':>40} | ratios auto, off, A/A (mean p99 max)")
print(header)
per_round = [header]
cts = {c: [] for c in ("ct", "auto", "off", "aa")}
ratios.update({("aa", n): [] for n in names})
for r in range(1, rounds + 1):
    c = cyclictest(f"{out}/ct{r}.json")
    cts["ct"].append(c)
    line = f"{r:>5} | {open(f'{out}/load{r}').read().strip():>5} | {f(c):>44}"
    rr = []
    for causes in ("auto", "off", "aa"):
        t = cyclictest(f"{out}/ctaa{r}.json") if causes == "aa" else tunelab(f"{out}/tl-{causes}-{r}.json")
        cts[causes].append(t)
        rs = [a / b if b > 0 else float("nan") for a, b in zip(t, c)]
        for n, x in zip(names, rs):
            ratios[(causes, n)].append(x)
        if causes != "aa":
            line += f" | {f(t):>40}"
        rr.append(" ".join(f"{x:.3f}" for x in rs[:3]))
    print(line + " | " + ", ".join(rr))
    per_round.append(line + " | " + ", ".join(rr))
# Host stalls: wake-ups of 1 ms or more, and the steal the kernel counted
# while each run lasted. A stall of ~100 ms is one sample of ~100 ms for
# either tool, so over 40,000 wake-ups each one adds 2.5 µs to the mean:
# the count, a Poisson variable of the host, decides a run's mean.
line = f"{'round':>5} | stalls >= 1 ms (count of wake-ups) ct/auto/off/A-A | host steal (ms) ct/auto/off/A-A"
print(line)
per_round += ["", line]
pooled = {c: [0, 0] for c in ("ct", "auto", "off", "aa")}
files = {"ct": "ct{}.json", "aa": "ctaa{}.json", "auto": "tl-auto-{}.json", "off": "tl-off-{}.json"}
for r in range(1, rounds + 1):
    ks, st = [], []
    for c in ("ct", "auto", "off", "aa"):
        k, n = stalls[f"{out}/" + files[c].format(r)]
        pooled[c][0] += k
        pooled[c][1] += n
        ks.append(str(k))
        st.append(open(f"{out}/steal-{c}-{r}").read().strip())
    line = f"{r:>5} | {'/'.join(ks):>51} | {'/'.join(st)}"
    print(line)
    per_round.append(line)

def same_stall_rate(c):
    # Exact conditional test of two Poisson rates: given both tools'
    # stalls together, tunelab's count is binomial with its share of the
    # wake-ups. Two-sided p-value (sum of the outcomes no likelier).
    (k1, n1), (k2, n2) = pooled[c], pooled["ct"]
    m, q = k1 + k2, n1 / (n1 + n2)
    if m == 0:
        return 1.0
    pmf = [math.exp(math.lgamma(m + 1) - math.lgamma(i + 1) - math.lgamma(m - i + 1)
                    + (i * math.log(q) if i else 0) + ((m - i) * math.log(1 - q) if m - i else 0))
           for i in range(m + 1)]
    return min(1.0, sum(x for x in pmf if x <= pmf[k1] * (1 + 1e-7)))

# The A/A: cyclictest against itself in the same rounds. Where one of its
# rounds is already outside 10% on a figure, this machine cannot resolve
# 10% on that figure in this many rounds, and a tunelab ratio outside 10%
# is UNDECIDED, not FAIL (as the regression-detection projects judge a
# change only beyond what A/A runs show).
ok, undecided = True, False
summary = []
for n in names:
    aa = ratios[("aa", n)]
    line = (f"A/A cyclictest {n:<5}: ratio median {statistics.median(aa):.3f} "
            f"(rounds {min(aa):.3f}..{max(aa):.3f})"
            + ("" if n not in judged else
               "  resolves 10%" if all(abs(x - 1) <= 0.10 for x in aa) else
               "  this machine cannot resolve 10% on it"))
    print(line)
    summary.append(line)
for causes in ("auto", "off"):
    for n in names:
        med = statistics.median(ratios[(causes, n)])
        lo, hi = min(ratios[(causes, n)]), max(ratios[(causes, n)])
        passed = abs(med - 1) <= 0.10
        verdict = ("PASS" if passed else "FAIL") if n in judged else "(not judged)"
        if n == "mean" and not passed:
            # The mean apart from the host: the tool's own wake-up path
            # (m<1ms) agrees and it saw stalls no more often than
            # cyclictest did (p >= 0.05): the host's stall count made the
            # difference, not the tool. Said as such, never as a plain PASS.
            bulk = statistics.median(ratios[(causes, "m<1ms")])
            p = same_stall_rate(causes)
            (k1, n1), (k2, n2) = pooled[causes], pooled["ct"]
            if abs(bulk - 1) <= 0.10 and p >= 0.05:
                passed = True
                verdict = (f"PASS apart from host stalls (m<1ms ratio {bulk:.3f}; stalls {k1} of {n1} "
                           f"vs {k2} of {n2} wake-ups, rates indistinguishable, p={p:.2f})")
            else:
                verdict += f" (m<1ms ratio {bulk:.3f}; stalls {k1} of {n1} vs {k2} of {n2}, p={p:.3f})"
        aa = ratios[("aa", n)]
        if n in judged and not passed and any(abs(x - 1) > 0.10 for x in aa):
            verdict = verdict.replace("FAIL", "UNDECIDED", 1) + (
                f" (cyclictest against itself: rounds {min(aa):.3f}..{max(aa):.3f})")
            undecided = True
        elif n in judged:
            ok &= passed
        i = names.index(n)
        line = (f"causes={causes:<4} {n:<5}: tunelab {statistics.median(x[i] for x in cts[causes])*1e6:7.1f} µs, "
                f"cyclictest {statistics.median(x[i] for x in cts['ct'])*1e6:7.1f} µs (medians); "
                f"ratio median {med:.3f} (rounds {lo:.3f}..{hi:.3f})  {verdict}")
        print(line)
        summary.append(line)
crit = ("criterion: median per-round ratio within 10% of 1 for mean, p99 and max, causes on and off;"
        " m<1ms = mean of the wake-ups under 1 ms (both from 2 µs bins), the bulk without stalls;"
        " a mean outside 10% passes only 'apart from host stalls': m<1ms within 10% and stalls >= 1 ms"
        " no more frequent than cyclictest's (exact Poisson rate test over all rounds, p >= 0.05);"
        " a figure outside 10% is UNDECIDED, not FAIL, where a round of cyclictest against itself"
        " (A/A) is outside 10% too")
print(crit)
summary.append(crit)
if sys.argv[3]:
    # DOC=page: the block for bench/lib/docblock.sh.
    open(sys.argv[3], "w").write(
        f"Generated by bench/latency_vs_cyclictest.sh: {sys.argv[4]}.\n\n```text\n"
        + "\n".join(per_round + [""] + summary) + "\n```\n")
sys.exit(1 if not ok else 6 if undecided else 0)
PY
if [ -n "${DOC:-}" ] && [ -s "$OUT/doc" ]; then
    docblock "$DOC" latency_vs_cyclictest "$OUT/doc"
fi
exit "$status"
