#!/bin/sh
# io.random vs fio: 4 KiB random reads, O_DIRECT, at queue depth 1 and 32, with
# psync (QD 32 = 32 threads) and io_uring (QD 32 = one ring), on the same file system
# in one run, interleaved: every round runs each case with both tools back to back,
# alternating which goes first, so both see the same device at the same minute.
#
# Each tool does the same work per case:
#   tunelab  io.random rw=randread bs=4k mode=direct depth=QD engine=E size=SIZE
#            duration=DUR: its own scratch file of SIZE (random data, fsync, untimed),
#            1 warm-up trial + TRIALS trials of DUR seconds. IOPS = median of the trials;
#            p99 = the 99th percentile of the point's merged HDR histogram (all measured
#            trials' operations), latency from start to completion of each operation.
#   fio      a file of SIZE in the same directory (laid out once by fio, fsync), one job
#            --rw=randread --bs=4k --direct=1 --ioengine=E --norandommap --randrepeat=0
#            (uniform random offsets with repeats, as tunelab), --ramp_time=DUR (the
#            warm-up) --runtime=TRIALS*DUR --time_based --lat_percentiles=1;
#            psync QD 32 = --numjobs=32 --thread --group_reporting, io_uring QD 32 =
#            --iodepth=32. IOPS = read.iops; p99 = read.lat_ns percentile 99 (fio's total
#            latency, submission included, which is what tunelab times).
#   fio with several jobs (psync QD > 1, or J > 1): read.iops sums each job's rate over
#            that job's own window, and with hundreds of threads on few CPUs those windows
#            do not overlap (jobs start seconds apart), so it need not be a rate the device
#            ever delivered (512 psync threads on zram: fio's JSON said 731k IOPS while the
#            device completed 614k a second); tunelab's jobs share one trial window. So fio
#            also writes each job's IOPS log (--write_iops_log --log_avg_msec=100
#            --log_unix_epoch=1), of which only the time stamps are used: a job is measuring
#            from its first sample's 100 ms to its last sample. (The logged rates are not
#            summed: fio computes each over its own sampling period, which lags behind after
#            a starved thread's gap, and such sums came out a third under the device's.)
#            fio IOPS is then the device's completed reads (/sys/dev/block/M:m/stat of the
#            target's file system, sampled every 50 ms by the script, interpolated) over the
#            window in which every job was measuring (latest start to earliest end), over
#            its length: what fio's jobs got together, at the row's concurrency. All jobs,
#            not 90% of them: outside that window some job is ramping, not started or done.
#            Under a third of the runtime or empty, fio runs once more with its runtime
#            stretched by twice its jobs' start spread plus a second (the rerun's figure
#            replaces the first); still under a third, the round is "staggered": no fio
#            rate, ratio and verdict "not comparable" (N/C, not a FAIL). fio's JSON
#            read.iops is printed beside it on every row, and for staggered rows the
#            device's busiest 200 ms. fio's CPU per I/O stays its jobs' CPU over the I/Os
#            of the same per-job windows: a valid cost per I/O even when staggered, though
#            spent at whatever concurrency each job then had.
# Two comparisons:
#   host  the target directory's own disk. On a shared VM whose disk the host caches,
#         rates swing by 2x between minutes (and with other load on the CPUs), so the
#         per-round ratios show that spread.
#   lab   (root) ext4 on a loop device whose IOPS a cgroup v1 blkio throttle limits to
#         LAB_IOPS (riops); both tools run inside that cgroup. The loop image is on
#         /dev/shm when that is a tmpfs (else in TARGET), so the device under the throttle
#         is memory and even QD 1 is held to the limit: this is the low-noise check that
#         both tools count and time the same thing.
#   ram   (root) ext4 on RAM-backed devices (RAM_DEVS): `zram` (its own device,
#         removed at exit) and `loop` (a direct-io loop device on an image in
#         /dev/shm, served by the loop's kworker), no throttle, at RAM_QDS (default 1 32 128): the
#         device answers in microseconds, so a quarter-million IOPS shows each tool's
#         own cost per I/O (issue 31); each depth also with RAM_JOBS workers
#         (default 1 4: tunelab jobs=J, fio --numjobs=J --thread --group_reporting for
#         io_uring and --numjobs=QD*J for psync; rows named …-J4).
# Per round: ratio = tunelab / fio. Per case: median of the per-round ratios and its
# range, and a distribution-free confidence interval of that median (order statistics
# of the per-round ratios; with 5 rounds it is their range, 94%): "agree" when it lies
# inside the ±3% band, "tunelab ahead"/"fio ahead" when it lies outside, "undecided"
# when the band is narrower than the machine's round-to-round spread. PASS when the median IOPS ratio is within 5% of 1 (3% for the ram rows,
# issue 31) and the median p99 ratio within 10% of 1 (issue 17). On a machine other
# processes load, judge the per-round ratios' spread, not one round.
#
# Usage: bench/random_vs_fio.sh [TARGET_DIR] [SIZE] [ROUNDS]   (defaults /var/tmp 512M 3)
#   env: TUNELAB=path/to/tunelab  TRIALS=3  DUR=1 (seconds)  HOST=1|0  LAB=auto|0  LAB_IOPS=500
#        LAB_SIZE=64M  RAM=auto|0  RAM_DEVS="zram loop"  RAM_SIZE=256M  RAM_QDS="1 32 128"  RAM_JOBS="1 4"  FIO_BATCH=0|1|2 (1: fio at its lowest cost per I/O;
#        2: that and --gtod_reduce=1, no latency kept: fio's floor)
#        DOC=docs/performance.md (also write the summary table, with the date and
#        load, between that page's random_vs_fio:begin/end markers)
#        FLOOR=1 (also run bench/floor/randread.c on fio's file after both tools:
#        the device with the least work per I/O; its column is tunelab/floor)
# Needs fio (with io_uring for those cases) and python3 to read JSON; the lab part needs
# root, losetup, mkfs.ext4 and a cgroup v1 blkio hierarchy (skipped with a note otherwise).
set -eu
TARGET=${1:-/var/tmp}
SIZE=${2:-512M}
ROUNDS=${3:-3}
TRIALS=${TRIALS:-3}
DUR=${DUR:-1}
HOST=${HOST:-1}
LAB=${LAB:-auto}
LAB_IOPS=${LAB_IOPS:-500}
LAB_SIZE=${LAB_SIZE:-64M}
RAM=${RAM:-auto}
RAM_SIZE=${RAM_SIZE:-256M}
RAM_QDS=${RAM_QDS:-1 32 128}
RAM_JOBS=${RAM_JOBS:-1 4}
RAM_DEVS=${RAM_DEVS:-zram loop}
QDS="1 32"
# Workers per case (the ram part sweeps RAM_JOBS); J is the current one.
JOBS_LIST=1
J=1
TL=${TUNELAB:-}
if [ -z "$TL" ]; then
    for c in "${CARGO_TARGET_DIR:-target}/release/tunelab" target/release/tunelab \
        "${CARGO_TARGET_DIR:-target}/debug/tunelab"; do
        [ -x "$c" ] && TL=$c && break
    done
    [ -z "$TL" ] && TL=$(command -v tunelab || true)
fi
if [ -z "$TL" ] || [ ! -x "$TL" ]; then echo "tunelab binary not found (set TUNELAB=)" >&2; exit 2; fi
command -v fio >/dev/null || { echo "fio is not installed (apt-get install -y fio)" >&2; exit 4; }
command -v python3 >/dev/null || { echo "python3 is needed to read the JSON" >&2; exit 4; }
# shellcheck source-path=SCRIPTDIR source=lib/docblock.sh disable=SC1091
. "$(dirname "$0")/lib/docblock.sh"
[ -z "${DOC:-}" ] || docblock_check "$DOC" random_vs_fio

WORK=$(mktemp -d "$TARGET/.random-vs-fio.XXXXXX")
MNT="" LOOP="" CG="" SHM_DIR="" RMNT="" RLOOP="" RIMG="" ZID=""
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    set +e
    [ -n "$RMNT" ] && mountpoint -q "$RMNT" && umount "$RMNT"
    [ -n "$RLOOP" ] && losetup -d "$RLOOP" 2>/dev/null
    [ -n "$ZID" ] && echo "$ZID" >/sys/class/zram-control/hot_remove 2>/dev/null
    [ -n "$RIMG" ] && rm -f "$RIMG"
    [ -n "$CG" ] && [ -d "$CG" ] && rmdir "$CG" 2>/dev/null
    [ -n "$MNT" ] && mountpoint -q "$MNT" && umount "$MNT"
    [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
    [ -n "$SHM_DIR" ] && rm -rf "$SHM_DIR"
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
ROWS="$WORK/rows"
: >"$ROWS"

# in_cg CGROUP CMD…: run CMD inside the cgroup (none when CGROUP is empty).
in_cg() {
    # shellcheck disable=SC2016
    sh -c '[ -z "$1" ] || echo $$ >"$1/cgroup.procs"; shift; exec "$@"' in-cg "$@"
}

# tl_case ENGINE QD DIR SIZE CGROUP -> "iops p99"
tl_case() {
    in_cg "$5" "$TL" run io.random -p rw=randread -p bs=4k -p mode=direct -p depth="$2" -p engine="$1" \
        -p jobs="$J" -p size="$4" -p duration="$DUR" --warmup 1 --trials "$TRIALS" --quiet-check 0 \
        --no-store --json --target "$3" >"$WORK/tl.json" 2>"$WORK/tl.err" \
        || { cat "$WORK/tl.err" >&2; exit 1; }
    python3 - "$WORK/tl.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
m = {x["name"]: x["summary"]["median"] for x in r["metrics"]}
if "iops" not in m:
    print("skip skip 0"); sys.exit()
h = [h for h in r["histograms"] if h["name"] == "completion latency"][0]
p99 = [p["value"] for p in h["percentiles"] if abs(p["p"] - 99) < 1e-9][0]
# tunelab's CPU (user + system) per I/O: its process's getrusage over each
# trial over the trial's operations (metric cpu_per_op), median of the trials.
print(m["iops"], p99, m.get("cpu_per_op", 0) * 1e9)
PY
}

# fio_case ENGINE QD DIR SIZE CGROUP -> "iops p99 cpu json_iops together spread flag peak"
# (iops: the figure compared, see the header; flag single|together|staggered;
# peak: the device's completed reads in its busiest 200 ms, per second).
fio_case() {
    if [ "$1" = psync ]; then
        nj=$(($2 * J))
        par="--numjobs=$nj --thread --group_reporting"
    else
        nj=$J
        par="--iodepth=$2"
        if [ "$J" != 1 ]; then par="$par --numjobs=$J --thread --group_reporting"; fi
    fi
    # Each job's IOPS log, 100 ms samples with absolute (Unix epoch, ms) time
    # stamps, fio 3.33 writes them as x_iops.N.log: when each job measured
    # (several jobs: their common window; one job: the window its CPU is
    # taken over).
    logdir="$WORK/fiolog"
    rm -rf "$logdir"
    mkdir "$logdir"
    par="$par --write_iops_log=$logdir/x --log_avg_msec=100 --log_unix_epoch=1"
    # FIO_BATCH=1: fio at its own lowest cost per I/O, as tunelab runs: the
    # TSC clock (--clocksource=cpu; tunelab reads CLOCK_MONOTONIC through the
    # vDSO) and, for io_uring, submitting and reaping up to the queue depth
    # per system call with registered files and buffers (fio's default is one
    # I/O per io_uring_enter).
    if [ "${FIO_BATCH:-0}" != 0 ]; then
        par="$par --clocksource=cpu"
        if [ "$1" = io_uring ]; then
            par="$par --iodepth_batch_submit=$2 --iodepth_batch_complete_min=1"
            par="$par --iodepth_batch_complete_max=$2 --registerfiles --fixedbufs"
        fi
        # FIO_BATCH=2: and no time stamps per I/O at all (--gtod_reduce=1): fio's
        # floor, which tells how much of the gap is fio's latency accounting. No
        # p99 then (printed as 0 and left out of the verdict).
        [ "$FIO_BATCH" = 2 ] && par="$par --gtod_reduce=1"
    fi
    lp=--lat_percentiles=1
    [ "${FIO_BATCH:-0}" = 2 ] && lp=""
    eng=$1 dir=$3 size=$4 cg=$5
    out=$(fio_once "$eng" "$dir" "$size" "$cg" "$par $lp" "$logdir" "$nj" $((TRIALS * DUR))) ||
        { echo "skip skip 0"; return 0; }
    # Staggered: fio's jobs started further apart than the runtime. Run it
    # once more with the runtime stretched by twice that spread (plus a
    # second), so that every job is measuring for a common window of about
    # the runtime; the figure is still the device's reads in that window.
    # shellcheck disable=SC2086
    set -- $out
    if [ "$7" = staggered ] && [ "$6" != -1 ]; then
        extra=$(python3 -c "import math; print(math.ceil(2 * float('$6')) + 1)")
        rm -rf "$logdir"
        mkdir "$logdir"
        again=$(fio_once "$eng" "$dir" "$size" "$cg" "$par $lp" "$logdir" "$nj" $((TRIALS * DUR + extra))) &&
            out="$again"
    fi
    echo "$out"
}

# fio_once ENGINE DIR SIZE CGROUP "FIO OPTIONS" LOGDIR NJOBS RUNTIME_S -> fio_case's line
fio_once() {
    # The device's completed reads and fio's CPU, sampled every 50 ms with
    # absolute time stamps while fio runs (the rate fio's jobs got, counted
    # where the I/O ends, and what fio spent on it; see the header).
    python3 - "$2" >"$WORK/devstat" <<'PY' &
import os, signal, sys, time
d = os.stat(sys.argv[1]).st_dev
path = f"/sys/dev/block/{os.major(d)}:{os.minor(d)}/stat"
fio = None


def cpu_of(pid):
    # Every thread's nanoseconds on a CPU so far (/proc/PID/task/*/schedstat).
    return sum(int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0])
               for t in os.listdir(f"/proc/{pid}/task"))


def fio_cpu_ns():
    # fio's CPU so far, as the scheduler counts it, and how many processes
    # it is of: the fio process (its jobs' threads with --thread, its main
    # thread) and its children (a single job runs as a forked process).
    # "-1 0" before fio is found and after it has gone.
    global fio
    if fio is None:
        for p in os.listdir("/proc"):
            try:
                if p.isdigit() and open(f"/proc/{p}/comm").read().strip() == "fio":
                    fio = p
                    break
            except OSError:
                pass
        if fio is None:
            return "-1 0"
    try:
        kids = open(f"/proc/{fio}/task/{fio}/children").read().split()
        return f"{cpu_of(fio) + sum(cpu_of(k) for k in kids)} {1 + len(kids)}"
    except OSError:
        return "-1 0"


def sample(*_):
    with open(path) as f:
        n = f.read().split()[0]
    print(f"{time.time() * 1000:.1f} {n} {fio_cpu_ns()}", flush=True)


def last(*_):
    # One more reading once fio has ended: its jobs' last log samples are
    # written as they exit, after the sampler's previous reading.
    sample()
    sys.exit(0)


signal.signal(signal.SIGTERM, last)
while True:
    sample()
    time.sleep(0.05)
PY
    sampler=$!
    # shellcheck disable=SC2086
    in_cg "$4" fio --name=cmp --filename="$2/fio.dat" --size="$3" --bs=4k --rw=randread --direct=1 \
        --ioengine="$1" $5 --norandommap --randrepeat=0 --time_based \
        --ramp_time="$DUR" --runtime="$8" \
        --output-format=json --output="$WORK/fio.json" >/dev/null 2>"$WORK/fio.err"
    rc=$?
    kill "$sampler"
    wait "$sampler" 2>/dev/null || true
    [ "$rc" = 0 ] || return 1
    python3 - "$WORK/fio.json" "$6" "$7" "$((TRIALS * DUR))" "$WORK/devstat" <<'PY'
import glob, json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
r = j["read"]
p = r.get("lat_ns", {}).get("percentile", {}).get("99.000000")
# fio's CPU (user + system) per I/O, from its own getrusage over the measured
# time (after the ramp): usr_cpu and sys_cpu are shares of job_runtime, and
# with --group_reporting both are summed over the jobs (fio adds usr_time,
# sys_time and total_run_time of each job), so the product is every job's CPU.
# It stays only where no window could be read from the logs; elsewhere it is
# replaced below by fio's whole process's CPU over the jobs' window.
cpu = (j["usr_cpu"] + j["sys_cpu"]) / 100 * j["job_runtime"] * 1e6
cpu = cpu / r["total_ios"] if r["total_ios"] else 0
p99 = p / 1e9 if p else 0
single = int(sys.argv[3]) == 1
# Several jobs (rule in the header). Each job's measured span from its IOPS
# log: its first sample's 100 ms to its last sample (only the time stamps are
# used: a sample's rate is over fio's own sampling period, which lags after a
# starved thread's gap, so summing the logged rates mis-counts).
AVG, nj, asked = 100, int(sys.argv[3]), float(sys.argv[4])
spans = []
for f in glob.glob(sys.argv[2] + "/x_iops.*.log"):
    ts = [int(line.split(",")[0]) for line in open(f)]
    if ts:
        spans.append((min(ts) - AVG, max(ts)))
dev = [tuple(map(float, line.split())) for line in open(sys.argv[5])]
# The device's peak rate over any 200 ms (four samples): printed for reference.
peak = max(((b[1] - a[1]) / (b[0] - a[0]) * 1000 for a, b in zip(dev, dev[4:]) if b[0] > a[0]), default=0)
if len(spans) < nj or len(dev) < 2:
    # A job with no logged sample was never measured alongside the others
    # (one job: no window to take its CPU over; fio's own figure then).
    if single:
        print(r["iops"], p99, cpu, r["iops"], -1, -1, "single", -1)
        sys.exit()
    print(0, p99, cpu, r["iops"], 0, -1, "staggered", f"{peak:.0f}")
    sys.exit()
w0 = max(a for a, _ in spans)
w1 = min(b for _, b in spans)
spread = (w0 - min(a for a, _ in spans)) / 1000
win = max(0, w1 - w0) / 1000


def at(t, col, rows):
    # Column col (1: the device's completed reads, 2: fio's CPU ns) at time
    # t, interpolated between the samples `rows`.
    for a, b in zip(rows, rows[1:]):
        if a[0] <= t <= b[0]:
            return a[col] + (b[col] - a[col]) * (t - a[0]) / (b[0] - a[0]) if b[0] > a[0] else a[col]
    return None


ra, rb = at(w0, 1, dev), at(w1, 1, dev)
conc = (rb - ra) / win if win > 0 and ra is not None and rb is not None else 0
# fio's CPU per I/O over the same window: its whole process's CPU (every job
# thread and its main thread, as tunelab's figure is its whole process's)
# over the reads the device completed. Not fio's JSON usr_cpu/sys_cpu here:
# with --thread each job's share comes from its own thread's getrusage, and
# threads that wait on a throttled device most of the time came out at 0 to
# 5 ms for 1,500 reads in identical runs, where the same jobs as processes
# gave 23-25 ms. Only samples that counted all of fio's processes (a forked
# job that has exited takes its CPU with it), so the window may end early.
full = max((row[3] for row in dev), default=0)
ok = [row for row in dev if row[2] >= 0 and row[3] == full and full > 0]
if ok:
    c0, c1 = max(w0, ok[0][0]), min(w1, ok[-1][0])
    ca, cb = at(c0, 2, ok), at(c1, 2, ok)
    na, nb = at(c0, 1, ok), at(c1, 1, ok)
    if c1 - c0 >= (w1 - w0) / 2 and None not in (ca, cb, na, nb) and nb > na and cb >= ca:
        cpu = (cb - ca) / (nb - na)
if single:
    # One job: fio's own rate (JSON), its whole family's CPU over its window.
    print(r["iops"], p99, cpu, r["iops"], -1, -1, "single", -1)
    sys.exit()
# A third of the runtime asked for (the rerun's stretched runtime does not
# raise the bar).
flag = "together" if win >= asked / 3 and conc > 0 else "staggered"
print(f"{conc:.1f}", p99, cpu, r["iops"], f"{win:.2f}", f"{spread:.2f}", flag, f"{peak:.0f}")
PY
}

# floor_case ENGINE QD DIR CGROUP -> IOPS of bench/floor/randread.c on fio's file
# (FLOOR=1; 0 otherwise): the device with the least work per I/O a program can do.
floor_case() {
    if [ -z "$FLOOR_BIN" ]; then echo 0; return 0; fi
    in_cg "$4" "$FLOOR_BIN" "$3/fio.dat" "$1" "$2" "$((TRIALS * DUR))" "$J" 2>>"$WORK/floor.err" || echo 0
}

# compare KIND DIR SIZE CGROUP: ROUNDS rounds of the four cases, appending
# "KIND-case round tl_iops tl_p99 fio_iops fio_p99 floor tl_cpu fio_cpu
# fio_json_iops together_s start_spread_s flag peak" to ROWS.
compare() {
    kind=$1 dir=$2 size=$3 cg=$4
    fio --name=layout --filename="$dir/fio.dat" --size="$size" --bs=1M --rw=write \
        --ioengine=psync --end_fsync=1 --output-format=json >/dev/null
    i=1
    while [ "$i" -le "$ROUNDS" ]; do
        for eng in psync io_uring; do
            for qd in $QDS; do
              for J in $JOBS_LIST; do
                name="$kind-$eng-QD$qd"
                if [ "$J" != 1 ]; then name="$name-J$J"; fi
                if [ $((i % 2)) -eq 1 ]; then
                    t=$(tl_case "$eng" "$qd" "$dir" "$size" "$cg"); f=$(fio_case "$eng" "$qd" "$dir" "$size" "$cg")
                else
                    f=$(fio_case "$eng" "$qd" "$dir" "$size" "$cg"); t=$(tl_case "$eng" "$qd" "$dir" "$size" "$cg")
                fi
                case "$t $f" in *skip*) echo "$name $i skipped (engine unavailable)"; continue ;; esac
                fl=$(floor_case "$eng" "$qd" "$dir" "$cg")
                # shellcheck disable=SC2086
                set -- $t $f
                row="$name $i $1 $2 $4 $5 $fl $3 $6 $7 $8 $9 ${10} ${11}"
                echo "$row" >>"$ROWS"
                echo "$row" | awk -v rt=$((TRIALS * DUR)) '{
                    nc = ($13 == "staggered")
                    printf "%-26s %5d %11.0f %11s %7s   %9.3fms %9.3fms %7.3f   %7.0fns %7.0fns",
                        $1, $2, $3, (nc ? "n/c" : sprintf("%.0f", $5)), (nc ? "n/c" : sprintf("%.3f", $3/$5)),
                        $4*1e3, $6*1e3, ($6 > 0 ? $4/$6 : 0), $8, $9
                    if ($7 > 0) printf "   %11.0f %7.3f", $7, $3/$7
                    printf "   %11.0f", $10
                    if ($13 == "together") printf "   together %.2fs of %ds (starts %.2fs apart)", $11, rt, $12
                    if (nc) printf "   STAGGERED: all jobs measured together %.2fs of %ds (starts %.2fs apart)%s%s",
                        $11, rt, $12, ($11 > 0 ? sprintf(", %.0f IOPS then", $5) : ""),
                        ($14 > 0 ? sprintf("; the device completed at most %.0f reads/s in any 200 ms", $14) : "")
                    printf "\n" }'
              done
            done
        done
        i=$((i + 1))
    done
    rm -f "$dir/fio.dat"
}

FLOOR_BIN=""
if [ "${FLOOR:-0}" = 1 ]; then
    FLOOR_BIN="$WORK/randread"
    cc -O2 -o "$FLOOR_BIN" "$(dirname "$0")/floor/randread.c" -luring -lpthread ||
        { echo "FLOOR=1 needs cc and liburing (apt-get install -y gcc liburing-dev)" >&2; exit 4; }
fi
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
echo "tunelab: $TL ($("$TL" --version 2>/dev/null || echo '?')); $(fio --version); kernel $(uname -r); $(nproc) CPUs, load $LOAD_BEFORE"
echo "4 KiB randread, O_DIRECT; $ROUNDS rounds x (1 warm-up + $TRIALS x ${DUR}s) per tool and case"
printf "%-26s %5s %11s %11s %7s   %11s %11s %7s   %9s %9s" case round "tl IOPS" "fio IOPS" ratio \
    "tl p99" "fio p99" ratio "tl CPU/IO" "fio CPU/IO"
[ -n "$FLOOR_BIN" ] && printf "   %11s %7s" "floor IOPS" "tl/flr"
printf "   %11s   %s\n" "fio JSON" "fio jobs (several: fio IOPS = their concurrent rate)"
if [ "$HOST" = 1 ]; then
    echo "host: target $TARGET ($(df -P "$TARGET" | awk 'NR==2 {print $1}'), $(stat -f -c %T "$TARGET")), file $SIZE"
    compare host "$WORK" "$SIZE" ""
else
    echo "host: skipped (HOST=0)"
fi

lab_skip=""
if [ "$LAB" = 0 ]; then
    lab_skip="LAB=0"
elif [ "$(id -u)" != 0 ]; then
    lab_skip="needs root"
elif [ ! -w /sys/fs/cgroup/blkio/cgroup.procs ] || [ ! -e /sys/fs/cgroup/blkio/blkio.throttle.read_iops_device ]; then
    lab_skip="no cgroup v1 blkio hierarchy"
elif ! command -v losetup >/dev/null || ! command -v mkfs.ext4 >/dev/null; then
    lab_skip="losetup or mkfs.ext4 missing"
fi
if [ -z "$lab_skip" ]; then
    IMG_DIR=$WORK
    if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
        IMG_DIR=$(mktemp -d /dev/shm/random-vs-fio.XXXXXX)
        SHM_DIR=$IMG_DIR
    fi
    truncate -s 256M "$IMG_DIR/lab.img"
    LOOP=$(losetup --find --show "$IMG_DIR/lab.img")
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$LOOP"
    MNT="$WORK/mnt"
    mkdir "$MNT"
    mount "$LOOP" "$MNT"
    majmin=$(cat "/sys/block/$(basename "$LOOP")/dev")
    CG=/sys/fs/cgroup/blkio/random-vs-fio-$$
    mkdir "$CG"
    echo "$majmin $LAB_IOPS" >"$CG/blkio.throttle.read_iops_device"
    echo "lab: ext4 on $LOOP ($majmin, image in $IMG_DIR), blkio throttle riops=$LAB_IOPS for both tools, file $LAB_SIZE"
    compare lab "$MNT" "$LAB_SIZE" "$CG"
else
    echo "lab: skipped ($lab_skip)"
fi

ram_skip=""
if [ "$RAM" = 0 ]; then
    ram_skip="RAM=0"
elif [ "$(id -u)" != 0 ]; then
    ram_skip="needs root"
elif ! command -v mkfs.ext4 >/dev/null; then
    ram_skip="mkfs.ext4 missing"
fi
# ram_dev zram|loop: set RDEV (and what) to a fresh RAM-backed device, or
# return 1 with why in $what.
ram_dev() {
    if [ "$1" = zram ]; then
        if [ -w /sys/class/zram-control/hot_add ] &&
            ZID=$(cat /sys/class/zram-control/hot_add 2>/dev/null) &&
            echo 1G >"/sys/block/zram$ZID/disksize" 2>/dev/null; then
            n=0
            while [ ! -b "/dev/zram$ZID" ] && [ "$n" -lt 50 ]; do sleep 0.1; n=$((n + 1)); done
            RDEV=/dev/zram$ZID
            what="zram$ZID (RAM, synchronous; its own device, removed at exit)"
            return 0
        fi
        # A device added whose size could not be set is removed again.
        [ -n "$ZID" ] && echo "$ZID" >/sys/class/zram-control/hot_remove 2>/dev/null
        ZID=""
        what="no zram (zram-control missing or refused)"
        return 1
    fi
    if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" != tmpfs ] || ! command -v losetup >/dev/null; then
        what="no tmpfs /dev/shm or no losetup"
        return 1
    fi
    RIMG=$(mktemp /dev/shm/random-vs-fio.XXXXXX)
    truncate -s 1G "$RIMG"
    # --direct-io=on: the loop worker reads the image with O_DIRECT (tmpfs
    # takes it from Linux 6.6), no second page cache under the file system.
    RLOOP=$(losetup --direct-io=on --find --show "$RIMG")
    RDEV=$RLOOP
    what="$RLOOP (direct-io loop, image in /dev/shm; dio=$(cat "/sys/block/$(basename "$RLOOP")/loop/dio" 2>/dev/null || echo ?))"
}
# ram_free: unmount and remove the device ram_dev made.
ram_free() {
    mountpoint -q "$RMNT" && umount "$RMNT"
    [ -n "$RLOOP" ] && losetup -d "$RLOOP" 2>/dev/null
    [ -n "$ZID" ] && echo "$ZID" >/sys/class/zram-control/hot_remove 2>/dev/null
    [ -n "$RIMG" ] && rm -f "$RIMG"
    RLOOP="" ZID="" RIMG=""
}
if [ -z "$ram_skip" ]; then
    RMNT="$WORK/ram"
    mkdir "$RMNT"
    QDS=$RAM_QDS
    JOBS_LIST=$RAM_JOBS
    for dev in $RAM_DEVS; do
        if ! ram_dev "$dev"; then
            echo "ram-$dev: skipped ($what)"
            continue
        fi
        mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$RDEV"
        mount "$RDEV" "$RMNT"
        echo "ram-$dev: ext4 on $what, no throttle, file $RAM_SIZE, QD $RAM_QDS, jobs $RAM_JOBS; load $(cut -d' ' -f1-3 /proc/loadavg)"
        compare "ram-$dev" "$RMNT" "$RAM_SIZE" ""
        ram_free
    done
else
    echo "ram: skipped ($ram_skip)"
fi

echo
META="$(date -u '+%Y-%m-%d %H:%M UTC'), $("$TL" --version 2>/dev/null || echo tunelab) ($(basename "$(dirname "$TL")") build), $(fio --version), kernel $(uname -r), $(nproc) CPUs, load average $LOAD_BEFORE before, $(cut -d' ' -f1-3 /proc/loadavg) after; $ROUNDS rounds x (1 warm-up + $TRIALS x ${DUR}s) per tool and case"
status=0
python3 - "$ROWS" "${DOC:+$ROWS.doc}" "$META" "$(nproc)" "$((TRIALS * DUR))" <<'PY' || status=$?
import math, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
fail = False
table = []


def median_ci(xs):
    """Distribution-free CI of the median from order statistics: the widest
    rank k with P(Binomial(n, 1/2) < k) <= 2.5% (n=5: the range, 94%)."""
    x, n = sorted(xs), len(xs)
    cdf = lambda k: sum(math.comb(n, i) for i in range(k)) / 2 ** n
    k = max([j for j in range(1, n // 2 + 1) if cdf(j) <= 0.025] or [1])
    return x[k - 1], x[n - k], 1 - 2 * cdf(k)


def verdict(lo, hi, tol, other="fio"):
    if 1 - tol <= lo and hi <= 1 + tol:
        return "agree"
    if lo > 1 + tol:
        return "tunelab ahead"
    if hi < 1 - tol:
        return f"{other} ahead"
    return "undecided"
runtime = sys.argv[5]
cpu_calls = {}
for case in dict.fromkeys(r[0] for r in rows):
    rs_all = [r for r in rows if r[0] == case]
    # fio with several jobs: its IOPS (r[4]) is their concurrent rate (header);
    # a round in which they were never all measured together for a third of
    # the runtime ("staggered") has no fio rate to compare: it is left out of
    # every ratio and verdict, and fio's JSON figure (r[9]) is printed beside.
    multi = rs_all[0][12] != "single"
    rs = [r for r in rs_all if r[12] != "staggered"]
    nstag = len(rs_all) - len(rs)
    fjson = statistics.median(float(r[9]) for r in rs_all)
    wins = [float(r[10]) for r in rs_all]
    tog = f"{min(wins):.2f}..{max(wins):.2f} s of {runtime} s" if multi else "single job"
    tol = 0.03 if case.startswith("ram-") else 0.05
    lat = [float(r[3]) / float(r[5]) for r in (rs or rs_all) if float(r[5]) > 0]
    # FIO_BATCH=2: fio kept no latencies, so only IOPS are judged.
    ml = statistics.median(lat) if lat else 1.0
    lat = lat or [float("nan")]
    if rs:
        io = [float(r[2]) / float(r[4]) for r in rs]
        mi = statistics.median(io)
        ok = abs(mi - 1) <= tol and abs(ml - 1) <= 0.10
        fail |= not ok
        print(f"{'PASS' if ok else 'FAIL'} {case:<26} n={len(rs)}  IOPS ratio median {mi:.3f} "
              f"(range {min(io):.3f}..{max(io):.3f}), tunelab {statistics.median(float(r[2]) for r in rs):.0f} "
              f"fio {statistics.median(float(r[4]) for r in rs):.0f}  |  p99 ratio median {ml:.3f} "
              f"(range {min(lat):.3f}..{max(lat):.3f})")
        lo, hi, cover = median_ci(io)
        print(f"     {case:<26} IOPS ratio median CI {lo:.3f}..{hi:.3f} ({cover:.0%}): "
              f"{verdict(lo, hi, tol)} (band ±{tol:.0%})")
        if multi:
            print(f"     {case:<26} fio's jobs all measured together {tog}; fio IOPS is their concurrent "
                  f"rate then, fio's JSON (summed per-job rates) {fjson:.0f}"
                  + (f"; {nstag} of {len(rs_all)} rounds not comparable (fio's jobs staggered), left out"
                     if nstag else ""))
        fio_cell = f"{statistics.median(float(r[4]) for r in rs):.0f}"
        ratio_cell = f"{mi:.3f} ({lo:.3f}–{hi:.3f}) {verdict(lo, hi, tol)}" + (
            f", {nstag} of {len(rs_all)} rounds not comparable" if nstag else "")
    else:
        # Not judged either way, and not a FAIL: there is nothing to compare.
        print(f"N/C  {case:<26} n={len(rs_all)}  not comparable (fio's jobs staggered): they were all "
              f"measured together {tog}, less than a third; tunelab "
              f"{statistics.median(float(r[2]) for r in rs_all):.0f}, fio JSON {fjson:.0f} (per-job rates "
              f"over different windows, summed), while the device completed at most "
              f"{max(float(r[13]) for r in rs_all):.0f} reads/s in any 200 ms  |  p99 ratio median "
              f"{ml:.3f} (not judged)")
        fio_cell = "n/c"
        ratio_cell = "not comparable (fio's jobs staggered)"
    fl = [float(r[2]) / float(r[6]) for r in rs_all if float(r[6]) > 0]
    if fl:
        okf = abs(statistics.median(fl) - 1) <= 0.03
        print(f"{'PASS' if okf else 'FAIL'} {case:<26} tunelab/floor median {statistics.median(fl):.3f} "
              f"(range {min(fl):.3f}..{max(fl):.3f}), floor "
              f"{statistics.median(float(r[6]) for r in rs_all):.0f}")
        lo, hi, cover = median_ci(fl)
        print(f"     {case:<26} tunelab/floor median CI {lo:.3f}..{hi:.3f} ({cover:.0%}): "
              f"{verdict(lo, hi, 0.03, 'floor')}")
        # A figure above the minimal reader's is not the device: fio with
        # --ramp_time and hundreds of threads on 2 CPUs reported 2x what
        # vmstat showed the device deliver (docs/performance.md).
        over = [float(r[9]) / float(r[6]) for r in rs_all if float(r[6]) > 0]
        if statistics.median(over) > 1.10:
            print(f"WARN {case:<26} fio's JSON reports {statistics.median(over):.2f} x the minimal "
                  "reader's IOPS: more than the device can have delivered, so fio's JSON figure for "
                  "this row is not trusted")
    # CPU per I/O over every round: fio's is its jobs' CPU over the I/Os of
    # the same per-job windows, a cost per I/O even when they were staggered
    # (though then at whatever concurrency each job happened to run with).
    tc = [float(r[7]) for r in rs_all if float(r[7]) > 0]
    fc = [float(r[8]) for r in rs_all if float(r[8]) > 0]
    if tc and fc:
        # Per round: which tool spent less CPU on one I/O (each from its own
        # getrusage over its measured time).
        lower = sum(float(r[7]) <= float(r[8]) for r in rs_all if float(r[8]) > 0)
        print(f"     {case:<26} CPU per I/O (user + system), median: tunelab "
              f"{statistics.median(tc):.0f} ns (range {min(tc):.0f}..{max(tc):.0f}), fio "
              f"{statistics.median(fc):.0f} ns (range {min(fc):.0f}..{max(fc):.0f}); tunelab "
              f"lower in {lower} of {len(fc)} rounds")
    # Which tool costs less per I/O, as the rounds can tell: the median of
    # the per-round ratios tunelab / fio and its order-statistic CI. Where
    # the CI straddles 1 the rounds cannot tell the two apart ("tied"): at
    # QD 1 on a RAM-backed device nearly all of either tool's CPU per I/O is
    # kernel time (the system call, the block layer, a sleep and a wake-up,
    # often a CPU migration), and which is lower flips between runs.
    cr = [float(r[7]) / float(r[8]) for r in rs_all if float(r[7]) > 0 and float(r[8]) > 0]
    cpu_call = "-"
    if cr:
        clo, chi, ccov = median_ci(cr)
        cpu_call = ("tunelab lower" if chi < 1 else "fio lower" if clo > 1 else "tied")
        cpu_calls[cpu_call] = cpu_calls.get(cpu_call, 0) + 1
        print(f"     {case:<26} CPU per I/O ratio tunelab/fio median {statistics.median(cr):.3f} "
              f"CI {clo:.3f}..{chi:.3f} ({ccov:.0%}): {cpu_call}")
    cpu = (f"{statistics.median(tc):.0f} | {statistics.median(fc):.0f} | {lower} of {len(fc)} | "
           f"{statistics.median(cr):.3f} ({clo:.3f}–{chi:.3f}) {cpu_call}"
           if tc and fc and cr else "- | - | - | -")
    # A rate no machine of this size can reach: IOPS x CPU time per I/O is
    # the CPUs the tool kept busy. (fio's JSON figure for hundreds of
    # --numjobs threads did: it sums each job's rate over its own window.)
    impossible = ""
    for who, iops_col, cpu_col, rr in (("fio", 4, 8, rs), ("tunelab", 2, 7, rs_all)):
        busy = statistics.median(float(r[iops_col]) * float(r[cpu_col]) * 1e-9
                                 for r in rr) if tc and fc and rr else 0.0
        if busy > int(sys.argv[4]) * 1.05:
            print(f"WARN {case:<26} {who}'s IOPS x its CPU per I/O = {busy:.1f} CPUs busy, more than "
                  f"the {sys.argv[4]} this machine has: its IOPS is not a rate the device and "
                  "CPUs delivered at one time, so this row's ratio is not trusted")
            impossible += f" ({who}'s IOPS beyond {sys.argv[4]} CPUs: not trusted)"
    table.append(f"| {case} | {statistics.median(float(r[2]) for r in (rs or rs_all)):.0f} | "
                 f"{fio_cell} | {ratio_cell}{impossible} | {ml:.3f}{'' if rs else ' (not judged)'} | {cpu} | "
                 f"{fjson:.0f} | {tog} |")
print("CPU per I/O over the rows: " + ", ".join(f"{v} {k}" for k, v in sorted(cpu_calls.items()))
      + " ('tied': the CI of the median ratio straddles 1)")
print("criterion: |median IOPS ratio - 1| <= 5% (ram rows: 3%) and |median p99 ratio - 1| <= 10%;"
      " with FLOOR=1 also |median tunelab/floor - 1| <= 3% (the exit status follows the fio rows only)."
      " The CI line says whether the rounds can tell: 'undecided' means the machine's spread"
      " between rounds is wider than the band. N/C: fio's jobs were never all measured together for a"
      " third of the runtime, so fio has no rate to compare (not judged, not a FAIL)")
if sys.argv[2]:
    # DOC=page: the table for bench/lib/docblock.sh.
    open(sys.argv[2], "w").write(
        f"Generated by bench/random_vs_fio.sh: {sys.argv[3]}.\n\n"
        "| row | tunelab IOPS | fio IOPS | IOPS ratio median (CI), verdict | p99 ratio | "
        "tunelab CPU/I/O ns | fio CPU/I/O ns | tunelab lower | CPU/I/O ratio median (CI) | fio JSON IOPS | fio's jobs all measured together |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
        + "\n".join(table) + "\n")
sys.exit(1 if fail else 0)
PY
if [ -n "${DOC:-}" ] && [ -s "$ROWS.doc" ]; then
    docblock "$DOC" random_vs_fio "$ROWS.doc"
fi
exit "$status"
