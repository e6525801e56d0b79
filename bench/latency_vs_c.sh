#!/usr/bin/env bash
# Cross-check mem.latency's random-chase curve against an independent
# pointer chase in C (built here; needs cc), at the same working-set sizes,
# measured side by side: per size, tunelab's median of 3 trials and C's
# median of 3 timings, alternating which goes first. Prints the per-size
# ratio and where each curve steps past L2 and L3 (first size above the
# geometric mean of the two plateaus), next to the sizes sysfs reports.
# If both curves step at the same size and that size is not sysfs's, the
# machine (a shared cache, a VM's share of it) differs from its sysfs, not
# the tool.
#
# CHASE=pages compares mem.latency -p chase=pages with the C chase built the
# way lmbench's lat_mem_rd -t (thrash_initialize) builds it: pages in a random
# order, lines inside a page in bit-reversed order, the chain moving to the
# next page on every load (so knees line up with lmbench's).
#
# Usage: bench/latency_vs_c.sh [PAGES]   (thp (default) or 4k)
# Env: TUNELAB (a built binary; default: cargo build --release),
#      CHASE=random (default) | pages.
set -euo pipefail
cd "$(dirname "$0")/.."
PAGES=${1:-thp}
CHASE=${CHASE:-random}
export CHASE
command -v cc >/dev/null || { echo "missing cc (apt-get install -y gcc)" >&2; exit 4; }
if [ -n "${TUNELAB:-}" ]; then TL=$TUNELAB; else
    cargo build --release --quiet
    TL="${CARGO_TARGET_DIR:-target}/release/tunelab"
fi
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
cat >"$OUT/chase.c" <<'C'
/* Random cyclic pointer chase, one pointer per 64 B line (Sattolo). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return (x > y) - (x < y); }
int main(int argc, char **argv) {
    size_t max = 0;
    for (int i = 2; i < argc; i++) { size_t s = strtoull(argv[i], 0, 10); if (s > max) max = s; }
    size_t huge = 2u << 20, len = (max + huge - 1) / huge * huge;
    char *raw = mmap(0, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return 1;
    char *b = (char *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
    madvise(b, len, strcmp(argv[1], "thp") == 0 ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    memset(b, 1, len);
    size_t *idx = malloc(len / 64 * sizeof *idx);
    for (int a = 2; a < argc; a++) {
        size_t n = strtoull(argv[a], 0, 10) / 64;
        if (n < 2) continue;
        const char *chase = getenv("CHASE");
        if (chase && strcmp(chase, "pages") == 0 && n * 64 >= 2 * 4096) {
            /* lat_mem_rd -t: visit k of round r = line w[(k + r) % 64] of page pg[k]. */
            size_t np = n * 64 / 4096, w[64];
            for (size_t i = 0; i < 64; i++) { /* 6-bit reversal */
                size_t v = 0;
                for (int bit = 0; bit < 6; bit++) if (i & (1u << bit)) v |= 1u << (5 - bit);
                w[i] = v;
            }
            for (size_t i = 0; i < np; i++) idx[i] = i;
            for (size_t i = np - 1; i > 0; i--) { size_t j = next() % (i + 1), t = idx[i]; idx[i] = idx[j]; idx[j] = t; }
            char *first = b + idx[0] * 4096 + w[0] * 64, *prev = first;
            for (size_t r = 0; r < 64; r++)
                for (size_t k = 0; k < np; k++) {
                    if (r == 0 && k == 0) continue;
                    char *cur = b + idx[k] * 4096 + w[(k + r) % 64] * 64;
                    *(void **)prev = cur;
                    prev = cur;
                }
            *(void **)prev = first;
        } else {
            for (size_t i = 0; i < n; i++) idx[i] = i;
            for (size_t i = n - 1; i > 0; i--) { size_t j = next() % i, t = idx[i]; idx[i] = idx[j]; idx[j] = t; }
            for (size_t i = 0; i < n; i++) *(void **)(b + idx[i] * 64) = b + idx[(i + 1) % n] * 64;
        }
        void **p = (void **)b;
        long loads = 1000;
        for (;;) { /* calibrate to >= 20 ms */
            double t0 = now();
            for (long i = 0; i < loads; i++) p = *p;
            if (now() - t0 >= 0.02) break;
            loads *= 2;
        }
        double t[3];
        for (int k = 0; k < 3; k++) {
            double t0 = now();
            for (long i = 0; i < loads; i++) p = *p;
            t[k] = (now() - t0) / loads;
        }
        qsort(t, 3, sizeof t[0], cmp);
        printf("%zu %.4f %d\n", n * 64, t[1] * 1e9, (int)((uintptr_t)p & 1));
    }
    return 0;
}
C
cc -O2 -o "$OUT/chase" "$OUT/chase.c"
tl_curve() {
    "$TL" run mem.latency -p pages="$PAGES" -p chase="$CHASE" -p min=64k -p max=128M --trials 1 --warmup 0 \
        --json --no-store --quiet-check 0 2>/dev/null | python3 -c '
import json, sys
for r in json.load(sys.stdin)["results"]:
    for s in r["series"]:
        if s["name"].startswith("random"):
            for x, y in s["points"]:
                print(int(x), y * 1e9)'
}
for round in 1 2 3; do
    if [ $((round % 2)) -eq 1 ]; then
        tl_curve >"$OUT/tl$round"
        "$OUT/chase" "$PAGES" $(cut -d' ' -f1 "$OUT/tl$round") >"$OUT/c$round"
    else
        "$OUT/chase" "$PAGES" $(cut -d' ' -f1 "$OUT/tl1") >"$OUT/c$round"
        tl_curve >"$OUT/tl$round"
    fi
done
python3 - "$OUT" <<'PY'
import os, statistics as st, sys
d = sys.argv[1]
def load(prefix):
    per = {}
    for r in (1, 2, 3):
        for line in open(os.path.join(d, f"{prefix}{r}")):
            s, v = line.split()[:2]
            per.setdefault(int(s), []).append(float(v))
    return {s: st.median(v) for s, v in per.items()}
tl, c = load("tl"), load("c")
def cache(level):
    base = "/sys/devices/system/cpu/cpu0/cache"
    for e in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        p = os.path.join(base, e)
        if open(p + "/level").read().strip() == str(level) and open(p + "/type").read().strip() != "Instruction":
            v = open(p + "/size").read().strip()
            return int(v[:-1]) * {"K": 1 << 10, "M": 1 << 20}.get(v[-1], 1)
    return None
def plateau(curve, below, size):
    # As mem.latency's analysis: the median inside the lower half (log
    # scale) of (1.5 below, 0.75 size]; size None: DRAM, >= 2 below.
    if size is None:
        v = [y for s, y in curve.items() if s >= 2 * below]
    else:
        v = [y for s, y in curve.items() if 1.5 * below < s <= min((below * size) ** 0.5, 0.75 * size)]
        v = v or [y for s, y in curve.items() if 1.5 * below < s <= 0.75 * size]
    return st.median(v) if v else None
def step(curve, lo, hi, nxt):
    # The first size past 1.5 lo above the geometric mean of this level's
    # plateau and the next one's.
    a, b = plateau(curve, lo, hi), plateau(curve, hi, nxt)
    if a is None or b is None:
        return None
    t = (a * b) ** 0.5
    return next((s for s in sorted(curve) if s > 1.5 * lo and curve[s] > t), None)
print(f"{'working set':>12} {'tunelab ns':>11} {'C ns':>8} {'ratio':>6}")
ratios = []
for s in sorted(tl):
    if s in c:
        r = tl[s] / c[s]
        ratios.append(r)
        print(f"{s/1024:10.0f}Ki {tl[s]:11.2f} {c[s]:8.2f} {r:6.3f}")
print(f"median ratio tunelab/C: {st.median(ratios):.3f}  (min {min(ratios):.3f}, max {max(ratios):.3f})")
l1, l2, l3 = cache(1), cache(2), cache(3)
for name, lo, hi, nxt in (("L2", l1, l2, l3), ("L3", l2, l3, None)):
    if lo and hi:
        fmt = lambda v: "none" if v is None else f"{v/1048576:.2f} MiB"
        print(f"{name} step: sysfs {hi/1048576:.2f} MiB, tunelab curve {fmt(step(tl, lo, hi, nxt))}, C curve {fmt(step(c, lo, hi, nxt))}")
PY
