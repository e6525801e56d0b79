//! The stored form of a sampled CPU profile and of hardware counters, as
//! `tunelab diagnose` records them. Pure data: produced by
//! `diagnose::profile`, kept in a stored run, rendered by `report` without
//! any live kernel or symbol access (an imported run from a board renders on
//! the host).

use serde::{Deserialize, Serialize};

/// A sampled profile: `opreport -l` rows, an `opreport -c` caller/callee
/// view and folded stacks for a flame graph.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// The event sampled: "cycles", "cpu-clock" (no PMU), "cache-misses".
    pub event: String,
    /// Why this event was chosen (e.g. "no PMU in this VM: cpu-clock").
    #[serde(default)]
    pub event_reason: String,
    /// Requested sampling frequency in Hz (0 when a period was used).
    pub(crate) frequency_hz: u64,
    /// Samples taken, and how many were in user and kernel mode.
    pub samples: u64,
    pub user_samples: u64,
    pub kernel_samples: u64,
    /// Samples the kernel dropped (ring buffer full): non-zero means the
    /// profile under-counts bursts.
    pub lost: u64,
    /// Flat profile, most samples first (`opreport -l`).
    pub symbols: Vec<SymbolRow>,
    /// Caller/callee view of the top symbols (`opreport -c`).
    #[serde(default)]
    pub callgraph: Vec<CallEntry>,
    /// Folded call stacks, root first ("main;f;g"), for a flame graph.
    #[serde(default)]
    pub folded: Vec<FoldedStack>,
    /// What was profiled, in words ("pid 1234, its threads and children",
    /// "whole system, 4 CPUs").
    #[serde(default)]
    pub scope: String,
    /// Whether kernel-mode samples were taken (false when the kernel only
    /// allowed user space, e.g. perf_event_paranoid=2 without root).
    #[serde(default)]
    pub kernel_included: bool,
    /// Whether call chains were sampled (the callgraph and folded stacks
    /// then have more than one frame).
    #[serde(default)]
    pub(crate) call_graph: bool,
    /// Samples the kernel throttled away (perf_event_max_sample_rate).
    #[serde(default)]
    pub(crate) throttled: u64,
    /// What the profiler itself cost.
    #[serde(default)]
    pub overhead: ProfileOverhead,
}

/// The profiler's own cost over one profile, measured, not estimated.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileOverhead {
    /// One sentence with the numbers below, for a report.
    pub summary: String,
    /// Wall time sampled, from start() to finish() stopping the events, ms.
    pub interval_ms: f64,
    /// CPU time of tunelab's ring-buffer reader thread (user+sys), ms.
    pub reader_cpu_ms: f64,
    /// CPU time spent symbolising and aggregating in finish(), after the
    /// sampled interval, ms.
    pub(crate) symbolise_cpu_ms: f64,
    /// Reader CPU / sampled interval, % of one CPU: what the profiler took
    /// from the machine while the workload ran.
    pub cpu_percent_of_one_cpu: f64,
    /// Ring buffer memory mapped for the samplers, bytes.
    pub(crate) ring_bytes: u64,
    /// Distinct stacks kept in memory while sampling.
    pub(crate) distinct_stacks: u64,
}

/// One symbol of a flat profile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SymbolRow {
    pub samples: u64,
    /// Share of all samples, 0–100.
    pub percent: f64,
    /// Binary or "[kernel]" / "[kernel.module]" / "[unknown]".
    pub image: String,
    /// Symbol name (demangled), or the address in hex when unresolved.
    pub symbol: String,
}

/// One symbol with who called it and what it called, with sample counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallEntry {
    pub(crate) symbol: String,
    pub(crate) image: String,
    /// Samples in the symbol itself.
    pub(crate) self_samples: u64,
    /// Samples with the symbol anywhere on the stack.
    pub(crate) total_samples: u64,
    pub callers: Vec<CallEdge>,
    pub(crate) callees: Vec<CallEdge>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallEdge {
    pub(crate) symbol: String,
    pub(crate) samples: u64,
}

/// A folded stack (root first, frames joined by ';') and its sample count.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FoldedStack {
    pub stack: String,
    pub samples: u64,
}

/// Counted (not sampled) events over the interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    pub counters: Vec<Counter>,
    /// instructions / cycles, when both were counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipc: Option<f64>,
    /// What was counted, in words (like `Profile::scope`).
    #[serde(default)]
    pub(crate) scope: String,
    /// Wall time the counters were enabled, ms.
    #[serde(default)]
    pub interval_ms: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counter {
    /// "instructions", "cycles", "cache-references", "cache-misses",
    /// "branch-misses", "task-clock", "context-switches", …
    pub name: String,
    /// Scaled count (value × enabled / running when multiplexed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Fraction of the interval the counter was actually on the PMU
    /// (running / enabled): below 1 means multiplexed and scaled.
    #[serde(default)]
    pub running_fraction: f64,
    /// Unit of `value`: "ns" for the clocks, "" for plain counts.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unit: String,
    /// Why there is no value (e.g. "not supported: no PMU in this VM").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unavailable: String,
}
