#!/usr/bin/env bash
# The emulated board lab: one command boots an aarch64 "board" under QEMU
# (TCG, cortex-a53, 128 MiB and 64 MiB of RAM) with Debian's arm64 kernel, a
# busybox initramfs and the static aarch64 tunelab, runs tunelab there against
# an ext4 and a vfat disk, brings the runs back to the host and imports them.
#
#   lab/board-lab.sh
#
# Environment (all optional):
#   LAB_DIR        work directory (default target/board-lab); downloads are cached there
#   LAB_MEMS       guest memory sizes in MiB (default "128 64")
#   LAB_BOOT_RUNS  boots timed by `tunelab boot` (default 3; 0 skips)
#   LAB_TIMEOUT    seconds one guest may run before it is killed (default 900)
#   LAB_SMP        guest CPUs (default 1)
#   TUNELAB_AARCH64, TUNELAB_HOST   prebuilt binaries (default: scripts/build-static.sh)
#
# Needs on the host (Debian): qemu-system-arm, dpkg with the arm64 architecture
# added (dpkg --add-architecture arm64; apt-get update), e2fsprogs, dosfstools,
# cpio, gzip, jq, plus what scripts/build-static.sh needs. No root.
#
# Every step prints "LAB <step> <status> <seconds>s"; a failing step prints
# the guest console log; the exit status is 1 when any step failed, 4 when
# the host lacks something.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

LAB_DIR=${LAB_DIR:-$repo/target/board-lab}
LAB_MEMS=${LAB_MEMS:-128 64}
LAB_BOOT_RUNS=${LAB_BOOT_RUNS:-3}
LAB_TIMEOUT=${LAB_TIMEOUT:-900}
LAB_SMP=${LAB_SMP:-1}
mkdir -p "$LAB_DIR/cache"
LAB_DIR=$(cd "$LAB_DIR" && pwd)
lab_t0=$(date +%s)

summary=()
failed=0
note() { echo "lab: $*" >&2; }
die() { note "$1"; exit "${2:-4}"; }
# record STEP STATUS SECONDS [DETAIL]
record() {
  local line
  line=$(printf 'LAB %-28s %-5s %5ss %s' "$1" "$2" "$3" "${4:-}")
  echo "$line"
  summary+=("$line")
  [ "$2" = ok ] || [ "$2" = skip ] || failed=1
}
show_log() {
  echo "----- $1 (last ${2:-200} lines) -----"
  tail -n "${2:-200}" "$1"
  echo "----- end of $1 -----"
}

for t in qemu-system-aarch64 apt-get dpkg-deb mkfs.ext4 mkfs.vfat cpio gzip jq; do
  command -v "$t" >/dev/null || die "$t not found (Debian: apt-get install qemu-system-arm e2fsprogs dosfstools cpio gzip jq)"
done

# ---- 1. binaries ----------------------------------------------------------
t=$(date +%s)
if [ -z "${TUNELAB_AARCH64:-}" ] || [ -z "${TUNELAB_HOST:-}" ]; then
  if scripts/build-static.sh aarch64 x86_64 >"$LAB_DIR/build.log" 2>&1; then
    record build-static ok $(($(date +%s) - t)) "$(grep -h '^target/static' "$LAB_DIR/build.log" | sed 's/;.*//' | tr '\n' ' ')"
  else
    record build-static FAIL $(($(date +%s) - t)); show_log "$LAB_DIR/build.log" 60; exit 1
  fi
fi
TUNELAB_AARCH64=${TUNELAB_AARCH64:-$repo/target/static/tunelab-aarch64-linux-musl}
TUNELAB_HOST=${TUNELAB_HOST:-$repo/target/static/tunelab-x86_64-linux-musl}

# ---- 2. kernel, modules and busybox from Debian's arm64 packages ----------
t=$(date +%s)
cache=$LAB_DIR/cache
kpkg=${LAB_KERNEL_PKG:-$(apt-cache search --names-only '^linux-image-[0-9.]+-[0-9]+-arm64-unsigned$' 2>/dev/null |
  awk '{print $1}' | sort -V | tail -1)}
[ -n "$kpkg" ] || die "no linux-image-*-arm64-unsigned package known to apt (dpkg --add-architecture arm64 && apt-get update)"
fetch() { # package → the .deb in the cache
  local deb
  deb=$(ls "$cache/${1}_"*_arm64.deb 2>/dev/null | head -1)
  if [ -z "$deb" ]; then
    (cd "$cache" && apt-get download "$1:arm64" >/dev/null 2>"$LAB_DIR/apt.log") ||
      { show_log "$LAB_DIR/apt.log" 20; die "apt-get download $1:arm64 failed"; }
    deb=$(ls "$cache/${1}_"*_arm64.deb | head -1)
  fi
  echo "$deb"
}
kdeb=$(fetch "$kpkg") || exit 4
bdeb=$(fetch busybox-static) || exit 4
rm -rf "$LAB_DIR/pkg" && mkdir -p "$LAB_DIR/pkg"
dpkg-deb -x "$kdeb" "$LAB_DIR/pkg/kernel"
dpkg-deb -x "$bdeb" "$LAB_DIR/pkg/busybox"
vmlinuz=$(ls "$LAB_DIR"/pkg/kernel/boot/vmlinuz-* | head -1)
kver=$(basename "$(ls -d "$LAB_DIR"/pkg/kernel/lib/modules/*)")
moddir=$LAB_DIR/pkg/kernel/lib/modules/$kver
record kernel ok $(($(date +%s) - t)) "$kpkg ($kver), vmlinuz $(stat -c %s "$vmlinuz") B"

# ---- 3. initramfs ----------------------------------------------------------
t=$(date +%s)
root=$LAB_DIR/initramfs
rm -rf "$root" && mkdir -p "$root"/{bin,dev,proc,sys,tmp,mnt/ext4,mnt/vfat,results,lib/modules}
cp "$LAB_DIR/pkg/busybox/bin/busybox" "$root/bin/busybox"
# tunelab itself lives on the ext4 disk, as a board keeps it on flash: in
# the initramfs it would pin 4 MiB of the 64 MiB guest's RAM.
# Modules with their dependencies (read from each .ko's .modinfo), in load order.
declare -A loaded=()
order=()
add_module() {
  local m=$1 f dep
  [ -n "${loaded[$m]:-}" ] && return 0
  f=$(find "$moddir" -name "$m.ko" -o -name "$m.ko.xz" | head -1)
  [ -n "$f" ] || { note "module $m is not in $kpkg"; return 1; }
  case "$f" in *.xz) xz -dc "$f" >"$LAB_DIR/$m.ko"; f=$LAB_DIR/$m.ko ;; esac
  loaded[$m]=1
  for dep in $(tr '\0' '\n' <"$f" | grep -a '^depends=' | cut -d= -f2 | tr ',' ' '); do
    add_module "${dep//-/_}" || add_module "$dep" || return 1
  done
  cp "$f" "$root/lib/modules/$m.ko"
  order+=("$m")
}
# crc32c_generic: ext4's checksums ask the crypto API for crc32c (a soft dependency).
# vfat mounts with codepage 437 and iocharset "ascii" by default (Debian's
# CONFIG_FAT_DEFAULT_IOCHARSET): without nls_ascii the mount fails with EINVAL.
for m in virtio_mmio virtio_blk crc32c_generic ext4 vfat nls_cp437 nls_ascii nls_iso8859-1 nls_utf8; do
  add_module "$m" || add_module "${m//_/-}" || die "cannot collect module $m"
done
printf '%s\n' "${order[@]}" >"$root/lib/modules/order"
cat >"$root/init" <<'INIT'
#!/bin/busybox sh
# Lab init: mount, load modules, then either report "ready" and power off
# (lab.mode=boot, for `tunelab boot`) or run the tunelab steps (lab.mode=suite).
/bin/busybox --install -s /bin
export PATH=/bin:/mnt/ext4/bin HOME=/tmp TUNELAB_DB=/tmp/results.db NO_COLOR=1
mount -t proc proc /proc; mount -t sysfs sys /sys
mount -t devtmpfs dev /dev; mount -t tmpfs tmp /tmp
for m in $(cat /lib/modules/order); do
  insmod /lib/modules/$m.ko 2>/dev/null || echo "LAB-GUEST insmod $m failed"
done
mode=suite
for w in $(cat /proc/cmdline); do case $w in lab.mode=*) mode=${w#lab.mode=} ;; esac; done
if [ "$mode" = boot ]; then
  echo "tunelab-lab: ready"
  poweroff -f
fi
dmesg -n 1
i=0; while [ ! -b /dev/vdc ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
# virtio-mmio disks appear in reverse order of the qemu command line; they
# are told apart by size: ext4 (largest), vfat, results (smallest).
set -- $(for d in /sys/block/vd?; do echo "$(cat $d/size) ${d##*/}"; done | sort -n | while read -r _ d; do echo $d; done)
results_dev=/dev/$1 vfat_dev=/dev/$2 ext4_dev=/dev/$3
echo "LAB-GUEST disks: ext4=$ext4_dev vfat=$vfat_dev results=$results_dev"
now() { read up _ </proc/uptime; echo "$up"; }
n=0
# step NAME CMD…: run, keep its output, export the run it stored.
step() {
  name=$1; shift
  before=$(tunelab runs 2>/dev/null | wc -l)
  t0=$(now)
  "$@" >/results/$name.out 2>&1
  rc=$?
  t1=$(now)
  echo "===== LAB-GUEST step $name: $*"
  cat /results/$name.out
  after=$(tunelab runs 2>/dev/null | wc -l)
  stored=no
  if [ "$after" -gt "$before" ]; then
    n=$((n + 1))
    tunelab export last --format json >/results/run-$n-$name.json 2>>/results/$name.out && stored=run-$n-$name.json
  fi
  echo "$name $rc $t0 $t1 $stored" >>/results/steps
  echo "LAB-GUEST-STEP $name rc=$rc start=$t0 end=$t1 stored=$stored"
}
: >/results/steps
# A failed mount is a failed step (with the kernel's last words), and the
# steps on that file system are skipped rather than run on the initramfs.
mnt() { mount -t "$1" "$2" "$3" || { rc=$?; dmesg | tail -n 5; return $rc; }; }
mounted() { grep -q " $1 " /proc/mounts; }
step mount-ext4 mnt ext4 $ext4_dev /mnt/ext4
step mount-vfat mnt vfat $vfat_dev /mnt/vfat
cat /proc/meminfo >/results/meminfo
step version tunelab --version
step list tunelab list
if mounted /mnt/ext4; then
  step inspect tunelab inspect --target /mnt/ext4
  step study-quick tunelab study quick --target /mnt/ext4 --trials 1 --warmup 0 --quiet-check 0 --label "lab study quick"
  step io.record-size tunelab run io.record-size --target /mnt/ext4 -p record=4k,64k,1m -p size=8M --trials 2 --warmup 0 --quiet-check 0
  step io.stream tunelab run io.stream --target /mnt/ext4 -p duration=3s --trials 1 --warmup 0 --quiet-check 0
fi
if mounted /mnt/vfat; then
  step io.record-size-vfat tunelab run io.record-size --target /mnt/vfat -p mode=buffered -p record=64k -p size=8M --trials 2 --warmup 0 --quiet-check 0
fi
step mem.latency tunelab run mem.latency -p max=8M --trials 1 --warmup 0 --quiet-check 0
step runs tunelab runs
cp /tmp/results.db /results/results.db 2>/dev/null
sync
umount /mnt/vfat /mnt/ext4 2>/dev/null
# The results disk is raw: a tar archive the host reads without mounting.
tar cf $results_dev -C /results . && sync && echo "LAB-GUEST results written"
poweroff -f
INIT
chmod +x "$root/init"
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -9) >"$LAB_DIR/initramfs.cpio.gz"
record initramfs ok $(($(date +%s) - t)) "$(stat -c %s "$LAB_DIR/initramfs.cpio.gz") B gzip, modules: ${order[*]}"

qemu_base() { # MEM → the qemu command line (without disks)
  echo qemu-system-aarch64 -M virt -cpu cortex-a53 -smp "$LAB_SMP" -m "$1" -nographic -no-reboot \
    -kernel "$vmlinuz" -initrd "$LAB_DIR/initramfs.cpio.gz"
}

# ---- 4. boot time, measured from outside (tunelab boot) --------------------
# Results of an earlier lab must not be taken for this one's.
rm -rf "$LAB_DIR"/m[0-9]* "$LAB_DIR/host.db" "$LAB_DIR/boot-console.log" "$LAB_DIR/boot.out"
if [ "$LAB_BOOT_RUNS" -gt 0 ]; then
  t=$(date +%s)
  if "$TUNELAB_HOST" boot --help >/dev/null 2>&1; then
    # shellcheck disable=SC2046
    if "$TUNELAB_HOST" --db "$LAB_DIR/host.db" boot --runs "$LAB_BOOT_RUNS" --ready 'tunelab-lab: ready' \
      --kernel "$vmlinuz" --log "$LAB_DIR/boot-console.log" --label "lab boot 128M" --timeout 300s \
      -- $(qemu_base 128) -append "console=ttyAMA0 earlycon=pl011,0x9000000 printk.time=1 panic=-1 lab.mode=boot" \
      >"$LAB_DIR/boot.out" 2>&1; then
      record boot-time ok $(($(date +%s) - t)); cat "$LAB_DIR/boot.out"
    else
      record boot-time FAIL $(($(date +%s) - t)); cat "$LAB_DIR/boot.out"; show_log "$LAB_DIR/boot-console.log" 80
    fi
  else
    record boot-time FAIL 0 "this tunelab has no 'boot' verb"
  fi
fi

# ---- 5. the suite on the emulated board, per memory size -------------------
for mem in $LAB_MEMS; do
  t=$(date +%s)
  d=$LAB_DIR/m$mem
  rm -rf "$d" && mkdir -p "$d/results"
  # Disks built without root: mkfs on image files.
  mkdir -p "$d/ext4root/bin" && cp "$TUNELAB_AARCH64" "$d/ext4root/bin/tunelab"
  truncate -s 160M "$d/ext4.img" && mkfs.ext4 -q -F -L labext4 -E root_owner=0:0 -d "$d/ext4root" "$d/ext4.img" >/dev/null
  truncate -s 48M "$d/vfat.img" && mkfs.vfat -n LABVFAT "$d/vfat.img" >/dev/null
  truncate -s 32M "$d/results.img"
  disks=()
  i=0
  for img in ext4 vfat results; do
    disks+=(-drive "file=$d/$img.img,format=raw,if=none,id=d$i" -device "virtio-blk-device,drive=d$i")
    i=$((i + 1))
  done
  # shellcheck disable=SC2046
  timeout --foreground -k 10 "$LAB_TIMEOUT" $(qemu_base "$mem") "${disks[@]}" \
    -append "console=ttyAMA0 loglevel=4 panic=-1 lab.mode=suite" </dev/null >"$d/console.log" 2>&1
  qrc=$?
  secs=$(($(date +%s) - t))
  if [ $qrc -ne 0 ] || ! tar xf "$d/results.img" -C "$d/results" 2>/dev/null || [ ! -s "$d/results/steps" ]; then
    record "guest-${mem}M" FAIL "$secs" "qemu exit $qrc (124: timeout after ${LAB_TIMEOUT}s); no results came back"
    show_log "$d/console.log"
    continue
  fi
  record "guest-${mem}M" ok "$secs" "$(awk '/^MemTotal/{print "MemTotal " $2 " kB"}' "$d/results/meminfo")"
  while read -r name rc t0 t1 stored; do
    s=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f", b-a}')
    if [ "$rc" = 0 ]; then
      record "  ${mem}M $name" ok "$s" "${stored/no/}"
    else
      record "  ${mem}M $name" FAIL "$s" "exit $rc${stored:+, stored $stored}"
      echo "----- output of $name in the ${mem} MiB guest -----"
      tail -n 40 "$d/results/$name.out"
    fi
    if [ "$stored" != no ]; then
      if ! jq -e '.schema == "tunelab.run/1" and (.results | type == "array")' "$d/results/$stored" >/dev/null; then
        record "  ${mem}M $name json" FAIL 0 "$stored is not a tunelab.run/1 document"
      fi
    fi
  done <"$d/results/steps"
  if grep -q FAIL <(printf '%s\n' "${summary[@]}" | grep " ${mem}M "); then
    show_log "$d/console.log" 80
  fi
done

# ---- 6. the runs come home ----------------------------------------------
t=$(date +%s)
jsons=$(ls "$LAB_DIR"/m*/results/run-*.json 2>/dev/null)
if [ -z "$jsons" ]; then
  record import FAIL 0 "no run came back from the guest"
elif "$TUNELAB_HOST" import --help >/dev/null 2>&1; then
  # shellcheck disable=SC2086
  if "$TUNELAB_HOST" --db "$LAB_DIR/host.db" import $jsons >"$LAB_DIR/import.out" 2>&1 &&
    "$TUNELAB_HOST" --db "$LAB_DIR/host.db" runs >>"$LAB_DIR/import.out" 2>&1; then
    record import ok $(($(date +%s) - t)) "$(echo "$jsons" | wc -l) run(s) into $LAB_DIR/host.db"
  else
    record import FAIL $(($(date +%s) - t)); cat "$LAB_DIR/import.out"
  fi
  cat "$LAB_DIR/import.out"
else
  record import skip 0 "this tunelab has no 'import' verb yet; $(echo "$jsons" | wc -l) JSON run(s) validated with jq"
fi

echo
echo "board lab summary ($(($(date +%s) - lab_t0)) s in all; work files in $LAB_DIR)"
printf '%s\n' "${summary[@]}"
exit $failed
