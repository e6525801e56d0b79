//! The validity guard: what can silently invalidate a trial, read before and
//! after it (never inside the timed region) and turned into flags.
//!
//! Sources, each skipped with its reason when the machine lacks it:
//!
//! - CPU clock: `cpufreq/scaling_cur_freq` of every CPU (min/max recorded),
//!   `scaling_max_freq` (a limit that moves during a trial is thermal or
//!   power capping); with a fixed-frequency governor (performance,
//!   powersave, userspace) a clock that moves by more than 10% is flagged;
//!   with a dynamic governor clock changes are the governor's normal work and
//!   only recorded;
//! - thermal: every zone's temperature against its lowest passive/hot/
//!   critical trip point, CPU cooling devices in a non-zero state, and the
//!   x86 `thermal_throttle/*_throttle_count` counters;
//! - steal time (`/proc/stat` steal) above 2% of the machine's CPU time;
//! - other processes' CPU use: `/proc/stat` user+nice+system minus our own
//!   process tree (ourselves, reaped children via cutime/cstime, and live
//!   descendants via `/proc/PID/task/TID/children`) above 10% of one CPU
//!   (the quietness check's per-process threshold); kernel threads working
//!   for us (writeback) count as others;
//! - other processes' disk I/O: bytes read and written on the machine's
//!   disks (`/proc/diskstats`, whole hardware disks only — those with a
//!   `/sys/block/NAME/device` — so partitions, loop, dm and md devices
//!   stacked on them are not counted twice) minus our process tree's own
//!   (`/proc/PID/io` read_bytes + write_bytes − cancelled_write_bytes of
//!   ourselves, which includes reaped children, and of live descendants)
//!   above 1 MiB/s and 1 MiB; writeback of pages dirtied before the trial
//!   and I/O a kernel loop worker does for our loop devices count as others
//!   (they disturb the trial just the same);
//! - swap: `pswpin`/`pswpout` in `/proc/vmstat` moved;
//! - a cache drop that failed (counted in the context's [`CacheDrops`] by
//!   the experiments' cache control);
//! - a scratch file system with less than max(1 MiB, 1%) free after the trial.
//!
//! Each reading is a handful of small /proc and /sys files (a few tens of
//! microseconds on a board). Readers take a `proc::Root` and the /sys root
//! so tests run them on fixture trees.
//!
//! The guard itself (discovery, `read`, `check`) and the records it keeps
//! are here; each source's discovery, parsing and flagging lives in its own
//! file: `clock` (cpufreq), `thermal` (zones, cooling devices, throttle
//! counters), `cpu_time` (steal and other processes' CPU from /proc/stat
//! and our process tree), `disk` (/proc/diskstats against /proc/PID/io),
//! `swap` (/proc/vmstat); `record` holds the serialised records.

mod clock;
mod cpu_time;
mod disk;
mod record;
mod swap;
#[cfg(test)]
mod tests;
mod thermal;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::system::proc;
use clock::CpuFreq;
pub use record::{Flag, TrialCheck, Validity};
use thermal::{Cooling, Zone};

/// Other processes' CPU above this share of one CPU flag a trial (%).
pub(crate) const OTHER_CPU_PCT: f64 = 10.0;
/// ... and only when it is at least this many clock ticks (short trials
/// would otherwise be flagged by one tick of rounding).
pub(crate) const OTHER_CPU_MIN_TICKS: u64 = 5;
/// Other processes' disk I/O above this rate flags a trial (B/s) ...
pub(crate) const OTHER_IO_BPS: f64 = 1048576.0;
/// ... and only when it is at least this many bytes (one journal commit
/// or an atime update is not worth a flag).
pub(crate) const OTHER_IO_MIN_BYTES: u64 = 1 << 20;
/// Steal above this share of all CPU time flags a trial (%).
pub(crate) const STEAL_PCT: f64 = 2.0;
/// A fixed-frequency governor's clock moving by more than this flags (ratio).
pub(crate) const FREQ_CHANGE: f64 = 0.10;
/// Scratch space below max(this, 1% of the file system) flags a trial.
pub(crate) const SCRATCH_MIN_FREE: u64 = 1 << 20;

/// Failed cache drops of one measurement context, counted by the
/// experiment (when root's drop_caches write did not work as asked) and
/// read by its guard, which flags the running trial: a value handed down
/// through `Ctx`, not a process-wide counter.
pub(crate) type CacheDrops = std::sync::Arc<AtomicU64>;

/// Where /proc and /sys are (fixtures in tests).
#[derive(Debug, Clone)]
pub(crate) struct Roots {
    pub(crate) proc_: proc::Root,
    pub(crate) sys: PathBuf,
    pub(crate) pid: u32,
    pub(crate) ticks_per_second: u64,
}

impl Roots {
    pub(crate) fn system() -> Roots {
        Roots {
            proc_: proc::Root::live(),
            sys: PathBuf::from("/sys"),
            pid: std::process::id(),
            ticks_per_second: super::hogs::ticks_per_second().max(1),
        }
    }
}

/// One reading of every source.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reading {
    /// (user+nice+system, steal, all columns) ticks.
    cpu: Option<(u64, u64, u64)>,
    own: Option<u64>,
    /// Bytes read + written on the watched disks, and by our tree.
    disk_bytes: Option<u64>,
    own_io: Option<u64>,
    swap: Option<u64>,
    /// (cur kHz, limit kHz) per CPU.
    freq: Vec<(u64, u64)>,
    /// (zone index, m°C).
    temps: Vec<(usize, i64)>,
    cooling: Vec<u64>,
    throttle: Option<u64>,
    scratch: Option<(u64, u64)>,
    drops: u64,
}

/// The guard for one point: sources discovered once, then `read` before
/// and after each trial and `check` the pair.
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    roots: Roots,
    freqs: Vec<CpuFreq>,
    fixed_governor: Option<String>,
    zones: Vec<Zone>,
    cooling: Vec<Cooling>,
    throttle: Vec<PathBuf>,
    children: bool,
    /// Whole hardware disks of /proc/diskstats (empty: not watched).
    disks: Vec<String>,
    scratch: Option<PathBuf>,
    /// Failed cache drops so far, in the context this guard watches.
    drops: CacheDrops,
    pub(crate) skipped: Vec<String>,
}

fn read_u64(p: &Path) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

fn read_i64(p: &Path) -> Option<i64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// Directory entries named `prefix<N>`, sorted by N.
fn numbered(dir: &Path, prefix: &str) -> Vec<(u32, PathBuf)> {
    let mut v: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let n = name.strip_prefix(prefix)?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    v.sort();
    v
}

/// Add one flag to a trial's check.
fn flag(c: &mut TrialCheck, kind: &str, detail: String) {
    c.flags.push(Flag {
        kind: kind.to_string(),
        detail,
    })
}

impl Guard {
    /// Discover the sources under `roots`; `scratch` is the directory whose
    /// file system is watched for filling up, `drops` the context's count of
    /// failed cache drops.
    pub(crate) fn new(roots: Roots, scratch: Option<&Path>, drops: CacheDrops) -> Guard {
        let mut skipped = Vec::new();
        let cpu_dir = roots.sys.join("devices/system/cpu");
        let cpus = numbered(&cpu_dir, "cpu");
        let (freqs, fixed_governor) = clock::discover(&cpus, &mut skipped);
        let throttle = thermal::throttle_counters(&cpus, &mut skipped);
        let (zones, cooling) = thermal::discover(&roots, &mut skipped);
        let children = cpu_time::discover(&roots, &mut skipped);
        let disks = disk::discover(&roots, &mut skipped);
        Guard {
            roots,
            freqs,
            fixed_governor,
            zones,
            cooling,
            throttle,
            children,
            disks,
            scratch: scratch.map(Path::to_path_buf),
            drops,
            skipped,
        }
    }

    /// Read every source once. Never fails: a source that cannot be read
    /// this time is left out of this reading.
    pub(crate) fn read(&self) -> Reading {
        let proc_ = &self.roots.proc_;
        Reading {
            cpu: proc_
                .read("stat")
                .ok()
                .and_then(|s| cpu_time::parse_cpu_line(&s)),
            own: self.children.then(|| self.own_ticks()).flatten(),
            disk_bytes: (!self.disks.is_empty())
                .then(|| {
                    let text = proc_.read("diskstats").ok()?;
                    Some(disk::parse_diskstats(&text, &self.disks))
                })
                .flatten(),
            own_io: (!self.disks.is_empty()).then(|| self.own_io()).flatten(),
            swap: proc_.read("vmstat").ok().and_then(|s| swap::parse_swap(&s)),
            freq: self
                .freqs
                .iter()
                .filter_map(|f| Some((read_u64(&f.cur)?, read_u64(&f.limit).unwrap_or(0))))
                .collect(),
            temps: self
                .zones
                .iter()
                .enumerate()
                .filter_map(|(i, z)| Some((i, read_i64(&z.temp)?)))
                .collect(),
            cooling: self
                .cooling
                .iter()
                .map(|c| read_u64(&c.cur).unwrap_or(0))
                .collect(),
            throttle: (!self.throttle.is_empty())
                .then(|| self.throttle.iter().filter_map(|p| read_u64(p)).sum()),
            scratch: self.scratch.as_deref().and_then(|d| {
                let s = rustix::fs::statvfs(d).ok()?;
                Some((s.f_bavail * s.f_frsize, s.f_blocks * s.f_frsize))
            }),
            drops: self.drops.load(Ordering::Relaxed),
        }
    }

    /// Turn the readings around one trial of `seconds` into a check; each
    /// source adds its figures and flags in this order.
    pub(crate) fn check(&self, before: &Reading, after: &Reading, seconds: f64) -> TrialCheck {
        let mut c = TrialCheck {
            seconds,
            ..Default::default()
        };
        let (fmin, fmax) = self.check_clock(before, after, &mut c);
        let hottest = self.check_thermal(before, after, &mut c);
        self.check_cpu_time(before, after, seconds, &mut c);
        self.check_disk(before, after, seconds, &mut c);
        swap::check(before, after, &mut c);
        if after.drops > before.drops {
            flag(
                &mut c,
                "cache-drop",
                "dropping the page cache failed: reads may have come from the cache".to_string(),
            );
        }
        if let Some((free, size)) = after.scratch {
            c.scratch_free = Some(free);
            if free < SCRATCH_MIN_FREE.max(size / 100) {
                flag(
                    &mut c,
                    "scratch-full",
                    format!(
                        "the scratch file system was nearly full after the trial ({} KiB free)",
                        free / 1024
                    ),
                );
            }
        }
        c.freq_mhz_min = fmin.map(clock::mhz);
        c.freq_mhz_max = fmax.map(clock::mhz);
        c.temp_c_max = hottest.map(|t| t as f64 / 1000.0);
        c
    }
}
