//! A setting `tunelab apply` made persistent (a sysctl.d drop-in, a udev
//! rule), as the store keeps it: which tune run it came from, the values
//! before and after, the files written, and whether it is still applied.

use serde::{Deserialize, Serialize};

/// One file written by `apply`, with the exact content (so `verify` can
/// tell an edit and `unapply` removes only what tunelab wrote).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedFile {
    pub path: String,
    pub content: String,
}

/// A live file and its value before apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveValue {
    pub(crate) path: String,
    pub(crate) old: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedChange {
    /// `<knob>` or `<knob>@<disk>`, unique among applied changes.
    pub id: String,
    /// The tune run whose verdict chose the value.
    pub run_id: String,
    pub knob: String,
    /// The block device (`sda`, `loop3`) for block-queue knobs, else "".
    #[serde(default)]
    pub device: String,
    /// The live value before apply (what `unapply` puts back).
    pub old: String,
    /// The value apply wrote and read back (the kernel's, if it clamped).
    pub new: String,
    /// The live files the value was written to (below `root`).
    pub live: Vec<String>,
    /// Files the kernel changes as a side effect (vm.dirty_bytes zeroed when
    /// vm.dirty_ratio is set), with their value before apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub partners: Vec<LiveValue>,
    /// The verdict and its 95% CI, in words, as written in the file headers.
    pub verdict: String,
    #[serde(default)]
    pub files: Vec<AppliedFile>,
    /// An fstab line to paste (mount options; fstab is never edited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fstab_line: Option<String>,
    /// The command that measures the same workload again.
    pub remeasure: String,
    /// The file-system root the paths are under ("/" on a real system).
    pub root: String,
    /// Notes such as "the kernel set 4 instead of 0".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The machine it was applied on (/etc/machine-id or tunelab's own):
    /// a record from another machine sharing the store is never acted on.
    #[serde(default)]
    pub machine_id: String,
    /// "applied" or "unapplied".
    pub state: String,
    pub applied_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unapplied_at: Option<String>,
}

/// Settings applied or unapplied between two runs' start times, in words
/// with the verdict that chose them: the environment difference that
/// explains a before/after (`compare` and `report --vs` print them).
pub(crate) fn between(changes: &[AppliedChange], a_started: &str, b_started: &str) -> Vec<String> {
    let (from, to) = if a_started <= b_started {
        (a_started, b_started)
    } else {
        (b_started, a_started)
    };
    // RFC 3339 UTC times of one format compare as text.
    let within = |t: &str| t > from && t <= to;
    let mut lines = Vec::new();
    for c in changes {
        if within(&c.applied_at) {
            lines.push(format!(
                "applied between these runs: {} {} → {} (tunelab apply of run {}: {})",
                c.id, c.old, c.new, c.run_id, c.verdict
            ));
        }
        if c.unapplied_at.as_deref().is_some_and(within) {
            lines.push(format!(
                "unapplied between these runs: {} {} → {} (tunelab unapply)",
                c.id, c.new, c.old
            ));
        }
    }
    lines
}
