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
    pub frequency_hz: u64,
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
    pub symbol: String,
    pub image: String,
    /// Samples in the symbol itself.
    pub self_samples: u64,
    /// Samples with the symbol anywhere on the stack.
    pub total_samples: u64,
    pub callers: Vec<CallEdge>,
    pub callees: Vec<CallEdge>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallEdge {
    pub symbol: String,
    pub samples: u64,
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
    /// Why there is no value (e.g. "not supported: no PMU in this VM").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unavailable: String,
}
