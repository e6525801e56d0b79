#!/bin/bash
# tunelab's sampling profiler (diagnose's CPU profile) vs `perf record` /
# `perf report` on the same workloads, run one after the other: the top-5
# symbols of each, the share agreement over those symbols, and the
# workload's wall time alone, under tunelab and under perf (what profiling
# costs the workload). Both sample at 999 Hz with call chains, user+kernel.
#
# tunelab's side runs through the ignored test `print_profile_of_command`
# in tests/diagnose_profile.rs (the diagnose command itself lives in the
# CLI); it forks the command stopped, attaches, releases it, as diagnose
# does. Needs: perf (Debian: linux-perf), root or perf_event_paranoid ≤ 1.
#
# Symbols are compared by name: glibc aliases (perf: __GI___libc_write from
# the debug file, tunelab: __write from .dynsym) count as disagreement, and
# unresolved addresses (stripped binaries) are compared by address.
# Timings are single runs on whatever else the machine is doing.
#
# Agreement = Σ over the union of both top-5 lists of min(share_perf,
# share_tunelab): 100% when both put the same shares on the same symbols.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v perf >/dev/null || { echo "profile_vs_perf: perf not found (apt-get install linux-perf)" >&2; exit 4; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT

echo "building the test binary…"
cargo test --test diagnose_profile --no-run >/dev/null 2>&1

workloads=(
  "dd if=/dev/zero of=/dev/null bs=512 count=1500000"
  "head -c 400000000 /dev/zero | gzip -1 > /dev/null"
  "perl -e 'my \$s = 0; for my \$i (1..12000000) { \$s += \$i * \$i } print \"\$s\\n\"' > /dev/null"
)

ms_now() { date +%s%3N; }

for w in "${workloads[@]}"; do
  echo
  echo "== workload: $w"
  t0=$(ms_now); sh -c "$w" 2>/dev/null; t1=$(ms_now); plain=$((t1 - t0))

  TUNELAB_PROFILE_CMD="$w" cargo test -q --test diagnose_profile print_profile_of_command \
    -- --ignored --exact --nocapture 2>/dev/null > "$T/tl.txt" || true
  grep -q '^ROW' "$T/tl.txt" || { echo "tunelab profile failed:"; cat "$T/tl.txt"; continue; }

  t0=$(ms_now)
  perf record -q -F 999 -g -o "$T/perf.data" -- sh -c "$w" 2>/dev/null >/dev/null
  t1=$(ms_now); perf_wall=$((t1 - t0))
  perf report -i "$T/perf.data" --stdio --no-children -g none --sort sym -q --percent-limit 0 2>/dev/null \
    | sed -E 's/^ +([0-9.]+)% +\[[^]]*\] +(.*)$/ROW\t\1\t\2/' | grep '^ROW' > "$T/perf.txt" || true

  python3 - "$T/tl.txt" "$T/perf.txt" "$plain" "$perf_wall" <<'PY'
import sys
def norm(sym):
    # Unresolved addresses: perf pads to 16 digits, tunelab does not.
    if sym.startswith("0x"):
        try:
            return hex(int(sym, 16))
        except ValueError:
            pass
    return sym
def rows(path):
    out = {}
    for line in open(path):
        p = line.rstrip("\n").split("\t")
        if p[0] == "ROW" and len(p) >= 3:
            sym = norm(p[2].strip())
            out[sym] = out.get(sym, 0.0) + float(p[1])
    return out
tl, pf = rows(sys.argv[1]), rows(sys.argv[2])
meta = {l.split("\t")[0]: l.rstrip("\n").split("\t")[1] for l in open(sys.argv[1]) if "\t" in l and not l.startswith("ROW")}
plain, perf_wall = int(sys.argv[3]), int(sys.argv[4])
top_tl = sorted(tl, key=tl.get, reverse=True)[:5]
top_pf = sorted(pf, key=pf.get, reverse=True)[:5]
print("%-4s %-44s %7s   %-44s %7s" % ("rank", "tunelab", "%", "perf report", "%"))
for i in range(5):
    a = top_tl[i] if i < len(top_tl) else ""
    b = top_pf[i] if i < len(top_pf) else ""
    print("%-4d %-44s %7.2f   %-44s %7.2f" % (i + 1, a[:44], tl.get(a, 0), b[:44], pf.get(b, 0)))
union = set(top_tl) | set(top_pf)
agree = sum(min(tl.get(s, 0), pf.get(s, 0)) for s in union)
both = sum(max(tl.get(s, 0), pf.get(s, 0)) for s in union)
print("top-5 share agreement: %.1f%% of samples (the union holds %.1f%%); same #1: %s"
      % (agree, both, "yes" if top_tl[:1] == top_pf[:1] else "no"))
tlw = int(float(meta.get("WALL_MS", "0")))
print("workload wall: alone %d ms, under tunelab %d ms (x%.2f), under perf record %d ms (x%.2f; includes perf's start-up and perf.data writing)"
      % (plain, tlw, tlw / max(plain, 1), perf_wall, perf_wall / max(plain, 1)))
print("tunelab samples %s; %s" % (meta.get("SAMPLES", "?"), meta.get("OVERHEAD", "")))
PY
done
