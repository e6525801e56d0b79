#!/usr/bin/env bash
# Regenerates the command outputs README.md quotes, so they cannot go stale:
# runs each command with this tree's binary and prints the README's blocks
# (Markdown) on stdout. Paste them over the old ones.
#
#   scripts/readme-figures.sh [DIR]       # DIR: scratch for the study and its database
#   TUNELAB=target/debug/tunelab scripts/readme-figures.sh   # another build
#
# Default binary: target/release/tunelab (cargo build --release). The study
# writes only inside DIR (default: a new temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TUNELAB:-target/release/tunelab}
[ -x "$bin" ] || { echo "no $bin: cargo build --release, or set TUNELAB" >&2; exit 2; }
dir=${1:-$(mktemp -d)}
mkdir -p "$dir/q"
export TUNELAB_DB="$dir/results.db"
build=$(case "$bin" in *release*) echo "release build" ;; *debug*) echo "debug build" ;; *) echo "build $bin" ;; esac)
cpus=$(nproc)

start=$(date +%s)
set +e
"$bin" study quick --target "$dir/q" > "$dir/study.out" 2> "$dir/study.err"
code=$?
set -e
secs=$(( $(date +%s) - start ))

echo "<!-- scripts/readme-figures.sh: What a study looks like -->"
echo "Real output from this repository's ${cpus}-CPU machine (\`tunelab study quick --target /tmp/q\`,"
echo "${build} of this tree, ${secs} s, exit ${code}; verdicts are judged on the 95% CI widened by the drift between runs):"
echo "the run's header, then the summary:"
echo
echo '```text'
# The header (run, machine, target) and the summary table; the per-experiment
# tables between them are in `tunelab show last` and the report.
head -n 3 "$dir/study.out" | sed "s#$dir/q#/tmp/q#g"
echo "…"
sed -n '/^quick — /,$p' "$dir/study.out"
echo '```'
echo
echo "<!-- scripts/readme-figures.sh: tunelab list -->"
echo '```text'
echo '$ tunelab list'
"$bin" list
echo '```'
