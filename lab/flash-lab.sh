#!/usr/bin/env bash
# The flash lab: the emulated aarch64 board (lab/board-lab.sh) with
# lab/flashsim's simulated card served over NBD as its disk, and a fake card
# that states 192 MiB but keeps 64 MiB. One guest of 64 MiB runs
# flash.au-size, flash.open-units and flash.steady-state raw on the card and
# flash.capacity on the fake card's vfat; the host checks each figure
# against the model (unit 4 MiB, 2 open units, 16 MiB cache, 64 MiB kept)
# and prints "LAB flashsim …" lines. Exit status as lab/board-lab.sh's.
#
#   lab/flash-lab.sh                 (LAB_* variables as in lab/board-lab.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
export LAB_FLASHSIM=1
export LAB_MEMS=${LAB_MEMS:-64}
export LAB_BOOT_RUNS=${LAB_BOOT_RUNS:-0}
export LAB_SSH=${LAB_SSH:-0}
export LAB_TIMEOUT=${LAB_TIMEOUT:-2400}
export LAB_FS=${LAB_FS-}
export LAB_ONLY=${LAB_ONLY-"flashsim-au-size flashsim-open-units flashsim-steady-state flashsim-capacity"}
exec lab/board-lab.sh
