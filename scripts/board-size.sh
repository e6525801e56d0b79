#!/usr/bin/env bash
# What each cargo feature costs in the static board binary, in bytes:
#
#   scripts/board-size.sh [x86_64|aarch64]        (default: x86_64)
#
# Builds the board binary as scripts/build-static.sh does (profile "board":
# opt-level z, fat LTO, panic=abort, stripped, static musl) once with the
# board's features, then once per optional feature with that feature added
# (features the board leaves out) or removed (features it keeps), and prints
# the difference. Each build takes minutes (fat LTO); set FEATURES to a
# space-separated subset to measure fewer (default: every optional feature;
# SKIP_SQLITE=1 skips the SQLite extensions' row).
# Output binaries go to target/board-size/ (OUT_DIR overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-x86_64}
board=${BOARD_FEATURES-profile}
out=${OUT_DIR:-target/board-size}
mkdir -p "$out"
features=${FEATURES-profile completions charts flamegraph fleet profile-dwarf}

build() { # name, feature list → size in bytes on stdout
  local dir="$out/$1"
  OUT_DIR=$dir BOARD_FEATURES=$2 SIZE_LIMIT=999999999 scripts/build-static.sh "$arch" >"$dir.log" 2>&1 ||
    { echo "board-size: the build '$1' (features '$2') failed; see $dir.log" >&2; exit 1; }
  stat -c %s "$dir/tunelab-$arch-linux-musl"
}

in_board() { case " ${board//,/ } " in *" $1 "*) return 0 ;; esac; return 1; }

base=$(build board "$board")
printf '%-14s %-8s %12s %10s\n' feature board bytes KiB
printf '%-14s %-8s %12d %10.1f   (the board build: features "%s")\n' total - "$base" "$(echo "$base / 1024" | bc -l)" "$board"
for f in $features; do
  if in_board "$f"; then
    rest=$(echo " ${board//,/ } " | sed "s/ $f / /" | xargs | tr ' ' ,)
    size=$(build "without-$f" "$rest")
    cost=$((base - size)); kept=kept
  else
    size=$(build "with-$f" "${board:+$board,}$f")
    cost=$((size - base)); kept=left-out
  fi
  printf '%-14s %-8s %12d %10.1f\n' "$f" "$kept" "$cost" "$(echo "$cost / 1024" | bc -l)"
done
# Not a cargo feature: the SQLite extensions build-static.sh compiles out.
if [ -z "${SKIP_SQLITE:-}" ]; then
  size=$(BOARD_SQLITE_FLAGS= build with-sqlite-extras "$board")
  cost=$((size - base))
  printf '%-14s %-8s %12d %10.1f   (SQLite FTS3/FTS5, R*Tree, dbstat, STAT4, soundex)\n' sqlite-extras left-out "$cost" "$(echo "$cost / 1024" | bc -l)"
fi
