#!/usr/bin/env bash
# CPU truth against references on this machine, interleaved in one run:
# every round measures tunelab then the reference (the order alternates
# between rounds), so slow drifts of a noisy machine hit both sides alike.
# Only ratios measured side by side mean anything.
#
#   cpu.clock clock_max           vs  /proc/cpuinfo "cpu MHz"  (and the imul cross-check)
#   cpu.compute sha256 threads=1  vs  openssl speed -evp sha256      (1 thread, same CPU)
#   cpu.compute aes128 threads=1  vs  openssl speed -evp aes-128-ctr (1 thread, same CPU)
#   cpu.compute lz threads=1      vs  gzip -1 (zlib deflate: hash match finder +
#                                     Huffman, the same class of work) and 7z b -mmt1
#                                     (LZMA, heavier: its ratio is a scale, not agreement)
#
# Same workload on both sides where the tool allows it:
#   - sha256/aes128: 256 KiB buffers (openssl -bytes 262144), one thread
#     pinned to CPU 0 on both sides (taskset for openssl), throughput in
#     bytes/s. Both use the CPU's instructions when it has them (SHA-NI,
#     AES-NI; openssl picks them itself, tunelab says so in its notes).
#   - lz: tunelab compresses its generated 256 KiB text corpus; gzip -1
#     compresses a 256 KiB text made from this machine's licence files
#     (/usr/share/common-licenses), repeated to ~8 MiB so one run lasts long
#     enough to time; the compression ratios of both are printed, since speed
#     depends on the data. 7z b -mmt1 prints its LZMA compression speed (KiB/s)
#     for a 4 MiB dictionary run: a much heavier compressor.
#   - clock: /proc/cpuinfo is not a measurement but the kernel's claim; on a
#     VM without cpufreq it is the TSC's nominal rate, and a boosting core
#     runs above it (see docs/cpu.md).
#
#   env: TUNELAB=path/to/tunelab (default: cargo build --release)  ROUNDS=5
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
for t in openssl gzip taskset python3; do
    command -v "$t" >/dev/null || { echo "missing $t" >&2; exit 4; }
done
if [ -n "${TUNELAB:-}" ]; then
    TL=$TUNELAB
else
    cargo build --release --quiet
    TL="${CARGO_TARGET_DIR:-target}/release/tunelab"
fi
[ -x "$TL" ] || { echo "tunelab binary not found (set TUNELAB=)" >&2; exit 2; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

tl() { # experiment and args: prints "metric median" per metric, then notes
    "$TL" run "$@" --json --no-store --quiet-check 0 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
for r in d["results"]:
    for m in r["metrics"]:
        print(m["name"], m["summary"]["median"])
    for n in r.get("notes", []):
        print("note", n)'
}

# The gzip input: text of this machine's licences, 8 MiB.
python3 - "$OUT/text" <<'EOF'
import glob, sys
data = b"".join(open(f, "rb").read() for f in sorted(glob.glob("/usr/share/common-licenses/*")) if not f.endswith("/GPL"))
data = (data * (8 * 2**20 // max(len(data), 1) + 1))[: 8 * 2**20]
open(sys.argv[1], "wb").write(data)
EOF
text_bytes=$(stat -c %s "$OUT/text")
gz_ratio=$(gzip -1 -c "$OUT/text" | wc -c | awk -v n="$text_bytes" '{printf "%.1f", $1 * 100 / n}')

ossl() { # algo -> bytes/s (openssl prints 1000s of bytes per second)
    taskset -c 0 openssl speed -evp "$1" -bytes 262144 -seconds 2 2>/dev/null |
        awk -v a="$1" 'tolower($1) == tolower(a) || $1 == "AES-128-CTR" {v = $NF} END {sub(/k$/, "", v); print v * 1000}'
}
gz() { # bytes/s of gzip -1 over the text, pinned to CPU 0
    local t0 t1
    t0=$(date +%s.%N)
    taskset -c 0 gzip -1 -c "$OUT/text" >/dev/null
    t1=$(date +%s.%N)
    echo "$text_bytes $t0 $t1" | awk '{print $1 / ($3 - $2)}'
}
sz() { # 7z b -mmt1: average compression speed, KiB/s -> B/s
    command -v 7z >/dev/null || { echo nan; return; }
    taskset -c 0 7z b -mmt1 -md22 2>/dev/null | awk '/^Avr:/ {print $2 * 1024; exit}'
}
tl_clock() {
    tl cpu.clock --trials 5 >"$OUT/clock"
    awk '$1=="clock_max" {print $2}' "$OUT/clock"
}
tl_compute() { # kernel -> B/s
    tl cpu.compute -p kernel="$1" -p threads=1 --warmup 1 --trials 5 | awk '$1=="throughput" {print $2}'
}

cpuinfo_mhz=$(awk -F: '/^cpu MHz/ {print $2; exit}' /proc/cpuinfo | tr -d ' ')
echo "round  clock/cpuinfo  sha256 tl/openssl  aes128 tl/openssl  lz tl/gzip-1  lz tl/7z(LZMA)"
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) -eq 1 ]; then
        c=$(tl_clock)
        s_tl=$(tl_compute sha256); s_ref=$(ossl sha256)
        a_tl=$(tl_compute aes128); a_ref=$(ossl aes-128-ctr)
        l_tl=$(tl_compute lz); l_gz=$(gz); l_7z=$(sz)
    else
        s_ref=$(ossl sha256); s_tl=$(tl_compute sha256)
        a_ref=$(ossl aes-128-ctr); a_tl=$(tl_compute aes128)
        l_7z=$(sz); l_gz=$(gz); l_tl=$(tl_compute lz)
        c=$(tl_clock)
    fi
    echo "$r $c $cpuinfo_mhz $s_tl $s_ref $a_tl $a_ref $l_tl $l_gz $l_7z" >>"$OUT/rounds"
    echo "$r $c $cpuinfo_mhz $s_tl $s_ref $a_tl $a_ref $l_tl $l_gz $l_7z" |
        awk '{c = ($3 != "" ? sprintf("%.3f", $2 / 1e6 / $3) : "-");
              printf "%-6s %-14s %-18.3f %-18.3f %-13.3f %.3f\n", $1, c, $4 / $5, $6 / $7, $8 / $9, $8 / $10}'
done
echo
awk '{c += $2 / 1e6; s += $4 / $5; a += $6 / $7; g += $8 / $9; z += $8 / $10; n++}
     END {printf "mean   clock %.0f MHz  sha256 %.3f  aes128 %.3f  lz/gzip %.3f  lz/7z %.3f  (%d rounds)\n",
                 c / n, s / n, a / n, g / n, z / n, n}' "$OUT/rounds"
awk '{printf "last round: tunelab sha256 %.0f MB/s, openssl %.0f MB/s; aes128 %.0f vs %.0f MB/s; lz %.1f MB/s, gzip -1 %.1f MB/s, 7z %.1f MB/s\n",
      $4 / 1e6, $5 / 1e6, $6 / 1e6, $7 / 1e6, $8 / 1e6, $9 / 1e6, $10 / 1e6}' <(tail -1 "$OUT/rounds")
echo "/proc/cpuinfo: $cpuinfo_mhz MHz; gzip -1 packs its text to $gz_ratio%"
grep -E "^note (cross-check|cpu0:)" "$OUT/clock" | sed 's/^note /tunelab: /'
"$TL" run cpu.compute -p kernel=lz,sha256,aes128 -p threads=1 --trials 1 --warmup 0 --json --no-store --quiet-check 0 2>/dev/null |
    python3 -c '
import json, sys
for r in json.load(sys.stdin)["results"]:
    print("tunelab:", r["notes"][0])'
