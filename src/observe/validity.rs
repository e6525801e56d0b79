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
//! - a cache drop that failed ([`record_cache_drop_failure`], called by the
//!   experiments' cache control);
//! - a scratch file system with less than max(1 MiB, 1%) free after the trial.
//!
//! Each reading is a handful of small /proc and /sys files (a few tens of
//! microseconds on a board). Readers take the /proc and /sys roots so tests
//! run them on fixture trees.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// Other processes' CPU above this share of one CPU flag a trial (%).
pub const OTHER_CPU_PCT: f64 = 10.0;
/// ... and only when it is at least this many clock ticks (short trials
/// would otherwise be flagged by one tick of rounding).
pub const OTHER_CPU_MIN_TICKS: u64 = 5;
/// Other processes' disk I/O above this rate flags a trial (B/s) ...
pub const OTHER_IO_BPS: f64 = 1048576.0;
/// ... and only when it is at least this many bytes (one journal commit
/// or an atime update is not worth a flag).
pub const OTHER_IO_MIN_BYTES: u64 = 1 << 20;
/// Steal above this share of all CPU time flags a trial (%).
pub const STEAL_PCT: f64 = 2.0;
/// A fixed-frequency governor's clock moving by more than this flags (ratio).
pub const FREQ_CHANGE: f64 = 0.10;
/// Scratch space below max(this, 1% of the file system) flags a trial.
pub const SCRATCH_MIN_FREE: u64 = 1 << 20;

static CACHE_DROP_FAILURES: AtomicU64 = AtomicU64::new(0);

/// Called by an experiment when dropping the page cache did not work as
/// asked (e.g. root's drop_caches write failed); flags the running trial.
pub fn record_cache_drop_failure() {
    CACHE_DROP_FAILURES.fetch_add(1, Ordering::Relaxed);
}

/// One flag: what happened during a trial, in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flag {
    /// `throttle`, `clock`, `thermal`, `steal`, `load`, `disk-io`, `swap`,
    /// `cache-drop` or `scratch-full`.
    pub kind: String,
    pub detail: String,
}

/// What the guard saw around one measured trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialCheck {
    /// Seconds the trial took (wall clock, guard readings excluded).
    pub seconds: f64,
    /// Lowest and highest scaling_cur_freq seen on any CPU (MHz).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq_mhz_min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq_mhz_max: Option<f64>,
    /// Hottest thermal zone (°C).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_c_max: Option<f64>,
    /// Steal time, % of all CPU time during the trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_pct: Option<f64>,
    /// Other processes' CPU, % of one CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_cpu_pct: Option<f64>,
    /// Bytes other processes read from and wrote to the disks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_io_bytes: Option<u64>,
    /// Pages swapped in + out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_pages: Option<u64>,
    /// Free bytes of the scratch file system after the trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch_free: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<Flag>,
}

/// The guard's record of one point: a check per measured trial and the
/// sources this machine does not have. Also says how many measured trials
/// the runner discarded as warm-up (their values are the last entries of
/// each metric's `warmup`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Validity {
    /// Measured trials discarded automatically as warm-up.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub warmup_discarded: usize,
    /// Why (the outlier test that discarded them).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub warmup_reason: String,
    /// One per measured trial in order, discarded warm-up trials first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trials: Vec<TrialCheck>,
    /// Sources not available here, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Validity {
    pub fn is_empty(&self) -> bool {
        *self == Validity::default()
    }

    /// The summarised trials' checks (discarded warm-up trials excluded).
    pub fn kept(&self) -> &[TrialCheck] {
        self.trials
            .get(self.warmup_discarded.min(self.trials.len())..)
            .unwrap_or(&[])
    }

    /// "2 of 5 trials flagged: other processes used up to 85% of a CPU; …"
    /// when any summarised trial is flagged.
    pub fn suspect_summary(&self) -> Option<String> {
        let kept = self.kept();
        let flagged = kept.iter().filter(|t| !t.flags.is_empty()).count();
        if flagged == 0 {
            return None;
        }
        // One line per kind: the first detail seen, with how many trials.
        let mut kinds: Vec<(&str, &str, usize)> = Vec::new();
        for f in kept.iter().flat_map(|t| &t.flags) {
            match kinds.iter_mut().find(|(k, _, _)| *k == f.kind) {
                Some(k) => k.2 += 1,
                None => kinds.push((&f.kind, &f.detail, 1)),
            }
        }
        let what: Vec<String> = kinds
            .iter()
            .map(|(k, d, n)| {
                if *n > 1 {
                    format!("{k} in {n} (e.g. {d})")
                } else {
                    d.to_string()
                }
            })
            .collect();
        Some(format!(
            "{flagged} of {} trials flagged: {}",
            kept.len(),
            what.join("; ")
        ))
    }
}

/// Where /proc and /sys are (fixtures in tests).
#[derive(Debug, Clone)]
pub struct Roots {
    pub proc_: PathBuf,
    pub sys: PathBuf,
    pub pid: u32,
    pub ticks_per_second: u64,
}

impl Roots {
    pub fn system() -> Roots {
        Roots {
            proc_: PathBuf::from("/proc"),
            sys: PathBuf::from("/sys"),
            pid: std::process::id(),
            ticks_per_second: super::hogs::ticks_per_second().max(1),
        }
    }
}

#[derive(Debug, Clone)]
struct CpuFreq {
    cur: PathBuf,
    limit: PathBuf,
}

#[derive(Debug, Clone)]
struct Zone {
    name: String,
    temp: PathBuf,
    /// Lowest passive/hot/critical trip point (m°C).
    trip_mc: Option<i64>,
}

#[derive(Debug, Clone)]
struct Cooling {
    name: String,
    cur: PathBuf,
    max_state: u64,
}

/// One reading of every source.
#[derive(Debug, Clone, Default)]
pub struct Reading {
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
pub struct Guard {
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
    /// Failed cache drops so far (the process-wide counter; tests use their own).
    drops: &'static AtomicU64,
    pub skipped: Vec<String>,
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

impl Guard {
    /// Discover the sources under `roots`; `scratch` is the directory whose
    /// file system is watched for filling up.
    pub fn new(roots: Roots, scratch: Option<&Path>) -> Guard {
        let mut skipped = Vec::new();
        let cpu_dir = roots.sys.join("devices/system/cpu");
        let cpus = numbered(&cpu_dir, "cpu");
        let freqs: Vec<CpuFreq> = cpus
            .iter()
            .map(|(_, d)| d.join("cpufreq"))
            .filter(|d| d.join("scaling_cur_freq").exists())
            .map(|d| CpuFreq {
                cur: d.join("scaling_cur_freq"),
                limit: d.join("scaling_max_freq"),
            })
            .collect();
        let mut fixed_governor = None;
        if freqs.is_empty() {
            skipped.push(
                "CPU clock: no cpufreq/scaling_cur_freq in /sys/devices/system/cpu/cpu* (no \
                 cpufreq driver, or a VM)"
                    .to_string(),
            );
        } else if let Some((_, d)) = cpus.first() {
            let g = std::fs::read_to_string(d.join("cpufreq/scaling_governor")).unwrap_or_default();
            let g = g.trim();
            if matches!(g, "performance" | "powersave" | "userspace") {
                fixed_governor = Some(g.to_string());
            }
        }
        let throttle: Vec<PathBuf> = cpus
            .iter()
            .flat_map(|(_, d)| {
                ["core_throttle_count", "package_throttle_count"]
                    .into_iter()
                    .map(move |f| d.join("thermal_throttle").join(f))
            })
            .filter(|p| p.exists())
            .collect();
        if throttle.is_empty() {
            skipped.push(
                "throttle counters: no /sys/devices/system/cpu/cpu*/thermal_throttle (not exposed \
                 on this CPU)"
                    .to_string(),
            );
        }
        let thermal = roots.sys.join("class/thermal");
        let zones: Vec<Zone> = numbered(&thermal, "thermal_zone")
            .into_iter()
            .filter(|(_, d)| read_i64(&d.join("temp")).is_some())
            .map(|(n, d)| {
                let name = std::fs::read_to_string(d.join("type"))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| format!("thermal_zone{n}"));
                // trip_point_N_type / trip_point_N_temp, N from 0 until
                // a type is missing.
                let mut lowest: Option<i64> = None;
                for k in 0..32 {
                    let ty = match std::fs::read_to_string(d.join(format!("trip_point_{k}_type"))) {
                        Ok(t) => t,
                        Err(_) => break,
                    };
                    if !matches!(ty.trim(), "passive" | "hot" | "critical") {
                        continue;
                    }
                    if let Some(t) = read_i64(&d.join(format!("trip_point_{k}_temp"))) {
                        if t > 0 {
                            lowest = Some(lowest.map_or(t, |l: i64| l.min(t)));
                        }
                    }
                }
                Zone {
                    name,
                    temp: d.join("temp"),
                    trip_mc: lowest,
                }
            })
            .collect();
        if zones.is_empty() {
            skipped.push("thermal: no readable /sys/class/thermal/thermal_zone*/temp".to_string());
        }
        let cooling: Vec<Cooling> = numbered(&thermal, "cooling_device")
            .into_iter()
            .filter_map(|(_, d)| {
                let ty = std::fs::read_to_string(d.join("type")).ok()?;
                let ty = ty.trim().to_string();
                let l = ty.to_lowercase();
                let cpu = l.contains("cpu") || l.contains("processor") || l.contains("powerclamp");
                (cpu && d.join("cur_state").exists()).then(|| Cooling {
                    max_state: read_u64(&d.join("max_state")).unwrap_or(0),
                    name: ty,
                    cur: d.join("cur_state"),
                })
            })
            .collect();
        let children = roots
            .proc_
            .join(format!("{}/task/{}/children", roots.pid, roots.pid))
            .exists();
        if !children {
            skipped.push(
                "other processes' CPU: no /proc/PID/task/TID/children (kernel without \
                 CONFIG_PROC_CHILDREN), our children's CPU cannot be told from others'"
                    .to_string(),
            );
        }
        let disks = hardware_disks(&roots);
        let own_io = proc_io(&roots.proc_, roots.pid).is_some();
        if disks.is_empty() {
            skipped.push(
                "other processes' disk I/O: no whole disk with a /sys/block/NAME/device in \
                 /proc/diskstats"
                    .to_string(),
            );
        } else if !own_io {
            skipped.push(
                "other processes' disk I/O: no /proc/PID/io (kernel without \
                 CONFIG_TASK_IO_ACCOUNTING), our own I/O cannot be told from others'"
                    .to_string(),
            );
        }
        let disks = if own_io { disks } else { Vec::new() };
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
            drops: &CACHE_DROP_FAILURES,
            skipped,
        }
    }

    /// Read every source once. Never fails: a source that cannot be read
    /// this time is left out of this reading.
    pub fn read(&self) -> Reading {
        let proc_ = &self.roots.proc_;
        Reading {
            cpu: std::fs::read_to_string(proc_.join("stat"))
                .ok()
                .and_then(|s| parse_cpu_line(&s)),
            own: self.children.then(|| self.own_ticks()).flatten(),
            disk_bytes: (!self.disks.is_empty())
                .then(|| {
                    let text = std::fs::read_to_string(proc_.join("diskstats")).ok()?;
                    Some(parse_diskstats(&text, &self.disks))
                })
                .flatten(),
            own_io: (!self.disks.is_empty()).then(|| self.own_io()).flatten(),
            swap: std::fs::read_to_string(proc_.join("vmstat"))
                .ok()
                .and_then(|s| parse_swap(&s)),
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

    /// CPU ticks of our process tree: ourselves (all threads), children we
    /// reaped (cutime/cstime), and every live descendant with what it
    /// reaped. A descendant reaped during a trial moves from "live" to our
    /// cutime, so deltas stay right.
    fn own_ticks(&self) -> Option<u64> {
        let mut total = proc_ticks(&self.roots.proc_, self.roots.pid)?;
        let mut todo = children_of(&self.roots.proc_, self.roots.pid);
        let mut seen = 0;
        while let Some(p) = todo.pop() {
            seen += 1;
            if seen > 4096 {
                break;
            }
            total += proc_ticks(&self.roots.proc_, p).unwrap_or(0);
            todo.extend(children_of(&self.roots.proc_, p));
        }
        Some(total)
    }

    /// Disk bytes of our process tree, like [`Self::own_ticks`]: reaped
    /// children's I/O is in our own /proc/PID/io.
    fn own_io(&self) -> Option<u64> {
        let mut total = proc_io(&self.roots.proc_, self.roots.pid)?;
        if self.children {
            let mut todo = children_of(&self.roots.proc_, self.roots.pid);
            let mut seen = 0;
            while let Some(p) = todo.pop() {
                seen += 1;
                if seen > 4096 {
                    break;
                }
                total += proc_io(&self.roots.proc_, p).unwrap_or(0);
                todo.extend(children_of(&self.roots.proc_, p));
            }
        }
        Some(total)
    }

    /// Turn the readings around one trial of `seconds` into a check.
    pub fn check(&self, before: &Reading, after: &Reading, seconds: f64) -> TrialCheck {
        let mut c = TrialCheck {
            seconds,
            ..Default::default()
        };
        let mut flag = |kind: &str, detail: String| {
            c.flags.push(Flag {
                kind: kind.to_string(),
                detail,
            })
        };
        let mhz = |khz: u64| khz as f64 / 1000.0;
        // CPU clock.
        let curs = before.freq.iter().chain(&after.freq).map(|f| f.0);
        let (fmin, fmax) = (curs.clone().min(), curs.max());
        for (i, (b, a)) in before.freq.iter().zip(&after.freq).enumerate() {
            if b.1 != a.1 && b.1 > 0 && a.1 > 0 {
                flag(
                    "throttle",
                    format!(
                        "cpu{i}'s frequency limit moved from {:.0} to {:.0} MHz (thermal or power capping)",
                        mhz(b.1),
                        mhz(a.1)
                    ),
                );
                break;
            }
        }
        if let Some(g) = &self.fixed_governor {
            for (i, (b, a)) in before.freq.iter().zip(&after.freq).enumerate() {
                let (lo, hi) = (b.0.min(a.0) as f64, b.0.max(a.0) as f64);
                if lo > 0.0 && hi / lo - 1.0 > FREQ_CHANGE {
                    flag(
                        "clock",
                        format!(
                            "cpu{i}'s clock moved from {:.0} to {:.0} MHz under the {g} governor",
                            mhz(b.0),
                            mhz(a.0)
                        ),
                    );
                    break;
                }
            }
        }
        // Thermal.
        let mut hottest: Option<i64> = None;
        let mut tripped = None;
        for &(i, t) in before.temps.iter().chain(&after.temps) {
            hottest = Some(hottest.map_or(t, |h| h.max(t)));
            if let Some(trip) = self.zones[i].trip_mc.filter(|trip| t >= *trip) {
                tripped.get_or_insert((i, t, trip));
            }
        }
        if let Some((i, t, trip)) = tripped {
            flag(
                "thermal",
                format!(
                    "{} at {:.1} °C, at or above its {:.1} °C trip point",
                    self.zones[i].name,
                    t as f64 / 1000.0,
                    trip as f64 / 1000.0
                ),
            );
        }
        for (k, cd) in self.cooling.iter().enumerate() {
            let state = after
                .cooling
                .get(k)
                .copied()
                .max(before.cooling.get(k).copied())
                .unwrap_or(0);
            if state > 0 {
                flag(
                    "thermal",
                    format!(
                        "cooling device {} active (state {state} of {}): the CPU is held back",
                        cd.name, cd.max_state
                    ),
                );
                break;
            }
        }
        if let (Some(b), Some(a)) = (before.throttle, after.throttle) {
            if a > b {
                flag(
                    "throttle",
                    format!(
                        "the CPU throttled itself {} times (thermal_throttle counters)",
                        a - b
                    ),
                );
            }
        }
        // Steal and other processes' CPU.
        if let (Some(b), Some(a)) = (before.cpu, after.cpu) {
            let total = a.2.saturating_sub(b.2);
            let steal = a.1.saturating_sub(b.1);
            if total > 0 {
                let pct = steal as f64 * 100.0 / total as f64;
                c.steal_pct = Some(pct);
                if pct > STEAL_PCT && steal >= 2 {
                    flag(
                        "steal",
                        format!("the hypervisor took {pct:.1}% of the CPU time (steal)"),
                    );
                }
            }
            if let (Some(ob), Some(oa)) = (before.own, after.own) {
                let busy = a.0.saturating_sub(b.0);
                let others = busy.saturating_sub(oa.saturating_sub(ob));
                if seconds > 0.0 {
                    let pct =
                        others as f64 * 100.0 / (seconds * self.roots.ticks_per_second as f64);
                    c.other_cpu_pct = Some(pct);
                    if pct > OTHER_CPU_PCT && others >= OTHER_CPU_MIN_TICKS {
                        flag("load", format!("other processes used {pct:.0}% of a CPU"));
                    }
                }
            }
        }
        if let (Some(db), Some(da), Some(ob), Some(oa)) = (
            before.disk_bytes,
            after.disk_bytes,
            before.own_io,
            after.own_io,
        ) {
            let others = da.saturating_sub(db).saturating_sub(oa.saturating_sub(ob));
            c.other_io_bytes = Some(others);
            if seconds > 0.0
                && others >= OTHER_IO_MIN_BYTES
                && others as f64 / seconds > OTHER_IO_BPS
            {
                flag(
                    "disk-io",
                    format!(
                        "other processes read or wrote {:.1} MiB on the disks ({:.1} MiB/s)",
                        others as f64 / 1048576.0,
                        others as f64 / 1048576.0 / seconds
                    ),
                );
            }
        }
        if let (Some(b), Some(a)) = (before.swap, after.swap) {
            let pages = a.saturating_sub(b);
            c.swap_pages = Some(pages);
            if pages > 0 {
                flag("swap", format!("{pages} pages swapped in or out"));
            }
        }
        if after.drops > before.drops {
            flag(
                "cache-drop",
                "dropping the page cache failed: reads may have come from the cache".to_string(),
            );
        }
        if let Some((free, size)) = after.scratch {
            c.scratch_free = Some(free);
            if free < SCRATCH_MIN_FREE.max(size / 100) {
                flag(
                    "scratch-full",
                    format!(
                        "the scratch file system was nearly full after the trial ({} KiB free)",
                        free / 1024
                    ),
                );
            }
        }
        c.freq_mhz_min = fmin.map(mhz);
        c.freq_mhz_max = fmax.map(mhz);
        c.temp_c_max = hottest.map(|t| t as f64 / 1000.0);
        c
    }
}

/// (user+nice+system, steal, sum of all columns) of the `cpu ` line.
fn parse_cpu_line(stat: &str) -> Option<(u64, u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 4 {
        return None;
    }
    // guest and guest_nice (9, 10) are already inside user and nice.
    let total: u64 = v.iter().take(8).sum();
    Some((v[0] + v[1] + v[2], v.get(7).copied().unwrap_or(0), total))
}

/// Whole disks backed by hardware: names in /proc/diskstats with a
/// /sys/block/NAME/device link (partitions are not in /sys/block; loop, dm,
/// md, ram and zram devices have no device link).
fn hardware_disks(roots: &Roots) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(roots.proc_.join("diskstats")) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|n| roots.sys.join("block").join(n).join("device").exists())
        .map(str::to_string)
        .collect()
}

/// Bytes read + written on `disks`: sectors (512 B, whatever the device's
/// block size) read are field 6, written field 10 of /proc/diskstats.
fn parse_diskstats(text: &str, disks: &[String]) -> u64 {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if !disks.iter().any(|d| Some(&d.as_str()) == f.get(2)) {
                return None;
            }
            let read: u64 = f.get(5)?.parse().ok()?;
            let written: u64 = f.get(9)?.parse().ok()?;
            Some((read + written) * 512)
        })
        .sum()
}

/// read_bytes + write_bytes − cancelled_write_bytes of one process (its
/// reaped children included).
fn proc_io(proc_: &Path, pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(proc_.join(format!("{pid}/io"))).ok()?;
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?
            .trim()
            .parse()
            .ok()
    };
    Some(
        (field("read_bytes")? + field("write_bytes")?)
            .saturating_sub(field("cancelled_write_bytes").unwrap_or(0)),
    )
}

/// pswpin + pswpout.
fn parse_swap(vmstat: &str) -> Option<u64> {
    let mut found = false;
    let mut sum = 0;
    for l in vmstat.lines() {
        let mut it = l.split_whitespace();
        if let (Some("pswpin" | "pswpout"), Some(v)) = (it.next(), it.next()) {
            sum += v.parse::<u64>().ok()?;
            found = true;
        }
    }
    found.then_some(sum)
}

/// utime + stime + cutime + cstime of one process.
fn proc_ticks(proc_: &Path, pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(proc_.join(format!("{pid}/stat"))).ok()?;
    // Fields after the command name (which may hold spaces and parens).
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime..cstime are fields 14..17.
    let get = |field: usize| f.get(field - 3)?.parse::<i64>().ok();
    let sum = get(14)? + get(15)? + get(16)? + get(17)?;
    Some(sum.max(0) as u64)
}

/// Child pids of every thread of `pid`.
fn children_of(proc_: &Path, pid: u32) -> Vec<u32> {
    let tasks = proc_.join(format!("{pid}/task"));
    std::fs::read_dir(tasks)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tree(tempfile::TempDir);

    impl Tree {
        fn new() -> Tree {
            Tree(tempfile::tempdir().unwrap())
        }
        fn put(&self, rel: &str, text: &str) -> &Self {
            let p = self.0.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
            self
        }
        /// A guard on this tree with its own cache-drop counter, so tests
        /// running in parallel do not see each other's failures.
        fn guard(&self, scratch: Option<&Path>) -> Guard {
            static QUIET: AtomicU64 = AtomicU64::new(0);
            let mut g = Guard::new(self.roots(), scratch);
            g.drops = &QUIET;
            g
        }
        fn roots(&self) -> Roots {
            Roots {
                proc_: self.0.path().join("proc"),
                sys: self.0.path().join("sys"),
                pid: 100,
                ticks_per_second: 100,
            }
        }
    }

    fn stat_line(pid: u32, utime: u64, stime: u64, cutime: u64, cstime: u64) -> String {
        format!(
            "{pid} (my prog) S 1 {pid} {pid} 0 -1 4194304 0 0 0 0 {utime} {stime} {cutime} {cstime} 20 0 1 0 1 0 0\n"
        )
    }

    fn proc_stat(user: u64, system: u64, idle: u64, steal: u64) -> String {
        format!("cpu  {user} 0 {system} {idle} 0 0 0 {steal} 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n")
    }

    /// A minimal board: /proc without children files, no cpufreq, no thermal.
    #[test]
    fn missing_sources_are_skipped_with_reasons() {
        let t = Tree::new();
        t.put("proc/stat", &proc_stat(100, 50, 1000, 0))
            .put("proc/vmstat", "nr_free_pages 10\n")
            .put("proc/100/stat", &stat_line(100, 1, 1, 0, 0))
            .put("sys/devices/system/cpu/cpu0/online", "1");
        let g = t.guard(None);
        let text = g.skipped.join("\n");
        assert!(text.contains("CPU clock: no cpufreq"), "{text}");
        assert!(text.contains("thermal: no readable"), "{text}");
        assert!(text.contains("throttle counters"), "{text}");
        assert!(text.contains("CONFIG_PROC_CHILDREN"), "{text}");
        assert!(text.contains("disk I/O: no whole disk"), "{text}");
        let r = g.read();
        let c = g.check(&r, &g.read(), 1.0);
        assert!(c.flags.is_empty(), "{:?}", c.flags);
        assert_eq!(c.other_cpu_pct, None);
        assert_eq!(c.swap_pages, None, "no pswpin line: no swap figure");
        assert_eq!(c.freq_mhz_min, None);
    }

    #[test]
    fn other_processes_are_what_our_tree_did_not_use() {
        let t = Tree::new();
        t.put("proc/stat", &proc_stat(1000, 100, 5000, 0))
            .put("proc/vmstat", "pswpin 0\npswpout 0\n")
            .put("proc/100/stat", &stat_line(100, 10, 5, 0, 0))
            .put("proc/100/task/100/children", "200 ")
            .put("proc/100/task/101/children", "")
            .put("proc/200/stat", &stat_line(200, 3, 1, 0, 0))
            .put("proc/200/task/200/children", "");
        let g = t.guard(None);
        assert!(g.skipped.iter().all(|s| !s.contains("CHILDREN")));
        let before = g.read();
        // One second later: the machine did 150 busy ticks; we did 60, our
        // child (reaped meanwhile: now in our cutime) 40 → others 50 ticks
        // = 50% of a CPU.
        t.put("proc/stat", &proc_stat(1120, 130, 5050, 0))
            .put("proc/100/stat", &stat_line(100, 50, 25, 44, 0))
            .put("proc/100/task/100/children", "");
        let after = g.read();
        let c = g.check(&before, &after, 1.0);
        assert_eq!(c.other_cpu_pct.map(|p| p.round()), Some(50.0));
        assert_eq!(c.flags.len(), 1, "{:?}", c.flags);
        assert_eq!(c.flags[0].kind, "load");
        // Without the child's share, the others would have been blamed for it.
        t.put("proc/stat", &proc_stat(1010, 110, 6000, 0));
        let quiet = g.check(&before, &g.read(), 1.0);
        assert!(quiet.flags.is_empty(), "{:?}", quiet.flags);
    }

    fn diskstats(vda_read: u64, vda_written: u64, loop_written: u64) -> String {
        // major minor name reads merged SECTORS_READ ms writes merged SECTORS_WRITTEN ...
        format!(
            " 253 0 vda 100 0 {vda_read} 50 200 0 {vda_written} 80 0 100 130 0 0 0 0\n\
             253 1 vda1 90 0 {vda_read} 40 190 0 {vda_written} 70 0 90 110 0 0 0 0\n\
             7 0 loop0 10 0 0 1 20 0 {loop_written} 2 0 3 3 0 0 0 0\n"
        )
    }

    fn io(read: u64, write: u64, cancelled: u64) -> String {
        format!(
            "rchar: 1\nwchar: 1\nsyscr: 1\nsyscw: 1\nread_bytes: {read}\nwrite_bytes: {write}\n\
             cancelled_write_bytes: {cancelled}\n"
        )
    }

    /// A machine whose disk moved 40 MiB in a 2 s trial of which our tree
    /// (we, and a live child) did 10 MiB: the other 30 MiB are flagged.
    #[test]
    fn other_processes_disk_io_is_flagged() {
        let t = Tree::new();
        t.put("proc/stat", &proc_stat(100, 0, 1000, 0))
            .put("proc/diskstats", &diskstats(1000, 2000, 0))
            .put("sys/block/vda/device/vendor", "0x1af4")
            .put("sys/block/loop0/size", "0")
            .put("proc/100/stat", &stat_line(100, 1, 1, 0, 0))
            .put("proc/100/io", &io(0, 4096, 0))
            .put("proc/100/task/100/children", "200")
            .put("proc/200/stat", &stat_line(200, 1, 1, 0, 0))
            .put("proc/200/io", &io(0, 0, 0))
            .put("proc/200/task/200/children", "");
        let g = t.guard(None);
        assert!(
            g.skipped.iter().all(|s| !s.contains("disk I/O")),
            "{:?}",
            g.skipped
        );
        assert_eq!(
            g.disks,
            ["vda"],
            "partitions and loop devices are not watched"
        );
        let before = g.read();
        let mib_sectors = 2048;
        // vda: +15 MiB read, +25 MiB written (its partition and a loop
        // device moved too: not counted again). We wrote 6 MiB, cancelled
        // 1 MiB of it; our child read 5 MiB.
        t.put(
            "proc/diskstats",
            &diskstats(1000 + 15 * mib_sectors, 2000 + 25 * mib_sectors, 999_999),
        )
        .put("proc/100/io", &io(0, 4096 + (6 << 20), 1 << 20))
        .put("proc/200/io", &io(5 << 20, 0, 0));
        let c = g.check(&before, &g.read(), 2.0);
        assert_eq!(c.other_io_bytes, Some(30 << 20));
        let kinds: Vec<&str> = c.flags.iter().map(|f| f.kind.as_str()).collect();
        assert_eq!(kinds, ["disk-io"], "{:?}", c.flags);
        assert!(c.flags[0].detail.contains("30.0 MiB"), "{:?}", c.flags);
        // The same 30 MiB over 60 s is 0.5 MiB/s: under the threshold.
        let slow = g.check(&before, &g.read(), 60.0);
        assert!(slow.flags.is_empty(), "{:?}", slow.flags);
        // Only our own I/O: nothing to flag.
        t.put(
            "proc/diskstats",
            &diskstats(1000, 2000 + 5 * mib_sectors, 0),
        )
        .put("proc/100/io", &io(0, 4096 + (5 << 20), 0))
        .put("proc/200/io", &io(0, 0, 0));
        let own = g.check(&before, &g.read(), 1.0);
        assert_eq!(own.other_io_bytes, Some(0));
        assert!(own.flags.is_empty(), "{:?}", own.flags);
    }

    #[test]
    fn disk_io_without_io_accounting_is_skipped() {
        let t = Tree::new();
        t.put("proc/diskstats", &diskstats(0, 0, 0))
            .put("sys/block/vda/device/vendor", "x")
            .put("proc/100/stat", &stat_line(100, 1, 1, 0, 0));
        let g = t.guard(None);
        assert!(
            g.skipped
                .iter()
                .any(|s| s.contains("CONFIG_TASK_IO_ACCOUNTING")),
            "{:?}",
            g.skipped
        );
        let c = g.check(&g.read(), &g.read(), 1.0);
        assert_eq!(c.other_io_bytes, None);
    }

    #[test]
    fn steal_and_swap_are_flagged() {
        let t = Tree::new();
        t.put("proc/stat", &proc_stat(100, 0, 1000, 0))
            .put("proc/vmstat", "pswpin 10\npswpout 5\n");
        let g = t.guard(None);
        let before = g.read();
        t.put("proc/stat", &proc_stat(150, 0, 1100, 20))
            .put("proc/vmstat", "pswpin 12\npswpout 9\n");
        let c = g.check(&before, &g.read(), 1.0);
        let kinds: Vec<&str> = c.flags.iter().map(|f| f.kind.as_str()).collect();
        assert_eq!(kinds, ["steal", "swap"]);
        assert_eq!(c.swap_pages, Some(6));
        assert!((c.steal_pct.unwrap() - 20.0 / 170.0 * 100.0).abs() < 1e-9);
    }

    fn board_with_cpufreq(t: &Tree, governor: &str) {
        for cpu in 0..2 {
            let d = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq");
            t.put(&format!("{d}/scaling_cur_freq"), "1200000")
                .put(&format!("{d}/scaling_max_freq"), "1200000")
                .put(&format!("{d}/scaling_governor"), governor);
        }
        t.put("sys/class/thermal/thermal_zone0/type", "cpu-thermal")
            .put("sys/class/thermal/thermal_zone0/temp", "61000")
            .put(
                "sys/class/thermal/thermal_zone0/trip_point_0_type",
                "active",
            )
            .put("sys/class/thermal/thermal_zone0/trip_point_0_temp", "50000")
            .put(
                "sys/class/thermal/thermal_zone0/trip_point_1_type",
                "passive",
            )
            .put("sys/class/thermal/thermal_zone0/trip_point_1_temp", "80000")
            .put(
                "sys/class/thermal/cooling_device0/type",
                "thermal-cpufreq-0",
            )
            .put("sys/class/thermal/cooling_device0/cur_state", "0")
            .put("sys/class/thermal/cooling_device0/max_state", "4")
            .put("sys/class/thermal/cooling_device1/type", "Fan")
            .put("sys/class/thermal/cooling_device1/cur_state", "3");
    }

    #[test]
    fn a_board_heating_up_is_flagged() {
        let t = Tree::new();
        board_with_cpufreq(&t, "schedutil");
        let g = t.guard(None);
        assert!(
            !g.skipped.iter().any(|s| s.contains("thermal:")),
            "{:?}",
            g.skipped
        );
        let before = g.read();
        // Cool and quiet: the active (fan) trip and a running fan do not flag.
        let c = g.check(&before, &g.read(), 1.0);
        assert!(c.flags.is_empty(), "{:?}", c.flags);
        assert_eq!(c.temp_c_max, Some(61.0));
        assert_eq!(c.freq_mhz_max, Some(1200.0));
        // Hot: passive trip reached, cpufreq cooling engaged, limit lowered,
        // clock down (a dynamic governor: only recorded, not a clock flag).
        t.put("sys/class/thermal/thermal_zone0/temp", "81500")
            .put("sys/class/thermal/cooling_device0/cur_state", "2")
            .put(
                "sys/devices/system/cpu/cpu1/cpufreq/scaling_max_freq",
                "800000",
            )
            .put(
                "sys/devices/system/cpu/cpu1/cpufreq/scaling_cur_freq",
                "800000",
            );
        let c = g.check(&before, &g.read(), 1.0);
        let kinds: Vec<&str> = c.flags.iter().map(|f| f.kind.as_str()).collect();
        assert_eq!(kinds, ["throttle", "thermal", "thermal"], "{:?}", c.flags);
        assert!(
            c.flags[1].detail.contains("cpu-thermal at 81.5 °C"),
            "{:?}",
            c.flags
        );
        assert_eq!(
            (c.freq_mhz_min, c.freq_mhz_max),
            (Some(800.0), Some(1200.0))
        );
    }

    #[test]
    fn a_fixed_governor_clock_change_is_flagged() {
        let t = Tree::new();
        board_with_cpufreq(&t, "performance");
        let g = t.guard(None);
        let before = g.read();
        t.put(
            "sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq",
            "1000000",
        );
        let c = g.check(&before, &g.read(), 1.0);
        assert_eq!(c.flags.len(), 1, "{:?}", c.flags);
        assert_eq!(c.flags[0].kind, "clock");
        // 5% is within normal reporting jitter.
        t.put(
            "sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq",
            "1140000",
        );
        assert!(g.check(&before, &g.read(), 1.0).flags.is_empty());
    }

    #[test]
    fn throttle_counters_and_cache_drops() {
        let t = Tree::new();
        t.put(
            "sys/devices/system/cpu/cpu0/thermal_throttle/core_throttle_count",
            "3",
        )
        .put(
            "sys/devices/system/cpu/cpu0/thermal_throttle/package_throttle_count",
            "1",
        );
        let g = Guard::new(t.roots(), None);
        let before = g.read();
        t.put(
            "sys/devices/system/cpu/cpu0/thermal_throttle/package_throttle_count",
            "4",
        );
        record_cache_drop_failure();
        let c = g.check(&before, &g.read(), 1.0);
        let kinds: Vec<&str> = c.flags.iter().map(|f| f.kind.as_str()).collect();
        assert_eq!(kinds, ["throttle", "cache-drop"], "{:?}", c.flags);
        assert!(c.flags[0].detail.contains("3 times"));
    }

    #[test]
    fn scratch_space_is_watched() {
        let t = Tree::new();
        let g = t.guard(Some(t.0.path()));
        let r = g.read();
        let c = g.check(&r, &r, 1.0);
        // A real file system with room to spare: measured, not flagged.
        assert!(c.scratch_free.unwrap() > 0);
        assert!(!c.flags.iter().any(|f| f.kind == "scratch-full"));
        let mut full = r.clone();
        full.scratch = Some((4096, 1 << 30));
        let c = g.check(&r, &full, 1.0);
        assert_eq!(c.flags[0].kind, "scratch-full");
    }

    #[test]
    fn suspect_summary_counts_kept_trials_only() {
        let load = |d: &str| TrialCheck {
            flags: vec![Flag {
                kind: "load".into(),
                detail: d.into(),
            }],
            ..Default::default()
        };
        let mut v = Validity {
            warmup_discarded: 1,
            trials: vec![load("discarded one"), TrialCheck::default(), load("x 40%")],
            ..Default::default()
        };
        assert_eq!(v.suspect_summary().unwrap(), "1 of 2 trials flagged: x 40%");
        v.trials[1] = load("x 20%");
        assert_eq!(
            v.suspect_summary().unwrap(),
            "2 of 2 trials flagged: load in 2 (e.g. x 20%)"
        );
        v.trials = vec![load("only discarded"), TrialCheck::default()];
        assert_eq!(v.suspect_summary(), None);
        let old: Validity = serde_json::from_str("{}").unwrap();
        assert!(old.is_empty());
    }

    #[test]
    fn parsers() {
        assert_eq!(
            parse_cpu_line("cpu  10 2 3 100 5 1 1 7 4 0\n"),
            Some((15, 7, 129))
        );
        assert_eq!(parse_swap("pswpin 3\npswpout 4\n"), Some(7));
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("7")).unwrap();
        std::fs::write(
            d.path().join("7/stat"),
            "7 (a) b) c) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n",
        )
        .unwrap();
        // utime..cstime = fields 14..17 = 11 12 13 14 here.
        assert_eq!(proc_ticks(d.path(), 7), Some(11 + 12 + 13 + 14));
    }

    /// The guard reads twice per trial: on this machine's real /proc and
    /// /sys a reading must stay far below a trial's ~100 ms minimum.
    #[test]
    fn reading_the_real_system_is_cheap() {
        let dir = tempfile::tempdir().unwrap();
        let g = Guard::new(Roots::system(), Some(dir.path()));
        let mut us: Vec<f64> = (0..50)
            .map(|_| {
                let t = std::time::Instant::now();
                std::hint::black_box(g.read());
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        us.sort_by(f64::total_cmp);
        let median = us[us.len() / 2];
        eprintln!(
            "guard reading: median {median:.0} µs, max {:.0} µs",
            us[us.len() - 1]
        );
        assert!(median < 5000.0, "a guard reading took {median:.0} µs");
    }
}
