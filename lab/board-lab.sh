#!/usr/bin/env bash
# The emulated board lab: one command boots an aarch64 "board" under QEMU
# (TCG, cortex-a53, 128 MiB and 64 MiB of RAM) with Debian's arm64 kernel, a
# busybox initramfs and the static aarch64 tunelab, runs tunelab there against
# ext4, vfat, exfat and f2fs disks (and a loop-mounted `--fs vfat` lab), brings
# the runs back to the host and imports them; then boots once more with an SSH
# server (dropbear) behind qemu's user-mode port forward and drives the guest
# from the host with `tunelab remote`. The last (smallest) guest also gets
# what a board user meets first (issue 24): `study quick` on a 16 MiB tmpfs
# /data, two "flash" disks (ext4 and vfat) throttled by qemu to 20 MB/s and
# run with io.record-size's defaults, and tables printed on the serial
# console, which reports 0 columns.
#
#   lab/board-lab.sh
#
# Environment (all optional):
#   LAB_DIR        work directory (default target/board-lab); downloads are cached there
#   LAB_MEMS       guest memory sizes in MiB (default "128 64")
#   LAB_FLASH      1: the last guest also gets the throttled flash disks, a
#                  16 MiB tmpfs target and the width-0 console check (adds
#                  ~6 minutes under TCG; off by default so CI keeps its 15)
#   LAB_TMPFS      1 (default): the last guest runs `study quick` on a 16 MiB
#                  tmpfs /data (issue 44: it must exit 0, say which key issues
#                  cannot fit, and leave /data empty); 0 skips it
#   LAB_LONG       1: each guest also runs the quick profile long (fixed work,
#                  10 trials an issue) and the lab prints its verdicts beside
#                  the quick ones, issue by issue (adds minutes under TCG)
#   LAB_FOOTPRINT  1 (default): the last guest prints the peak RSS of each
#                  verb and `tunelab runs` start-up (bench/footprint.sh
#                  --verbs; each verb at most 16 MiB)
#   LAB_DOC        1: the footprint table goes into docs/board.md's generated
#                  block, the diagnose steps' cost table into docs/diagnose.md's
#                  (bench/lib/docblock.sh)
#   LAB_BOOT_RUNS  boots timed by `tunelab boot` (default 3; 0 skips)
#   LAB_TIMEOUT    seconds one guest may run before it is killed (default 900)
#   LAB_SMP        guest CPUs (default 1)
#   LAB_ONLY       run only these guest steps (names as in the report, space-separated)
#   LAB_STEP_TIMEOUT  seconds one guest step may take (default 600: a hang guard; a 128 MiB study quick took 432 s on a loaded host)
#   LAB_FS         file systems measured in the first guest besides ext4
#                  (default "vfat exfat f2fs"; each needs its mkfs on the host)
#   LAB_DIAGNOSE   1: the guests also diagnose the workloads of
#                  tests/workloads (spin, memcpy, fork, mutex, producer/consumer,
#                  more threads than CPUs), check their findings and diagnose's
#                  cost (bench/diagnose_cost.sh: the spinner keeps >= 95% of the
#                  CPU, tunelab <= 5%), each printing its readers' cost; ~70 s
#                  of steps a guest. Default: 1 with LAB_SMP >= 2 (on 2
#                  emulated CPUs every step passed in every run, tunelab
#                  1.9-2.7% of one CPU on the spinner), 0 with one CPU (there
#                  the producer/consumer program's threads wait behind each
#                  other and once drew a cpu-starvation finding the step
#                  forbids); docs/diagnose.md "What diagnose costs"
#   LAB_SSH        1 (default): the remote-guest step; 0 skips it
#   LAB_FLASHSIM   1: the last guest also gets lab/flashsim's simulated cards over
#                  NBD (card: 4 MiB units, 2 open; slowcard: 4 MiB cache at
#                  256 KiB/s; fakecard: states 192 MiB, keeps 64 MiB, vfat), runs
#                  flash.au-size, flash.open-units, flash.steady-state and
#                  flash.capacity on them and checks the figures against the
#                  model (lab/flash-lab.sh runs only these steps)
#   TUNELAB_AARCH64, TUNELAB_HOST   prebuilt binaries (default: scripts/build-static.sh)
#
# Needs on the host (Debian): qemu-system-arm, dpkg with the arm64 architecture
# added (dpkg --add-architecture arm64; apt-get update), e2fsprogs, dosfstools,
# cpio, gzip, jq, plus what scripts/build-static.sh needs; for LAB_FS
# exfatprogs and f2fs-tools; for LAB_SSH the OpenSSH client (ssh, ssh-keygen)
# and readelf (binutils). No root.
#
# Every step prints "LAB <step> <status> <seconds>s"; a failing step prints
# the guest console log; the exit status is 1 when any step failed, 4 when
# the host lacks something.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${LAB_DOC:-0}" = 1 ]; then
  . bench/lib/docblock.sh
  docblock_check docs/board.md footprint
  docblock_check docs/diagnose.md diagnose_board
fi
repo=$(pwd)

LAB_DIR=${LAB_DIR:-$repo/target/board-lab}
LAB_MEMS=${LAB_MEMS:-128 64}
LAB_BOOT_RUNS=${LAB_BOOT_RUNS:-3}
LAB_TIMEOUT=${LAB_TIMEOUT:-900}
LAB_SMP=${LAB_SMP:-1}
if [ "$LAB_SMP" -ge 2 ] 2>/dev/null; then LAB_DIAGNOSE=${LAB_DIAGNOSE:-1}; else LAB_DIAGNOSE=${LAB_DIAGNOSE:-0}; fi
LAB_FS=${LAB_FS-vfat exfat f2fs}
LAB_SSH=${LAB_SSH:-1}
LAB_ONLY=${LAB_ONLY:-}
lab_only=${LAB_ONLY// /,}
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
  [ "$2" = ok ] || [ "$2" = skip ] || [ "$2" = info ] || failed=1
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
rm -rf "$root" && mkdir -p "$root"/{bin,dev,proc,sys,tmp,data,mnt/ext4,mnt/vfat,mnt/exfat,mnt/f2fs,mnt/flashext4,mnt/flashvfat,results,lib/modules}
# The board's own mkfs for the `--fs vfat` lab: busybox calls it mkdosfs.
printf '#!/bin/busybox sh\nexec /bin/busybox mkdosfs "$@"\n' >"$root/bin/mkfs.vfat"
chmod +x "$root/bin/mkfs.vfat"
cp "$LAB_DIR/pkg/busybox/bin/busybox" "$root/bin/busybox"
# tunelab itself lives on the ext4 disk, as a board keeps it on flash: in
# the initramfs it would pin 4 MiB of the 64 MiB guest's RAM.
# Modules with their dependencies (read from each .ko's .modinfo), in load order.
declare -A loaded=()
order=()
flash_mods=""
flash_missing=""
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
nbase=${#order[@]}
# loop: the `--fs` lab inside the guest; exfat, f2fs: the LAB_FS disks. Only
# the guest that measures them loads them (f2fs brings its compressors: about
# 1.5 MiB of kernel memory the 64 MiB guest keeps for tunelab).
# crc32_generic: f2fs asks the crypto API for "crc32" (a soft dependency:
# without it the mount fails, "F2FS-fs: Cannot load crc32 driver").
for m in loop exfat crc32_generic f2fs; do
  add_module "$m" || die "cannot collect module $m"
done
printf '%s\n' "${order[@]:0:nbase}" >"$root/lib/modules/order"
printf '%s\n' "${order[@]:nbase}" >"$root/lib/modules/order.fs"
# Emulated flash (nandsim/block2mtd + UBI + UBIFS): only when this kernel
# package has a way to make an MTD device; docs/board.md says why not otherwise.
for m in nandsim block2mtd mtdram ubi ubifs; do
  if find "$moddir" -name "$m.ko*" | grep -q .; then flash_mods+=" $m"; else flash_missing+=" $m"; fi
done
cat >"$root/init" <<'INIT'
#!/bin/busybox sh
# Lab init: mount, load modules, then either report "ready" and power off
# (lab.mode=boot, for `tunelab boot`) or run the tunelab steps (lab.mode=suite).
/bin/busybox --install -s /bin
export PATH=/bin:/mnt/ext4/bin HOME=/tmp TUNELAB_DB=/tmp/results.db NO_COLOR=1
mount -t proc proc /proc; mount -t sysfs sys /sys
mount -t devtmpfs dev /dev; mount -t tmpfs tmp /tmp
mode=suite disks="results vfat ext4" fsmatrix=0 flash=0 tmpfs=0 long=0 footprint=0 only= step_timeout=600
for w in $(cat /proc/cmdline); do
  case $w in
    lab.mode=*) mode=${w#lab.mode=} ;;
    lab.disks=*) disks=$(echo "${w#lab.disks=}" | tr , ' ') ;;
    lab.fsmatrix=*) fsmatrix=${w#lab.fsmatrix=} ;;
    lab.flash=*) flash=${w#lab.flash=} ;;
    lab.tmpfs=*) tmpfs=${w#lab.tmpfs=} ;;
    lab.long=*) long=${w#lab.long=} ;;
    lab.footprint=*) footprint=${w#lab.footprint=} ;;
    lab.only=?*) only=",${w#lab.only=}," ;;
    lab.step_timeout=*) step_timeout=${w#lab.step_timeout=} ;;
    # The machine name the runs carry home (busybox leaves it "(none)").
    lab.host=*) hostname "${w#lab.host=}" ;;
  esac
done
mods=$(cat /lib/modules/order)
[ "$fsmatrix" = 1 ] && mods="$mods $(cat /lib/modules/order.fs 2>/dev/null)"
for m in $mods; do
  insmod /lib/modules/$m.ko 2>/dev/null || echo "LAB-GUEST insmod $m failed"
done
# The initramfs lives in RAM: the loaded modules' files are no longer needed.
rm -f /lib/modules/*.ko
if [ "$mode" = boot ]; then
  echo "tunelab-lab: ready"
  poweroff -f
fi
if [ "$mode" = ssh ]; then
  # The fleet step: network behind qemu's user-mode NAT (guest 10.0.2.15,
  # gateway 10.0.2.2; the host reaches port 22 through hostfwd) and dropbear
  # with the throwaway key in /root/.ssh/authorized_keys.
  dmesg -n 1
  ip link set lo up
  ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2 ||
    echo "LAB-GUEST network setup failed"
  chmod 700 /root /root/.ssh; chmod 600 /root/.ssh/authorized_keys
  mkdir -p /etc/dropbear
  # -R: make the host key when first needed; -s: no password logins; -E: log to the console.
  LD_LIBRARY_PATH=/lib/aarch64-linux-gnu /usr/sbin/dropbear -R -s -E -p 22 -P /tmp/dropbear.pid &&
    echo "tunelab-lab: sshd ready" || echo "LAB-GUEST dropbear failed to start"
  while :; do sleep 3600; done
fi
dmesg -n 1
ndisks=$(echo $disks | wc -w)
i=0; while [ "$(ls /sys/block | grep -c '^vd')" -lt "$ndisks" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
# virtio-mmio disks appear in reverse order of the qemu command line; they
# are told apart by size: lab.disks names them from the smallest up.
set -- $(for d in /sys/block/vd?; do echo "$(cat $d/size) ${d##*/}"; done | sort -n | while read -r _ d; do echo $d; done)
desc=""
for role in $disks; do eval "${role}_dev=/dev/$1"; desc="$desc $role=/dev/$1"; shift; done
echo "LAB-GUEST disks:$desc"
now() { read up _ </proc/uptime; echo "$up"; }
n=0
# step NAME CMD…: run, keep its output, export the run it stored.
step() {
  name=$1; shift
  # LAB_ONLY: run only the named steps (to look at one step quickly); the
  # mounts always run (tunelab itself is on /mnt/ext4).
  if [ -n "$only" ] && [ "${only#*,$name,}" = "$only" ] && [ "${name#mount-}" = "$name" ]; then
    echo "$name skipped - - no" >>/results/steps
    return 0
  fi
  before=$(tunelab runs 2>/dev/null | wc -l)
  t0=$(now)
  # A step that hangs must not take the rest with it: LAB_STEP_TIMEOUT.
  # (Shell functions such as mnt cannot run under timeout.)
  case $1 in
    tunelab | sh) timeout "$step_timeout" "$@" >/results/$name.out 2>&1 ;;
    *) "$@" >/results/$name.out 2>&1 ;;
  esac
  rc=$?
  t1=$(now)
  # Failed, killed (137) or timed out (143/124): the kernel's account of
  # any OOM kill (a step such as the footprint's reports a child's kill as
  # its own exit 1; the console's log level hides the kernel's lines).
  if [ $rc -ne 0 ]; then
    dmesg | grep -iE -A2 "out of memory|killed process|oom-kill|hung" | tail -n 12 >>/results/$name.out
  fi
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
# The diagnose workloads (LAB_DIAGNOSE) travel on the ext4 disk.
[ -d /mnt/ext4/wl ] && ln -sfn /mnt/ext4/wl /wl
step mount-vfat mnt vfat $vfat_dev /mnt/vfat
for fs in exfat f2fs; do
  eval "dev=\${${fs}_dev:-}"
  [ -n "$dev" ] && step mount-$fs mnt $fs $dev /mnt/$fs
done
# The throttled "flash" disks (20 MB/s, like a USB stick; issue 24), when given.
[ -n "${flashext4_dev:-}" ] && step mount-flashext4 mnt ext4 $flashext4_dev /mnt/flashext4
[ -n "${flashvfat_dev:-}" ] && step mount-flashvfat mnt vfat $flashvfat_dev /mnt/flashvfat
cat /proc/meminfo >/results/meminfo
# Where a 35 MiB guest's memory goes before tunelab starts (slab caches).
cat /proc/slabinfo >/results/slabinfo 2>/dev/null
step version tunelab --version
step list tunelab list
if mounted /mnt/ext4; then
  step inspect tunelab inspect --target /mnt/ext4
  # As a board user types it: the profile's own trials and warm-ups.
  step study-quick tunelab study quick --target /mnt/ext4 --quiet-check 0 --label "lab study quick"
  # The same key issues with their work fixed and 10 trials each: the
  # verdicts the sized quick study must reach (the host prints both).
  [ "$long" = 1 ] &&
    step study-quick-long tunelab study /mnt/ext4/bin/quick-long.toml --target /mnt/ext4 --quiet-check 0 --label "lab study quick long"
  step io.record-size tunelab run io.record-size --target /mnt/ext4 -p record=4k,64k,1m -p size=8M --trials 2 --warmup 0 --quiet-check 0
  step io.stream tunelab run io.stream --target /mnt/ext4 -p duration=3s --trials 1 --warmup 0 --quiet-check 0
fi
if mounted /mnt/vfat; then
  step io.record-size-vfat tunelab run io.record-size --target /mnt/vfat -p mode=buffered -p record=64k -p size=8M --trials 2 --warmup 0 --quiet-check 0
fi
# The board file systems: each experiment with its default modes, which
# must fall back (O_DIRECT, fallocate, atime) or skip a point with the
# reason, never fail. Once, in the first guest.
if [ "$fsmatrix" = 1 ]; then
  q="--trials 2 --warmup 0 --quiet-check 0"
  for fs in vfat exfat f2fs; do
    mounted /mnt/$fs || continue
    step $fs-io.record-size tunelab run io.record-size --target /mnt/$fs -p record=64k,1m -p size=4M $q
    step $fs-io.pregrow tunelab run io.pregrow --target /mnt/$fs -p size=4M -p record=1m $q
    step $fs-io.atime tunelab run io.atime --target /mnt/$fs -p atime=current -p files=200 $q
    step $fs-io.random tunelab run io.random --target /mnt/$fs -p size=8M -p duration=1s -p depth=1,4 $q
    # Write amplification against the block layer's own count, read here
    # around the whole step (sectors written, field 7 of the disk's stat):
    # the host compares it with the run's note (issue 40). 6 s of recording:
    # the file system's own writes outside the note's window (the scratch
    # directory made and removed, an f2fs checkpoint) stay well under 2%.
    eval "dev=\${${fs}_dev:-}"
    sync; wr0=$(awk '{print $7}' /sys/block/${dev#/dev/}/stat)
    step $fs-io.stream tunelab run io.stream --target /mnt/$fs -p duration=6s --trials 1 --warmup 0 --quiet-check 0
    sync; wr1=$(awk '{print $7}' /sys/block/${dev#/dev/}/stat)
    echo $(((wr1 - wr0) * 512)) >/results/$fs-io.stream.blockbytes
  done
  # The filesystem lab on a board: a loop device through /dev/loop-control,
  # formatted by busybox's mkdosfs (no -q), mounted and torn down by tunelab.
  mounted /mnt/ext4 &&
    step fs-lab-vfat tunelab run io.stream --fs vfat --fs-size 32M --target /mnt/ext4 -p duration=2s --trials 1 --warmup 0 --quiet-check 0
fi
step mem.latency tunelab run mem.latency -p max=8M --trials 1 --warmup 0 --quiet-check 0
# Wake-up latency idle and under the recorder's load (storage+memory), one
# short trial each: the guest runs as root, so SCHED_FIFO and perf causes.
mounted /mnt/ext4 &&
  step sched.latency tunelab run sched.latency --target /mnt/ext4 -p duration=500ms -p load=none,storage+memory --trials 1 --warmup 0 --quiet-check 0
step cpu.clock tunelab run cpu.clock --trials 2 --warmup 0 --quiet-check 0
# An idle board is reported idle (issue 24): tunelab's own sampling is not
# the board's load, so no "CPU is busy/saturated" and no CPU finding; and it
# fits in 64 MiB (kernel symbols are streamed from /proc/kallsyms, not
# loaded whole: that OOM-killed it here before).
step diagnose-idle sh -c '(t=0;
  # In the foreground on the console, as a board user types it. Beside it,
  # its memory every 5 s (VmHWM: the peak; what a 64 MiB board has left
  # matters here) — rarely, to leave the board idle; past 150 s it is
  # stuck: where each thread waits, then it is killed.
  while sleep 5; do
    p=$(pidof tunelab | tr " " "\n" | sort -n | tail -n 1); [ -n "$p" ] || continue;
    m=$(grep -E "^(VmHWM|VmRSS|RssAnon|RssFile):" /proc/$p/status 2>/dev/null | tr -s " \t" " " | tr "\n" " ");
    a=$(grep MemAvailable /proc/meminfo | tr -s " ");
    echo "$(cut -d" " -f1 /proc/uptime) s: $m| $a" >>/tmp/diag-mem.txt; t=$((t + 1));
    if [ $t = 30 ]; then
      for d in /proc/$p/task/*; do echo "thread $(cat $d/comm): $(cat $d/wchan) $(cut -d" " -f3 $d/stat)"; head -n 8 $d/stack 2>/dev/null; done;
      kill -9 $p;
    fi;
  done) & w=$!;
  tunelab diagnose --for 5s --no-store >/tmp/diag.txt 2>&1; s=$?; kill $w;
  grep -E "CPU is|^\[|no finding" /tmp/diag.txt | head -n 6;
  echo "memory (first and last reading; VmHWM is the peak RSS):"; head -n 1 /tmp/diag-mem.txt;
  tail -n 1 /tmp/diag-mem.txt; rm -f /tmp/diag-mem.txt;
  if [ $s = 0 ] && ! grep -qE "CPU is (saturated|busy)|\(diagnose\.(kernel-bound|cpu)" /tmp/diag.txt;
  then rm -f /tmp/diag.txt; else echo "exit $s"; tail -n 25 /tmp/diag.txt; rm -f /tmp/diag.txt; exit 1; fi'
# A RAM-backed target (issue 24): /data on a 16 MiB tmpfs. Its files are
# memory, so the study sizes them to the memory left; nothing stays behind.
if [ "$flash" = 1 ] || [ "$tmpfs" = 1 ]; then
  mount -t tmpfs -o size=16m data /data
  step study-quick-tmpfs tunelab study quick --target /data --quiet-check 0 --label "lab study quick tmpfs"
  step tmpfs-left-empty sh -c 'ls -A /data; [ -z "$(ls -A /data)" ]'
  umount /data
fi
# Slow flash: the defaults size themselves to the device's speed and keep
# to the time budget they print first.
if mounted /mnt/flashext4; then
  step flash-ext4-io.record-size tunelab run io.record-size --target /mnt/flashext4 --quiet-check 0
fi
if mounted /mnt/flashvfat; then
  step flash-vfat-io.record-size tunelab run io.record-size --target /mnt/flashvfat -p record=64k,1m --quiet-check 0
fi
# ---- diagnose on the board's own programs (issue 39 item 6, issue 44
# item 3): lab/diagnose-check.sh NAME EXPECTED FORBIDDEN SECONDS [ARGS].
if [ -x /wl/check.sh ]; then
  # The spinner keeps >= 95% of the CPU by its own account and tunelab
  # stays <= 5% of one CPU (issue 44's bound); cost.sh prints it beside
  # the spinner alone.
  # TUNELAB_DIAGNOSE_COST: each reader's readings and cost on stderr.
  step diagnose-spin sh -c 'TUNELAB_DIAGNOSE_COST=1 MIN_CPU=95 MAX_OWN=5 sh /wl/check.sh spin cpu-hotspot "cpu-starvation|kernel-bound" 10'
  step diagnose-spin-short sh -c 'TUNELAB_DIAGNOSE_COST=1 MIN_CPU=95 MAX_OWN=5 sh /wl/check.sh spin cpu-hotspot "cpu-starvation|kernel-bound" 2'
  step diagnose-cost sh -c 'TUNELAB_DIAGNOSE_COST=1 SPIN=/wl/spin TUNELAB=tunelab CHECK=1 sh /wl/cost.sh'
  step diagnose-memcpy sh -c 'TUNELAB_DIAGNOSE_COST=1 sh /wl/check.sh memcpy_loop cpu-hotspot=copy_blocks "cpu-starvation" 4'
  step diagnose-fork sh -c 'TUNELAB_DIAGNOSE_COST=1 sh /wl/check.sh fork_loop "" "cpu-starvation|cpu-hotspot" 4'
  step diagnose-mutex sh -c 'TUNELAB_DIAGNOSE_COST=1 sh /wl/check.sh mutex user-lock=contended_update "" 4'
  step diagnose-prodcons sh -c 'TUNELAB_DIAGNOSE_COST=1 sh /wl/check.sh prodcons cpu-hotspot "cpu-starvation" 4'
  step diagnose-threads sh -c 'TUNELAB_DIAGNOSE_COST=1 sh /wl/check.sh threads_cpu cpu-starvation "observer-cost" 4 4'
fi
# ---- lab/flashsim's cards (LAB_FLASHSIM): raw on the honest one, handed
# over with overwrite=yes; file level on the fake one's vfat.
if [ -n "${card_dev:-}" ]; then
  q="--trials 1 --warmup 0 --quiet-check 0"
  # Emulated reads are noisy: more repeats and positions than on a board.
  step flashsim-au-size tunelab run flash.au-size -p device=$card_dev -p repeats=8 -p positions=8 $q
  step flashsim-open-units tunelab run flash.open-units -p device=$card_dev -p overwrite=yes -p streams=4 -p spacing=8M -p min_written=32M -p max_time=120s $q
fi
if [ -n "${slowcard_dev:-}" ]; then
  step flashsim-steady-state tunelab run flash.steady-state -p device=$slowcard_dev -p overwrite=yes -p size=64M -p window=4s -p min_written=8M -p max_time=300s --trials 1 --warmup 0 --quiet-check 0
fi
if [ -n "${fakecard_dev:-}" ]; then
  mkdir -p /mnt/fakecard
  step mount-fakecard mnt vfat $fakecard_dev /mnt/fakecard
  mounted /mnt/fakecard &&
    step flashsim-capacity tunelab run flash.capacity --target /mnt/fakecard -p size=160M -p file_size=16M --trials 1 --warmup 0 --quiet-check 0
  umount /mnt/fakecard 2>/dev/null
fi
step runs tunelab runs
# tunelab's own footprint per verb on this board (issue 44): peak RSS of
# each, `tunelab runs` start-up; a private database, removed after.
if [ "$footprint" = 1 ] && mounted /mnt/ext4; then
  step footprint env TUNELAB=/mnt/ext4/bin/tunelab sh /mnt/ext4/bin/footprint.sh --verbs /mnt/ext4
fi
# The serial console reports 0 columns: tables printed on it (the init's
# stdout is /dev/console) must stay readable; the host checks the lines
# between the markers.
if [ "$flash" = 1 ]; then
  stty -F /dev/console 2>/dev/null | head -n 1
  echo "LAB-GUEST width0-begin"
  tunelab list
  tunelab runs
  echo "LAB-GUEST width0-end"
fi
cp /tmp/results.db /results/results.db 2>/dev/null
sync
umount /mnt/f2fs /mnt/exfat /mnt/vfat /mnt/flashext4 /mnt/flashvfat /mnt/ext4 2>/dev/null
# The results disk is raw: a tar archive the host reads without mounting.
dmesg >/results/dmesg.out 2>&1
tar cf $results_dev -C /results . && sync && echo "LAB-GUEST results written"
poweroff -f
INIT
chmod +x "$root/init"
# ---- diagnose's own workloads (issue 39 item 6, issue 44 item 3) ---------
# Static aarch64 builds of tests/workloads/{spin,memcpy_loop,fork_loop,
# mutex,prodcons,threads_cpu}.c in /wl, with check.sh: a finding expected,
# findings forbidden, and the spinner's own share of a CPU (getrusage).
# They go on each guest's ext4 disk, not in the initramfs: unpacked in RAM
# they made the 64 MiB guest panic at boot ("deadlocked on memory").
rm -rf "$LAB_DIR/wl"
if [ "${LAB_DIAGNOSE:-0}" = 1 ] && command -v aarch64-linux-gnu-gcc >/dev/null; then
  mkdir -p "$LAB_DIR/wl"
  for w in spin memcpy_loop fork_loop mutex prodcons threads_cpu; do
    aarch64-linux-gnu-gcc -static -O2 -g -pthread -o "$LAB_DIR/wl/$w" "tests/workloads/$w.c" ||
      die "cannot build tests/workloads/$w.c for aarch64"
  done
  cp lab/diagnose-check.sh "$LAB_DIR/wl/check.sh"
  cp bench/diagnose_cost.sh "$LAB_DIR/wl/cost.sh"
elif [ "${LAB_DIAGNOSE:-0}" = 1 ]; then
  note "aarch64-linux-gnu-gcc not found: the diagnose workload steps are skipped"
fi
mkcpio() { (cd "$1" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet | gzip -9) >"$2"; }
mkcpio "$root" "$LAB_DIR/initramfs.cpio.gz"
record initramfs ok $(($(date +%s) - t)) "$(stat -c %s "$LAB_DIR/initramfs.cpio.gz") B gzip, modules: ${order[*]}"
if [ -n "$flash_missing" ]; then
  note "no emulated flash: $kpkg lacks$flash_missing (has:${flash_mods:- none}); UBIFS is not run (docs/board.md)"
fi

qemu_base() { # MEM [INITRD] → the qemu command line (without disks)
  echo qemu-system-aarch64 -M virt -cpu cortex-a53 -smp "$LAB_SMP" -m "$1" -nographic -no-reboot \
    -kernel "$vmlinuz" -initrd "${2:-$LAB_DIR/initramfs.cpio.gz}"
}

# ---- the simulated cards of LAB_FLASHSIM (lab/flashsim over NBD) ----------
sim_pids=()
trap '[ ${#sim_pids[@]} -gt 0 ] && kill "${sim_pids[@]}" 2>/dev/null' EXIT
flashsim_start() { # DIR → card_port, fake_port set; the servers run until the lab ends
  local dir=$1 sim=lab/flashsim/target/debug/flashsim
  cargo build -q --manifest-path lab/flashsim/Cargo.toml ||
    { record flashsim FAIL 0 "cannot build lab/flashsim"; return 1; }
  card_port=$((20000 + RANDOM % 20000)) fake_port=$((card_port + 1)) slow_port=0
  # Read steps of 10 ms a unit and 2 ms a page: above an emulated guest's
  # read noise (the default 150/30 µs steps drown in it under TCG).
  "$sim" --port "$card_port" --file "$dir/card-back.img" --size 256M --unit 4M --open 2 \
    --cache 16M --unit-step 0.01 --page-step 0.002 >"$dir/card-sim.log" 2>&1 &
  sim_pids+=($!)
  # Slowed below what the TCG guest pushes (~1 MB/s), so the cache fills
  # and the steady state is the card's: 4 MiB cache, 256 KiB/s programming.
  slow_port=$((card_port + 2))
  "$sim" --port "$slow_port" --file "$dir/slow-back.img" --size 224M --unit 4M --open 2 \
    --cache 4M --program 256K --bus 4M >"$dir/slow-sim.log" 2>&1 &
  sim_pids+=($!)
  # The fake card's vfat is made on the host for its stated size; only its
  # first 64 MiB (boot sector, FATs, the start of the data area) are kept.
  truncate -s 192M "$dir/fake-full.img" && mkfs.vfat -n LABFAKE "$dir/fake-full.img" >/dev/null &&
    head -c 64M "$dir/fake-full.img" >"$dir/fake-back.img" && rm -f "$dir/fake-full.img"
  "$sim" --port "$fake_port" --file "$dir/fake-back.img" --size 192M --real 64M --cache 0 \
    >"$dir/fake-sim.log" 2>&1 &
  sim_pids+=($!)
  sleep 1
}
# flashsim_check DIR: the guest's figures against the model's geometry.
flashsim_check() {
  local dir=$1 f v
  metric() { jq -r --arg m "$2" '[.results[0].metrics[] | select(.name == $m) | .summary.median][0]' "$1"; }
  check() { # NAME RUN-GLOB METRIC AWK-CONDITION(v) WHAT
    f=$(ls "$dir"/results/run-*-"$2".json 2>/dev/null | head -1)
    if [ -z "$f" ]; then record "  flashsim $1" FAIL 0 "no stored run of $2"; return; fi
    v=$(metric "$f" "$3")
    if awk -v v="$v" "BEGIN{exit !($4)}"; then record "  flashsim $1" ok 0 "$3 $v ($5)"
    else record "  flashsim $1" FAIL 0 "$3 $v, want $5"; fi
  }
  check unit flashsim-au-size unit_bytes 'v == 4194304' "the model's 4 MiB unit"
  check open flashsim-open-units open_units 'v == 2' "the model's 2 open units"
  local rate p99
  rate=$(sed -n 's/.*model steady_rate \([0-9]*\) B.*/\1/p' "$dir/slow-sim.log")
  check cache flashsim-steady-state cache_bytes 'v >= 0.9 * 4194304 && v <= 1.1 * 4194304' "4 MiB ± 10%"
  check steady flashsim-steady-state steady_rate "v >= 0.95 * $rate && v <= 1.05 * $rate" "the model's $rate B/s ± 5%"
  p99=$(sed -n 's/.*stall_p99 \([0-9.]*\) s.*/\1/p' "$dir/slow-sim.log")
  check stall-p99 flashsim-steady-state stall_p99 "v >= 0.8 * $p99 && v <= 1.2 * $p99" "the model's $p99 s ± 20%"
  check capacity flashsim-capacity real_capacity 'v <= 67108864 && v >= 0.5 * 67108864' "the fake card's 64 MiB at most"
}

# lab_doc PAGE NAME MEM FILE: with LAB_DOC=1, FILE under a line saying
# where, when and on which guest it was made, into PAGE's NAME block.
lab_doc() {
  [ "${LAB_DOC:-0}" = 1 ] || return 0
  {
    echo "Generated by \`LAB_DOC=1 lab/board-lab.sh\` on $(date -u '+%Y-%m-%d %H:%M') UTC" \
      "(host load $(cut -d' ' -f1-3 /proc/loadavg)), $3 MiB guest, ${LAB_SMP} CPUs:"
    echo
    cat "$4"
  } >"$4.doc"
  docblock "$1" "$2" "$4.doc"
}

# diagnose_table DIR MEM: each diagnose step's result, tunelab's own CPU
# over the interval and the spinner's own share of a CPU, from the steps'
# output; with LAB_DOC=1 into docs/diagnose.md's generated block.
diagnose_table() {
  local d=$1 mem=$2 f n rc own prog table=""
  ls "$d"/results/diagnose-*.out >/dev/null 2>&1 || return 0
  for f in "$d"/results/diagnose-*.out; do
    n=$(basename "$f" .out)
    [ "$n" = diagnose-idle ] && continue
    rc=$(awk -v n="$n" '$1 == n {print ($2 == 0 ? "pass" : "FAIL")}' "$d/results/steps")
    own=$(sed -n "s/.*tunelab's own CPU time over the interval.*(\([0-9.]*\)% of one CPU).*/\1/p" "$f" | tr '\n' ' ')
    [ -n "$own" ] || own=$(awk '/^[0-9]+ s +[0-9.]+% of a CPU/ {sub("%", "", $11); printf "%s s: %s ", $1, $11}' "$f")
    prog=$(sed -n 's/.*cpu_pct=\([0-9.]*\).*/\1%/p' "$f" | tr '\n' ' ')
    [ -n "$prog" ] || prog=$(awk '/^[0-9]+ s +[0-9.]+% of a CPU/ {printf "%s s: %s ", $1, $7}' "$f")
    table+="| ${n#diagnose-} | ${rc:-?} | ${own:--} | ${prog:--} |"$'\n'
  done
  # Only diagnose-idle ran (one guest CPU): no table; the block keeps its last.
  [ -n "$table" ] || return 0
  echo "diagnose on the ${mem} MiB guest: step | result | tunelab's own CPU, % of one CPU | the program's own share of a CPU"
  printf '%s' "$table" | sed 's/^/  /'
  {
    echo "| step | result | tunelab's own CPU over the interval, % of one CPU | the program's own share of a CPU |"
    echo "|---|---|---|---|"
    printf '%s' "$table"
  } >"$d/diagnose.md"
  lab_doc docs/diagnose.md diagnose_board "$mem" "$d/diagnose.md"
}

# study_checks DIR MEM: the quick study's time against the board's goal
# (issue 44: 64 MiB ≤ 60 s, 128 MiB ≤ 90 s; TCG on a shared host: the
# host's load is printed beside it; reported, not judged — an emulated
# board's seconds follow the host's load, and the lab checks behaviour), its verdicts beside the long run's,
# the tmpfs study's skipped issues, and the footprint table.
study_checks() {
  local d=$1 mem=$2 f long limit s
  f=$(ls "$d"/results/run-*-study-quick.json 2>/dev/null | head -1)
  if [ -n "$f" ]; then
    limit=$([ "$mem" -le 64 ] && echo 60 || echo 90)
    s=$(awk '$1 == "study-quick" {printf "%.0f", $4 - $3}' "$d/results/steps")
    # A study that did not finish has no time to judge (an OOM kill once
    # read as "ok, 23 s").
    if [ "$(awk '$1 == "study-quick" {print $2}' "$d/results/steps")" != 0 ]; then
      record "  ${mem}M study-quick-time" FAIL "${s:-0}" "the study did not finish (see study-quick)"
    elif [ "${s:-999}" -le "$limit" ]; then
      record "  ${mem}M study-quick-time" ok "$s" "≤ ${limit} s (host load $(cut -d' ' -f1-3 /proc/loadavg))"
    else
      record "  ${mem}M study-quick-time" info "$s" "over the ${limit} s goal (host load $(cut -d' ' -f1-3 /proc/loadavg); not judged)"
    fi
    echo "time per key issue, ${mem} MiB: $(jq -r '[.study.issues[] | "\(.name) \(.seconds // 0 | . * 10 | round / 10) s"] | join(" · ")' "$f")"
  fi
  long=$(ls "$d"/results/run-*-study-quick-long.json 2>/dev/null | head -1)
  if [ -n "$f" ] && [ -n "$long" ]; then
    echo "verdicts, ${mem} MiB: quick (sized work) | long (fixed work, 10 trials)"
    jq -r --slurpfile l "$long" '.study.issues[] as $q
      | ($l[0].study.issues[] | select(.name == $q.name)) as $o
      | "  \($q.name): \($q.verdict | ascii_upcase) (\($q.result)) | \($o.verdict | ascii_upcase) (\($o.result))"' "$f"
    # A difference is a contradiction when one run says PASS and the other
    # FAIL; a MARGINAL beside a decided verdict is one run that could not
    # tell (its interval straddles the need), reported apart.
    local differ contra
    differ=$(jq -r --slurpfile l "$long" '[.study.issues[] as $q
      | ($l[0].study.issues[] | select(.name == $q.name)) as $o
      | select($q.verdict != $o.verdict) | "\($q.name) (\($q.verdict) | \($o.verdict))"] | join(", ")' "$f")
    contra=$(jq -r --slurpfile l "$long" '[.study.issues[] as $q
      | ($l[0].study.issues[] | select(.name == $q.name)) as $o
      | select([$q.verdict, $o.verdict] | sort == ["fail", "pass"]) | $q.name] | join(", ")' "$f")
    # With LAB_DOC=1: the time and the verdicts side by side into
    # docs/study.md's block for this guest's memory.
    {
      echo "\`study quick\` (the profile's own trials, as a user types it): ${s:-?} s (goal ≤ ${limit} s); the long run: the same profile with fixed work and 10 trials."
      echo
      echo "| key issue | quick, s | quick | long |"
      echo "|---|---|---|---|"
      jq -r --slurpfile l "$long" '.study.issues[] as $q
        | ($l[0].study.issues[] | select(.name == $q.name)) as $o
        | "| \($q.name) | \($q.seconds // 0 | . * 10 | round / 10) | \($q.verdict | ascii_upcase) | \($o.verdict | ascii_upcase) |"' "$f"
      echo
      echo "Where they differ: ${differ:-nowhere}."
    } >"$d/study.md"
    case $mem in
      64) lab_doc docs/study.md study_board_64 "$mem" "$d/study.md" ;;
      128) lab_doc docs/study.md study_board_128 "$mem" "$d/study.md" ;;
    esac
    if [ -z "$differ" ]; then
      record "  ${mem}M study-verdicts" ok 0 "quick and long agree on every key issue"
    elif [ -z "$contra" ]; then
      record "  ${mem}M study-verdicts" FAIL 0 "differ, none contradicts (one run MARGINAL): $differ"
    else
      record "  ${mem}M study-verdicts" FAIL 0 "contradict: $contra; differ: $differ"
    fi
  fi
  f=$(ls "$d"/results/run-*-study-quick-tmpfs.json 2>/dev/null | head -1)
  if [ -n "$f" ]; then
    echo "tmpfs /data study, ${mem} MiB: key issues that did not run and why:"
    jq -r '.study.issues[] | select(.verdict == "unknown") | "  \(.name): \(.result)"' "$f"
  fi
  if [ -f "$d/results/footprint.out" ]; then
    echo "tunelab's footprint on the ${mem} MiB guest (bench/footprint.sh --verbs):"
    sed 's/^/  /' "$d/results/footprint.out"
    { echo '```'; cat "$d/results/footprint.out"; echo '```'; } >"$d/footprint.md"
    lab_doc docs/board.md footprint "$mem" "$d/footprint.md"
  fi
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
  cp bench/footprint.sh "$d/ext4root/bin/footprint.sh"
  [ -d "$LAB_DIR/wl" ] && cp -r "$LAB_DIR/wl" "$d/ext4root/wl"
  # The long study: the quick profile with its work fixed and 10 trials
  # (the one-trial video stream too: 10 recordings, their misses pooled).
  sed -e 's/, work = "sized"//' -e 's/^trials = [1-9]$/trials = 10/' \
    -e 's/^name = "quick"$/name = "quick-long"/' profiles/quick.toml >"$d/ext4root/bin/quick-long.toml"
  truncate -s 160M "$d/ext4.img" && mkfs.ext4 -q -F -L labext4 -E root_owner=0:0 -d "$d/ext4root" "$d/ext4.img" >/dev/null
  truncate -s 48M "$d/vfat.img" && mkfs.vfat -n LABVFAT "$d/vfat.img" >/dev/null
  truncate -s 32M "$d/results.img"
  # The guest tells the disks apart by size; lab.disks names them from the
  # smallest up: results 32M < exfat 40M < vfat 48M < f2fs 128M < ext4 160M.
  # (f2fs keeps overprovisioning and GC sections: 64M left 16 MiB free.)
  fsmatrix=0 extra=" "
  if [ "$mem" = "${LAB_MEMS%% *}" ] && [ -n "$LAB_FS" ]; then
    fsmatrix=1
    for fs in $LAB_FS; do
      case $fs in
        vfat) continue ;;
        exfat) truncate -s 40M "$d/exfat.img" && mkfs.exfat -L LABEXFAT "$d/exfat.img" >/dev/null 2>&1 ;;
        f2fs) truncate -s 128M "$d/f2fs.img" && mkfs.f2fs -q -f -l labf2fs "$d/f2fs.img" >/dev/null 2>&1 ;;
        *) false ;;
      esac && extra+="$fs " ||
        record "  ${mem}M $fs disk" FAIL 0 "cannot make a $fs image on the host (mkfs.$fs: exfatprogs, f2fs-tools)"
    done
  fi
  # The last (smallest) guest also gets two "flash" disks throttled by
  # qemu to 20 MB/s (a USB stick), ext4 and vfat, a 16 MiB tmpfs target and
  # the width-0 console check: flashvfat 24M < results 32M … flashext4 96M.
  flash=0
  if [ "${LAB_FLASH:-0}" = 1 ] && [ "$mem" = "${LAB_MEMS##* }" ]; then
    flash=1
    truncate -s 24M "$d/flashvfat.img" && mkfs.vfat -n LABFLASHV "$d/flashvfat.img" >/dev/null
    truncate -s 96M "$d/flashext4.img" && mkfs.ext4 -q -F -L labflash "$d/flashext4.img" >/dev/null
  fi
  last=0
  [ "$mem" = "${LAB_MEMS##* }" ] && last=1
  tmpfs=$((last && ${LAB_TMPFS:-1})) footprint=$((last && ${LAB_FOOTPRINT:-1}))
  sim=0
  if [ "${LAB_FLASHSIM:-0}" = 1 ] && [ "$mem" = "${LAB_MEMS##* }" ]; then
    flashsim_start "$d" && sim=1
  fi
  roles=()
  [ $flash = 1 ] && roles+=(flashvfat)
  roles+=(results)
  [[ $extra == *" exfat "* ]] && roles+=(exfat)
  roles+=(vfat)
  [ $flash = 1 ] && roles+=(flashext4)
  [[ $extra == *" f2fs "* ]] && roles+=(f2fs)
  roles+=(ext4)
  # The largest: fakecard 192M < slowcard 224M < card 256M.
  [ $sim = 1 ] && roles+=(fakecard slowcard card)
  disks=()
  i=0
  for img in "${roles[@]}"; do
    throttle=
    case $img in flash*) throttle=",throttling.bps-total=20000000" ;; esac
    file=$d/$img.img
    case $img in
      card) file=nbd://127.0.0.1:$card_port ;;
      slowcard) file=nbd://127.0.0.1:$slow_port ;;
      fakecard) file=nbd://127.0.0.1:$fake_port ;;
    esac
    disks+=(-drive "file=$file,format=raw,if=none,id=d$i$throttle" -device "virtio-blk-device,drive=d$i")
    i=$((i + 1))
  done
  # shellcheck disable=SC2046
  timeout --foreground -k 10 "$LAB_TIMEOUT" $(qemu_base "$mem") "${disks[@]}" \
    -append "console=ttyAMA0 loglevel=4 panic=-1 lab.mode=suite lab.host=lab-a53-${mem}m lab.disks=$(IFS=,; echo "${roles[*]}") lab.fsmatrix=$fsmatrix lab.flash=$flash lab.tmpfs=$tmpfs lab.long=${LAB_LONG:-0} lab.footprint=$footprint lab.only=$lab_only lab.step_timeout=${LAB_STEP_TIMEOUT:-600}" \
    </dev/null >"$d/console.log" 2>&1
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
    elif [ "$rc" = skipped ]; then
      record "  ${mem}M $name" skip 0 "LAB_ONLY"
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
  # The CPU key issue names the emulated cluster by its MIDR core type.
  if [ -f "$d/results/cpu.clock.out" ]; then
    if grep -q "^  note: cluster .*ARM Cortex-A53" "$d/results/cpu.clock.out"; then
      record "  ${mem}M cpu.clock cluster" ok 0 "$(grep -m1 '^  note: cluster' "$d/results/cpu.clock.out" | cut -c15-)"
    else
      record "  ${mem}M cpu.clock cluster" FAIL 0 "no Cortex-A53 cluster in the cpu.clock notes"
    fi
  fi
  # The guest runs as root, so every sched.latency point must have run as
  # SCHED_FIFO: the static musl build once fell back to SCHED_OTHER on
  # every board (musl's sched_setscheduler is an ENOSYS stub), which only
  # this board build can show.
  if [ -f "$d/results/sched.latency.out" ]; then
    if grep -q "not permitted" "$d/results/sched.latency.out" ||
      ! grep -q "^  note: SCHED_FIFO [0-9]* on CPU" "$d/results/sched.latency.out"; then
      record "  ${mem}M sched.latency policy" FAIL 0 "a point ran without SCHED_FIFO as root: $(grep -m1 -E 'SCHED_(FIFO|OTHER)' "$d/results/sched.latency.out" | cut -c1-120)"
    else
      record "  ${mem}M sched.latency policy" ok 0 "$(grep -c '^  note: SCHED_FIFO [0-9]* on CPU' "$d/results/sched.latency.out") points as $(grep -m1 -o 'SCHED_FIFO [0-9]*' "$d/results/sched.latency.out")"
    fi
  fi
  [ $sim = 1 ] && flashsim_check "$d"
  study_checks "$d" "$mem"
  diagnose_table "$d" "$mem"
  # The recorder's write amplification note against the guest's own
  # reading of the block layer around the step: within 2% (issue 40).
  for fs in vfat exfat f2fs; do
    bb=$d/results/$fs-io.stream.blockbytes
    f=$(ls "$d"/results/run-*-"$fs"-io.stream.json 2>/dev/null | head -1)
    [ -f "$bb" ] && [ -n "$f" ] || continue
    want=$(cat "$bb")
    got=$(jq -r '[.results[].notes[] | select(startswith("write amplification"))][0] // ""' "$f" |
      sed -n 's/.*device_bytes=\([0-9]*\).*/\1/p')
    wa=$(jq -r '[.results[].notes[] | select(startswith("write amplification"))][0] // ""' "$f" |
      sed -n 's/^write amplification \([0-9.]*\):.*/\1/p')
    if [ -n "$got" ] && [ "$want" -gt 0 ] &&
      awk -v g="$got" -v w="$want" 'BEGIN{d=(g-w)/w; if (d<0) d=-d; exit !(d <= 0.02)}'; then
      record "  ${mem}M $fs WA" ok 0 "write amplification $wa: device_bytes $got, block layer $want"
    else
      record "  ${mem}M $fs WA" FAIL 0 "device_bytes '${got}' vs the block layer's $want (want within 2%)"
    fi
  done
  if [ $flash = 1 ]; then
    # Width 0: no column squeezed to a letter a line, the names whole.
    w0=$(sed -n '/LAB-GUEST width0-begin/,/LAB-GUEST width0-end/p' "$d/console.log" | tr -d '\r')
    single=$(printf '%s\n' "$w0" | awk '{ t=$0; gsub(/[^[:alnum:]]/, "", t) } length(t) == 1' | wc -l)
    if printf '%s\n' "$w0" | grep -q 'io\.record-size' && printf '%s\n' "$w0" | grep -q 'mem\.latency' &&
      [ "$single" -lt 3 ]; then
      record "  ${mem}M console-width-0" ok 0 "$(printf '%s\n' "$w0" | wc -l) lines"
    else
      record "  ${mem}M console-width-0" FAIL 0 "$single one-letter lines"
      printf '%s\n' "$w0" | head -n 60
    fi
  fi
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

# ---- 7. the fleet: tunelab remote into the guest over SSH ----------------
# Issue 16 item 4: the aarch64 guest is a fleet host. Debian's dropbear-bin
# is dynamically linked: it goes into a second initramfs with the glibc
# libraries it needs (this step only; tunelab itself stays static), the
# guest gets virtio-net behind qemu's user-mode NAT with a hostfwd of
# 127.0.0.1:PORT to its port 22, and the host runs `tunelab remote` with a
# throwaway key, storing the run the guest brings back in host.db.
remote_guest() {
  local t dir sroot port qpid i deb lib need rc
  t=$(date +%s)
  dir=$LAB_DIR/ssh
  rm -rf "$dir" && mkdir -p "$dir"
  for x in ssh ssh-keygen readelf; do
    command -v $x >/dev/null || { record remote-guest FAIL 0 "$x not found on the host (openssh-client, binutils)"; return; }
  done
  sroot=$dir/initramfs
  # virtio_net (with failover, net_failover) only in this step's initramfs.
  add_module virtio_net || { record remote-guest FAIL 0 "module virtio_net is not in $kpkg"; return; }
  cp -a "$root" "$sroot"
  printf '%s\n' "${order[@]}" >"$sroot/lib/modules/order"
  mkdir -p "$dir/pkg"
  for p in dropbear-bin libc6 libcrypt1 libtomcrypt1 libtommath1 libgmp10 zlib1g; do
    deb=$(fetch "$p") || { record remote-guest FAIL 0 "apt-get download $p:arm64 failed"; return; }
    dpkg-deb -x "$deb" "$dir/pkg"
  done
  mkdir -p "$sroot/usr/sbin" "$sroot/lib/aarch64-linux-gnu" "$sroot/etc" "$sroot/root/.ssh"
  cp "$dir/pkg/usr/sbin/dropbear" "$sroot/usr/sbin/"
  # The loader, then every DT_NEEDED library, transitively.
  cp -L "$dir/pkg/usr/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1" "$sroot/lib/ld-linux-aarch64.so.1" 2>/dev/null ||
    cp -L "$dir/pkg/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1" "$sroot/lib/ld-linux-aarch64.so.1" ||
    { record remote-guest FAIL 0 "no ld-linux-aarch64.so.1 in libc6:arm64"; return; }
  need=$(readelf -d "$sroot/usr/sbin/dropbear" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p')
  while [ -n "$need" ]; do
    set -- $need; lib=$1; shift; need="$*"
    [ -f "$sroot/lib/aarch64-linux-gnu/$lib" ] && continue
    f=$(find "$dir/pkg" -name "$lib" | head -1)
    [ -n "$f" ] || { record remote-guest FAIL 0 "library $lib not found in the downloaded packages"; return; }
    cp -L "$f" "$sroot/lib/aarch64-linux-gnu/$lib"
    need="$need $(readelf -d "$sroot/lib/aarch64-linux-gnu/$lib" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p')"
    need=$(echo $need)
  done
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$sroot/etc/passwd"
  printf 'root:x:0:\n' >"$sroot/etc/group"
  printf '/bin/sh\n' >"$sroot/etc/shells"
  ssh-keygen -q -t ed25519 -N '' -C tunelab-lab -f "$dir/id" </dev/null
  cp "$dir/id.pub" "$sroot/root/.ssh/authorized_keys"
  mkcpio "$sroot" "$dir/initramfs.cpio.gz"
  port=$((20000 + RANDOM % 20000))
  # shellcheck disable=SC2046
  $(qemu_base 128 "$dir/initramfs.cpio.gz") \
    -netdev "user,id=n,hostfwd=tcp:127.0.0.1:$port-:22" -device virtio-net-device,netdev=n \
    -append "console=ttyAMA0 loglevel=4 panic=-1 lab.mode=ssh lab.host=lab-a53-ssh" </dev/null >"$dir/console.log" 2>&1 &
  qpid=$!
  i=0
  while ! grep -q "tunelab-lab: sshd ready" "$dir/console.log" && kill -0 $qpid 2>/dev/null && [ $i -lt 600 ]; do
    sleep 0.2; i=$((i + 1))
  done
  if ! grep -q "tunelab-lab: sshd ready" "$dir/console.log"; then
    kill $qpid 2>/dev/null; wait $qpid 2>/dev/null
    record remote-guest FAIL $(($(date +%s) - t)) "the guest's sshd did not come up"
    show_log "$dir/console.log" 60
    return
  fi
  local before after
  before=$("$TUNELAB_HOST" --db "$LAB_DIR/host.db" runs 2>/dev/null | wc -l)
  timeout -k 5 300 "$TUNELAB_HOST" --db "$LAB_DIR/host.db" remote "root@127.0.0.1:$port" \
    --bin "$(dirname "$TUNELAB_AARCH64")" --timeout 240s \
    -o "-i $dir/id" -o "-o StrictHostKeyChecking=no" -o "-o UserKnownHostsFile=/dev/null" -o "-o LogLevel=ERROR" \
    -- run mem.latency -p max=4M --trials 1 --warmup 0 --quiet-check 0 --label "lab remote-guest" \
    >"$dir/remote.out" 2>&1
  rc=$?
  after=$("$TUNELAB_HOST" --db "$LAB_DIR/host.db" runs 2>/dev/null | wc -l)
  kill $qpid 2>/dev/null; wait $qpid 2>/dev/null
  cat "$dir/remote.out"
  if [ $rc = 0 ] && [ "$after" -gt "$before" ]; then
    record remote-guest ok $(($(date +%s) - t)) "tunelab remote root@127.0.0.1:$port (qemu hostfwd to the guest's dropbear): run stored in host.db"
  else
    record remote-guest FAIL $(($(date +%s) - t)) "tunelab remote exit $rc; runs in host.db $before -> $after"
    show_log "$dir/console.log" 60
  fi
}
if [ "$LAB_SSH" = 1 ]; then
  remote_guest
fi

echo
echo "board lab summary ($(($(date +%s) - lab_t0)) s in all; work files in $LAB_DIR)"
printf '%s\n' "${summary[@]}"
exit $failed
