#!/bin/sh
# SIGKILL tunelab at random moments of tune, study, diagnose, boot,
# throttled and lab runs, then run `tunelab restore`, and check that nothing
# is left behind: no process, cgroup, mount, loop device, scratch directory,
# journal entry or changed knob. Prints one line per round and a summary per
# case; exits 1 if any round left something.
#
# usage (as root): scripts/kill_loop.sh [ROUNDS] [TUNELAB]
#   ROUNDS   rounds per case (default 10)
#   TUNELAB  the binary (default target/debug/tunelab)
set -u
ROUNDS=${1:-10}
BIN=$(realpath "${2:-target/debug/tunelab}")
[ "$(id -u)" = 0 ] || { echo "kill_loop.sh: needs root (knobs, cgroups, loop devices)" >&2; exit 3; }
[ -x "$BIN" ] || { echo "kill_loop.sh: no binary $BIN (cargo build)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/tunelab-killloop.XXXXXX)
T=$WORK/target
mkdir -p "$T"
export TUNELAB_STATE_DIR="$WORK/state" TUNELAB_DB="$WORK/results.db"
KNOB=/proc/sys/vm/dirty_expire_centisecs
ORIG=$(cat $KNOB)
TAG=$(( $$ % 900 + 100 ))
FAILED=0

# A random delay in [min, max) seconds, with millisecond steps.
delay() { awk -v a="$1" -v b="$2" -v r="$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')" \
    'BEGIN { printf "%.3f", a + (b - a) * r / 65536 }'; }

# Everything a killed tunelab may have left, one word per kind.
leftovers() {
    pid=$1
    out=""
    # Processes: the unique sleeps of diagnose/boot, and anything naming WORK.
    ps -eo pid=,args= | grep -E "sleep 13[0-9][0-9]\.$TAG|$WORK" | grep -v -e grep -e kill_loop \
        >/dev/null && out="$out process"
    ls /sys/fs/cgroup/blkio 2>/dev/null | grep -q "^tunelab-$pid-" && out="$out cgroup"
    ls /sys/fs/cgroup 2>/dev/null | grep -q "^tunelab-$pid-" && out="$out cgroup2"
    grep -q " $WORK" /proc/self/mountinfo && out="$out mount"
    cat /sys/block/loop*/loop/backing_file 2>/dev/null | grep -q "$WORK" && out="$out loop"
    ls -A "$T" | grep -q . && out="$out scratch"
    ls -d /tmp/.tunelab-scratch-"$pid"-* >/dev/null 2>&1 && out="$out tmp-scratch"
    [ -e "$WORK/state/journal.json" ] && out="$out journal"
    [ "$(cat $KNOB)" = "$ORIG" ] || out="$out knob"
    echo "$out"
}

# run_case NAME MIN MAX COMMAND…: ROUNDS times, start COMMAND, SIGKILL it
# after a random delay, restore, check.
run_case() {
    name=$1 min=$2 max=$3
    shift 3
    clean=0
    i=1
    while [ $i -le "$ROUNDS" ]; do
        "$@" >/dev/null 2>&1 &
        pid=$!
        d=$(delay "$min" "$max")
        sleep "$d"
        if kill -0 $pid 2>/dev/null; then alive=killed; else alive=finished; fi
        kill -9 $pid 2>/dev/null
        wait $pid 2>/dev/null
        sleep 0.2 # the kernel delivers the parent-death signals
        msg=$("$BIN" restore 2>&1 | tr '\n' ' ')
        left=$(leftovers $pid)
        if [ -z "$left" ]; then
            clean=$((clean + 1))
            echo "$name round $i: SIGKILL at ${d}s ($alive): clean; restore: ${msg:-nothing}"
        else
            FAILED=1
            echo "$name round $i: SIGKILL at ${d}s ($alive): LEFT$left; restore: $msg"
            # Clean up by hand so the next round starts from nothing.
            pkill -9 -f "sleep 13[0-9][0-9]\.$TAG" 2>/dev/null
            grep " $WORK" /proc/self/mountinfo | awk '{print $5}' | sort -r | xargs -r -n1 umount -l
            for c in /sys/fs/cgroup/blkio/tunelab-$pid-* /sys/fs/cgroup/tunelab-$pid-*; do
                [ -d "$c" ] && rmdir "$c"
            done
            rm -rf "$T"/.tunelab-scratch-* /tmp/.tunelab-scratch-"$pid"-* "$WORK/state"
            echo "$ORIG" > $KNOB
        fi
        i=$((i + 1))
    done
    echo "== $name: $clean of $ROUNDS rounds left nothing behind"
}

FAST="--no-store --quiet-check 0 --warmup 0"
run_case tune 0.2 4 "$BIN" tune vm.dirty_expire_centisecs --values "$((ORIG + 7)),$((ORIG + 11))" \
    -e io.file-read -p size=1M --trials 30 $FAST --target "$T"
run_case study 0.2 8 "$BIN" study quick --target "$T" --no-store --quiet-check 0
run_case diagnose 0.2 4 "$BIN" diagnose --no-store --startup-runs 2 -- sleep "1301.$TAG"
run_case boot 0.2 3 "$BIN" boot --runs 3 --timeout 2s --no-store -- sleep "1302.$TAG"
if [ -e /sys/fs/cgroup/blkio/blkio.throttle.read_bps_device ] || [ -e /sys/fs/cgroup/cgroup.controllers ]; then
    run_case throttle 0.2 4 "$BIN" run io.file-read -p size=1M --throttle read=20MB/s \
        --trials 1000 --budget 60s $FAST --target "$T"
fi
if command -v mkfs.ext4 >/dev/null && [ -e /dev/loop-control ]; then
    run_case lab 0.2 4 "$BIN" run io.file-read -p size=1M --fs ext4 --fs-size 64M \
        --trials 1000 --budget 60s $FAST --target "$T"
fi
rm -rf "$WORK"
exit $FAILED
