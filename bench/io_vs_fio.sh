#!/bin/sh
# io.record-size (mode=direct, record=1m) vs fio --rw=write|read --bs=1M --direct=1
# on the same target directory, same file size, same machine, interleaved:
# prints per-round ratios and the median ratio (tunelab / fio).
#
# Usage: bench/io_vs_fio.sh [TARGET_DIR] [SIZE] [ROUNDS]
#   TUNELAB=path/to/tunelab (default: target/release/tunelab or on PATH)
set -eu
TARGET=${1:-/var/tmp}
SIZE=${2:-256M}
ROUNDS=${3:-5}
TL=${TUNELAB:-}
if [ -z "$TL" ]; then
    for c in "${CARGO_TARGET_DIR:-target}/release/tunelab" target/release/tunelab; do
        [ -x "$c" ] && TL=$c && break
    done
    [ -z "$TL" ] && TL=$(command -v tunelab || true)
fi
[ -x "$TL" ] || { echo "tunelab binary not found (set TUNELAB=)" >&2; exit 2; }
command -v fio >/dev/null || { echo "fio is not installed (apt-get install -y fio)" >&2; exit 4; }
command -v python3 >/dev/null || { echo "python3 is needed to read the JSON" >&2; exit 4; }

WORK=$(mktemp -d "$TARGET/.io-vs-fio.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM HUP
FILE="$WORK/fio.dat"
OUT="$WORK/results"
: >"$OUT"

# Lay the fio file out once, like tunelab lays out its file in prepare().
fio --name=layout --filename="$FILE" --size="$SIZE" --bs=1M --rw=write --direct=1 \
    --ioengine=psync --output-format=json >/dev/null

for i in $(seq 1 "$ROUNDS"); do
    "$TL" run io.record-size -p mode=direct -p record=1m -p size="$SIZE" \
        --trials 3 --warmup 1 --quiet-check 0 --no-store --json --target "$WORK" \
        >"$WORK/tl.json" 2>/dev/null
    for rw in write read; do
        fio --name=cmp --filename="$FILE" --size="$SIZE" --bs=1M --rw=$rw --direct=1 \
            --ioengine=psync --loops=3 --output-format=json >"$WORK/fio-$rw.json" 2>/dev/null
    done
    python3 - "$WORK" "$i" >>"$OUT" <<'PY'
import json, sys
work, i = sys.argv[1], sys.argv[2]
tl = json.load(open(f"{work}/tl.json"))
m = {x["name"]: x["summary"]["median"] for x in tl["results"][0]["metrics"]}
fw = json.load(open(f"{work}/fio-write.json"))["jobs"][0]["write"]["bw_bytes"]
fr = json.load(open(f"{work}/fio-read.json"))["jobs"][0]["read"]["bw_bytes"]
print(i, m["write_throughput_nofsync"], fw, m["read_throughput"], fr)
PY
done

python3 - "$OUT" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
print(f"{'round':>5} {'tunelab write':>15} {'fio write':>12} {'ratio':>6}   {'tunelab read':>14} {'fio read':>12} {'ratio':>6}   (MB/s = 10^6 B/s)")
wr, rr = [], []
for i, tw, fw, tr, fr in rows:
    tw, fw, tr, fr = map(float, (tw, fw, tr, fr))
    wr.append(tw / fw); rr.append(tr / fr)
    print(f"{i:>5} {tw/1e6:15.1f} {fw/1e6:12.1f} {tw/fw:6.3f}   {tr/1e6:14.1f} {fr/1e6:12.1f} {tr/fr:6.3f}")
mw, mr = statistics.median(wr), statistics.median(rr)
print(f"median ratio tunelab/fio: write {mw:.3f}, read {mr:.3f}")
ok = abs(mw - 1) <= 0.03 and abs(mr - 1) <= 0.03
print("within 3%: " + ("yes" if ok else "NO"))
sys.exit(0 if ok else 1)
PY
