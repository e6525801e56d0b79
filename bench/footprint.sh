#!/bin/sh
# tunelab's own peak RSS per experiment, default parameters, as the kernel
# counts it: GNU time's %M (the maximum resident set size from wait4(), in
# KiB, of tunelab and of the children it reaped). Each experiment runs with
# its default parameters, 1 warm-up trial skipped and 2 measured trials
# (--warmup 0 --trials 2: the sample vectors are all that grows with the
# trial count), nothing stored. app.time times /bin/true.
#
# Usage: bench/footprint.sh [TARGET_DIR]        (default /var/tmp)
#        bench/footprint.sh --verbs [TARGET_DIR]
#   env: TUNELAB=path/to/tunelab
# Prints one line per experiment: name, peak RSS (MiB), exit status, seconds.
#
# --verbs: the peak RSS of each verb a board user runs (run, study, runs,
# show, compare, report, diagnose --for, monitor, inspect) and the start-up
# time of `tunelab runs` (median of 5), measured by tunelab's own `time`
# verb (ru_maxrss of the program, from a small helper that execs it), so
# it runs on a board with only busybox. The runs it stores go to a private
# database that is removed at the end. Exit 1 when a verb failed or peaked
# above FOOTPRINT_LIMIT_MIB (default 16). FOOTPRINT_STUDY names the profile
# the study verb runs (default quick; "" leaves the verb out).
set -u
if [ "${1:-}" = --verbs ]; then
    shift
    TARGET=${1:-/var/tmp}
    TL=${TUNELAB:-$(command -v tunelab || true)}
    [ -n "$TL" ] && [ -x "$TL" ] || { echo "tunelab binary not found (set TUNELAB=)" >&2; exit 2; }
    LIMIT=${FOOTPRINT_LIMIT_MIB:-16}
    STUDY=${FOOTPRINT_STUDY-quick}
    D=$(mktemp -d) || exit 4
    trap 'rm -rf "$D"' EXIT
    export TUNELAB_DB=$D/results.db
    echo "$("$TL" --version 2>/dev/null || echo tunelab); kernel $(uname -r); $(grep -c ^processor /proc/cpuinfo) CPUs;" \
        "MemTotal $(awk '/MemTotal/ {printf "%.0f MiB", $2/1024}' /proc/meminfo);" \
        "MemAvailable $(awk '/MemAvailable/ {printf "%.0f MiB", $2/1024}' /proc/meminfo); target $TARGET"
    printf "%-10s %12s %5s %10s  %s\n" verb "peak RSS MiB" exit "wall" command
    bad=0
    # measure NAME ARGS…: one timed run of `tunelab ARGS…` (stored runs
    # stay in the private database, the timing run itself is not stored).
    measure() {
        name=$1; shift
        # A study takes minutes on a board: past `time`'s default 60 s budget.
        "$TL" time --runs 1 --warmup 0 --no-store --ignore-failure --budget 900s -- "$TL" "$@" >"$D/out" 2>&1
        rss=$(awk -F'|' '$3 ~ /peak_rss/ {print $5; exit}' "$D/out")
        wall=$(awk -F'|' '$3 ~ /wall_time/ {gsub(/^ +| +$/, "", $5); print $5; exit}' "$D/out")
        rc=$(sed -n 's/.*: exit \([0-9]*\)$/\1/p; s/.*: signal \([0-9]*\)$/sig\1/p' "$D/out" | tail -n 1)
        mib=$(echo "$rss" | awk '{v=$1; if ($2=="KiB") v/=1024; else if ($2=="GiB") v*=1024; else if ($2=="B") v/=1048576; printf "%.1f", v}')
        printf "%-10s %12s %5s %10s  tunelab %s\n" "$name" "${mib:-?}" "${rc:-?}" "${wall:-?}" "$*"
        if [ -z "$mib" ] || [ "${rc:-1}" != 0 ] || awk -v m="$mib" -v l="$LIMIT" 'BEGIN{exit !(m > l)}'; then
            bad=1
            tail -n 5 "$D/out" | sed 's/^/    /'
        fi
    }
    q="--trials 2 --warmup 0 --quiet-check 0"
    # shellcheck disable=SC2086
    measure run run io.record-size --target "$TARGET" -p record=64k -p size=4M $q
    # A second run, so `compare` has two to compare.
    # shellcheck disable=SC2086
    measure run run io.record-size --target "$TARGET" -p record=1m -p size=4M $q
    if [ -n "$STUDY" ]; then
        measure study study "$STUDY" --target "$TARGET" --quiet-check 0
        # Where the study's wall time went (one board study once took 95 s
        # against 32-36 s in every other run, and nothing said where).
        "$TL" show last 2>/dev/null | awk '/^time per key issue:/ {p = 1; print; next}
            p && /^  / {print; next} p {exit}' | sed 's/^/    /'
    fi
    measure runs runs
    measure show show last
    measure compare compare last~1 last
    measure report report last --output "$D/report.html"
    measure diagnose diagnose --for 2s --no-store
    measure monitor monitor vmstat --count 2
    measure inspect inspect --target "$TARGET"
    # Start-up of the smallest verb, as a board user waits for it.
    "$TL" time --runs 5 --warmup 1 --no-store -- "$TL" runs >"$D/out" 2>&1
    echo "tunelab runs start-up (wall time, median of 5 after 1 warm-up):" \
        "$(awk -F'|' '$3 ~ /wall_time/ {gsub(/^ +| +$/, "", $5); print $5; exit}' "$D/out")"
    echo "limit: every verb's peak RSS <= $LIMIT MiB: $([ $bad = 0 ] && echo ok || echo NOT MET)"
    exit $bad
fi
TARGET=${1:-/var/tmp}
TL=${TUNELAB:-}
if [ -z "$TL" ]; then
    for c in "${CARGO_TARGET_DIR:-target}/release/tunelab" target/release/tunelab; do
        [ -x "$c" ] && TL=$c && break
    done
fi
[ -n "$TL" ] && [ -x "$TL" ] || { echo "tunelab binary not found (set TUNELAB=)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "GNU time (/usr/bin/time) is needed" >&2; exit 4; }
echo "$("$TL" --version 2>/dev/null || echo tunelab); kernel $(uname -r); $(nproc) CPUs;" \
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
