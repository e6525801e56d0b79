#!/bin/sh
# The ground-truth table of docs/flash.md: the flash methods on the simulated card
# (tests/common/flashsim.rs, virtual clock) at three geometries, each figure found
# beside the model's own. Deterministic: the same table on any machine.
#
#   bench/flash_truth.sh            print the table
#   bench/flash_truth.sh --docs     also replace the table in docs/flash.md
set -eu
out=$(cargo test -q --test flash_truth truth_table -- --ignored --nocapture 2>/dev/null | grep '^|')
echo "$out"
if [ "${1:-}" = "--docs" ]; then
  awk -v table="$out" '
    /<!-- truth-table:begin -->/ {print; print table; skip=1; next}
    /<!-- truth-table:end -->/ {skip=0}
    !skip {print}' docs/flash.md >docs/flash.md.new && mv docs/flash.md.new docs/flash.md
fi
