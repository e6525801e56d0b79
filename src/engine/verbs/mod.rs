//! The verbs that measure programs or the machine rather than an
//! experiment's points: `time`, `boot`, `diagnose` and `memory`, and
//! `remote`, which runs tunelab on other hosts; `inspect` and `restore`
//! read and repair the host. Each is two calls: `plan` takes the request
//! the CLI parsed and decides every input before anything runs;
//! `Planned::measure` only runs, in one session (`Session::open`: the run
//! built in one place); those that keep a run close it through the pipeline
//! (`pipeline::close`: stored, the store's failure kept for after the
//! results are printed) and return what the CLI renders. Messages go
//! through the engine's one `Observer` (`engine::observer`).

pub(crate) mod boot;
pub(crate) mod diagnose;
pub(crate) mod inspect;
pub(crate) mod memory;
pub(crate) mod monitor;
pub(crate) mod remote;
pub(crate) mod restore;
pub mod run;
pub(crate) mod time;

use std::collections::BTreeMap;

use crate::model::run::{MetricResult, PointResult};
use crate::model::Better;
use crate::model::ParamValue;
use crate::stats::{self, StopReason};

/// The one point a verb measured (no series, no histograms).
fn point(
    experiment: &str,
    params: BTreeMap<String, ParamValue>,
    metrics: Vec<MetricResult>,
    notes: Vec<String>,
    elapsed_s: f64,
) -> PointResult {
    PointResult {
        experiment: experiment.into(),
        params,
        metrics,
        notes,
        elapsed_s,
        ..Default::default()
    }
}

/// A metric from measured samples and the warm-up ones (None when nothing
/// was measured), its summary stopped for `reason`.
fn metric(
    name: String,
    unit: &str,
    better: Better,
    samples: Vec<f64>,
    warmup: Vec<f64>,
    reason: Option<StopReason>,
) -> Option<MetricResult> {
    if samples.is_empty() {
        return None;
    }
    let mut summary = stats::summarize(&samples);
    summary.stop_reason = reason;
    Some(MetricResult {
        name,
        unit: unit.to_string(),
        better,
        samples,
        warmup,
        summary,
    })
}
