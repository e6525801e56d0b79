//! The result model: what a run is, as stored and as exported
//! (`tunelab.run/1`, see docs/result-model.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Better, ParamValue};
use crate::observe::sampler::MonitorSample;
pub use crate::observe::validity::{Flag, TrialCheck, Validity};
use crate::stats::{HistogramData, Summary};
use crate::system::Quietness;
use crate::units::format_size;

pub(crate) const RUN_SCHEMA: &str = "tunelab.run/1";

/// An x/y curve for the charts (throughput vs record size, latency vs size).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub(crate) name: String,
    pub(crate) x_label: String,
    pub(crate) x_unit: String,
    pub(crate) y_label: String,
    pub(crate) y_unit: String,
    pub(crate) points: Vec<(f64, f64)>,
}

/// One metric of one point: every raw sample plus its summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricResult {
    pub name: String,
    pub unit: String,
    pub better: Better,
    pub samples: Vec<f64>,
    /// Warm-up trials: recorded, not summarised. The configured warm-up
    /// trials come first, then the measured trials the runner discarded as
    /// warm-up (their number is the point's `validity.warmup_discarded`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warmup: Vec<f64>,
    pub summary: Summary,
}

/// The measurements of one experiment at one point (one parameter combination).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    pub experiment: String,
    pub params: BTreeMap<String, ParamValue>,
    pub metrics: Vec<MetricResult>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<Series>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub histograms: Vec<HistogramData>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Seconds spent on this point, warm-up included.
    pub elapsed_s: f64,
    /// The validity guard's per-trial checks and the warm-up trials
    /// discarded automatically (absent in runs from older versions).
    #[serde(default, skip_serializing_if = "Validity::is_empty")]
    pub validity: Validity,
    /// The kind of each parameter ("size", "duration", "count", …), so a
    /// run imported from another build displays without its registry.
    /// Empty for runs stored before it was recorded.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub param_kinds: BTreeMap<String, String>,
    /// The storage this result was measured on (None: no scratch I/O, or a
    /// run stored before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageFact>,
}

/// Where a result's I/O went: a lab file system is not the host's disk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StorageFact {
    /// The directory measured in (the lab's mount point for a lab run).
    pub(crate) path: String,
    /// Partition or device name (`vda1`, `loop3`), "" when not block-backed.
    #[serde(default)]
    pub(crate) device: String,
    /// Whole disk (`vda`, `loop3`).
    #[serde(default)]
    pub(crate) disk: String,
    #[serde(default)]
    pub(crate) fs: String,
    #[serde(default)]
    pub(crate) mount_options: String,
    /// The `--fs` lab file system (e.g. "ext4:noatime"), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) lab: Option<String>,
    /// The `--throttle` limits in force, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) throttle: Option<String>,
}

impl StorageFact {
    /// Measured on the real device as the system uses it: no lab image, no throttle.
    pub(crate) fn is_native(&self) -> bool {
        self.lab.is_none() && self.throttle.is_none()
    }
}

impl PointResult {
    pub(crate) fn metric(&self, name: &str) -> Option<&MetricResult> {
        self.metrics.iter().find(|m| m.name == name)
    }

    /// `key=value …` in a stable order, sizes in binary units, for display.
    /// Uses the kinds stored with the result (see `param_kind`).
    pub(crate) fn params_label(&self) -> String {
        self.params
            .iter()
            .map(|(k, v)| match (self.param_kind(k).as_deref(), v) {
                (Some("size"), ParamValue::Int(n)) => format!("{k}={}", format_size(*n)),
                _ => format!("{k}={v}"),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The stored kind of a parameter ("size", "duration", …). Results stored
    /// before kinds were recorded learn theirs when the store reads them
    /// ([`PointResult::learn_kinds`]); the model itself knows no registry.
    pub(crate) fn param_kind(&self, name: &str) -> Option<String> {
        self.param_kinds.get(name).cloned()
    }

    /// Give every parameter stored without its kind the kind `lookup` (this
    /// build's registry) names; a stored kind is kept.
    pub(crate) fn learn_kinds(&mut self, lookup: LegacyKinds) {
        for name in self.params.keys() {
            if !self.param_kinds.contains_key(name) {
                if let Some(kind) = lookup(&self.experiment, name) {
                    self.param_kinds.insert(name.clone(), kind.to_string());
                }
            }
        }
    }

    /// "2 of 5 trials flagged: …" when the guard flagged a summarised trial.
    pub(crate) fn suspect_summary(&self) -> Option<String> {
        self.validity.suspect_summary()
    }
}

/// How a result stored without `param_kinds` learns a parameter's kind:
/// (experiment, parameter) -> kind name, from this build's registry.
pub(crate) type LegacyKinds = fn(&str, &str) -> Option<&'static str>;

/// Whether the run finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Complete,
    Interrupted,
    Failed,
}

impl RunStatus {
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            RunStatus::Complete => "complete",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Failed => "failed",
        }
    }
}

/// A run: one invocation of `run` (or a study), with its context.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    pub schema: String,
    pub id: String,
    #[serde(default)]
    pub label: String,
    pub status: RunStatus,
    pub started: String,
    pub finished: String,
    pub tool_version: String,
    pub argv: Vec<String>,
    pub environment: BTreeMap<String, String>,
    #[serde(default)]
    pub quietness: Quietness,
    pub results: Vec<PointResult>,
    #[serde(default)]
    pub samples: Vec<MonitorSample>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Present when the run is a study: key issues with verdicts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub study: Option<StudySummary>,
    /// Present when the run is a `tunelab diagnose`: its sections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<Box<super::diagnosis::Diagnosis>>,
}

/// The verdict on one key issue of a study profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IssueVerdict {
    pub name: String,
    /// The question the key issue answers ("can it record at 6 Mb/s?").
    pub question: String,
    /// The measured figures the verdict rests on, in words.
    pub result: String,
    /// "pass", "fail", "marginal" (the 95% CI straddles the need), "info"
    /// (no criterion) or "unknown" (measurement missing or failed).
    pub verdict: String,
    pub conclusion: String,
    /// Points whose summarised trials the validity guard flagged, in words;
    /// a verdict on them is on suspect data.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suspect: Vec<String>,
    /// Wall-clock seconds the key issue took, fixtures and checks included
    /// (None in runs stored before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

impl IssueVerdict {
    /// PASS, FAIL, MARGINAL, … with "(suspect)" when the validity guard
    /// flagged trials the verdict rests on.
    pub(crate) fn label(&self) -> String {
        if self.suspect.is_empty() {
            self.verdict.to_uppercase()
        } else {
            format!("{} (suspect)", self.verdict.to_uppercase())
        }
    }
}

/// What a study run concluded, for the summary table and the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudySummary {
    pub profile: String,
    pub title: String,
    pub issues: Vec<IssueVerdict>,
}

/// Environment key of the inventory name a run came from (`remote`).
pub(crate) const FLEET_HOST: &str = "fleet.host";

impl Run {
    /// The machine the run is from: its inventory name when `remote`
    /// brought it back, else its host name.
    pub(crate) fn machine(&self) -> Option<&String> {
        self.environment
            .get(FLEET_HOST)
            .or_else(|| self.environment.get("host.name"))
    }

    /// Distinct experiment names, in order of first appearance.
    pub(crate) fn experiments(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in &self.results {
            if !out.contains(&r.experiment) {
                out.push(r.experiment.clone());
            }
        }
        out
    }
}

/// Current UTC time as RFC 3339.
pub(crate) fn now_rfc3339() -> String {
    crate::units::now_rfc3339()
}

/// A sortable, typeable run id: `20261120-231355-3fa2`.
pub(crate) fn new_run_id() -> String {
    format!(
        "{}-{:04x}",
        crate::units::now_stamp(),
        rand::random::<u16>()
    )
}
