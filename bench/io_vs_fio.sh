#!/bin/sh
# io.record-size (mode=direct, record=1m) vs fio (--ioengine=psync --direct=1 --bs=1M
# --rw=write|read) on the same machine, in one run, interleaved. Two comparisons:
#
#   host  the target directory's own disk. On a VM whose disk the host caches, the
#         absolute rates swing by 2x between minutes, so both tools run in alternating
#         order, ROUNDS times, and each round compares the two side by side.
#   lab   a loop-backed ext4 (root) whose loop device is limited by a cgroup v1 blkio
#         throttle (LAB_RATE B/s, read and write). The device rate is fixed, so this is
#         the low-noise check that both tools time the same thing; both must report it.
#
# Each tool does exactly the same work in a round, so the figures mean the same:
#   tunelab  a fresh file of SIZE (buffered random fill + fsync, untimed), 1 warm-up +
#            TRIALS trials; a trial = O_DIRECT overwrite of the whole file with 1 MiB
#            pwrite() (timed: write_throughput_nofsync), fsync (untimed), O_DIRECT read
#            of the whole file with 1 MiB pread() (timed: read_throughput); the figure is
#            the median over the TRIALS trials.
#   fio      a fresh file of SIZE in the same directory (fio buffered layout + fsync,
#            --fallocate=none, untimed), then 1 warm-up + TRIALS times: one fio write job
#            (--end_fsync=0, overwrites the laid-out file in place), `sync FILE` (untimed,
#            like tunelab's fsync), one fio read job; the figure is the median of the
#            TRIALS jobs' bw_bytes.
# Both in B/s (printed as MB/s = 10^6 B/s). Per round: ratio = tunelab / fio. Per
# comparison: medians of each tool over the rounds, the ratio of those medians, the
# median of the per-round ratios and its spread (min..max). PASS when both the median
# per-round ratio and the ratio of medians are within 3% of 1.
#
#   ram   (issue 11 item 8) tunelab's DEFAULT file (32 MiB) on a RAM-backed loop device
#         (ext4 on a loop device whose image lives in /dev/shm), where one pass over the
#         file takes a few ms, against fio TIME-BASED (--time_based --runtime=RAM_RUNTIME,
#         looping over a file of the same size): tunelab sweeps the file until a timed
#         phase lasts >= 100 ms, so both time long stretches of the same work.
#
# Usage: bench/io_vs_fio.sh [TARGET_DIR] [SIZE] [ROUNDS]     (defaults /var/tmp 1G 9)
#   env: TUNELAB=path/to/tunelab   TRIALS=3   LAB=auto|0   LAB_SIZE=256M
#        LAB_RATE=200000000 (B/s)   LAB_ROUNDS=ROUNDS   RAM=auto|0   RAM_SIZE=32M
#        RAM_RUNTIME=2 (s per fio job)   RAM_ROUNDS=ROUNDS
# Needs fio, python3 (to read JSON); the lab part needs root, losetup, mkfs.ext4 and
# a cgroup v1 blkio hierarchy (skipped with a note otherwise, or with LAB=0).
set -eu
TARGET=${1:-/var/tmp}
SIZE=${2:-1G}
ROUNDS=${3:-9}
TRIALS=${TRIALS:-3}
LAB=${LAB:-auto}
LAB_SIZE=${LAB_SIZE:-256M}
LAB_RATE=${LAB_RATE:-200000000}
LAB_ROUNDS=${LAB_ROUNDS:-$ROUNDS}
RAM=${RAM:-auto}
RAM_SIZE=${RAM_SIZE:-32M}
RAM_RUNTIME=${RAM_RUNTIME:-2}
RAM_ROUNDS=${RAM_ROUNDS:-$ROUNDS}
TL=${TUNELAB:-}
if [ -z "$TL" ]; then
    for c in "${CARGO_TARGET_DIR:-target}/release/tunelab" target/release/tunelab; do
        [ -x "$c" ] && TL=$c && break
    done
    [ -z "$TL" ] && TL=$(command -v tunelab || true)
fi
[ -n "$TL" ] && [ -x "$TL" ] || { echo "tunelab binary not found (set TUNELAB=)" >&2; exit 2; }
command -v fio >/dev/null || { echo "fio is not installed (apt-get install -y fio)" >&2; exit 4; }
command -v python3 >/dev/null || { echo "python3 is needed to read the JSON" >&2; exit 4; }

WORK=$(mktemp -d "$TARGET/.io-vs-fio.XXXXXX")
MNT="" LOOP="" CG="" RMNT="" RLOOP="" RIMG=""
cleanup() {
    set +e
    [ -n "$RMNT" ] && mountpoint -q "$RMNT" && umount "$RMNT"
    [ -n "$RLOOP" ] && losetup -d "$RLOOP" 2>/dev/null
    [ -n "$RIMG" ] && rm -f "$RIMG"
    [ -n "$CG" ] && [ -d "$CG" ] && rmdir "$CG" 2>/dev/null
    [ -n "$MNT" ] && mountpoint -q "$MNT" && umount "$MNT"
    [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
ROWS="$WORK/rows"
: >"$ROWS"

# tl_set KIND DIR SIZE [tunelab args…]: one tunelab run -> "tunelab_write tunelab_read"
tl_set() {
    kind=$1 dir=$2 size=$3
    shift 3
    "$TL" run io.record-size -p mode=direct -p record=1m -p size="$size" \
        --warmup 1 --trials "$TRIALS" --quiet-check 0 --no-store --json --target "$dir" "$@" \
        >"$WORK/tl.json" 2>"$WORK/tl.err" || { cat "$WORK/tl.err" >&2; exit 1; }
    python3 - "$WORK/tl.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
m = {x["name"]: x["summary"]["median"] for x in r["metrics"]}
print(m["write_throughput_nofsync"], m["read_throughput"])
PY
}

# fio_job DIR SIZE RW OUT [CGROUP]: one fio job on DIR/fio.dat, JSON to OUT.
fio_job() {
    # shellcheck disable=SC2016
    sh -c '[ -z "$1" ] || echo $$ >"$1/cgroup.procs"; shift; exec "$@"' fio-job "${5:-}" \
        fio --name=cmp --filename="$1/fio.dat" --size="$2" --bs=1M --rw="$3" --direct=1 \
        --ioengine=psync --iodepth=1 --end_fsync=0 --fallocate=none --output-format=json \
        --output="$4" >/dev/null
}

# fio_set DIR SIZE [CGROUP]: fresh file, warm-up + TRIALS x (write, sync, read)
# -> "fio_write fio_read" (medians of bw_bytes over the TRIALS jobs).
fio_set() {
    dir=$1 size=$2 cg=${3:-}
    rm -f "$dir/fio.dat" "$WORK"/fio-*.json
    fio --name=layout --filename="$dir/fio.dat" --size="$size" --bs=1M --rw=write \
        --ioengine=psync --fallocate=none --end_fsync=1 --output-format=json >/dev/null
    k=0
    while [ "$k" -le "$TRIALS" ]; do
        fio_job "$dir" "$size" write "$WORK/fio-w$k.json" "$cg"
        sync "$dir/fio.dat"
        fio_job "$dir" "$size" read "$WORK/fio-r$k.json" "$cg"
        k=$((k + 1))
    done
    rm -f "$dir/fio.dat"
    python3 - "$WORK" "$TRIALS" <<'PY'
import json, statistics, sys
work, n = sys.argv[1], int(sys.argv[2])
def bw(rw):
    return [json.load(open(f"{work}/fio-{rw[0]}{k}.json"))["jobs"][0][rw]["bw_bytes"]
            for k in range(1, n + 1)]  # job 0 is the warm-up
print(statistics.median(bw("write")), statistics.median(bw("read")))
PY
}

# fio_time_set DIR SIZE: fresh file, warm-up + TRIALS x (time-based write, sync,
# time-based read) of RAM_RUNTIME s each -> "fio_write fio_read" (medians).
fio_time_set() {
    dir=$1 size=$2
    rm -f "$dir/fio.dat" "$WORK"/fio-*.json
    fio --name=layout --filename="$dir/fio.dat" --size="$size" --bs=1M --rw=write \
        --ioengine=psync --fallocate=none --end_fsync=1 --output-format=json >/dev/null
    k=0
    while [ "$k" -le "$TRIALS" ]; do
        for rw in write read; do
            fio --name=cmp --filename="$dir/fio.dat" --size="$size" --bs=1M --rw="$rw" \
                --direct=1 --ioengine=psync --iodepth=1 --end_fsync=0 --fallocate=none \
                --time_based --runtime="$RAM_RUNTIME" --output-format=json \
                --output="$WORK/fio-$(echo $rw | cut -c1)$k.json" >/dev/null
            [ "$rw" = write ] && sync "$dir/fio.dat"
        done
        k=$((k + 1))
    done
    rm -f "$dir/fio.dat"
    python3 - "$WORK" "$TRIALS" <<'PY'
import json, statistics, sys
work, n = sys.argv[1], int(sys.argv[2])
def bw(rw):
    return [json.load(open(f"{work}/fio-{rw[0]}{k}.json"))["jobs"][0][rw]["bw_bytes"]
            for k in range(1, n + 1)]  # job 0 is the warm-up
print(statistics.median(bw("write")), statistics.median(bw("read")))
PY
}

# compare_time DIR SIZE NROUNDS: like compare, fio time-based; kind "ram".
compare_time() {
    dir=$1 size=$2 n=$3
    i=1
    while [ "$i" -le "$n" ]; do
        if [ $((i % 2)) -eq 1 ]; then
            t=$(tl_set ram "$dir" "$size"); f=$(fio_time_set "$dir" "$size")
        else
            f=$(fio_time_set "$dir" "$size"); t=$(tl_set ram "$dir" "$size")
        fi
        tw=${t% *} tr=${t#* } fw=${f% *} fr=${f#* }
        echo "ram $i $tw $fw $tr $fr" >>"$ROWS"
        awk -v i="$i" -v tw="$tw" -v fw="$fw" -v tr="$tr" -v fr="$fr" 'BEGIN {
            printf "%-5s %5d %10.1f %10.1f %7.3f   %10.1f %10.1f %7.3f\n",
                "ram", i, tw/1e6, fw/1e6, tw/fw, tr/1e6, fr/1e6, tr/fr }'
        i=$((i + 1))
    done
}

# compare KIND DIR SIZE NROUNDS [CGROUP] [tunelab args…]: NROUNDS rounds, alternating
# which tool goes first; appends "KIND round tl_w fio_w tl_r fio_r" to ROWS.
compare() {
    kind=$1 dir=$2 size=$3 n=$4 cg=${5:-}
    shift 5
    i=1
    while [ "$i" -le "$n" ]; do
        if [ $((i % 2)) -eq 1 ]; then
            t=$(tl_set "$kind" "$dir" "$size" "$@"); f=$(fio_set "$dir" "$size" "$cg")
        else
            f=$(fio_set "$dir" "$size" "$cg"); t=$(tl_set "$kind" "$dir" "$size" "$@")
        fi
        tw=${t% *} tr=${t#* } fw=${f% *} fr=${f#* }
        echo "$kind $i $tw $fw $tr $fr" >>"$ROWS"
        awk -v k="$kind" -v i="$i" -v tw="$tw" -v fw="$fw" -v tr="$tr" -v fr="$fr" 'BEGIN {
            printf "%-5s %5d %10.1f %10.1f %7.3f   %10.1f %10.1f %7.3f\n",
                k, i, tw/1e6, fw/1e6, tw/fw, tr/1e6, fr/1e6, tr/fr }'
        i=$((i + 1))
    done
}

echo "tunelab: $TL ($("$TL" --version 2>/dev/null || echo '?')); $(fio --version); kernel $(uname -r); $(nproc) CPUs"
echo "host: target $TARGET ($(df -P "$TARGET" | awk 'NR==2 {print $1}')), file $SIZE, $ROUNDS rounds x (1 warm-up + $TRIALS trials) per tool"
echo "per round: MB/s = 10^6 B/s, ratio = tunelab / fio"
printf "%-5s %5s %10s %10s %7s   %10s %10s %7s\n" kind round "tl write" "fio write" ratio "tl read" "fio read" ratio
compare host "$WORK" "$SIZE" "$ROUNDS" ""

lab_skip=""
if [ "$LAB" = 0 ]; then
    lab_skip="LAB=0"
elif [ "$(id -u)" != 0 ]; then
    lab_skip="needs root"
elif [ ! -w /sys/fs/cgroup/blkio/cgroup.procs ] || [ ! -e /sys/fs/cgroup/blkio/blkio.throttle.read_bps_device ]; then
    lab_skip="no cgroup v1 blkio hierarchy"
elif ! command -v losetup >/dev/null || ! command -v mkfs.ext4 >/dev/null; then
    lab_skip="losetup or mkfs.ext4 missing"
fi
if [ -z "$lab_skip" ]; then
    truncate -s 2G "$WORK/lab.img"
    LOOP=$(losetup --find --show "$WORK/lab.img")
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$LOOP"
    MNT="$WORK/mnt"
    mkdir "$MNT"
    mount "$LOOP" "$MNT"
    majmin=$(cat "/sys/block/$(basename "$LOOP")/dev")
    CG=/sys/fs/cgroup/blkio/io-vs-fio-$$
    mkdir "$CG"
    echo "$majmin $LAB_RATE" >"$CG/blkio.throttle.read_bps_device"
    echo "$majmin $LAB_RATE" >"$CG/blkio.throttle.write_bps_device"
    echo "lab: ext4 on $LOOP ($majmin, backed by a file in the page cache), blkio throttle" \
        "read=write=$LAB_RATE B/s ($(awk -v r="$LAB_RATE" 'BEGIN {printf "%.1f", r/1e6}') MB/s)" \
        "for both tools, file $LAB_SIZE, $LAB_ROUNDS rounds"
    compare lab "$MNT" "$LAB_SIZE" "$LAB_ROUNDS" "$CG" --throttle "read=$LAB_RATE,write=$LAB_RATE"
else
    echo "lab: skipped ($lab_skip)"
fi

ram_skip=""
if [ "$RAM" = 0 ]; then
    ram_skip="RAM=0"
elif [ "$(id -u)" != 0 ]; then
    ram_skip="needs root"
elif [ ! -d /dev/shm ] || ! command -v losetup >/dev/null || ! command -v mkfs.ext4 >/dev/null; then
    ram_skip="/dev/shm, losetup or mkfs.ext4 missing"
fi
if [ -z "$ram_skip" ]; then
    RIMG=$(mktemp /dev/shm/io-vs-fio.XXXXXX)
    truncate -s 512M "$RIMG"
    RLOOP=$(losetup --find --show "$RIMG")
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$RLOOP"
    RMNT="$WORK/ram"
    mkdir "$RMNT"
    mount "$RLOOP" "$RMNT"
    echo "ram: ext4 on $RLOOP (image in /dev/shm: RAM-backed), tunelab default file" \
        "$RAM_SIZE vs fio --time_based --runtime=$RAM_RUNTIME on the same size, $RAM_ROUNDS rounds"
    compare_time "$RMNT" "$RAM_SIZE" "$RAM_ROUNDS"
else
    echo "ram: skipped ($ram_skip)"
fi

echo
python3 - "$ROWS" "$LAB_RATE" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
rate = float(sys.argv[2])
fail = False
for kind in ("host", "lab", "ram"):
    rs = [r for r in rows if r[0] == kind]
    if not rs:
        continue
    for name, ti, fi in (("write", 2, 3), ("read", 4, 5)):
        t = [float(r[ti]) for r in rs]
        f = [float(r[fi]) for r in rs]
        ratios = [a / b for a, b in zip(t, f)]
        mt, mf, mr = statistics.median(t), statistics.median(f), statistics.median(ratios)
        rom = mt / mf
        ok = abs(mr - 1) <= 0.03 and abs(rom - 1) <= 0.03
        fail |= not ok
        extra = f", fixed rate {rate/1e6:.1f}" if kind == "lab" else ""
        print(f"{'PASS' if ok else 'FAIL'} {kind:<4} {name:<5} n={len(rs)}  median MB/s: "
              f"tunelab {mt/1e6:.1f}, fio {mf/1e6:.1f}{extra} (fio range "
              f"{min(f)/1e6:.0f}..{max(f)/1e6:.0f})  ratio of medians {rom:.3f}  "
              f"median per-round ratio {mr:.3f} (range {min(ratios):.3f}..{max(ratios):.3f})")
print("criterion: |median per-round ratio - 1| <= 3% and |ratio of medians - 1| <= 3%")
sys.exit(1 if fail else 0)
PY
