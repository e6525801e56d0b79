#!/usr/bin/env bash
# Regenerates the study header docs/on-a-board.md quotes: `study quick` run
# in a memory cgroup of LIMIT_MIB (default 64) MiB, its first lines (what it
# will write and the memory it sized itself to). Needs root (a cgroup v1
# memory controller or cgroup v2); the study writes only inside DIR.
#
#   scripts/on-a-board-figures.sh [DIR]
#   TUNELAB=target/debug/tunelab scripts/on-a-board-figures.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${TUNELAB:-target/release/tunelab}")
[ -x "$bin" ] || { echo "no $bin: cargo build --release, or set TUNELAB" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "a memory cgroup needs root" >&2; exit 3; }
dir=${1:-$(mktemp -d)}
mkdir -p "$dir/q"
limit=$(( ${LIMIT_MIB:-64} * 1024 * 1024 ))
export TUNELAB_DB="$dir/results.db"
if [ -d /sys/fs/cgroup/memory ]; then
  cg=/sys/fs/cgroup/memory/tunelab-demo-$$
  mkdir "$cg"; echo "$limit" > "$cg/memory.limit_in_bytes"
else
  cg=/sys/fs/cgroup/tunelab-demo-$$
  mkdir "$cg"; echo "$limit" > "$cg/memory.max"
fi
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
set +e
sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
  "$bin" study quick --target "$dir/q" > "$dir/study.out" 2>&1
code=$?
set -e
echo "<!-- scripts/on-a-board-figures.sh (exit $code) -->"
echo '```text'
grep -E '^(study quick:|footprint:)' "$dir/study.out" |
  sed -e "s#$dir/q#/tmp/q#g" -e "s#/sys/fs/cgroup/memory/[^:]*tunelab-demo#/sys/fs/cgroup/memory/…/tunelab-demo#"
echo '```'
