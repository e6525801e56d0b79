#!/usr/bin/env bash
# Issue 11 items 1, 2, 6: tunelab's figures side by side with reference
# tools on this machine, in one run; prints ratio = tunelab / reference.
#
#   app.time / memory peak_rss  vs  /usr/bin/time -v "Maximum resident set size"
#       for `true` and a C program touching ALLOC_MIB MiB (needs cc)
#   ipc.pipe / ipc.unix bandwidth and round trip, per placement, against
#       lmbench's bw_pipe / bw_unix / lat_pipe / lat_unix. lmbench is not
#       packaged: with LMBENCH_BIN=DIR (a directory holding those four
#       programs, built from lmbench's own sources and Makefile) the real
#       ones run, placed with lmbench's own LMBENCH_SCHED (SINGLE = one CPU,
#       UNIQUE = two CPUs, DEFAULT = the scheduler's choice) and timed with
#       ENOUGH=LMB_ENOUGH us per timing (calibration skipped: TIMING_O=0,
#       LOOP_O=0, as its config would set). Without it, a faithful small C
#       re-implementation built here: bw: a forked writer write()s 64 KiB
#       pieces continuously, the reader read()s 64 KiB at a time; B/s over
#       XFER_MIB MiB after a 4-chunk warm-up; lat: a 1-byte ping-pong over two
#       pipes (or one socketpair), mean of LAT_N round trips after 1000
#       warm-up ones. The output says which reference was used. Both sides run
#       placed the same way: same (one CPU), split (two CPUs), any (unpinned).
#   io.device-read buffered/cached  vs  hdparm -t / -T on a loop device
#       (root; LOOP_BACKING=/dev/shm for a RAM-backed one, default /var/tmp)
#
# Usage: bench/truth_vs_reference.sh [ROUNDS]  (default 3; rounds alternate
# which side goes first). Env: TUNELAB (binary; default: cargo build),
# ALLOC_MIB (64), XFER_MIB (256), LOOP_MIB (512), LOOP_BACKING, LMBENCH_BIN,
# LMB_ENOUGH (100000), LAT_N (200000), PARTS (rss,ipc,device: which parts run).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
ALLOC_MIB=${ALLOC_MIB:-64}
XFER_MIB=${XFER_MIB:-256}
LOOP_MIB=${LOOP_MIB:-512}
LMB_ENOUGH=${LMB_ENOUGH:-100000}
LAT_N=${LAT_N:-200000}
PARTS=${PARTS:-rss,ipc,device}
part() { case ",$PARTS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
LMB=""
if [ -n "${LMBENCH_BIN:-}" ]; then
    for p in bw_pipe bw_unix lat_pipe lat_unix; do
        [ -x "$LMBENCH_BIN/$p" ] || { echo "LMBENCH_BIN=$LMBENCH_BIN has no executable $p" >&2; exit 4; }
    done
    LMB=$LMBENCH_BIN
fi
for t in python3 cc; do
    command -v "$t" >/dev/null || { echo "missing $t" >&2; exit 4; }
done
[ -x /usr/bin/time ] || { echo "missing /usr/bin/time (apt-get install -y time)" >&2; exit 4; }
if [ -n "${TUNELAB:-}" ]; then TL=$TUNELAB; else
    cargo build --release --quiet
    TL="${CARGO_TARGET_DIR:-target}/release/tunelab"
fi
OUT=$(mktemp -d)
LOOPDEV=""
cleanup() {
    if [ -n "$LOOPDEV" ]; then umount "$OUT/mnt" 2>/dev/null || true; losetup -d "$LOOPDEV" 2>/dev/null || true; fi
    rm -rf "$OUT" "${LOOPIMG:-}"
}
trap cleanup EXIT

cat >"$OUT/alloc.c" <<EOF
#include <stdlib.h>
int main(void){size_t n=(size_t)$ALLOC_MIB<<20;volatile char*p=malloc(n);
for(size_t i=0;i<n;i+=4096)p[i]=1;return p[4096]-1;}
EOF
cc -O2 -o "$OUT/alloc" "$OUT/alloc.c"

# lmbench bw_pipe / bw_unix loop: writer child streams 64 KiB writes, the
# parent reads 64 KiB at a time and times XFER bytes (gettimeofday).
cat >"$OUT/bw.c" <<'EOF'
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
static void pin(int cpu) { if (cpu < 0) return; cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); sched_setaffinity(0, sizeof s, &s); }
int main(int argc, char **argv) {
    /* bw MODE(pipe|unix) XFER_MIB PARENT_CPU CHILD_CPU (-1 = unpinned) */
    int unix_ = strcmp(argv[1], "unix") == 0;
    size_t xfer = (size_t)atoi(argv[2]) << 20, chunk = 64 << 10;
    int pc = atoi(argv[3]), cc = atoi(argv[4]);
    int fd[2];
    if (unix_ ? socketpair(AF_UNIX, SOCK_STREAM, 0, fd) : pipe(fd)) return 1;
    char *buf = malloc(chunk); memset(buf, 7, chunk);
    pid_t pid = fork();
    if (pid == 0) { pin(cc); close(fd[0]); for (;;) if (write(fd[1], buf, chunk) <= 0) _exit(0); }
    pin(pc); close(fd[1]);
    size_t got = 0; ssize_t n;
    while (got < 4 * chunk && (n = read(fd[0], buf, chunk)) > 0) got += n; /* warm-up */
    struct timeval a, b; gettimeofday(&a, 0); got = 0;
    while (got < xfer && (n = read(fd[0], buf, chunk)) > 0) got += n;
    gettimeofday(&b, 0);
    kill(pid, SIGKILL);
    double s = (b.tv_sec - a.tv_sec) + (b.tv_usec - a.tv_usec) * 1e-6;
    printf("%.0f\n", got / s);
    return 0;
}
EOF
cc -O2 -o "$OUT/bw" "$OUT/bw.c"

# lmbench lat_pipe / lat_unix loop: the parent writes one byte, the child
# reads it and writes it back (two pipes, or one socketpair); mean s per
# round trip over N round trips after 1000 warm-up ones.
cat >"$OUT/lat.c" <<'EOF'
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
static void pin(int cpu) { if (cpu < 0) return; cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); sched_setaffinity(0, sizeof s, &s); }
int main(int argc, char **argv) {
    /* lat MODE(pipe|unix) N PARENT_CPU CHILD_CPU (-1 = unpinned) */
    int unix_ = strcmp(argv[1], "unix") == 0;
    long n = atol(argv[2]);
    int pc = atoi(argv[3]), cc = atoi(argv[4]);
    int a[2], b[2]; /* parent writes a[1], child reads a[0], writes b[1], parent reads b[0] */
    if (unix_) { int s[2]; if (socketpair(AF_UNIX, SOCK_STREAM, 0, s)) return 1; a[0] = s[1]; a[1] = s[0]; b[0] = s[0]; b[1] = s[1]; }
    else if (pipe(a) || pipe(b)) return 1;
    char c = 0;
    pid_t pid = fork();
    if (pid == 0) { pin(cc); for (;;) { if (read(a[0], &c, 1) != 1) _exit(0); if (write(b[1], &c, 1) != 1) _exit(0); } }
    pin(pc);
    struct timespec t0, t1;
    for (long i = -1000; i < n; i++) {
        if (i == 0) clock_gettime(CLOCK_MONOTONIC, &t0);
        if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1) return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    kill(pid, SIGKILL);
    printf("%.9f\n", ((t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9) / n);
    return 0;
}
EOF
cc -O2 -o "$OUT/lat" "$OUT/lat.c"

# The reference for one placement: B/s (bw) or s per round trip (lat).
ref_ipc() { # kind(bw|lat) mode(pipe|unix) placement a b
    local kind=$1 mode=$2 place=$3 a=$4 b=$5
    if [ -n "$LMB" ]; then
        local sched
        case $place in same) sched=SINGLE ;; split) sched=UNIQUE ;; *) sched=DEFAULT ;; esac
        # lmbench prints MB/sec with MB = 10^6 B (lib_timing.c), latency in microseconds.
        ENOUGH=$LMB_ENOUGH TIMING_O=0 LOOP_O=0.0 LMBENCH_SCHED=$sched \
            "$LMB/${kind}_$mode" -N 5 2>&1 | awk -v k="$kind" '
                k == "bw" && /MB\/sec/ {print $(NF-1) * 1e6}
                k == "lat" && /microseconds/ {print $(NF-1) / 1e6}'
    elif [ "$kind" = bw ]; then
        "$OUT/bw" "$mode" "$XFER_MIB" "$a" "$b"
    else
        "$OUT/lat" "$mode" "$LAT_N" "$a" "$b"
    fi
}

CPUS=$(python3 -c 'import os; print(" ".join(map(str, sorted(os.sched_getaffinity(0))[:2])))')
C0=${CPUS%% *}; C1=${CPUS##* }

tl() { "$TL" "$@" 2>/dev/null; }
tl_metric() { # metric, then run args: median of samples
    local m=$1; shift
    tl run "$@" --json --no-store --quiet-check 0 | python3 -c '
import json, statistics, sys
d = json.load(sys.stdin)
for r in d["results"]:
    for x in r["metrics"]:
        if x["name"] == sys.argv[1]: print(statistics.median(x["samples"]))' "$m"
}
timev() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1 | awk '{print $1*1024}'; }
memory_peak() { tl memory --json -- "$@" | python3 -c 'import json,sys; print(json.load(sys.stdin)["peak"]["rss"])'; }

rec() { echo "$1 $2" >>"$OUT/$3"; }
for r in $(seq 1 "$ROUNDS"); do
    echo "round $r/$ROUNDS ..." >&2
    part rss && for p in true "$OUT/alloc"; do
        k=$(basename "$p")
        if [ $((r % 2)) -eq 1 ]; then rec "$r" "$(timev "$p")" "ref_rss_$k"; fi
        rec "$r" "$(tl_metric peak_rss app.time -p "command=$p" --trials 5)" "tl_rss_$k"
        rec "$r" "$(memory_peak "$p")" "mem_rss_$k"
        if [ $((r % 2)) -eq 0 ]; then rec "$r" "$(timev "$p")" "ref_rss_$k"; fi
    done
    part ipc && for mode in pipe unix; do
        for place in same split any; do
            case $place in same) a=$C0 b=$C0 ;; split) a=$C0 b=$C1 ;; any) a=-1 b=-1 ;; esac
            [ "$place" = split ] && [ "$C0" = "$C1" ] && continue
            for kind in bw lat; do
                case $kind in bw) m=bandwidth t=bandwidth ;; lat) m=round_trip t=latency ;; esac
                if [ $((r % 2)) -eq 1 ]; then rec "$r" "$(ref_ipc $kind $mode $place $a $b)" "ref_${kind}_${mode}_$place"; fi
                rec "$r" "$(tl_metric $m "ipc.$mode" -p test=$t -p cpu=$place --trials 3 --warmup 1)" "tl_${kind}_${mode}_$place"
                if [ $((r % 2)) -eq 0 ]; then rec "$r" "$(ref_ipc $kind $mode $place $a $b)" "ref_${kind}_${mode}_$place"; fi
            done
        done
    done
done

if ! part device; then
    :
elif [ "$(id -u)" = 0 ] && command -v hdparm >/dev/null && command -v losetup >/dev/null; then
    LOOPIMG="${LOOP_BACKING:-/var/tmp}/tunelab-truth-$$.img"
    truncate -s "${LOOP_MIB}M" "$LOOPIMG"
    mkfs.ext4 -q -F "$LOOPIMG"
    LOOPDEV=$(losetup -f --show "$LOOPIMG")
    mkdir -p "$OUT/mnt" && mount "$LOOPDEV" "$OUT/mnt"
    for r in $(seq 1 "$ROUNDS"); do
        hdparm -tT "$LOOPDEV" | awk -v r="$r" -v o="$OUT" '
            /cached reads/ {print r, $(NF-1)*1e6 >> (o "/ref_cached")}
            /buffered disk reads/ {print r, $(NF-1)*1e6 >> (o "/ref_buffered")}'
        tl run io.device-read --target "$OUT/mnt" -p source=device --trials 3 --json --no-store --quiet-check 0 |
            python3 -c '
import json, statistics, sys
r = json.load(sys.stdin)["results"][0]
for m in r["metrics"]:
    if m["name"] in ("buffered_read", "cached_read"):
        print(m["name"], statistics.median(m["samples"]) / 1.048576)' |
            awk -v r="$r" -v o="$OUT" '{print r, $2 >> (o "/tl_" ($1=="cached_read" ? "cached" : "buffered"))}'
    done
    # hdparm prints MB/s with MB = 2^20 B; tunelab B/s was divided by 1.048576 to match.
else
    echo "io.device-read vs hdparm skipped (needs root, hdparm, losetup)" >&2
fi

if [ -n "$LMB" ]; then REF="lmbench ($LMB, LMBENCH_SCHED, ENOUGH=$LMB_ENOUGH)"; else REF="C re-implementation of lmbench's bw/lat loops (set LMBENCH_BIN for the real one)"; fi
echo "ipc reference: $REF"
python3 - "$OUT" <<'PY'
import os, statistics as st, sys
d = sys.argv[1]
def load(n):
    p = os.path.join(d, n)
    return [float(l.split()[1]) for l in open(p)] if os.path.exists(p) else []
def row(label, a, b, tol_abs=0.0, tol_rel=0.05):
    va, vb = load(a), load(b)
    if not va or not vb:
        print(f"{label:38} skipped"); return
    ma, mb = st.median(va), st.median(vb)
    ok = abs(ma - mb) <= max(tol_abs, tol_rel * mb)
    print(f"{label:38} {ma:12.4g} {mb:12.4g} {ma/mb:7.3f}  {'PASS' if ok else 'FAIL'}")
print(f"{'measure':38} {'tunelab':>12} {'reference':>12} {'ratio':>7}")
for k in ("true", "alloc"):
    row(f"app.time peak_rss {k} (B)", f"tl_rss_{k}", f"ref_rss_{k}", 256 * 1024)
    row(f"memory peak {k} (B)", f"mem_rss_{k}", f"ref_rss_{k}", 256 * 1024)
for m in ("pipe", "unix"):
    for p in ("same", "split", "any"):
        row(f"ipc.{m} bandwidth cpu={p} (B/s)", f"tl_bw_{m}_{p}", f"ref_bw_{m}_{p}", 0, 0.10)
        row(f"ipc.{m} round trip cpu={p} (s)", f"tl_lat_{m}_{p}", f"ref_lat_{m}_{p}", 0, 0.10)
row("io.device-read buffered (MB/s)", "tl_buffered", "ref_buffered", 0, 0.15)
row("io.device-read cached (MB/s)", "tl_cached", "ref_cached", 0, 0.15)
print("PASS: peak RSS within max(5%, 256 KiB); IPC within 10%; device 15%")
PY
