#!/bin/sh
# tunelab's own peak RSS per experiment, default parameters, as the kernel
# counts it: GNU time's %M (the maximum resident set size from wait4(), in
# KiB, of tunelab and of the children it reaped). Each experiment runs with
# its default parameters, 1 warm-up trial skipped and 2 measured trials
# (--warmup 0 --trials 2: the sample vectors are all that grows with the
# trial count), nothing stored. app.time times /bin/true.
#
# Usage: bench/footprint.sh [TARGET_DIR]        (default /var/tmp)
#   env: TUNELAB=path/to/tunelab
# Prints one line per experiment: name, peak RSS (MiB), exit status, seconds.
set -u
TARGET=${1:-/var/tmp}
TL=${TUNELAB:-}
if [ -z "$TL" ]; then
    for c in "${CARGO_TARGET_DIR:-target}/release/tunelab" target/release/tunelab; do
        [ -x "$c" ] && TL=$c && break
    done
fi
[ -n "$TL" ] && [ -x "$TL" ] || { echo "tunelab binary not found (set TUNELAB=)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "GNU time (/usr/bin/time) is needed" >&2; exit 4; }
echo "tunelab $("$TL" --version 2>/dev/null); kernel $(uname -r); $(nproc) CPUs;" \
    "MemAvailable $(awk '/MemAvailable/ {printf "%.0f MiB", $2/1024}' /proc/meminfo); target $TARGET"
OUT=$(mktemp)
trap 'rm -f "$OUT" "$OUT.err"' EXIT
printf "%-16s %12s %5s %8s\n" experiment "peak RSS MiB" exit seconds
for exp in $("$TL" list | awk -F'|' 'NR > 2 && $2 ~ /\./ {gsub(/ /, "", $2); print $2}'); do
    extra=""
    [ "$exp" = app.time ] && extra="-p command=/bin/true"
    start=$(date +%s)
    # shellcheck disable=SC2086
    /usr/bin/time -o "$OUT" -f "%M" "$TL" run "$exp" $extra --warmup 0 --trials 2 \
        --quiet-check 0 --no-store --target "$TARGET" >/dev/null 2>"$OUT.err"
    rc=$?
    [ "$rc" = 0 ] || tail -1 "$OUT.err" >&2
    kib=$(grep -E '^[0-9]+$' "$OUT" | tail -1)
    end=$(date +%s)
    printf "%-16s %12.1f %5s %8s\n" "$exp" "$(echo "$kib" | awk '{print $1/1024}')" "$rc" $((end - start))
done
