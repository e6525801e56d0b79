#!/bin/sh
# tunelab monitor vmstat/iostat vs procps vmstat / sysstat iostat -x over the
# same seconds, and tunelab time vs hyperfine -N. Needs python3 to align.
set -eu
BIN=${TUNELAB:-target/release/tunelab}
[ -x "$BIN" ] || cargo build --release >/dev/null 2>&1
T=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$T"' EXIT
DEV=$(lsblk -no PKNAME "$(df --output=source "$T" | tail -1)" 2>/dev/null || true)
[ -n "$DEV" ] || DEV=$(basename "$(df --output=source "$T" | tail -1)")

echo "== vmstat (5 × 1 s, same seconds; a CPU + context-switch load runs) =="
( while :; do :; done ) & spin=$!
# yes | cat: a context-switch load; killing cat ends yes by SIGPIPE.
yes | cat > /dev/null & pipe=$!
sleep 0.3
vmstat -n 1 6 > "$T/vmstat.txt" &
"$BIN" monitor vmstat --interval 1 --count 5 --json > "$T/tl-vmstat.json"
wait %3 2>/dev/null || sleep 1.2
kill $spin $pipe 2>/dev/null || true
python3 - "$T/vmstat.txt" "$T/tl-vmstat.json" <<'PY'
import json, sys
ref = [l.split() for l in open(sys.argv[1]) if l.split() and l.split()[0].isdigit()][1:]
tl = [json.loads(l) for l in open(sys.argv[2])]
# r b swpd free buff cache si so bi bo in cs us sy id wa st
cols = {"in": (10, "in_s"), "cs": (11, "cs_s"), "us": (12, "us"), "sy": (13, "sy"), "id": (14, "id"), "wa": (15, "wa")}
print("%-4s %s" % ("col", "  ".join("s%d vmstat/tunelab" % (i + 1) for i in range(len(tl)))))
worst = {}
for c, (i, k) in cols.items():
    pairs = [(float(r[i]), float(t[k])) for r, t in zip(ref, tl)]
    print("%-4s %s" % (c, "  ".join("%8.0f/%-8.0f" % p for p in pairs)))
    for a, b in pairs:
        d = abs(a - b) if c in ("us", "sy", "id", "wa") else abs(a - b) / max(a, 1) * 100
        worst[c] = max(worst.get(c, 0), d)
print("largest difference: " + ", ".join(
    "%s %.1f %s" % (c, d, "pts" if c in ("us", "sy", "id", "wa") else "%") for c, d in worst.items()))
ok = all((d <= 5) if c in ("us", "sy", "id", "wa") else (d <= 10) for c, d in worst.items())
tot = {c: (sum(float(r[i]) for r in ref), sum(float(t[k]) for t in tl)) for c, (i, k) in cols.items() if c in ("in", "cs")}
print("over the 5 s: " + ", ".join("%s %.0f/%.0f (%.1f%%)" % (c, a, b, abs(a - b) / max(a, 1) * 100) for c, (a, b) in tot.items()))
print("vmstat agreement per sample (cpu ±5 pts, in/cs ±10%):", "OK" if ok else "NOT OK (see the per-sample lines: the two tools read /proc a few ms apart)")
PY

echo
echo "== iostat -x on $DEV (5 × 1 s, same seconds, dd oflag=direct write load) =="
dd if=/dev/zero of="$T/load" bs=1M count=100000 oflag=direct status=none 2>/dev/null & dd=$!
sleep 0.5
iostat -x -d -y -o JSON "$DEV" 1 5 > "$T/iostat.json" &
io=$!
"$BIN" monitor iostat --device "$DEV" --interval 1 --count 5 --json > "$T/tl-iostat.json"
wait $io || true
kill $dd 2>/dev/null || true
python3 - "$T/iostat.json" "$T/tl-iostat.json" <<'PY'
import json, sys
ref = json.load(open(sys.argv[1]))["sysstat"]["hosts"][0]["statistics"]
ref = [s["disk"][0] for s in ref]
tl = [json.loads(l)["devices"][0] for l in open(sys.argv[2])]
cols = [("r/s", "r/s", "r_s"), ("w/s", "w/s", "w_s"), ("rkB/s", "rkB/s", "rkb_s"), ("wkB/s", "wkB/s", "wkb_s"),
        ("w_await", "w_await", "w_await_ms"), ("aqu-sz", "aqu-sz", "aqu_sz"), ("%util", "util", "util_pct")]
worst = {}
for name, rk, tk in cols:
    pairs = [(float(r[rk]), float(t[tk])) for r, t in zip(ref, tl)]
    print("%-8s %s" % (name, "  ".join("%9.1f/%-9.1f" % p for p in pairs)))
    # Light columns (a few reads by other processes) are dominated by the
    # ms-level offset between the two tools' sampling instants: compare
    # them absolutely (±5 /s, ±256 kB/s); loaded ones relatively.
    floor = 256.0 if "kB" in name else 5.0
    worst[name] = max((abs(a - b) / abs(a) * 100 if abs(a) > 10 * floor else (0.0 if abs(a - b) <= floor else 100.0))
                      for a, b in pairs)
print("largest difference (relative, or 0/100 for light columns within/outside the floor): " +
      ", ".join("%s %.1f%%" % kv for kv in worst.items()))
ok = all(worst[c] <= 10 for c in ("r/s", "w/s", "rkB/s", "wkB/s"))
print("iostat agreement (r/s, w/s, kB/s ±10%):", "OK" if ok else "NOT OK")
PY

echo
echo "== tunelab time vs hyperfine -N: sleep 0.05 =="
# Alternate the two tools in 4 rounds so a change in machine load hits both.
for i in 1 2 3 4; do
  hyperfine -N --warmup 1 --runs 20 --export-json "$T/hf$i.json" 'sleep 0.05' > /dev/null
  "$BIN" time --no-store --json --warmup 1 --runs 20 -- sleep 0.05 > "$T/tl$i.json"
done
python3 - "$T" <<'PY'
import json, sys
hf, tl = [], []
for i in range(1, 5):
    hf += json.load(open("%s/hf%d.json" % (sys.argv[1], i)))["results"][0]["times"]
    tl += json.load(open("%s/tl%d.json" % (sys.argv[1], i)))["results"][0]["metrics"][0]["samples"]
m = lambda v: sum(v) / len(v)
print("hyperfine -N mean %.2f ms (n=%d), tunelab time mean %.2f ms (n=%d), ratio of means %.4f" % (
    m(hf) * 1e3, len(hf), m(tl) * 1e3, len(tl), m(tl) / m(hf)))
print("time agreement (±2% of the mean):", "OK" if abs(m(tl) / m(hf) - 1) <= 0.02 else "NOT OK")
PY
