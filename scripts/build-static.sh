#!/usr/bin/env bash
# Build the static, stripped board binaries of tunelab:
#
#   scripts/build-static.sh [aarch64|x86_64]...     (default: both)
#
# Output: target/static/tunelab-aarch64-linux-musl and
# target/static/tunelab-x86_64-linux-musl (OUT_DIR overrides target/static),
# fully static (musl, no dynamic loader), stripped, at most 6 MiB (x86_64)
# and 5 MiB (aarch64), so they keep room to grow under 6 MiB. They
# need nothing on the target but a Linux kernel: copy one to the board and run it.
#
# The board build uses cargo profile "board" (size-optimised, fat LTO,
# panic=abort, no unwinding tables) and leaves out the PostgreSQL fleet client
# (feature "fleet"), flame graph SVGs ("flamegraph"), report charts ("charts")
# and shell completions/man pages ("completions"); it stores runs in SQLite
# and writes every report's tables. It keeps the profiler (feature "profile":
# perf_event_open, ELF/kallsyms symbols) but not DWARF ("profile-dwarf").
# What each feature costs: scripts/board-size.sh. BOARD_FEATURES overrides the feature list
# (BOARD_FEATURES= builds without the profiler, to compare sizes). Needs: rustup targets
# aarch64-unknown-linux-musl and x86_64-unknown-linux-musl, musl-gcc
# (Debian: musl-tools) and aarch64-linux-gnu-gcc (gcc-aarch64-linux-gnu).
# SIZE_LIMIT (bytes) overrides the size check.
set -euo pipefail
cd "$(dirname "$0")/.."

# Room to grow (issue 24): x86_64 keeps 256 KiB under 6 MiB (it was 512 KiB until
# the exporters, flash experiments and import checks of issues 40-42 took 350 KiB),
# aarch64 is at most 5 MiB.
limit_of() { case "$1" in x86_64) echo $((6 * 1024 * 1024)) ;; *) echo $((5 * 1024 * 1024)) ;; esac; }
features=${BOARD_FEATURES-profile}
arches=("$@")
[ ${#arches[@]} -gt 0 ] || arches=(aarch64 x86_64)
outdir=${OUT_DIR:-target/static}
mkdir -p "$outdir"

# No unwinding tables (.eh_frame was 756 KB of the 6.0 MiB x86_64 binary):
# the board profile aborts on panic, so nothing unwinds, and diagnose's
# profiler walks frame pointers. std's own tables (precompiled) stay, so a
# panic still prints its message; RUST_BACKTRACE shows fewer frames.
no_unwind="-fno-asynchronous-unwind-tables -fno-unwind-tables"

# The bundled SQLite without what tunelab's store never uses: full-text
# search (FTS3/FTS5), R*Tree, the dbstat table, STAT4, soundex, the column
# metadata calls (rusqlite's "column_metadata" feature, off here) and the API
# armor (checks of misuse that rusqlite's safe wrappers already rule out),
# and loadable extensions (rusqlite's "load_extension" feature, off here);
# rusqlite turns them on. Omitted too: the deprecated API, shared cache and
# progress callbacks, which tunelab's store never calls. BOARD_SQLITE_FLAGS=
# keeps them all (to measure their cost).
export LIBSQLITE3_FLAGS=${BOARD_SQLITE_FLAGS-"-USQLITE_ENABLE_FTS3 -USQLITE_ENABLE_FTS3_PARENTHESIS -USQLITE_ENABLE_FTS5 -USQLITE_ENABLE_RTREE -USQLITE_ENABLE_DBSTAT_VTAB -USQLITE_ENABLE_STAT4 -USQLITE_SOUNDEX -USQLITE_ENABLE_COLUMN_METADATA -USQLITE_ENABLE_API_ARMOR -USQLITE_ENABLE_LOAD_EXTENSION -DSQLITE_OMIT_LOAD_EXTENSION -DSQLITE_OMIT_DEPRECATED -DSQLITE_OMIT_SHARED_CACHE -DSQLITE_OMIT_PROGRESS_CALLBACK"}

need() { command -v "$1" >/dev/null || { echo "build-static: $1 not found ($2)" >&2; exit 4; }; }

for arch in "${arches[@]}"; do
  target="$arch-unknown-linux-musl"
  case "$arch" in
    x86_64)
      need musl-gcc "apt-get install musl-tools"
      export CC_x86_64_unknown_linux_musl=musl-gcc
      export CFLAGS_x86_64_unknown_linux_musl="$no_unwind"
      ;;
    aarch64)
      need aarch64-linux-gnu-gcc "apt-get install gcc-aarch64-linux-gnu"
      # Debian has no aarch64 musl-gcc: compile the bundled SQLite with the
      # glibc cross compiler but without the LFS64 aliases (fopen64, pread64…)
      # that glibc's headers would otherwise pull in and musl does not export.
      export CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc
      export AR_aarch64_unknown_linux_musl=aarch64-linux-gnu-ar
      export CFLAGS_aarch64_unknown_linux_musl="-DSQLITE_DISABLE_LFS -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=0 $no_unwind"
      export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=aarch64-linux-gnu-gcc
      ;;
    *) echo "build-static: unknown architecture '$arch' (aarch64 or x86_64)" >&2; exit 2 ;;
  esac
  # Non-PIE: `file` says "statically linked" (a static-pie is static too,
  # but needs its own start-up relocation and is reported as "static-pie").
  export "CARGO_TARGET_$(echo "$target" | tr 'a-z-' 'A-Z_')_RUSTFLAGS=-C relocation-model=static -C target-feature=+crt-static -C force-unwind-tables=no"
  rustup target list --installed 2>/dev/null | grep -qx "$target" ||
    { echo "build-static: rustup target $target missing (rustup target add $target)" >&2; exit 4; }
  echo "== $target"
  cargo build --locked --profile board --no-default-features --features "$features" --target "$target" --bin tunelab
  out="$outdir/tunelab-$arch-linux-musl"
  cp "${CARGO_TARGET_DIR:-target}/$target/board/tunelab" "$out"
  desc=$(file -b "$out")
  size=$(stat -c %s "$out")
  echo "$out: $size bytes ($(awk -v s="$size" 'BEGIN{printf "%.2f MiB", s/1048576}')); $desc"
  case "$desc" in
    *"statically linked"*) ;;
    *) echo "build-static: $out is not statically linked" >&2; exit 1 ;;
  esac
  case "$desc" in *"not stripped"*) echo "build-static: $out is not stripped" >&2; exit 1 ;; esac
  limit=${SIZE_LIMIT:-$(limit_of "$arch")}
  [ "$size" -le "$limit" ] ||
    { echo "build-static: $out is $size bytes, over the limit of $limit" >&2; exit 1; }
done
