//! What is computed from stored runs, for `report` to render and the CLI to
//! print: two runs compared point by point (`compare`), several devices
//! against a baseline (`devices`), a metric's history with its change
//! points (`history`). Nothing here renders, and nothing here imports
//! `report` (tests/architecture.rs keeps it so).

pub(crate) mod compare;
pub(crate) mod devices;
pub(crate) mod history;
pub(crate) mod machine;

/// A stored run with one point of `io.fake` (its write throughput samples),
/// for the tests of analysis and of the renderers of its results.
#[cfg(test)]
pub(crate) mod testing {
    use crate::model::run::{MetricResult, PointResult, Run, RunStatus};
    use crate::model::Better;
    use crate::stats::summarize;

    pub(crate) fn run(id: String, started: String, env: &[(&str, &str)], samples: Vec<f64>) -> Run {
        Run {
            schema: "tunelab.run/1".into(),
            id,
            label: String::new(),
            status: RunStatus::Complete,
            started,
            finished: String::new(),
            tool_version: "0".into(),
            argv: vec![],
            environment: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            quietness: Default::default(),
            results: vec![PointResult {
                experiment: "io.fake".into(),
                params: Default::default(),
                metrics: vec![MetricResult {
                    name: "write_throughput".into(),
                    unit: "B/s".into(),
                    better: Better::Higher,
                    summary: summarize(&samples),
                    samples,
                    warmup: vec![],
                }],
                series: vec![],
                histograms: vec![],
                notes: vec![],
                elapsed_s: 1.0,
                ..Default::default()
            }],
            samples: vec![],
            warnings: vec![],
            study: None,
            diagnosis: None,
        }
    }
}
