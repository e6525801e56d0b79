//! Several runs side by side — typically one per device of a fleet: the key
//! issues' verdicts per device, each device's ratio to a baseline device
//! per metric with a bootstrap 95% CI, and the environment facts that
//! differ between them (kernel, filesystem, mount options, flash identity,
//! knob values…), which are what could explain the spread.
//! `report::devices` renders the result.

use serde::Serialize;

use super::compare::VOLATILE;
pub(crate) use super::machine::{machine_of, FLEET_HOST};
use crate::model::run::Run;
use crate::model::Better;
use crate::stats::{compare, Comparison, Verdict};

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Device {
    /// Machine (host name) and run id: what a column is called.
    pub(crate) name: String,
    pub(crate) run: String,
    pub(crate) machine: String,
    pub(crate) label: String,
}

/// One metric of one point across devices.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct MetricRow {
    pub(crate) experiment: String,
    pub(crate) params: String,
    pub(crate) metric: String,
    pub(crate) unit: String,
    pub(crate) better: Better,
    /// Median per device (None: that device did not measure it).
    pub(crate) medians: Vec<Option<f64>>,
    /// Ratio to the baseline per device (None for the baseline itself and
    /// for devices without the metric).
    pub(crate) vs_baseline: Vec<Option<Comparison>>,
}

/// One key issue's verdict per device.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct IssueRow {
    pub(crate) issue: String,
    pub(crate) verdicts: Vec<Option<String>>,
}

/// An environment fact that is not the same everywhere.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FactRow {
    pub(crate) key: String,
    pub(crate) values: Vec<Option<String>>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct DeviceComparison {
    pub(crate) schema: &'static str,
    pub(crate) baseline: usize,
    pub(crate) noise: f64,
    pub(crate) devices: Vec<Device>,
    pub(crate) issues: Vec<IssueRow>,
    pub(crate) metrics: Vec<MetricRow>,
    pub(crate) environment_diff: Vec<FactRow>,
    /// Metrics a device is worse on than the baseline (verdict regressed).
    pub(crate) regressions: usize,
}

fn device(r: &Run) -> Device {
    let machine = machine_of(r).cloned().unwrap_or_else(|| "?".into());
    Device {
        name: format!("{machine} ({})", r.id),
        run: r.id.clone(),
        machine,
        label: r.label.clone(),
    }
}

/// Compare `runs` (two or more) against `runs[baseline]`.
pub(crate) fn compare_devices(runs: &[Run], baseline: usize, noise: f64) -> DeviceComparison {
    let base = &runs[baseline];
    let devices: Vec<Device> = runs.iter().map(device).collect();
    // Key issues in the order of the first run that has them.
    let mut issues: Vec<IssueRow> = Vec::new();
    for (d, r) in runs.iter().enumerate() {
        for iv in r.study.iter().flat_map(|s| &s.issues) {
            let row = match issues.iter().position(|x| x.issue == iv.name) {
                Some(i) => &mut issues[i],
                None => {
                    issues.push(IssueRow {
                        issue: iv.name.clone(),
                        verdicts: vec![None; runs.len()],
                    });
                    issues.last_mut().expect("just pushed")
                }
            };
            row.verdicts[d] = Some(iv.verdict.clone());
        }
    }
    // Metrics of the baseline, matched by (experiment, params, metric).
    let mut metrics = Vec::new();
    for pr in &base.results {
        let params = pr.params_label();
        for m in &pr.metrics {
            let mut row = MetricRow {
                experiment: pr.experiment.clone(),
                params: params.clone(),
                metric: m.name.clone(),
                unit: m.unit.clone(),
                better: m.better,
                medians: vec![None; runs.len()],
                vs_baseline: vec![None; runs.len()],
            };
            for (d, r) in runs.iter().enumerate() {
                let other = r
                    .results
                    .iter()
                    .find(|o| o.experiment == pr.experiment && o.params == pr.params)
                    .and_then(|o| o.metric(&m.name));
                if let Some(o) = other {
                    row.medians[d] = Some(o.summary.median);
                    if d != baseline {
                        row.vs_baseline[d] = Some(compare(
                            &m.samples,
                            &o.samples,
                            m.better == Better::Higher,
                            noise,
                        ));
                    }
                }
            }
            metrics.push(row);
        }
    }
    let mut keys: Vec<&String> = runs.iter().flat_map(|r| r.environment.keys()).collect();
    keys.sort();
    keys.dedup();
    let environment_diff = keys
        .into_iter()
        .filter(|k| !VOLATILE.contains(&k.as_str()))
        .filter_map(|k| {
            let values: Vec<Option<String>> =
                runs.iter().map(|r| r.environment.get(k).cloned()).collect();
            let differ = values.iter().any(|v| v != &values[0]);
            differ.then(|| FactRow {
                key: k.clone(),
                values,
            })
        })
        .collect();
    let regressions = metrics
        .iter()
        .flat_map(|m| m.vs_baseline.iter().flatten())
        .filter(|c| c.verdict == Verdict::Regressed)
        .count();
    DeviceComparison {
        schema: "tunelab.devices/1",
        baseline,
        noise,
        devices,
        issues,
        metrics,
        environment_diff,
        regressions,
    }
}

/// Runs of three boards for the tests here and of the renderers.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::model::run::{IssueVerdict, StudySummary};

    fn run(host: &str, value: f64, kernel: &str, verdict: &str) -> Run {
        let samples: Vec<f64> = [0.998, 1.0, 1.002, 0.999, 1.001]
            .iter()
            .map(|f| f * value)
            .collect();
        let available = format!("{}", value as u64);
        let env = [
            ("host.name", host),
            ("kernel.release", kernel),
            ("mem.available_bytes", available.as_str()),
        ];
        let mut r = super::super::testing::run(
            format!("run-{host}"),
            "2026-11-23T00:00:00Z".into(),
            &env,
            samples,
        );
        r.study = Some(StudySummary {
            profile: "pvr".into(),
            title: "PVR".into(),
            issues: vec![IssueVerdict {
                name: "Recording".into(),
                question: String::new(),
                result: String::new(),
                verdict: verdict.into(),
                conclusion: String::new(),
                suspect: vec![],
                seconds: None,
            }],
        });
        r
    }

    /// stb-b at half stb-a's write throughput (and failing), stb-c the same
    /// as stb-a on another kernel; stb-a is the baseline.
    pub(crate) fn three_devices() -> DeviceComparison {
        let runs = vec![
            run("stb-a", 20e6, "6.1", "pass"),
            run("stb-b", 10e6, "6.1", "fail"),
            run("stb-c", 20.1e6, "6.6", "pass"),
        ];
        compare_devices(&runs, 0, 0.02)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::three_devices;
    use super::*;

    #[test]
    fn devices_are_compared_with_the_baseline_and_their_differences() {
        let c = three_devices();
        assert_eq!(c.devices.len(), 3);
        assert_eq!(
            c.issues[0].verdicts,
            [
                Some("pass".into()),
                Some("fail".into()),
                Some("pass".into())
            ]
        );
        let m = &c.metrics[0];
        assert!(m.vs_baseline[0].is_none());
        let b = m.vs_baseline[1].as_ref().unwrap();
        assert!((b.ratio - 0.5).abs() < 0.01 && b.verdict == Verdict::Regressed);
        assert_eq!(
            m.vs_baseline[2].as_ref().unwrap().verdict,
            Verdict::NoChange
        );
        assert_eq!(c.regressions, 1);
        let keys: Vec<&str> = c.environment_diff.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(
            keys,
            ["host.name", "kernel.release"],
            "volatile facts are left out"
        );
    }
}
