//! Rules on a stored diagnosis (`tunelab diagnose`): kernel-bound CPU time
//! with heavy context switching, SLUB slow paths (from the profile or
//! CONFIG_SLUB_STATS), a hot kernel lock, a dominant cause of blocking.

use super::{finding, Evidence, Finding, Outcome, Severity, Workload};
use crate::model::diagnosis::{Diagnosis, OffCpuCause, SlabCache};
use crate::units::{human, seconds, si, sig};

/// System time above this share of busy CPU time makes a run kernel-bound.
const KERNEL_BOUND_PCT: f64 = 50.0;
/// The CPUs must be at least this busy for time in the kernel to matter.
const BUSY_PCT: f64 = 50.0;
/// A cache's allocations take the slow path too often below this fast share.
const LOW_FAST_PCT: f64 = 70.0;
/// Profile share in SLUB's slow paths worth a finding.
const SLAB_PROFILE_PCT: f64 = 10.0;
/// Allocations + frees per second that make a cache busy.
const BUSY_CACHE_PER_S: f64 = 10_000.0;

/// SLUB's slow-path functions, as they appear in a kernel profile.
const SLUB_SLOW: &[&str] = &[
    "___slab_alloc",
    "__slab_alloc",
    "__slab_free",
    "get_partial_node",
    "add_partial",
    "remove_partial",
    "put_cpu_partial",
    "deactivate_slab",
    "new_slab",
    "allocate_slab",
    "discard_slab",
    "__put_partials",
    "get_partial_node.part.0",
];

fn diag(ev: &Evidence) -> Option<(&str, &Diagnosis)> {
    ev.diagnosis.as_ref().map(|(id, d)| (id.as_str(), d))
}

/// The diagnosis and its workload's own figures; None for a whole-machine
/// diagnosis or none at all (every rule about the workload starts here).
fn own(ev: &Evidence) -> Option<(&str, &Diagnosis, WorkView<'_>)> {
    let (id, d) = diag(ev)?;
    Some((id, d, WorkView::of(d)?))
}

fn cpu_figures(d: &Diagnosis) -> Option<(f64, f64, f64)> {
    let cpu = d.resources.data()?.row("cpu")?;
    Some((
        cpu.figure("busy")?,
        cpu.figure("system")?,
        cpu.figure("context switches").unwrap_or(0.0),
    ))
}

/// Share of profile samples in SLUB's slow paths, and the top such symbol.
fn slub_share(d: &Diagnosis) -> Option<(f64, String)> {
    let p = d.profile.data()?;
    let mut share = 0.0;
    let mut top: Option<(f64, String)> = None;
    for s in &p.symbols {
        let name = s.symbol.split('+').next().unwrap_or(&s.symbol);
        if SLUB_SLOW.contains(&name) {
            share += s.percent;
            if top.as_ref().is_none_or(|t| s.percent > t.0) {
                top = Some((s.percent, name.to_string()));
            }
        }
    }
    Some((share, top?.1))
}

fn busiest_cache(d: &Diagnosis) -> Option<&SlabCache> {
    d.slab.data()?.caches.first()
}

fn slub_min_objects(d: &Diagnosis) -> u32 {
    (2 * d.cpus.max(1)).next_power_of_two().max(4)
}

pub(super) fn kernel_bound(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d)) = diag(ev) else {
        return Outcome::Fine;
    };
    if let Some(w) = WorkView::of(d) {
        return workload_kernel_bound(id, d, &w);
    }
    // The whole machine: the USE table (tunelab's own CPU time left out).
    let Some((busy, sys, cs)) = cpu_figures(d) else {
        return Outcome::Fine;
    };
    let cs_per_cpu = cs / d.cpus.max(1) as f64;
    if d.target.kind != "system" || busy < BUSY_PCT || sys / busy * 100.0 < KERNEL_BOUND_PCT {
        return Outcome::Fine;
    }
    finding(Finding {
        id: "diagnose.kernel-bound",
        severity: Severity::Warning,
        title: format!(
            "the machine spends its CPU in the kernel: {}% system of {}% busy, {} context switches/s",
            sig(sys),
            sig(busy),
            si(cs)
        ),
        evidence: vec![format!(
            "diagnosis {id}: USE table over {} ({} CPUs, tunelab's own CPU time left out): CPU busy {}%, system {}%, {}/s \
             context switches ({}/s per CPU)",
            seconds(d.interval_s),
            d.cpus,
            sig(busy),
            sig(sys),
            si(cs),
            si(cs_per_cpu)
        )],
        why: "When most busy CPU time is system time, the work is syscalls, wake-ups and kernel allocations rather than \
              the programs' own code: the kernel paths in the profile and the slab table say \
              which, and `tunelab diagnose --pid PID` on the busiest process says whose."
            .into(),
        command: "diagnose the busiest process on its own: tunelab diagnose --pid PID --for 10s"
            .into(),
        risk: "None (a reading).".into(),
        verify: "tunelab diagnose --for 10s".into(),
    })
}

pub(super) fn slab_slow_path(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d)) = diag(ev) else {
        return Outcome::Fine;
    };
    let Some(cache) = busiest_cache(d) else {
        return Outcome::Fine;
    };
    let profile = slub_share(d);
    let stats_slow = cache.alloc_fast_pct.is_some_and(|f| f < LOW_FAST_PCT);
    let profile_slow = profile
        .as_ref()
        .is_some_and(|(s, _)| *s >= SLAB_PROFILE_PCT);
    let sys = cpu_figures(d).map(|c| c.1).unwrap_or(0.0);
    let busy_cache = cache.churn_per_s >= BUSY_CACHE_PER_S;
    let churn_in_kernel = busy_cache && sys >= KERNEL_BOUND_PCT / 2.0;
    // Slab counters are machine-wide: for a process or command only its own
    // profile (its samples in SLUB's slow paths) shows it causes the churn.
    let scoped = d.target.kind != "system";
    if scoped && !profile_slow {
        return Outcome::Fine;
    }
    if !(stats_slow || profile_slow || churn_in_kernel) {
        return Outcome::Fine;
    }
    let n = slub_min_objects(d);
    let mut evidence = vec![format!(
        "diagnosis {id}: busiest slab cache {} ({} B objects): {} allocations and {} frees in {} \
         ({}/s){}",
        cache.name,
        cache.obj_size,
        cache.allocs,
        cache.frees,
        seconds(d.interval_s),
        si(cache.churn_per_s),
        match (cache.alloc_fast_pct, cache.free_fast_pct) {
            (Some(a), Some(f)) => format!(
                ", {a:.0}% of allocations and {f:.0}% of frees on the fast path (SLUB_STATS)"
            ),
            _ => " (net object changes from /proc/slabinfo: a lower bound)".into(),
        }
    )];
    if let Some((share, top)) = &profile {
        evidence.push(format!(
            "CPU profile: {}% of samples in SLUB slow paths (top: {top})",
            sig(*share)
        ));
    }
    if sys > 0.0 {
        evidence.push(format!("CPU system time {}%", sig(sys)));
    }
    let confirmed = stats_slow || profile_slow;
    let cache_dir = cache.name.split(',').next().unwrap_or(&cache.name);
    finding(Finding {
        id: "diagnose.slab-slow-path",
        severity: if confirmed {
            Severity::Warning
        } else {
            Severity::Info
        },
        title: if confirmed {
            format!(
                "SLUB slow paths for {}: allocations miss the per-CPU slabs",
                cache.name
            )
        } else {
            format!(
                "heavy slab churn in {} alongside kernel time; the slow-path share is not \
                 measured here",
                cache.name
            )
        },
        evidence,
        why: "SLUB serves allocations from a per-CPU slab; when it runs dry the slow path takes \
              the node's list_lock to find a partial slab, which under a storm of small \
              allocations (sockets, messages) becomes the bottleneck. Larger slabs \
              (slub_min_objects) and more per-CPU partial slabs (cpu_partial) keep more \
              allocations on the fast path."
            .into(),
        command: format!(
            "boot parameter slub_min_objects={n} (2×CPUs, power of two); live, per cache: echo \
             <N> > /sys/kernel/slab/{cache_dir}/cpu_partial (tune cannot sweep this file yet)"
        ),
        risk: "Larger and more partial slabs hold more memory per CPU (a few hundred KiB per \
               busy cache); on a 64 MiB board check MemAvailable after the change."
            .into(),
        verify: format!(
            "tunelab diagnose -- {}  (after the change: compare time and the slab table){}",
            if d.target.command.is_empty() {
                "CMD".to_string()
            } else {
                d.target.command.join(" ")
            },
            if confirmed {
                ""
            } else {
                "; a kernel with CONFIG_SLUB_STATS, or the CPU profile, shows the fast-path share"
            }
        ),
    })
}

pub(super) fn hot_lock(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d)) = diag(ev) else {
        return Outcome::Fine;
    };
    let Some(top) = d.locks.data().and_then(|l| l.locks.first()) else {
        return Outcome::Fine;
    };
    let wait_s = top.wait_total_us * 1e-6;
    let cpu_s = d.interval_s * d.cpus.max(1) as f64;
    if top.contentions < 1000 || wait_s < 0.01 * cpu_s {
        return Outcome::Fine;
    }
    // lock_stat is machine-wide: a process's finding needs its own samples
    // in the kernel's lock slow paths.
    if d.target.kind != "system"
        && profile_share(d, |f| KERNEL_LOCK_SLOW.iter().any(|k| f.starts_with(k))) < 5.0
    {
        return Outcome::Fine;
    }
    finding(Finding {
        id: "diagnose.hot-lock",
        severity: Severity::Warning,
        title: format!(
            "kernel lock {} is contended: {} waits totalling {}",
            top.class,
            top.contentions,
            seconds(wait_s)
        ),
        evidence: vec![format!(
            "diagnosis {id}: /proc/lock_stat over {}: {} contentions of {} acquisitions, wait max \
             {}, total {} ({}% of all CPU time); waited at {}",
            seconds(d.interval_s),
            top.contentions,
            top.acquisitions,
            seconds(top.wait_max_us * 1e-6),
            seconds(wait_s),
            sig(wait_s / cpu_s * 100.0),
            top.contention_points
                .iter()
                .take(2)
                .map(|(n, s)| format!("{s} ({n})"))
                .collect::<Vec<_>>()
                .join(", ")
        )],
        why: "Time waiting for a kernel lock is CPU time (spinlocks) or latency (mutexes) the \
              workload does not get; the call sites say which subsystem serialises it."
            .into(),
        command: "spread the work over independent objects (files, sockets, processes) so they \
                  stop sharing the lock; if the call sites are SLUB's (get_partial_node, \
                  __slab_free), see the slab finding"
            .into(),
        risk: "Restructuring changes the application; measure before and after.".into(),
        verify: "tunelab diagnose -- CMD (compare the lock table)".into(),
    })
}

// ------------------------------------------------------------ the workload's own findings
//
// Every rule below reads the diagnosed workload's own figures (its process
// tree: `Diagnosis::workload`, its off-CPU causes, its profile), never the
// machine-wide tables alone, and fires only past a stated share of the
// workload's time. Thresholds and their reasons: docs/diagnose-findings.md.

/// CPU-bound: on-CPU time at least this share of the workload's active thread time.
pub const CPU_BOUND_PCT: f64 = 50.0;
/// A hot spot: one user-space function holds at least this share of the samples.
pub const HOTSPOT_PCT: f64 = 20.0;
/// User-space code must hold at least this share of the samples for a hot spot.
pub const USER_SHARE_PCT: f64 = 50.0;
/// Lock waits worth a finding, share of active thread time.
pub const LOCK_PCT: f64 = 10.0;
/// Synchronous storage waits worth a finding, share of active thread time.
pub const STORAGE_PCT: f64 = 20.0;
/// Timer sleeps that set the pace, share of active thread time.
pub const SLEEP_PCT: f64 = 50.0;
/// Minor faults per second that make page-fault churn.
pub const FAULTS_PER_S: f64 = 10_000.0;
/// Profile share in the page-fault path (inclusive) that makes it the cost.
pub const FAULT_PROFILE_PCT: f64 = 20.0;
/// Read/write calls per second, and bytes per call below which they are small.
pub const SMALL_IO_CALLS_PER_S: f64 = 5_000.0;
pub const SMALL_IO_BYTES: f64 = 4096.0;
/// Own system time share of own CPU time that makes a workload kernel-bound.
pub const OWN_SYSTEM_PCT: f64 = 50.0;
/// Run-queue wait worth a finding: share of (on-CPU + run-queue) time, and of active time.
pub const STARVED_PCT: f64 = 25.0;
pub const STARVED_ACTIVE_PCT: f64 = 10.0;
/// Memory-pressure waits (reclaim, major faults), share of active thread time.
pub const MEMORY_WAIT_PCT: f64 = 10.0;
pub const MAJOR_FAULTS_PER_S: f64 = 50.0;
/// One other cause of blocking that dominates, share of active thread time.
pub const DOMINANT_WAIT_PCT: f64 = 50.0;
/// One process of several with the same name is judged on its own time
/// when it holds at least this share of the workload's active time.
pub const SIGNIFICANT_PROCESS_PCT: f64 = 10.0;

/// The kernel's lock slow paths, as they appear in a profile.
const KERNEL_LOCK_SLOW: &[&str] = &[
    "native_queued_spin_lock_slowpath",
    "queued_spin_lock_slowpath",
    "__mutex_lock",
    "rwsem_down_",
    "osq_lock",
];

/// The page-fault path, inclusive.
const FAULT_PATH: &[&str] = &[
    "asm_exc_page_fault",
    "exc_page_fault",
    "do_user_addr_fault",
    "handle_mm_fault",
    "clear_page_erms",
    "clear_page_rep",
    "clear_page_orig",
    "clear_page",
];

/// The workload's figures in one place.
struct WorkView<'a> {
    d: &'a Diagnosis,
    cpu_s: f64,
    user_s: f64,
    sys_s: f64,
    runq_s: f64,
    /// Blocked time (off-CPU causes), s; 0 without the section.
    blocked_s: f64,
    /// Blocked waiting for its own threads or children (not a bottleneck).
    join_s: f64,
    threads: u32,
    minflt: u64,
    majflt: u64,
    calls: u64,
    bytes: u64,
    write_bytes: u64,
    off_source: String,
}

impl<'a> WorkView<'a> {
    fn of(d: &'a Diagnosis) -> Option<WorkView<'a>> {
        let w = d.workload.data()?;
        let t = &w.total;
        let off = d.offcpu.data();
        let class_s = |c: &str| {
            off.map_or(0.0, |o| {
                o.causes
                    .iter()
                    .filter(|x| x.class == c)
                    .map(|x| x.total_s)
                    .sum()
            })
        };
        Some(WorkView {
            d,
            cpu_s: t.cpu_s(),
            user_s: t.user_s,
            sys_s: t.system_s,
            // With switch events a wait runs from switch out to switch in,
            // so it includes the wake-up delay; run-queue time is then only
            // the preemptions, and nothing is counted twice.
            runq_s: off
                .filter(|o| o.source == "sched switch events")
                .map_or(t.runqueue_s, |o| o.runqueue_s),
            blocked_s: off.map_or(0.0, |o| o.blocked_s),
            join_s: class_s("join"),
            threads: t.threads,
            minflt: t.minor_faults,
            majflt: t.major_faults,
            calls: t.syscr + t.syscw,
            bytes: t.rchar + t.wchar,
            write_bytes: t.write_bytes,
            off_source: off.map(|o| o.source.clone()).unwrap_or_default(),
        })
    }

    /// Thread time that could have done work: on CPU, waiting for one, or
    /// blocked on anything but its own threads and children.
    fn active_s(&self) -> f64 {
        (self.cpu_s + self.runq_s + self.blocked_s - self.join_s).max(1e-9)
    }

    fn pct_of_active(&self, s: f64) -> f64 {
        s / self.active_s() * 100.0
    }

    fn per_s(&self, n: u64) -> f64 {
        n as f64 / self.d.interval_s.max(1e-9)
    }

    fn words(&self) -> String {
        format!(
            "the workload's own figures over {}: {} CPU ({} user, {} system), {} waiting for a CPU, \
             {} blocked ({} of it waiting for its own threads/children), {} threads",
            seconds(self.d.interval_s),
            seconds(self.cpu_s),
            seconds(self.user_s),
            seconds(self.sys_s),
            seconds(self.runq_s),
            seconds(self.blocked_s),
            seconds(self.join_s),
            self.threads
        )
    }

    /// The process (by name) where these classes of waits take the largest
    /// share of its active time: (share %, process name, seconds). Shares
    /// are per process so a pipeline's reader and writer are judged each on
    /// its own time.
    fn class_share(&self, classes: &[&str]) -> (f64, String, f64) {
        let Some(o) = self.d.offcpu.data() else {
            return (0.0, String::new(), 0.0);
        };
        let sum = |comm: Option<&str>, cl: &[&str]| -> f64 {
            o.causes
                .iter()
                .filter(|c| comm.is_none_or(|n| c.comm == n) && cl.contains(&c.class.as_str()))
                .map(|c| c.total_s)
                .sum()
        };
        if o.by_process.is_empty() {
            let w = sum(None, classes);
            return (self.pct_of_active(w), String::new(), w);
        }
        let rows = self
            .d
            .workload
            .data()
            .map(|w| w.rows.as_slice())
            .unwrap_or(&[]);
        // Per process name (same-named workers summed): blocked and
        // run-queue time of every process of that name.
        let mut names: Vec<(&str, f64, f64, usize)> = Vec::new();
        for p in &o.by_process {
            match names.iter_mut().find(|n| n.0 == p.comm) {
                Some(n) => {
                    n.1 += p.blocked_s;
                    n.2 += p.runqueue_s;
                    n.3 += 1;
                }
                None => names.push((&p.comm, p.blocked_s, p.runqueue_s, 1)),
            }
        }
        let mut best = (0.0, String::new(), 0.0);
        for (comm, blocked, runq, _) in &names {
            let wait = sum(Some(comm), classes);
            if wait <= 0.0 {
                continue;
            }
            let own = rows.iter().filter(|r| r.comm == *comm);
            let cpu: f64 = own.clone().map(|r| r.cpu_s()).sum();
            let rq = if o.source == "sched switch events" {
                *runq
            } else {
                runq.max(own.map(|r| r.runqueue_s).sum())
            };
            let active = (cpu + rq + blocked - sum(Some(comm), &["join"])).max(1e-9);
            let pct = wait / active * 100.0;
            if pct > best.0 {
                best = (pct, comm.to_string(), wait);
            }
        }
        // Same-named processes (a reader and the writer it forked) are
        // also judged each on its own time, when it is a stated share of
        // the workload's.
        let class_s = |p: &crate::model::diagnosis::ProcessWaits, cl: &[&str]| -> f64 {
            p.classes
                .iter()
                .filter(|c| cl.contains(&c.0.as_str()))
                .map(|c| c.1)
                .sum()
        };
        for p in o.by_process.iter().filter(|p| p.pid != 0) {
            if names.iter().any(|n| n.0 == p.comm && n.3 < 2) {
                continue;
            }
            let wait = class_s(p, classes);
            let active =
                (p.thread_time_s.max(p.blocked_s + p.runqueue_s) - class_s(p, &["join"])).max(1e-9);
            if wait <= 0.0 || active < self.active_s() * SIGNIFICANT_PROCESS_PCT / 100.0 {
                continue;
            }
            let pct = wait / active * 100.0;
            if pct > best.0 {
                best = (pct, p.comm.clone(), wait);
            }
        }
        best
    }

    fn causes_of(&self, classes: &[&str], comm: &str) -> Vec<&'a OffCpuCause> {
        self.d
            .offcpu
            .data()
            .map(|o| {
                o.causes
                    .iter()
                    .filter(|c| {
                        classes.contains(&c.class.as_str()) && (comm.is_empty() || c.comm == comm)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn causes(&self, class: &str) -> Vec<&'a OffCpuCause> {
        self.d
            .offcpu
            .data()
            .map(|o| o.causes.iter().filter(|c| c.class == class).collect())
            .unwrap_or_default()
    }
}

fn cmd(d: &Diagnosis) -> String {
    if d.target.command.is_empty() {
        match d.target.pid {
            Some(p) if d.target.kind == "pid" => format!("--pid {p}"),
            _ => "-- CMD".into(),
        }
    } else {
        format!("-- {}", d.target.command.join(" "))
    }
}

/// Share of profile samples (inclusive) with a frame matching `pred`.
fn profile_share(d: &Diagnosis, pred: impl Fn(&str) -> bool) -> f64 {
    let Some(p) = d.profile.data() else {
        return 0.0;
    };
    let total: u64 = p.folded.iter().map(|f| f.samples).sum();
    if total == 0 {
        return 0.0;
    }
    let hit: u64 = p
        .folded
        .iter()
        .filter(|f| f.stack.split(';').skip(1).any(&pred))
        .map(|f| f.samples)
        .sum();
    hit as f64 / total as f64 * 100.0
}

/// The kernel syscalls most of the profile's kernel time is under:
/// ("sched_yield", share %) sorted.
fn top_syscalls(d: &Diagnosis) -> Vec<(String, f64)> {
    let Some(p) = d.profile.data() else {
        return Vec::new();
    };
    let total: u64 = p.folded.iter().map(|f| f.samples).sum();
    let mut by: std::collections::HashMap<String, u64> = Default::default();
    for f in &p.folded {
        if let Some(sc) = f.stack.split(';').find_map(|fr| {
            [
                "__x64_sys_",
                "__arm64_sys_",
                "__se_sys_",
                "__riscv_sys_",
                "__do_sys_",
            ]
            .iter()
            .find_map(|p| fr.strip_prefix(p))
        }) {
            *by.entry(sc.to_string()).or_default() += f.samples;
        }
    }
    let mut v: Vec<(String, f64)> = by
        .into_iter()
        .map(|(k, n)| (k, n as f64 * 100.0 / total.max(1) as f64))
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1));
    v
}

fn user_share(d: &Diagnosis) -> f64 {
    d.profile
        .data()
        .filter(|p| p.samples > 0)
        .map_or(0.0, |p| p.user_samples as f64 * 100.0 / p.samples as f64)
}

/// The heaviest call path to `symbol` in the folded stacks, root first,
/// without the process name and the C runtime's start frames.
fn call_path(d: &Diagnosis, symbol: &str) -> String {
    let Some(p) = d.profile.data() else {
        return String::new();
    };
    p.folded
        .iter()
        .filter(|f| f.stack.rsplit(';').next() == Some(symbol))
        .max_by_key(|f| f.samples)
        .map(|f| {
            f.stack
                .split(';')
                .skip(1)
                .filter(|fr| {
                    !matches!(
                        *fr,
                        "_start"
                            | "__libc_start_main"
                            | "__libc_start_call_main"
                            | "start_thread"
                            | "clone3"
                            | "clone"
                    ) && !fr.contains("+0x")
                })
                .collect::<Vec<_>>()
                .join(" → ")
        })
        .unwrap_or_default()
}

fn fault_churn(w: &WorkView) -> Option<(f64, f64)> {
    let rate = w.per_s(w.minflt);
    let share = profile_share(w.d, |f| FAULT_PATH.contains(&f));
    let sys_pct = w.sys_s / w.cpu_s.max(1e-9) * 100.0;
    (rate >= FAULTS_PER_S && (share >= FAULT_PROFILE_PCT || sys_pct >= 30.0))
        .then_some((rate, share))
}

fn small_io(w: &WorkView) -> Option<(f64, f64)> {
    let rate = w.per_s(w.calls);
    let per_call = w.bytes as f64 / w.calls.max(1) as f64;
    let sys_pct = w.sys_s / w.cpu_s.max(1e-9) * 100.0;
    (rate >= SMALL_IO_CALLS_PER_S
        && per_call < SMALL_IO_BYTES
        && sys_pct >= 30.0
        && w.pct_of_active(w.cpu_s + w.runq_s) >= 30.0)
        .then_some((rate, per_call))
}

fn yield_share(d: &Diagnosis) -> f64 {
    profile_share(d, |f| {
        f == "do_sched_yield" || f.ends_with("sys_sched_yield")
    })
}

/// Samples in the profile before its kernel share replaces the tick-based
/// system time (user/system from /proc are counted in 10 ms ticks).
const PROFILE_MIN_SAMPLES: u64 = 50;
/// A sched_yield spin: this share of the samples under sched_yield.
const YIELD_PCT: f64 = 25.0;

fn workload_kernel_bound(id: &str, d: &Diagnosis, w: &WorkView) -> Outcome {
    let mut sys_pct = w.sys_s / w.cpu_s.max(1e-9) * 100.0;
    if let Some(p) = d
        .profile
        .data()
        .filter(|p| p.samples >= PROFILE_MIN_SAMPLES)
    {
        sys_pct = p.kernel_samples as f64 * 100.0 / p.samples as f64;
    }
    let yielding = yield_share(d) >= YIELD_PCT;
    if w.pct_of_active(w.cpu_s + w.runq_s) < CPU_BOUND_PCT
        || (sys_pct < OWN_SYSTEM_PCT && !yielding)
    {
        return Outcome::Fine;
    }
    // A more specific finding explains the kernel time.
    if fault_churn(w).is_some() || small_io(w).is_some() {
        return Outcome::Fine;
    }
    let calls = top_syscalls(d);
    let top = calls.first().cloned();
    let target = target_words(d);
    finding(Finding {
        id: "diagnose.kernel-bound",
        severity: Severity::Warning,
        title: match &top {
            Some((sc, pct)) => format!(
                "{target} spends {}% of its own CPU time in the kernel, most in {sc} ({}% of its samples)",
                sig(sys_pct),
                sig(*pct)
            ),
            None => format!("{target} spends {}% of its own CPU time in the kernel", sig(sys_pct)),
        },
        evidence: vec![
            format!("diagnosis {id}: {}", w.words()),
            format!(
                "system calls under the kernel samples of its profile: {}",
                calls
                    .iter()
                    .take(3)
                    .map(|(s, p)| format!("{s} {}%", sig(*p)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!(
                "thresholds: on or waiting for a CPU ≥ {CPU_BOUND_PCT}% of its active time ({}%), own system time ≥ {OWN_SYSTEM_PCT}% of its CPU ({}%)",
                sig(w.pct_of_active(w.cpu_s + w.runq_s)),
                sig(sys_pct)
            ),
        ],
        why: if yielding {
            "A loop around sched_yield() spins: each call enters the kernel, finds little or \
             nothing else to run and returns, so the CPU is busy while no work is done."
                .into()
        } else {
            "The program's own CPU time is mostly system calls: the kernel work per call, not \
             the program's code, sets its speed."
                .into()
        },
        command: if yielding {
            "wait for the condition instead of polling it: a futex, pthread_cond_wait, a pipe or \
             eventfd the producer signals; if spinning is wanted, bound it and then block"
                .into()
        } else {
            format!(
                "make fewer, larger calls of {} (batch work per call); the profile's kernel paths \
                 below that call show what each costs",
                top.as_ref().map_or("the top system call", |t| t.0.as_str())
            )
        },
        risk: "Changes the program; measure before and after.".into(),
        verify: format!(
            "tunelab diagnose {} (its own system time and the syscall's share fall)",
            cmd(d)
        ),
    })
}

pub(super) fn cpu_hotspot(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let Some(p) = d.profile.data() else {
        return Outcome::Fine;
    };
    // CPU-bound: on a CPU or waiting for one (a starved CPU-bound program
    // is still CPU-bound).
    let on_cpu = w.pct_of_active(w.cpu_s + w.runq_s);
    let user = user_share(d);
    let Some(top) = p
        .symbols
        .iter()
        .find(|s| !s.image.starts_with('[') && !s.symbol.starts_with('['))
    else {
        return Outcome::Fine;
    };
    if on_cpu < CPU_BOUND_PCT || user < USER_SHARE_PCT || top.percent < HOTSPOT_PCT {
        return Outcome::Fine;
    }
    let path = call_path(d, &top.symbol);
    let second = p
        .symbols
        .iter()
        .filter(|s| !s.image.starts_with('[') && s.symbol != top.symbol)
        .take(2)
        .map(|s| format!("{} {}%", s.symbol, sig(s.percent)))
        .collect::<Vec<_>>()
        .join(", ");
    finding(Finding {
        id: "diagnose.cpu-hotspot",
        severity: Severity::Info,
        title: format!(
            "{} spends {}% of its CPU samples in {} ({})",
            target_words(d),
            sig(top.percent),
            top.symbol,
            top.image
        ),
        evidence: vec![
            format!("diagnosis {id}: {}", w.words()),
            format!(
                "CPU profile ({} samples, {}% in user space): {} {}%{}{}",
                p.samples,
                sig(user),
                top.symbol,
                sig(top.percent),
                if second.is_empty() { String::new() } else { format!("; next {second}") },
                if path.is_empty() { String::new() } else { format!("; call path {path}") }
            ),
            format!(
                "thresholds: on or waiting for a CPU ≥ {CPU_BOUND_PCT}% of active time ({}%), user space ≥ {USER_SHARE_PCT}% of samples, one function ≥ {HOTSPOT_PCT}%",
                sig(on_cpu)
            ),
        ],
        why: "The workload is CPU-bound and one function of its own holds a large share of the \
              CPU: speeding it up (or calling it less) shortens the run in proportion; elsewhere \
              gains are bounded by the rest (Amdahl)."
            .into(),
        command: format!(
            "optimise or call less often {}{}; the flame graph in `tunelab report RUN -o diag.html` shows its callers",
            top.symbol,
            if path.is_empty() { String::new() } else { format!(" (reached by {path})") }
        ),
        risk: "Changes the program; measure before and after.".into(),
        verify: format!("tunelab diagnose {} (the function's share and the run time fall)", cmd(d)),
    })
}

fn wait_rows(v: &[&OffCpuCause]) -> String {
    v.iter()
        .take(3)
        .map(|c| {
            format!(
                "{}{} in {}: {} over {} waits (mean {}, longest {})",
                c.cause,
                if c.caller.is_empty() {
                    String::new()
                } else {
                    format!(" from {}", c.caller)
                },
                c.comm,
                seconds(c.total_s),
                c.waits,
                seconds(c.total_s / c.waits.max(1) as f64),
                seconds(c.max_s)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub(super) fn user_lock(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let (process_pct, comm, wait) = w.class_share(&["lock"]);
    let locks = w.causes_of(&["lock"], &comm);
    let Some(top) = locks.first().copied() else {
        return Outcome::Fine;
    };
    // The share of the waiting threads' own time when the tracer knows it
    // (what `perf sched timehist` shows per thread); else of the process's.
    let pct = if top.thread_time_s > 0.0 {
        top.total_s / top.thread_time_s * 100.0
    } else {
        process_pct
    };
    if pct < LOCK_PCT {
        return Outcome::Fine;
    }
    finding(Finding {
        id: "diagnose.user-lock",
        severity: Severity::Warning,
        title: format!(
            "{} threads of {} wait for a user-space lock {}% of their time: {}{}",
            top.threads.max(1),
            target_words(d),
            sig(pct),
            top.cause.split(" (").next().unwrap_or(&top.cause).trim_start_matches("futex: "),
            if top.caller.is_empty() { String::new() } else { format!(" from {}", top.caller) }
        ),
        evidence: vec![
            format!("diagnosis {id}: {}", w.words()),
            format!("off-CPU ({}): {}", w.off_source, wait_rows(&locks)),
            format!(
                "{} waited by {} threads over their {} of lifetime (a wait runs from the switch out asleep to back on a CPU, wake-up delay in, preemptions out: perf sched timehist's wait after an S-state switch out); the process as a whole: {}% of its active thread time; threshold: ≥ {LOCK_PCT}%",
                seconds(wait),
                top.threads,
                seconds(top.thread_time_s),
                sig(process_pct)
            ),
        ],
        why: "Threads sleep in the kernel (futex) until the lock's holder releases it: while \
              they wait they do nothing, so adding threads adds waiting, not throughput."
            .into(),
        command: format!(
            "hold the lock for less (move work out of the critical section in {}), split it \
             (one lock per shard or per object), or give each thread its own data and merge at \
             the end",
            if top.caller.is_empty() { "the caller" } else { top.caller.split(" ← ").next().unwrap_or("the caller") }
        ),
        risk: "Finer locking changes the program's correctness argument; test under load.".into(),
        verify: format!("tunelab diagnose {} (the lock's share of thread time falls)", cmd(d)),
    })
}

pub(super) fn storage_sync(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let (pct, comm, wait) = w.class_share(&["storage"]);
    if pct < STORAGE_PCT {
        return Outcome::Fine;
    }
    let rows = w.causes_of(&["storage"], &comm);
    let waits: u64 = rows.iter().map(|c| c.waits).sum();
    let mut evidence = vec![
        format!("diagnosis {id}: {}", w.words()),
        format!("off-CPU ({}): {}", w.off_source, wait_rows(&rows)),
        format!(
            "threshold: storage waits ≥ {STORAGE_PCT}% of the process's active thread time ({} waited)",
            seconds(wait)
        ),
    ];
    // The disks are machine-wide: shown with the workload's own share.
    if let Some(u) = d.resources.data() {
        let disk_w: f64 = u
            .rows
            .iter()
            .filter(|r| r.kind == "disk")
            .map(|r| r.figure("write").unwrap_or(0.0) * d.interval_s)
            .sum();
        if disk_w > 0.0 {
            evidence.push(format!(
                "the workload wrote {} to storage, {}% of all disk writes in the interval",
                human(w.write_bytes as f64, "B"),
                sig((w.write_bytes as f64 / disk_w * 100.0).min(100.0))
            ));
        }
    }
    let sync = rows
        .iter()
        .any(|c| c.cause.contains("waits for the storage"));
    finding(Finding {
        id: "diagnose.storage-sync",
        severity: Severity::Warning,
        title: format!(
            "{} waits for storage {}% of its time: {} synchronous waits{}",
            target_words(d),
            sig(pct),
            waits,
            rows.first()
                .filter(|c| !c.caller.is_empty())
                .map(|c| format!(" from {}", c.caller))
                .unwrap_or_default()
        ),
        evidence,
        why: if sync {
            "Each fsync/fdatasync waits until the device has the data (and the journal its \
             commit): the program runs at the device's flush latency, not at memory speed."
                .into()
        } else {
            "The program waits for the device to read or write pages: the storage is on its \
             critical path."
                .into()
        },
        command: "sync less often: batch several records per fsync (group commit), fdatasync \
                  when metadata need not be durable, or write through a log that is synced \
                  once per batch; if durability is not needed, drop the sync"
            .into(),
        risk: "Fewer syncs widen the window of data a power cut can lose: only what the \
               application can afford."
            .into(),
        verify: format!(
            "tunelab diagnose {} (storage waits' share falls); tunelab run io.record-size --target DIR compares buffered and O_SYNC writes on the device",
            cmd(d)
        ),
    })
}

pub(super) fn sleep_bound(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let (pct, comm, wait) = w.class_share(&["sleep"]);
    if pct < SLEEP_PCT {
        return Outcome::Fine;
    }
    let rows = w.causes_of(&["sleep"], &comm);
    let n: u64 = rows.iter().map(|c| c.waits).sum();
    finding(Finding {
        id: "diagnose.sleep-bound",
        severity: Severity::Info,
        title: format!(
            "{}{} is paced by its own timer sleeps: {}% of its time, {} sleeps of {} on average",
            target_words(d),
            if comm.is_empty() {
                String::new()
            } else {
                format!(" ({comm})")
            },
            sig(pct),
            n,
            seconds(wait / n.max(1) as f64)
        ),
        evidence: vec![
            format!("diagnosis {id}: {}", w.words()),
            format!("off-CPU ({}): {}", w.off_source, wait_rows(&rows)),
            format!("threshold: sleeps ≥ {SLEEP_PCT}% of active thread time"),
        ],
        why: "The program is not waiting for a resource: it asked to sleep. Its speed is the \
              sleep length plus the timer's overshoot (timer slack, the wake-up latency), times \
              the number of sleeps."
            .into(),
        command: "if the sleep polls for work, block on the event instead (poll/epoll, a \
                  condition variable, a pipe); if it paces output, sleep until an absolute \
                  deadline (clock_nanosleep TIMER_ABSTIME) so overshoot does not accumulate; \
                  prctl(PR_SET_TIMERSLACK, 1) lowers the overshoot"
            .into(),
        risk: "Shorter or fewer sleeps use more CPU and power.".into(),
        verify: format!(
            "tunelab diagnose {} (mean sleep vs the asked length)",
            cmd(d)
        ),
    })
}

pub(super) fn fault_churn_rule(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let Some((rate, share)) = fault_churn(&w) else {
        return Outcome::Fine;
    };
    let zeroing = profile_share(d, |f| f.starts_with("clear_page"));
    finding(Finding {
        id: "diagnose.page-fault-churn",
        severity: Severity::Warning,
        title: format!(
            "{} takes {} minor page faults/s; {}% of its CPU samples are in the fault path ({}% zeroing pages)",
            target_words(d),
            si(rate),
            sig(share),
            sig(zeroing)
        ),
        evidence: vec![
            format!("diagnosis {id}: {}", w.words()),
            format!(
                "its own faults: {} minor, {} major in {} ({}/s); profile: {}% under exc_page_fault/handle_mm_fault, {}% in clear_page*",
                w.minflt,
                w.majflt,
                seconds(d.interval_s),
                si(rate),
                sig(share),
                sig(zeroing)
            ),
            format!(
                "thresholds: ≥ {} minor faults/s and ≥ {FAULT_PROFILE_PCT}% of samples in the fault path (or system ≥ 30% of its CPU)",
                si(FAULTS_PER_S)
            ),
        ],
        why: "Every first touch of a fresh anonymous page traps into the kernel, which allocates \
              and zeroes a 4 KiB page; memory mapped and unmapped (or malloc'd and freed past \
              the mmap threshold) again and again pays this on every round."
            .into(),
        command: "reuse the buffer instead of mapping it per round; if it must be fresh, \
                  mmap(…, MAP_POPULATE) faults it in one call; madvise(MADV_HUGEPAGE) (with THP \
                  in madvise or always mode: /sys/kernel/mm/transparent_hugepage/enabled) makes \
                  one fault per 2 MiB; for glibc malloc, mallopt(M_MMAP_THRESHOLD)/M_TRIM_THRESHOLD \
                  keep large blocks in the heap"
            .into(),
        risk: "Keeping or pre-faulting buffers holds memory; huge pages can raise memory use on a \
               small board."
            .into(),
        verify: format!("tunelab diagnose {} (minor faults/s and the fault path's share fall)", cmd(d)),
    })
}

pub(super) fn small_io_rule(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let Some((rate, per_call)) = small_io(&w) else {
        return Outcome::Fine;
    };
    finding(Finding {
        id: "diagnose.small-io",
        severity: Severity::Warning,
        title: format!(
            "{} makes {} read/write calls/s of {} each on average: the calls, not the data, cost",
            target_words(d),
            si(rate),
            human(per_call, "B")
        ),
        evidence: vec![
            format!("diagnosis {id}: {}", w.words()),
            format!(
                "its /proc/PID/io: {} calls moving {} ({} per call)",
                w.calls,
                human(w.bytes as f64, "B"),
                human(per_call, "B")
            ),
            format!(
                "thresholds: ≥ {} calls/s, < {} per call, system ≥ 30% of its CPU",
                si(SMALL_IO_CALLS_PER_S),
                human(SMALL_IO_BYTES, "B")
            ),
        ],
        why: "Each read()/write() costs a kernel entry and exit and the file system's per-call \
              work whatever its size: at a few bytes per call that overhead is nearly all of it."
            .into(),
        command: "buffer in user space and write 64 KiB or more per call: stdio with a buffer \
                  (setvbuf), BufWriter/BufReader in Rust, or collect records and writev() them"
            .into(),
        risk: "Buffered data is lost if the process dies before it flushes; flush where it must be \
               durable."
            .into(),
        verify: format!(
            "tunelab run io.api (raw vs buffered calls per MiB on this machine); tunelab diagnose {}",
            cmd(d)
        ),
    })
}

pub(super) fn cpu_starvation(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let of_runnable = w.runq_s / (w.cpu_s + w.runq_s).max(1e-9) * 100.0;
    let of_active = w.pct_of_active(w.runq_s);
    // A sched_yield loop's run-queue time is its own yielding.
    if of_runnable < STARVED_PCT || of_active < STARVED_ACTIVE_PCT || yield_share(d) >= 10.0 {
        return Outcome::Fine;
    }
    let machine = cpu_figures(d).map(|c| c.0).unwrap_or(0.0);
    let others = (machine / 100.0 * d.cpus as f64 * d.interval_s - w.cpu_s).max(0.0);
    let own_threads_exceed = w.threads > d.cpus;
    finding(Finding {
        id: "diagnose.cpu-starvation",
        severity: Severity::Warning,
        title: format!(
            "{} waits for a CPU {}% of the time it could run ({} in run queues)",
            target_words(d),
            sig(of_runnable),
            seconds(w.runq_s)
        ),
        evidence: vec![
            format!("diagnosis {id}: {}", w.words()),
            format!(
                "over the interval other processes used about {} of CPU time on {} CPUs (machine busy {}%, tunelab's own left out); the workload has {} threads",
                seconds(others),
                d.cpus,
                sig(machine),
                w.threads
            ),
            format!(
                "thresholds: run-queue wait ≥ {STARVED_PCT}% of on-CPU + run-queue time and ≥ {STARVED_ACTIVE_PCT}% of active time"
            ),
        ],
        why: if own_threads_exceed {
            "It is runnable but not running: it has more runnable threads than CPUs, and other \
             processes compete too."
                .into()
        } else {
            "It is runnable but not running: other processes hold the CPUs."
                .into()
        },
        command: "give it priority (nice -n -5 CMD, or lower the others: renice +10 -p PID), \
                  a CPU of its own (taskset -c N CMD; cgroup cpuset), or fewer threads than CPUs"
            .into(),
        risk: "Priority for one process is latency for the others.".into(),
        verify: format!("tunelab diagnose {} (run-queue wait falls)", cmd(d)),
    })
}

pub(super) fn memory_pressure(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let (pct, comm, _) = w.class_share(&["reclaim", "page-fault"]);
    let rows = w.causes_of(&["reclaim", "page-fault"], &comm);
    let majors = w.per_s(w.majflt);
    if pct < MEMORY_WAIT_PCT || (majors < MAJOR_FAULTS_PER_S && w.causes("reclaim").is_empty()) {
        return Outcome::Fine;
    }
    finding(Finding {
        id: "diagnose.memory-pressure",
        severity: Severity::Warning,
        title: format!(
            "{} waits for memory {}% of its time: reclaim and major faults ({}/s)",
            target_words(d),
            sig(pct),
            si(majors)
        ),
        evidence: vec![
            format!("diagnosis {id}: {}", w.words()),
            format!("off-CPU ({}): {}", w.off_source, wait_rows(&rows)),
            format!(
                "thresholds: memory waits ≥ {MEMORY_WAIT_PCT}% of active time, with ≥ {MAJOR_FAULTS_PER_S} major faults/s or direct reclaim"
            ),
        ],
        why: "The working set does not fit: pages are evicted and read back (major faults) or \
              allocations wait while the kernel reclaims."
            .into(),
        command: "shrink the working set (smaller caches or buffers), stop other memory users, \
                  add memory, or on a board add zram swap"
            .into(),
        risk: "Smaller caches can cost speed elsewhere.".into(),
        verify: format!("tunelab diagnose {} (major faults and reclaim waits fall)", cmd(d)),
    })
}

pub(super) fn blocking_cause(ev: &Evidence, _: Workload) -> Outcome {
    let Some((id, d, w)) = own(ev) else {
        return Outcome::Fine;
    };
    let Some(off) = d.offcpu.data() else {
        return Outcome::Fine;
    };
    // Classes with their own finding, and waiting for one's own threads.
    let covered = ["lock", "storage", "sleep", "join", "reclaim", "page-fault"];
    let Some(top) = off
        .causes
        .iter()
        .find(|c| !covered.contains(&c.class.as_str()))
    else {
        return Outcome::Fine;
    };
    let (pct, comm, _) = w.class_share(&[top.class.as_str()]);
    if pct < DOMINANT_WAIT_PCT {
        return Outcome::Fine;
    }
    let same: Vec<&OffCpuCause> = w.causes_of(&[top.class.as_str()], &comm);
    let top = same.first().copied().unwrap_or(top);
    let (why, command) = match top.class.as_str() {
        "pipe" | "socket" => (
            "It waits for the process at the other end: that process, not this one, sets the pace.",
            "diagnose the other end (tunelab diagnose --pid PID of the writer/peer); a larger \
             pipe (fcntl F_SETPIPE_SZ) only helps with bursts",
        ),
        "poll" => (
            "It waits for events (an event loop): it is idle, not slow, unless the events come late.",
            "if it should be busy, diagnose what produces its events",
        ),
        "condvar" => (
            "Threads wait on a condition variable: they are idle waiting for work to be handed to them.",
            "if they should be busy, look at the producer; too many workers for the work is harmless but idle",
        ),
        _ => (
            "The tasks wait here more than anywhere else: that wait, not CPU, is on the critical path.",
            "see the off-CPU table and flame graph for the callers",
        ),
    };
    finding(Finding {
        id: "diagnose.blocking",
        severity: Severity::Info,
        title: format!(
            "{}{} is blocked {}% of its time in {}{}",
            target_words(d),
            if comm.is_empty() {
                String::new()
            } else {
                format!(" ({comm})")
            },
            sig(pct),
            top.cause,
            if top.caller.is_empty() {
                String::new()
            } else {
                format!(" from {}", top.caller)
            }
        ),
        evidence: vec![
            format!("diagnosis {id}: {}", w.words()),
            format!("off-CPU ({}): {}", off.source, wait_rows(&same)),
            format!(
                "threshold: one cause ≥ {DOMINANT_WAIT_PCT}% of the process's active thread time"
            ),
        ],
        why: why.into(),
        command: command.into(),
        risk: "None (a reading).".into(),
        verify: format!("tunelab diagnose {}", cmd(d)),
    })
}

fn target_words(d: &Diagnosis) -> String {
    match d.target.kind.as_str() {
        "command" => format!("`{}`", d.target.command.join(" ")),
        "pid" => format!("pid {} ({})", d.target.pid.unwrap_or(0), d.target.name),
        _ => "the machine".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::diagnosis::{
        BlockCause, BlockingReport, Figure, Overhead, Section, SlabReport, UseRow, UseTable,
    };
    use crate::model::profile::{Profile, SymbolRow};

    fn messaging(fast: Option<f64>, profile: bool) -> Diagnosis {
        fn present<T>(x: T) -> Section<T> {
            Section::Present {
                data: x,
                overhead: Overhead::default(),
            }
        }
        let mut d = Diagnosis {
            cpus: 2,
            interval_s: 4.0,
            ..Default::default()
        };
        // Machine-wide slab and CPU figures back findings about the machine.
        d.target.kind = "system".into();
        d.resources = present(UseTable {
            rows: vec![UseRow {
                kind: "cpu".into(),
                utilisation: vec![
                    Figure::new("busy", 98.0, "%"),
                    Figure::new("system", 80.0, "%"),
                ],
                saturation: vec![Figure::new("context switches", 400_000.0, "/s")],
                ..Default::default()
            }],
            ..Default::default()
        });
        d.slab = present(SlabReport {
            source: "x".into(),
            caches: vec![SlabCache {
                name: "kmalloc-512".into(),
                obj_size: 512,
                allocs: 900_000,
                frees: 899_000,
                alloc_fast_pct: fast,
                free_fast_pct: fast,
                churn_per_s: 449_750.0,
                ..Default::default()
            }],
            method: String::new(),
        });
        if profile {
            d.profile = present(Profile {
                symbols: vec![
                    SymbolRow {
                        samples: 500,
                        percent: 30.0,
                        image: "[kernel]".into(),
                        symbol: "___slab_alloc".into(),
                    },
                    SymbolRow {
                        samples: 200,
                        percent: 12.0,
                        image: "[kernel]".into(),
                        symbol: "get_partial_node.part.0".into(),
                    },
                ],
                ..Default::default()
            });
        }
        d.blocking = present(BlockingReport {
            causes: vec![
                BlockCause {
                    pid: 7,
                    comm: "tunelab".into(),
                    processes: 1,
                    cause: "unix_stream_read_generic".into(),
                    total_s: 3.0,
                    max_s: 0.05,
                    count: 900,
                },
                BlockCause {
                    pid: 7,
                    comm: "tunelab".into(),
                    cause: "sock_alloc_send_pskb".into(),
                    total_s: 1.0,
                    ..Default::default()
                },
            ],
            ..Default::default()
        });
        d
    }

    fn ev(d: Diagnosis) -> Evidence {
        Evidence {
            diagnosis: Some(("RUN1".into(), d)),
            ..Default::default()
        }
    }

    fn get(o: Outcome) -> Option<Finding> {
        match o {
            Outcome::Finding(f) => Some(*f),
            _ => None,
        }
    }

    #[test]
    fn slow_paths_from_slub_stats_or_profile_are_warnings() {
        let f = get(slab_slow_path(
            &ev(messaging(Some(20.0), false)),
            Workload::General,
        ))
        .unwrap();
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.title.contains("kmalloc-512"));
        assert!(f.command.contains("slub_min_objects=4"), "{}", f.command);
        assert!(f
            .command
            .contains("/sys/kernel/slab/kmalloc-512/cpu_partial"));
        let f = get(slab_slow_path(
            &ev(messaging(None, true)),
            Workload::General,
        ))
        .unwrap();
        assert_eq!(f.severity, Severity::Warning);
        assert!(
            f.evidence[1].contains("42.0% of samples"),
            "{:?}",
            f.evidence
        );
        // Churn and kernel time without a slow-path measurement: info only.
        let f = get(slab_slow_path(
            &ev(messaging(None, false)),
            Workload::General,
        ))
        .unwrap();
        assert_eq!(f.severity, Severity::Info);
        // Fast paths and no profile: nothing to say if the cache is quiet.
        let mut d = messaging(Some(99.0), false);
        if let Section::Present { data, .. } = &mut d.slab {
            data.caches[0].churn_per_s = 10.0;
        }
        assert!(get(slab_slow_path(&ev(d), Workload::General)).is_none());
    }

    #[test]
    fn kernel_bound_and_blocking() {
        let f = get(kernel_bound(&ev(messaging(None, false)), Workload::General)).unwrap();
        assert!(
            f.title.contains("80.0% system of 98.0% busy"),
            "{}",
            f.title
        );
        assert!(get(hot_lock(&ev(messaging(None, false)), Workload::General)).is_none());
        assert!(get(kernel_bound(&Evidence::default(), Workload::General)).is_none());
    }

    use crate::model::diagnosis::{OffCpuReport, ProcessWaits, TaskFigures, WorkloadReport};
    use crate::model::profile::FoldedStack;

    /// A command's diagnosis from its own figures: `cpu` user+system s,
    /// blocked causes (class, cause, caller, total s).
    fn workload(user: f64, sys: f64, causes: &[(&str, &str, &str, f64)]) -> Diagnosis {
        fn present<T>(x: T) -> Section<T> {
            Section::Present {
                data: x,
                overhead: Overhead::default(),
            }
        }
        let mut d = messaging(None, false);
        d.target.kind = "command".into();
        d.target.command = vec!["./prog".into()];
        d.interval_s = 2.0;
        let total = TaskFigures {
            comm: "prog".into(),
            threads: 1,
            user_s: user,
            system_s: sys,
            ..Default::default()
        };
        d.workload = present(WorkloadReport {
            rows: vec![total.clone()],
            total,
            ..Default::default()
        });
        let blocked: f64 = causes.iter().map(|c| c.3).sum();
        d.offcpu = present(OffCpuReport {
            source: "sched switch events".into(),
            causes: causes
                .iter()
                .map(|(class, cause, caller, s)| OffCpuCause {
                    class: class.to_string(),
                    cause: cause.to_string(),
                    caller: caller.to_string(),
                    comm: "prog".into(),
                    total_s: *s,
                    waits: 100,
                    max_s: 0.002,
                    ..Default::default()
                })
                .collect(),
            blocked_s: blocked,
            by_process: vec![ProcessWaits {
                comm: "prog".into(),
                blocked_s: blocked,
                ..Default::default()
            }],
            ..Default::default()
        });
        d.profile = Section::skipped("none");
        d
    }

    fn ids(d: Diagnosis) -> Vec<&'static str> {
        let e = ev(d);
        super::super::ALL
            .iter()
            .filter_map(|r| get(r(&e, Workload::General)))
            .map(|f| f.id)
            .collect()
    }

    #[test]
    fn machine_wide_figures_do_not_make_findings_about_a_workload() {
        // The machine is 98% busy, 80% system, with slab churn: none of it
        // is the sleeping program's.
        let d = workload(
            0.01,
            0.01,
            &[("sleep", "timer sleep (nanosleep)", "main", 1.9)],
        );
        assert_eq!(ids(d), vec!["diagnose.sleep-bound"]);
    }

    #[test]
    fn one_storage_cause_one_finding_and_lock_share_per_thread() {
        let d = workload(
            0.2,
            0.3,
            &[(
                "storage",
                "fsync: waits for the storage to write",
                "append ← main",
                1.4,
            )],
        );
        assert_eq!(ids(d), vec!["diagnose.storage-sync"]);
        let mut d = workload(
            0.5,
            0.0,
            &[
                (
                    "lock",
                    "futex: pthread_mutex_lock (a user-space lock)",
                    "contended_update ← worker",
                    3.0,
                ),
                (
                    "join",
                    "futex: waits for threads to finish (pthread_join)",
                    "main",
                    2.0,
                ),
            ],
        );
        if let Section::Present { data, .. } = &mut d.offcpu {
            data.causes[0].threads = 4;
            data.causes[0].thread_time_s = 8.0;
        }
        let e = ev(d);
        let f = get(user_lock(&e, Workload::General)).unwrap();
        assert!(f.title.starts_with("4 threads"), "{}", f.title);
        assert!(f.title.contains("37.5% of their time"), "{}", f.title);
        assert!(f.title.contains("contended_update"), "{}", f.title);
        // pthread_join is not a finding.
        assert!(get(blocking_cause(&e, Workload::General)).is_none());
    }

    #[test]
    fn a_reader_and_its_same_named_writer_are_judged_apart() {
        // Together each cause is half of the name's time; each process
        // spends nearly all of its own time in one of them.
        let mut d = workload(
            0.01,
            0.03,
            &[
                (
                    "pipe",
                    "pipe read (waits for its writer)",
                    "consume ← main",
                    1.98,
                ),
                ("sleep", "timer sleep (nanosleep)", "produce ← main", 1.97),
            ],
        );
        if let Section::Present { data, .. } = &mut d.offcpu {
            let p = |pid, class: &str, s| ProcessWaits {
                comm: "prog".into(),
                pid,
                blocked_s: s,
                thread_time_s: 2.0,
                classes: vec![(class.to_string(), s)],
                ..Default::default()
            };
            data.by_process = vec![p(10, "pipe", 1.98), p(11, "sleep", 1.97)];
        }
        let e = ev(d);
        let f = get(blocking_cause(&e, Workload::General)).unwrap();
        assert!(
            f.title.contains("99.0% of its time in pipe read"),
            "{}",
            f.title
        );
        assert!(get(sleep_bound(&e, Workload::General)).is_some());
        // A small process of the name is not judged on its own.
        let mut d = workload(
            0.01,
            0.03,
            &[("pipe", "pipe read (waits for its writer)", "consume", 0.1)],
        );
        if let Section::Present { data, .. } = &mut d.offcpu {
            let p = |pid, class: &str, s, life| ProcessWaits {
                comm: "prog".into(),
                pid,
                blocked_s: s,
                thread_time_s: life,
                classes: vec![(class.to_string(), s)],
                ..Default::default()
            };
            data.by_process = vec![p(10, "pipe", 0.1, 0.1), p(11, "sleep", 1.9, 2.0)];
            data.causes.push(OffCpuCause {
                class: "sleep".into(),
                comm: "prog".into(),
                total_s: 1.9,
                ..Default::default()
            });
            data.blocked_s = 2.0;
        }
        assert!(get(blocking_cause(&ev(d), Workload::General)).is_none());
    }

    #[test]
    fn faults_explain_kernel_time_and_a_hot_spot_needs_user_samples() {
        let mut d = workload(0.4, 1.5, &[]);
        if let Section::Present { data, .. } = &mut d.workload {
            data.total.minor_faults = 200_000;
        }
        d.profile = Section::Present {
            data: Profile {
                samples: 100,
                user_samples: 10,
                kernel_samples: 90,
                folded: vec![
                    FoldedStack {
                        stack: "prog;main;asm_exc_page_fault;exc_page_fault;handle_mm_fault;clear_page_erms".into(),
                        samples: 70,
                    },
                    FoldedStack {
                        stack: "prog;main;entry_SYSCALL_64;__x64_sys_munmap".into(),
                        samples: 20,
                    },
                    FoldedStack {
                        stack: "prog;main".into(),
                        samples: 10,
                    },
                ],
                symbols: vec![SymbolRow {
                    samples: 10,
                    percent: 10.0,
                    image: "prog".into(),
                    symbol: "main".into(),
                }],
                ..Default::default()
            },
            overhead: Overhead::default(),
        };
        assert_eq!(ids(d), vec!["diagnose.page-fault-churn"]);
    }
}
