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
pub enum Section<T> {
    Present { data: T, overhead: Overhead },
    Skipped { reason: String },
}

impl<T> Section<T> {
    pub fn skipped(reason: impl Into<String>) -> Self {
        Section::Skipped {
            reason: reason.into(),
        }
    }

    pub fn data(&self) -> Option<&T> {
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
pub struct Overhead {
    /// CPU time (user + system) of the thread(s) that collected the section, s.
    pub cpu_s: f64,
    /// Wall time the section covered, s.
    pub interval_s: f64,
    /// Readings taken (samples, file reads), 0 when not sampled.
    #[serde(default)]
    pub readings: u64,
    /// The same in words ("3.1 ms CPU over 5.0 s: 0.06% of one CPU, 500 samples").
    pub words: String,
}

impl Overhead {
    /// Share of one CPU, 0–100.
    pub fn percent_of_cpu(&self) -> f64 {
        if self.interval_s > 0.0 {
            self.cpu_s / self.interval_s * 100.0
        } else {
            0.0
        }
    }
}

/// What was diagnosed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// "system", "pid" or "command".
    pub kind: String,
    /// The process id (the command's child, or --pid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    /// The command and its arguments (kind "command").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Process name (kind "pid").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// How the command ended: "exit 0", "exit 3", "signal 9".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
    /// Exit code when it exited normally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// A whole diagnosis.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    pub target: Target,
    /// Seconds the diagnosis covered (the command's run time for a command).
    pub interval_s: f64,
    /// CPUs online during the interval.
    pub cpus: u32,
    #[serde(default)]
    pub resources: Section<UseTable>,
    #[serde(default)]
    pub profile: Section<Profile>,
    #[serde(default)]
    pub counters: Section<Counters>,
    #[serde(default)]
    pub cache_profile: Section<Profile>,
    #[serde(default)]
    pub locks: Section<LockReport>,
    #[serde(default)]
    pub blocking: Section<BlockingReport>,
    #[serde(default)]
    pub slab: Section<SlabReport>,
    #[serde(default)]
    pub wakeups: Section<WakeupReport>,
    #[serde(default)]
    pub startup: Section<StartupReport>,
    /// The diagnosed workload's own figures (its process tree), beside the
    /// machine-wide USE table.
    #[serde(default)]
    pub workload: Section<WorkloadReport>,
    /// Time blocked by call chain, from scheduler switch events.
    #[serde(default)]
    pub offcpu: Section<OffCpuReport>,
}

fn one() -> u32 {
    1
}

// ------------------------------------------------------------ 1 USE table

/// One measured figure with its unit (base units: %, /s, s, B/s, count).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub name: String,
    pub value: f64,
    pub unit: String,
}

impl Figure {
    pub fn new(name: &str, value: f64, unit: &str) -> Figure {
        Figure {
            name: name.into(),
            value,
            unit: unit.into(),
        }
    }
}

/// One resource: utilisation, saturation and errors (Gregg's USE method).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UseRow {
    /// "cpu", "memory", "disk", "net".
    pub kind: String,
    /// "all CPUs", "memory", "vda", "eth0".
    pub name: String,
    pub utilisation: Vec<Figure>,
    pub saturation: Vec<Figure>,
    pub errors: Vec<Figure>,
    /// How much the row stands out, 0 (idle) to 1+ (saturated): the basis of
    /// `standouts`.
    pub score: f64,
    /// What does not exist for this resource ("disk errors are not exposed
    /// by /proc/diskstats").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl UseRow {
    pub fn figure(&self, name: &str) -> Option<f64> {
        self.utilisation
            .iter()
            .chain(&self.saturation)
            .chain(&self.errors)
            .find(|f| f.name == name)
            .map(|f| f.value)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UseTable {
    pub rows: Vec<UseRow>,
    /// The one or two rows that stand out, in plain words.
    pub standouts: Vec<String>,
    /// How each column was measured.
    pub method: String,
}

impl UseTable {
    pub fn row(&self, kind: &str) -> Option<&UseRow> {
        self.rows.iter().find(|r| r.kind == kind)
    }
}

// ------------------------------------------------------------ 4 locks

/// One lock class from /proc/lock_stat (times in µs as the kernel prints them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LockRow {
    /// Class name with its -R/-W suffix for rwlocks.
    pub class: String,
    pub con_bounces: u64,
    pub contentions: u64,
    pub wait_min_us: f64,
    pub wait_max_us: f64,
    pub wait_total_us: f64,
    pub acq_bounces: u64,
    pub acquisitions: u64,
    pub hold_min_us: f64,
    pub hold_max_us: f64,
    pub hold_total_us: f64,
    /// Where contention happened: (count, symbol+offset), most first.
    #[serde(default)]
    pub contention_points: Vec<(u64, String)>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LockReport {
    /// Top locks by contentions.
    pub locks: Vec<LockRow>,
    /// How lock_stat was switched on and back.
    pub method: String,
}

// ------------------------------------------------------------ 5 blocking

/// One cause of off-CPU time in the processes of one name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockCause {
    /// The lowest pid of the processes (same name) summed here.
    pub pid: i32,
    pub comm: String,
    /// How many processes of that name (a workload's workers) are summed.
    #[serde(default = "one")]
    pub processes: u32,
    /// Kernel function(s) the tasks waited in (wchan, or the stack's top
    /// frames, or LatencyTOP's backtrace).
    pub cause: String,
    /// Occurrences (LatencyTOP count, or samples).
    pub count: u64,
    /// Longest single blocked stretch, s.
    pub max_s: f64,
    /// Total blocked time, s (over all tasks of the process).
    pub total_s: f64,
}

/// Per process name: time on CPU and waiting for a CPU (schedstat).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SchedTime {
    pub pid: i32,
    pub comm: String,
    #[serde(default = "one")]
    pub processes: u32,
    pub tasks: u32,
    pub run_s: f64,
    /// Runnable but waiting for a CPU.
    pub runqueue_s: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockingReport {
    /// "latencytop" or "sampled wchan/stack".
    pub source: String,
    /// Top causes, by total blocked time.
    pub causes: Vec<BlockCause>,
    #[serde(default)]
    pub sched: Vec<SchedTime>,
    pub method: String,
}

// ------------------------------------------------------------ 6 slab

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SlabCache {
    pub name: String,
    pub obj_size: u64,
    pub active_objs: u64,
    /// Allocations/frees over the interval (SLUB_STATS), else the sum of
    /// the absolute changes of active objects between samples.
    pub allocs: u64,
    pub frees: u64,
    /// Share of allocations / frees that took the fast path, 0–100
    /// (SLUB_STATS only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alloc_fast_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_fast_pct: Option<f64>,
    /// Allocations + frees per second.
    pub churn_per_s: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SlabReport {
    /// "slub_stats" or "slabinfo".
    pub source: String,
    /// Busiest caches first.
    pub caches: Vec<SlabCache>,
    pub method: String,
}

// ------------------------------------------------------------ 7 wake-ups

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Waker {
    pub pid: i32,
    pub comm: String,
    #[serde(default = "one")]
    pub processes: u32,
    pub wakeups_per_s: f64,
    /// Involuntary context switches per second (preemptions).
    #[serde(default)]
    pub preempted_per_s: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CState {
    pub name: String,
    /// Share of all CPUs' time in this state over the interval, 0–100.
    pub residency_pct: f64,
    pub entries_per_s: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WakeupReport {
    /// "nr_wakeups" (schedstats) or "voluntary context switches" (proxy).
    pub source: String,
    pub processes: Vec<Waker>,
    #[serde(default)]
    pub cstates: Vec<CState>,
    /// Why C-states are missing, when they are.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cstates_missing: String,
    pub method: String,
}

// ------------------------------------------------------------ 8 start-up

/// Medians of repeated runs in one configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StartupRuns {
    /// "default" or "LD_BIND_NOW=1".
    pub mode: String,
    pub runs: u32,
    /// Exec to exit, s (median).
    pub wall_s: f64,
    pub minor_faults: u64,
    pub major_faults: u64,
    /// glibc's LD_DEBUG=statistics (absent for static or non-glibc programs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linker: Option<LinkerStats>,
    /// Runs that did not exit 0 (still timed).
    #[serde(default)]
    pub failed_runs: u32,
}

/// glibc's runtime linker statistics, medians.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkerStats {
    /// Total time in the dynamic loader, in `unit`.
    pub startup: f64,
    pub relocation: f64,
    pub load_objects: f64,
    /// "cycles" (older glibc) or "µs".
    pub unit: String,
    pub relocations: u64,
    pub relocations_from_cache: u64,
    pub relative_relocations: u64,
    /// Relocations done by exit (lazy binding resolves more while running).
    #[serde(default)]
    pub final_relocations: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StartupReport {
    pub default: StartupRuns,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind_now: Option<StartupRuns>,
    /// Shared objects the dynamic linker loaded.
    pub libraries: Vec<String>,
    pub method: String,
}

// ------------------------------------------------------------ workload

/// One process name of the workload (or the whole workload): its own
/// figures over the interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskFigures {
    pub comm: String,
    /// The lowest pid summed here.
    pub pid: i32,
    #[serde(default = "one")]
    pub processes: u32,
    /// Threads seen.
    pub threads: u32,
    pub user_s: f64,
    pub system_s: f64,
    /// Runnable but waiting for a CPU (schedstat), s.
    pub runqueue_s: f64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    /// /proc/PID/io: bytes through read/write calls, calls, and bytes that
    /// reached the block layer.
    pub rchar: u64,
    pub wchar: u64,
    pub syscr: u64,
    pub syscw: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

impl TaskFigures {
    pub fn cpu_s(&self) -> f64 {
        self.user_s + self.system_s
    }

    pub fn add(&mut self, o: &TaskFigures) {
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
pub struct WorkloadReport {
    /// Per process name, most CPU first.
    pub rows: Vec<TaskFigures>,
    /// The whole workload (for a command: the kernel's own account at its
    /// exit, wait4's rusage, where it has the figure).
    pub total: TaskFigures,
    /// tunelab's own CPU time over the interval (all its threads:
    /// samplers, profiler reader), s; never part of the figures above.
    pub tunelab_cpu_s: f64,
    /// The budget that CPU time was held to, % of one CPU (0: a run made
    /// before there was one).
    #[serde(default)]
    pub tunelab_budget_pct: f64,
    pub method: String,
}

// ------------------------------------------------------------ off-CPU

/// One cause of blocked time: a kind of wait, the call that waited and the
/// program's code that called it; all kernel paths of that wait summed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OffCpuCause {
    /// "lock", "condvar", "join", "futex", "storage", "sleep", "pipe",
    /// "socket", "poll", "page-fault", "reclaim", "terminal", "other".
    pub class: String,
    /// The wait in words: "futex: pthread_mutex_lock", "fsync (storage flush)".
    pub cause: String,
    /// The program's functions that made the call, nearest first
    /// ("contended_update ← worker").
    pub caller: String,
    pub comm: String,
    /// The heaviest kernel path of this cause, for the curious.
    pub kernel_path: String,
    pub total_s: f64,
    pub waits: u64,
    /// Longest single wait, s (one switch out to the switch back in).
    pub max_s: f64,
    /// Threads that waited here, and their summed lifetime in the interval
    /// (s): `total_s / thread_time_s` is the share of those threads' time
    /// spent in this wait. 0 when not known (the sampled fallback).
    #[serde(default)]
    pub threads: u32,
    #[serde(default)]
    pub thread_time_s: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OffCpuReport {
    /// "sched switch events" (perf_event_open) or "sampled wchan/stack".
    pub source: String,
    /// By total blocked time.
    pub causes: Vec<OffCpuCause>,
    /// All blocked time of the workload's tasks, s.
    pub blocked_s: f64,
    /// Time preempted while runnable (waiting for a CPU), s.
    pub runqueue_s: f64,
    /// Blocked and preempted time per process name (all causes, not only
    /// the rows kept).
    #[serde(default)]
    pub by_process: Vec<ProcessWaits>,
    /// Blocked time by whole stack (µs as samples): the off-CPU flame graph.
    #[serde(default)]
    pub folded: Vec<super::profile::FoldedStack>,
    pub method: String,
    /// Who held the CPU while the workload waited preempted (the task that
    /// ran before each switch back in), most first; empty when not traced.
    #[serde(default)]
    pub holders: Vec<CpuHolder>,
    /// Why holders are not known, when they are not ("" when traced).
    #[serde(default)]
    pub holders_missing: String,
}

/// A process that ran on a CPU while the workload's threads waited for it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuHolder {
    pub comm: String,
    pub pid: u32,
    /// The workload's run-queue time that ended with this process switched out, s.
    pub s: f64,
    /// "tunelab" (the observer), "workload" (its own threads), "idle", "other".
    pub role: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessWaits {
    pub comm: String,
    pub blocked_s: f64,
    pub runqueue_s: f64,
    /// One process of that name (switch events), 0 when the row sums every
    /// process of the name (the sampled fallback, older runs).
    #[serde(default)]
    pub pid: u32,
    /// Its threads' summed traced lifetime, s.
    #[serde(default)]
    pub thread_time_s: f64,
    /// Blocked time by class ("storage", "pipe", …), s.
    #[serde(default)]
    pub classes: Vec<(String, f64)>,
}
