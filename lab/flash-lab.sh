#!/usr/bin/env bash
# The flash lab: the emulated aarch64 board (lab/board-lab.sh) with
# lab/flashsim's simulated cards served over NBD as its disks. One guest of
# 64 MiB runs flash.au-size and flash.open-units raw on `card` (4 MiB units,
# 2 open), flash.steady-state raw on `slowcard` (4 MiB cache, 256 KiB/s:
# slower than the emulated guest writes), and flash.capacity on the vfat of
# `fakecard` (states 192 MiB, keeps 64 MiB); the host checks each figure
# against the model (unit exact, open units exact, cache ±10%, steady rate
# ±5%, stall p99 ±20%, real capacity at most 64 MiB) and prints
# "LAB flashsim …" lines. Exit status as lab/board-lab.sh's.
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
