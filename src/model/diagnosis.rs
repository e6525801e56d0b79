//! The stored form of `tunelab diagnose`: what was diagnosed, over which
//! interval, and each section either present (its data and what collecting
//! it cost) or skipped with the reason. Pure data: produced by `diagnose`,
//! kept in a run (`Run::diagnosis`), rendered by `report`, read by `advise`,
//! all without live kernel access (a board's run renders on the host).

use serde::{Deserialize, Serialize};

use super::profile::{Counters, Profile};

/// One section: present with its data and overhead, or skipped with why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub(crate) enum Section<T> {
    Present { data: T, overhead: Overhead },
    Skipped { reason: String },
}

impl<T> Section<T> {
    pub(crate) fn skipped(reason: impl Into<String>) -> Self {
        Section::Skipped {
            reason: reason.into(),
        }
    }

    pub(crate) fn data(&self) -> Option<&T> {
        match self {
            Section::Present { data, .. } => Some(data),
            Section::Skipped { .. } => None,
        }
    }
}

impl<T> Default for Section<T> {
    fn default() -> Self {
        Section::skipped("not collected by this version of tunelab")
    }
}

/// What a section cost: tunelab's own CPU time spent collecting it against
/// the interval it covered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Overhead {
    /// CPU time (user + system) of the thread(s) that collected the section, s.
    pub(crate) cpu_s: f64,
    /// Wall time the section covered, s.
    pub(crate) interval_s: f64,
    /// Readings taken (samples, file reads), 0 when not sampled.
    #[serde(default)]
    pub(crate) readings: u64,
    /// The same in words ("3.1 ms CPU over 5.0 s: 0.06% of one CPU, 500 samples").
    pub(crate) words: String,
}

impl Overhead {
    /// Share of one CPU, 0–100.
    pub(crate) fn percent_of_cpu(&self) -> f64 {
        if self.interval_s > 0.0 {
            self.cpu_s / self.interval_s * 100.0
        } else {
            0.0
        }
    }
}

/// What was diagnosed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Target {
    /// "system", "pid" or "command".
    pub(crate) kind: String,
    /// The process id (the command's child, or --pid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pid: Option<i32>,
    /// The command and its arguments (kind "command").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) command: Vec<String>,
    /// Process name (kind "pid").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) name: String,
    /// How the command ended: "exit 0", "exit 3", "signal 9".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) exit: Option<String>,
    /// Exit code when it exited normally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) exit_code: Option<i32>,
}

/// A whole diagnosis.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    pub(crate) target: Target,
    /// Seconds the diagnosis covered (the command's run time for a command).
    pub(crate) interval_s: f64,
    /// CPUs online during the interval.
    pub(crate) cpus: u32,
    #[serde(default)]
    pub(crate) resources: Section<UseTable>,
    #[serde(default)]
    pub(crate) profile: Section<Profile>,
    #[serde(default)]
    pub(crate) counters: Section<Counters>,
    #[serde(default)]
    pub(crate) cache_profile: Section<Profile>,
    #[serde(default)]
    pub(crate) locks: Section<LockReport>,
    #[serde(default)]
    pub(crate) blocking: Section<BlockingReport>,
    #[serde(default)]
    pub(crate) slab: Section<SlabReport>,
    #[serde(default)]
    pub(crate) wakeups: Section<WakeupReport>,
    #[serde(default)]
    pub(crate) startup: Section<StartupReport>,
    /// The diagnosed workload's own figures (its process tree), beside the
    /// machine-wide USE table.
    #[serde(default)]
    pub(crate) workload: Section<WorkloadReport>,
    /// Time blocked by call chain, from scheduler switch events.
    #[serde(default)]
    pub(crate) offcpu: Section<OffCpuReport>,
}

fn one() -> u32 {
    1
}

// ------------------------------------------------------------ 1 USE table

/// One measured figure with its unit (base units: %, /s, s, B/s, count).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Figure {
    pub(crate) name: String,
    pub(crate) value: f64,
    pub(crate) unit: String,
}

impl Figure {
    pub(crate) fn new(name: &str, value: f64, unit: &str) -> Figure {
        Figure {
            name: name.into(),
            value,
            unit: unit.into(),
        }
    }
}

/// One resource: utilisation, saturation and errors (Gregg's USE method).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct UseRow {
    /// "cpu", "memory", "disk", "net".
    pub(crate) kind: String,
    /// "all CPUs", "memory", "vda", "eth0".
    pub(crate) name: String,
    pub(crate) utilisation: Vec<Figure>,
    pub(crate) saturation: Vec<Figure>,
    pub(crate) errors: Vec<Figure>,
    /// How much the row stands out, 0 (idle) to 1+ (saturated): the basis of
    /// `standouts`.
    pub(crate) score: f64,
    /// What does not exist for this resource ("disk errors are not exposed
    /// by /proc/diskstats").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) notes: Vec<String>,
}

impl UseRow {
    pub(crate) fn figure(&self, name: &str) -> Option<f64> {
        self.utilisation
            .iter()
            .chain(&self.saturation)
            .chain(&self.errors)
            .find(|f| f.name == name)
            .map(|f| f.value)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct UseTable {
    pub(crate) rows: Vec<UseRow>,
    /// The one or two rows that stand out, in plain words.
    pub(crate) standouts: Vec<String>,
    /// How each column was measured.
    pub(crate) method: String,
}

impl UseTable {
    pub(crate) fn row(&self, kind: &str) -> Option<&UseRow> {
        self.rows.iter().find(|r| r.kind == kind)
    }
}

// ------------------------------------------------------------ 4 locks

/// One lock class from /proc/lock_stat (times in µs as the kernel prints them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct LockRow {
    /// Class name with its -R/-W suffix for rwlocks.
    pub(crate) class: String,
    pub(crate) con_bounces: u64,
    pub(crate) contentions: u64,
    pub(crate) wait_min_us: f64,
    pub(crate) wait_max_us: f64,
    pub(crate) wait_total_us: f64,
    pub(crate) acq_bounces: u64,
    pub(crate) acquisitions: u64,
    pub(crate) hold_min_us: f64,
    pub(crate) hold_max_us: f64,
    pub(crate) hold_total_us: f64,
    /// Where contention happened: (count, symbol+offset), most first.
    #[serde(default)]
    pub(crate) contention_points: Vec<(u64, String)>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct LockReport {
    /// Top locks by contentions.
    pub(crate) locks: Vec<LockRow>,
    /// How lock_stat was switched on and back.
    pub(crate) method: String,
}

// ------------------------------------------------------------ 5 blocking

/// One cause of off-CPU time in the processes of one name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct BlockCause {
    /// The lowest pid of the processes (same name) summed here.
    pub(crate) pid: i32,
    pub(crate) comm: String,
    /// How many processes of that name (a workload's workers) are summed.
    #[serde(default = "one")]
    pub(crate) processes: u32,
    /// Kernel function(s) the tasks waited in (wchan, or the stack's top
    /// frames, or LatencyTOP's backtrace).
    pub(crate) cause: String,
    /// Occurrences (LatencyTOP count, or samples).
    pub(crate) count: u64,
    /// Longest single blocked stretch, s.
    pub(crate) max_s: f64,
    /// Total blocked time, s (over all tasks of the process).
    pub(crate) total_s: f64,
}

/// Per process name: time on CPU and waiting for a CPU (schedstat).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct SchedTime {
    pub(crate) pid: i32,
    pub(crate) comm: String,
    #[serde(default = "one")]
    pub(crate) processes: u32,
    pub(crate) tasks: u32,
    pub(crate) run_s: f64,
    /// Runnable but waiting for a CPU.
    pub(crate) runqueue_s: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct BlockingReport {
    /// "latencytop" or "sampled wchan/stack".
    pub(crate) source: String,
    /// Top causes, by total blocked time.
    pub(crate) causes: Vec<BlockCause>,
    #[serde(default)]
    pub(crate) sched: Vec<SchedTime>,
    pub(crate) method: String,
}

// ------------------------------------------------------------ 6 slab

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct SlabCache {
    pub(crate) name: String,
    pub(crate) obj_size: u64,
    pub(crate) active_objs: u64,
    /// Allocations/frees over the interval (SLUB_STATS), else the sum of
    /// the absolute changes of active objects between samples.
    pub(crate) allocs: u64,
    pub(crate) frees: u64,
    /// Share of allocations / frees that took the fast path, 0–100
    /// (SLUB_STATS only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) alloc_fast_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) free_fast_pct: Option<f64>,
    /// Allocations + frees per second.
    pub(crate) churn_per_s: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct SlabReport {
    /// "slub_stats" or "slabinfo".
    pub(crate) source: String,
    /// Busiest caches first.
    pub(crate) caches: Vec<SlabCache>,
    pub(crate) method: String,
}

// ------------------------------------------------------------ 7 wake-ups

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Waker {
    pub(crate) pid: i32,
    pub(crate) comm: String,
    #[serde(default = "one")]
    pub(crate) processes: u32,
    pub(crate) wakeups_per_s: f64,
    /// Involuntary context switches per second (preemptions).
    #[serde(default)]
    pub(crate) preempted_per_s: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct CState {
    pub(crate) name: String,
    /// Share of all CPUs' time in this state over the interval, 0–100.
    pub(crate) residency_pct: f64,
    pub(crate) entries_per_s: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct WakeupReport {
    /// "nr_wakeups" (schedstats) or "voluntary context switches" (proxy).
    pub(crate) source: String,
    pub(crate) processes: Vec<Waker>,
    #[serde(default)]
    pub(crate) cstates: Vec<CState>,
    /// Why C-states are missing, when they are.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) cstates_missing: String,
    pub(crate) method: String,
}

// ------------------------------------------------------------ 8 start-up

/// Medians of repeated runs in one configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct StartupRuns {
    /// "default" or "LD_BIND_NOW=1".
    pub(crate) mode: String,
    pub(crate) runs: u32,
    /// Exec to exit, s (median).
    pub(crate) wall_s: f64,
    pub(crate) minor_faults: u64,
    pub(crate) major_faults: u64,
    /// glibc's LD_DEBUG=statistics (absent for static or non-glibc programs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) linker: Option<LinkerStats>,
    /// Runs that did not exit 0 (still timed).
    #[serde(default)]
    pub(crate) failed_runs: u32,
}

/// glibc's runtime linker statistics, medians.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct LinkerStats {
    /// Total time in the dynamic loader, in `unit`.
    pub(crate) startup: f64,
    pub(crate) relocation: f64,
    pub(crate) load_objects: f64,
    /// "cycles" (older glibc) or "µs".
    pub(crate) unit: String,
    pub(crate) relocations: u64,
    pub(crate) relocations_from_cache: u64,
    pub(crate) relative_relocations: u64,
    /// Relocations done by exit (lazy binding resolves more while running).
    #[serde(default)]
    pub(crate) final_relocations: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct StartupReport {
    pub(crate) default: StartupRuns,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) bind_now: Option<StartupRuns>,
    /// Shared objects the dynamic linker loaded.
    pub(crate) libraries: Vec<String>,
    pub(crate) method: String,
}

// ------------------------------------------------------------ workload

/// One process name of the workload (or the whole workload): its own
/// figures over the interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct TaskFigures {
    pub(crate) comm: String,
    /// The lowest pid summed here.
    pub(crate) pid: i32,
    #[serde(default = "one")]
    pub(crate) processes: u32,
    /// Threads seen.
    pub(crate) threads: u32,
    pub(crate) user_s: f64,
    pub(crate) system_s: f64,
    /// Runnable but waiting for a CPU (schedstat), s.
    pub(crate) runqueue_s: f64,
    pub(crate) voluntary_switches: u64,
    pub(crate) involuntary_switches: u64,
    pub(crate) minor_faults: u64,
    pub(crate) major_faults: u64,
    /// /proc/PID/io: bytes through read/write calls, calls, and bytes that
    /// reached the block layer.
    pub(crate) rchar: u64,
    pub(crate) wchar: u64,
    pub(crate) syscr: u64,
    pub(crate) syscw: u64,
    pub(crate) read_bytes: u64,
    pub(crate) write_bytes: u64,
}

impl TaskFigures {
    pub(crate) fn cpu_s(&self) -> f64 {
        self.user_s + self.system_s
    }

    pub(crate) fn add(&mut self, o: &TaskFigures) {
        self.threads += o.threads;
        self.user_s += o.user_s;
        self.system_s += o.system_s;
        self.runqueue_s += o.runqueue_s;
        self.voluntary_switches += o.voluntary_switches;
        self.involuntary_switches += o.involuntary_switches;
        self.minor_faults += o.minor_faults;
        self.major_faults += o.major_faults;
        self.rchar += o.rchar;
        self.wchar += o.wchar;
        self.syscr += o.syscr;
        self.syscw += o.syscw;
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct WorkloadReport {
    /// Per process name, most CPU first.
    pub(crate) rows: Vec<TaskFigures>,
    /// The whole workload (for a command: the kernel's own account at its
    /// exit, wait4's rusage, where it has the figure).
    pub(crate) total: TaskFigures,
    /// tunelab's own CPU time over the interval (all its threads:
    /// samplers, profiler reader), s; never part of the figures above.
    pub(crate) tunelab_cpu_s: f64,
    /// The budget that CPU time was held to, % of one CPU (0: a run made
    /// before there was one).
    #[serde(default)]
    pub(crate) tunelab_budget_pct: f64,
    pub(crate) method: String,
}

// ------------------------------------------------------------ off-CPU

/// One cause of blocked time: a kind of wait, the call that waited and the
/// program's code that called it; all kernel paths of that wait summed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct OffCpuCause {
    /// "lock", "condvar", "join", "futex", "storage", "sleep", "pipe",
    /// "socket", "poll", "page-fault", "reclaim", "terminal", "other".
    pub(crate) class: String,
    /// The wait in words: "futex: pthread_mutex_lock", "fsync (storage flush)".
    pub(crate) cause: String,
    /// The program's functions that made the call, nearest first
    /// ("contended_update ← worker").
    pub(crate) caller: String,
    pub(crate) comm: String,
    /// The heaviest kernel path of this cause, for the curious.
    pub(crate) kernel_path: String,
    pub(crate) total_s: f64,
    pub(crate) waits: u64,
    /// Longest single wait, s (one switch out to the switch back in).
    pub(crate) max_s: f64,
    /// Threads that waited here, and their summed lifetime in the interval
    /// (s): `total_s / thread_time_s` is the share of those threads' time
    /// spent in this wait. 0 when not known (the sampled fallback).
    #[serde(default)]
    pub(crate) threads: u32,
    #[serde(default)]
    pub(crate) thread_time_s: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct OffCpuReport {
    /// "sched switch events" (perf_event_open) or "sampled wchan/stack".
    pub(crate) source: String,
    /// By total blocked time.
    pub(crate) causes: Vec<OffCpuCause>,
    /// All blocked time of the workload's tasks, s.
    pub(crate) blocked_s: f64,
    /// Time preempted while runnable (waiting for a CPU), s.
    pub(crate) runqueue_s: f64,
    /// Blocked and preempted time per process name (all causes, not only
    /// the rows kept).
    #[serde(default)]
    pub(crate) by_process: Vec<ProcessWaits>,
    /// Blocked time by whole stack (µs as samples): the off-CPU flame graph.
    #[serde(default)]
    pub(crate) folded: Vec<super::profile::FoldedStack>,
    pub(crate) method: String,
    /// Who held the CPU while the workload waited preempted (the task that
    /// ran before each switch back in), most first; empty when not traced.
    #[serde(default)]
    pub(crate) holders: Vec<CpuHolder>,
    /// Why holders are not known, when they are not ("" when traced).
    #[serde(default)]
    pub(crate) holders_missing: String,
}

/// A process that ran on a CPU while the workload's threads waited for it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct CpuHolder {
    pub(crate) comm: String,
    pub(crate) pid: u32,
    /// The workload's run-queue time that ended with this process switched out, s.
    pub(crate) s: f64,
    /// "tunelab" (the observer), "workload" (its own threads), "idle", "other".
    pub(crate) role: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ProcessWaits {
    pub(crate) comm: String,
    pub(crate) blocked_s: f64,
    pub(crate) runqueue_s: f64,
    /// One process of that name (switch events), 0 when the row sums every
    /// process of the name (the sampled fallback, older runs).
    #[serde(default)]
    pub(crate) pid: u32,
    /// Its threads' summed traced lifetime, s.
    #[serde(default)]
    pub(crate) thread_time_s: f64,
    /// Blocked time by class ("storage", "pipe", …), s.
    #[serde(default)]
    pub(crate) classes: Vec<(String, f64)>,
}
