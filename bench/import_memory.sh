#!/usr/bin/env bash
# Peak memory of `tunelab import` against the size of what it imports
# (issue 28: imports stream rather than load whole files). Builds, from one
# real run, an export of N runs (an array) and one run holding M samples,
# imports each into a new database with /usr/bin/time, and prints file size,
# peak RSS and their ratio, then the re-import of the array (every run
# "already stored") and of the database it made (a copied results.db).
#
#   bench/import_memory.sh [TUNELAB]    (default target/release/tunelab)
#
# N (default 20000) and M (default 1000000, a run of ~21 MiB: under the
# 24 MiB one imported run may be) override. Needs python3 and
# GNU time (/usr/bin/time).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-target/release/tunelab}")
n=${N:-20000}
m=${M:-1000000}
[ -x /usr/bin/time ] || { echo "import_memory: needs /usr/bin/time (apt-get install time)" >&2; exit 4; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
TUNELAB_DB=$work/src.db "$bin" run ipc.pipe --trials 3 --warmup 0 --quiet-check 0 >/dev/null 2>&1
TUNELAB_DB=$work/src.db "$bin" export last --format json >"$work/one.json"
python3 - "$work" "$n" "$m" <<'PY'
import json, sys
work, n, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
run = json.load(open(f"{work}/one.json"))
runs = []
for i in range(n):
    r = dict(run)
    r["id"] = run["id"][:-4] + "%04x" % i
    runs.append(r)
json.dump(runs, open(f"{work}/many.json", "w"))
big = json.loads(json.dumps(run))
big["results"][0]["metrics"][0]["samples"] = [1.234567890123 + i * 1e-9 for i in range(m)]
json.dump(big, open(f"{work}/big.json", "w"))
PY
measure() { # what file db
  local size rss
  size=$(stat -c %s "$2")
  rss=$( { TUNELAB_DB=$3 /usr/bin/time -f "%M" "$bin" import "$2" >/dev/null 2>"$work/err"; } 2>&1; tail -1 "$work/err")
  printf '%-34s %10.1f MiB  peak RSS %8.1f MiB  RSS/size %5.2f\n' "$1" \
    "$(echo "$size / 1048576" | bc -l)" "$(echo "$rss / 1024" | bc -l)" "$(echo "$rss * 1024 / $size" | bc -l)"
}
echo "== tunelab import: peak memory against the file imported"
measure "$n runs (JSON array)" "$work/many.json" "$work/a.db"
measure "again (all already stored)" "$work/many.json" "$work/a.db"
measure "$n runs (copied results.db)" "$work/a.db" "$work/b.db"
measure "one run of $m samples (JSON)" "$work/big.json" "$work/c.db"
