//! The tune run's verdict as apply reads it: the knob, metric, noise,
//! device and original value a tune run records in its environment, the
//! winning value against the original, and the command that measures it
//! again.

use crate::model::run::Run;
use crate::model::Better;
use crate::stats::{compare, Comparison, Verdict};
use crate::tune::sweep::{best_value, default_metric};
use crate::{Error, Result};

/// Environment keys a tune run records for apply (see cli/tune.rs).
pub const ENV_KNOB: &str = "tune.knob";
pub const ENV_METRIC: &str = "tune.metric";
pub const ENV_NOISE: &str = "tune.noise";
pub const ENV_DEVICE: &str = "tune.device";
pub const ENV_ORIGINAL: &str = "tune.original";
pub const ENV_LAB: &str = "tune.lab";

/// What a tune run concluded, re-derived from its stored samples.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TuneVerdict {
    pub run_id: String,
    pub knob: String,
    pub metric: String,
    pub noise: f64,
    /// The disk block knobs acted on.
    pub device: Option<String>,
    /// The live value before the sweep, when the run recorded it.
    pub original: Option<String>,
    /// The value better than every other with 95% confidence, if any.
    pub best: Option<String>,
    /// The best median (the candidate when nothing won).
    pub candidate: String,
    /// What the candidate is compared with: the original value when it was
    /// swept, else the runner-up.
    pub baseline: String,
    pub ratio: f64,
    pub ci95_low: f64,
    pub ci95_high: f64,
    pub explanation: String,
    /// The sweep ran on a loop device of the file-system lab.
    pub lab: bool,
    /// The directory the sweep measured in (for the fstab line).
    pub target: Option<String>,
    /// The command that measures the same workload at the applied value.
    pub remeasure: String,
}

impl TuneVerdict {
    /// One line for file headers and the store.
    pub fn summary(&self) -> String {
        format!(
            "{}={} vs {}: {} ×{:.3} (95% CI {:.3}–{:.3}), {}",
            self.knob,
            self.candidate,
            self.baseline,
            self.metric,
            self.ratio,
            self.ci95_low,
            self.ci95_high,
            if self.best.is_some() {
                format!(
                    "better than every other value beyond ±{:.0}% noise",
                    self.noise * 100.0
                )
            } else {
                "NOT significantly better (applied with --force)".to_string()
            }
        )
    }
}

/// The value of `--flag X` in a stored argv.
pub(super) fn flag<'a>(argv: &'a [String], name: &str) -> Option<&'a str> {
    let eq = format!("{name}=");
    argv.iter().enumerate().find_map(|(i, a)| {
        if a == name {
            argv.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix(&eq)
        }
    })
}

/// The knob of a tune run: recorded in its environment, or (runs stored
/// before it was) the word after `tune` in its command line.
pub(super) fn knob_of(run: &Run) -> Option<String> {
    if let Some(k) = run.environment.get(ENV_KNOB) {
        return Some(k.clone());
    }
    let i = run.argv.iter().position(|a| a == "tune")?;
    run.argv.get(i + 1).cloned()
}

/// Read a tune run's verdict back from its samples (the same rule `tune`
/// printed: best only when it beats every other value with 95% confidence).
pub fn verdict_of(run: &Run) -> Result<TuneVerdict> {
    let knob = knob_of(run).ok_or_else(|| {
        Error::usage(format!(
            "run {} is not a tune run (no knob recorded): apply takes the run of a \
             'tunelab tune KNOB …'",
            run.id
        ))
    })?;
    if run.results.is_empty() {
        return Err(Error::usage(format!("tune run {} has no results", run.id)));
    }
    let labs: std::collections::BTreeSet<String> = run
        .results
        .iter()
        .filter_map(|r| r.params.get("fs").map(|v| v.to_string()))
        .collect();
    if labs.len() > 1 {
        return Err(Error::usage(format!(
            "run {} swept {knob} on several lab file systems ({}): each has its own verdict; \
             tune on the one you use and apply that run",
            run.id,
            labs.into_iter().collect::<Vec<_>>().join(", ")
        )));
    }
    let metrics: Vec<(String, String)> = run.results[0]
        .metrics
        .iter()
        .map(|m| (m.name.clone(), m.unit.clone()))
        .collect();
    let metric = run
        .environment
        .get(ENV_METRIC)
        .cloned()
        .or_else(|| flag(&run.argv, "--metric").map(String::from))
        .unwrap_or_else(|| default_metric(&knob, &metrics));
    let noise = run
        .environment
        .get(ENV_NOISE)
        .and_then(|n| n.parse().ok())
        .or_else(|| {
            flag(&run.argv, "--noise").and_then(|n| {
                n.trim_end_matches('%')
                    .parse::<f64>()
                    .ok()
                    .map(|p| p / 100.0)
            })
        })
        .unwrap_or(0.02);
    let v = best_value(&knob, &run.results, &metric, noise)?;
    let rows: Vec<(String, &crate::model::run::MetricResult)> = run
        .results
        .iter()
        .filter_map(|r| Some((r.params.get(&knob)?.to_string(), r.metric(&metric)?)))
        .collect();
    let higher = rows[0].1.better == Better::Higher;
    let by_median = |a: &f64, b: &f64| {
        if higher {
            a.total_cmp(b)
        } else {
            b.total_cmp(a)
        }
    };
    let mut sorted = rows.clone();
    sorted.sort_by(|a, b| by_median(&b.1.summary.median, &a.1.summary.median));
    let candidate = v.best.clone().unwrap_or_else(|| sorted[0].0.clone());
    let original = run.environment.get(ENV_ORIGINAL).cloned();
    let baseline = original
        .as_ref()
        .filter(|o| **o != candidate && rows.iter().any(|r| &r.0 == *o))
        .cloned()
        .or_else(|| {
            sorted
                .iter()
                .find(|r| r.0 != candidate)
                .map(|r| r.0.clone())
        })
        .ok_or_else(|| Error::usage(format!("run {} measured only one value", run.id)))?;
    let samples = |name: &str| -> Result<&[f64]> {
        rows.iter()
            .find(|r| r.0 == name)
            .map(|r| r.1.samples.as_slice())
            .ok_or_else(|| {
                Error::measurement(format!("run {}: no samples for {knob}={name}", run.id))
            })
    };
    let c: Comparison = compare(samples(&baseline)?, samples(&candidate)?, higher, noise);
    let device =
        run.environment.get(ENV_DEVICE).cloned().or_else(|| {
            flag(&run.argv, "--device").map(|d| d.trim_start_matches("/dev/").to_string())
        });
    let lab = run.environment.contains_key(ENV_LAB) || !labs.is_empty();
    Ok(TuneVerdict {
        run_id: run.id.clone(),
        remeasure: remeasure(run, &knob),
        knob,
        metric,
        noise,
        device,
        original,
        best: v.best.filter(|_| c.verdict == Verdict::Improved),
        candidate,
        baseline,
        ratio: c.ratio,
        ci95_low: c.ci95_low,
        ci95_high: c.ci95_high,
        explanation: v.explanation,
        lab,
        target: run
            .environment
            .get("target.path")
            .cloned()
            .or_else(|| flag(&run.argv, "--target").map(String::from)),
    })
}

/// `tunelab run EXP -p … --target …`: the tune run's workload, measured
/// at whatever value is live (after apply: the applied one).
fn remeasure(run: &Run, knob: &str) -> String {
    let r = &run.results[0];
    let mut cmd = format!("tunelab run {}", r.experiment);
    for (k, v) in &r.params {
        if k != knob && k != "fs" {
            cmd.push_str(&format!(" -p {k}={v}"));
        }
    }
    for f in ["--target", "--fs", "--fs-size", "--throttle"] {
        if let Some(v) = flag(&run.argv, f) {
            cmd.push_str(&format!(" {f} {v}"));
        }
    }
    cmd.push_str(&format!(" --label after-apply-{}", run.id));
    cmd
}
