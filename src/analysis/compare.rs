//! `compare A B`: pair results by experiment and point, find what differs in
//! the environment, then per metric the ratio of medians with a bootstrap
//! 95% CI widened by the between-run noise learned from other stored runs
//! (`stats::calibrate`), and a verdict marked suspect when the validity
//! guard flagged trials of either side. `report::compare` renders the result.

use serde::Serialize;

use crate::model::run::{PointResult, Run};
use crate::model::Better;
use crate::stats::calibrate::{
    compare_runs as calibrated, Calibrated, NoiseFloor, MAX_HISTORY, MIN_TRIALS,
};
use crate::stats::Verdict;

/// Facts that change from one minute to the next and say nothing about setup.
pub(crate) const VOLATILE: &[&str] = &["mem.available_bytes"];

#[derive(Debug, Clone, Serialize)]
pub(crate) struct EnvDiff {
    pub(crate) key: String,
    pub(crate) base: Option<String>,
    pub(crate) new: Option<String>,
}

#[derive(Debug, Serialize)]
pub(crate) struct MetricComparison {
    pub(crate) name: String,
    pub(crate) unit: String,
    pub(crate) better: Better,
    pub(crate) base_median: f64,
    pub(crate) new_median: f64,
    /// The verdict and what it rests on; `ci95_low`/`ci95_high` are the
    /// widened interval it was judged on, `run_ci95_*` the runs' own.
    #[serde(flatten)]
    pub(crate) calibrated: Calibrated,
    /// Either run's trials of this point were flagged by the validity guard.
    pub(crate) suspect: bool,
}

impl MetricComparison {
    pub(crate) fn comparison(&self) -> &crate::stats::Comparison {
        &self.calibrated.comparison
    }

    /// "regressed", or "regressed (suspect)" on flagged trials.
    pub(crate) fn verdict_label(&self) -> String {
        let v = self.comparison().verdict.as_str();
        if self.suspect {
            format!("{v} (suspect)")
        } else {
            v.to_string()
        }
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct PairComparison {
    pub(crate) experiment: String,
    pub(crate) base_params: String,
    pub(crate) new_params: String,
    pub(crate) metrics: Vec<MetricComparison>,
    /// What the validity guard flagged on either side, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) suspect: Vec<String>,
}

impl PairComparison {
    /// The pair's parameters: one label when both sides agree, else
    /// "base → new".
    pub(crate) fn params(&self) -> String {
        if self.base_params == self.new_params {
            self.base_params.clone()
        } else {
            format!("{} → {}", self.base_params, self.new_params)
        }
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct RunComparison {
    pub(crate) schema: &'static str,
    pub(crate) base: String,
    pub(crate) new: String,
    pub(crate) noise: f64,
    pub(crate) environment_diff: Vec<EnvDiff>,
    pub(crate) pairs: Vec<PairComparison>,
    /// Results present in only one of the runs.
    pub(crate) unpaired: Vec<String>,
    /// Regressed metrics whose trials no guard flagged.
    pub(crate) regressions: usize,
    /// Regressed metrics resting on flagged trials (not counted above).
    pub(crate) suspect_regressions: usize,
    /// How verdicts are reached, in one sentence.
    pub(crate) method: String,
}

/// Pair results: identical (experiment, params) first; what is left of the
/// same experiment is paired in order (so `chunk=64k` vs `chunk=512` still
/// compares, with the parameter difference shown).
fn pair<'a>(a: &'a Run, b: &'a Run) -> (Vec<(&'a PointResult, &'a PointResult)>, Vec<String>) {
    let mut used_b = vec![false; b.results.len()];
    let mut pairs = Vec::new();
    let mut left_a = Vec::new();
    for ra in &a.results {
        let hit = b.results.iter().enumerate().position(|(j, rb)| {
            !used_b[j] && rb.experiment == ra.experiment && rb.params == ra.params
        });
        match hit {
            Some(j) => {
                used_b[j] = true;
                pairs.push((ra, &b.results[j]));
            }
            None => left_a.push(ra),
        }
    }
    let mut unpaired = Vec::new();
    for ra in left_a {
        let hit =
            (0..b.results.len()).find(|&j| !used_b[j] && b.results[j].experiment == ra.experiment);
        match hit {
            Some(j) => {
                used_b[j] = true;
                pairs.push((ra, &b.results[j]));
            }
            None => unpaired.push(format!(
                "only in {}: {} {}",
                a.id,
                ra.experiment,
                ra.params_label()
            )),
        }
    }
    for (j, rb) in b.results.iter().enumerate() {
        if !used_b[j] {
            unpaired.push(format!(
                "only in {}: {} {}",
                b.id,
                rb.experiment,
                rb.params_label()
            ));
        }
    }
    (pairs, unpaired)
}

/// Environment facts that differ between two runs (volatile ones left out).
pub(crate) fn env_diff(a: &Run, b: &Run) -> Vec<EnvDiff> {
    let mut keys: Vec<&String> = a.environment.keys().chain(b.environment.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| !VOLATILE.contains(&k.as_str()))
        .filter(|k| a.environment.get(*k) != b.environment.get(*k))
        .map(|k| EnvDiff {
            key: k.clone(),
            base: a.environment.get(k).cloned(),
            new: b.environment.get(k).cloned(),
        })
        .collect()
}

/// Other runs of the same points: what the between-run noise is learned from.
#[derive(Default)]
pub(crate) struct History<'a> {
    pub(crate) runs: &'a [Run],
}

/// The machine a run's noise belongs to: its machine id, else its name.
fn machine_key(r: &Run) -> Option<&String> {
    r.environment
        .get("machine.id")
        .or_else(|| super::machine::machine_of(r))
}

impl History<'_> {
    fn floor(&self, judged: &Run, p: &PointResult, metric: &str) -> NoiseFloor {
        noise_floor(self.runs, judged, p, metric)
    }
}

/// The between-run noise of `metric` at the point of `p`, learned from the
/// medians of that point in `runs` of the machine of `judged` (the run
/// being judged is left out): what a run comparison, and a study's
/// verdict, widen their interval by.
pub(crate) fn noise_floor(runs: &[Run], judged: &Run, p: &PointResult, metric: &str) -> NoiseFloor {
    let machine = machine_key(judged);
    let mut seen: Vec<&str> = Vec::new();
    let mut medians = Vec::new();
    for r in runs {
        if r.id == judged.id || machine_key(r) != machine || seen.contains(&r.id.as_str()) {
            continue;
        }
        let hit = r
            .results
            .iter()
            .filter(|x| x.experiment == p.experiment && x.params == p.params)
            // The same point on another device or file system is another
            // point (a study on tmpfs beside one on the card).
            .filter(|x| same_storage(x, p))
            .find_map(|x| x.metric(metric))
            .filter(|m| !m.samples.is_empty());
        if let Some(m) = hit {
            seen.push(r.id.as_str());
            medians.push((r.started.as_str(), m.summary.median));
        }
    }
    // The newest runs: an old change of the machine ages out.
    medians.sort_by(|a, b| b.0.cmp(a.0));
    medians.truncate(MAX_HISTORY);
    let medians: Vec<f64> = medians.into_iter().map(|(_, m)| m).collect();
    NoiseFloor::learn(&medians)
}

/// Whether two results were measured on the same device and file system
/// (either without storage facts: yes).
fn same_storage(a: &PointResult, b: &PointResult) -> bool {
    match (&a.storage, &b.storage) {
        (Some(x), Some(y)) => x.device == y.device && x.fs == y.fs,
        _ => true,
    }
}

/// [`compare_runs_with`] without stored history: the default noise floor.
pub(crate) fn compare_runs(a: &Run, b: &Run, noise: f64) -> RunComparison {
    compare_runs_with(a, b, noise, &History::default())
}

/// Either side's validity summary of a pair, labelled by run.
fn suspect_of(a: &Run, ra: &PointResult, b: &Run, rb: &PointResult) -> Vec<String> {
    [(a, ra), (b, rb)]
        .iter()
        .filter_map(|(run, r)| r.suspect_summary().map(|s| format!("{}: {s}", run.id)))
        .collect()
}

pub(crate) fn compare_runs_with(a: &Run, b: &Run, noise: f64, history: &History) -> RunComparison {
    let (pairs, unpaired) = pair(a, b);
    let pairs: Vec<PairComparison> = pairs
        .into_iter()
        .map(|(ra, rb)| {
            let suspect = suspect_of(a, ra, b, rb);
            PairComparison {
                experiment: ra.experiment.clone(),
                base_params: ra.params_label(),
                new_params: rb.params_label(),
                metrics: ra
                    .metrics
                    .iter()
                    .filter_map(|ma| {
                        let mb = rb.metric(&ma.name)?;
                        Some(MetricComparison {
                            name: ma.name.clone(),
                            unit: ma.unit.clone(),
                            better: ma.better,
                            base_median: ma.summary.median,
                            new_median: mb.summary.median,
                            calibrated: calibrated(
                                &ma.samples,
                                &mb.samples,
                                ma.better == Better::Higher,
                                noise,
                                history.floor(b, rb, &ma.name),
                            ),
                            suspect: !suspect.is_empty(),
                        })
                    })
                    .collect(),
                suspect,
            }
        })
        .collect();
    let regressed = |suspect: bool| {
        pairs
            .iter()
            .flat_map(|p| &p.metrics)
            .filter(|m| m.comparison().verdict == Verdict::Regressed && m.suspect == suspect)
            .count()
    };
    RunComparison {
        schema: "tunelab.compare/1",
        base: a.id.clone(),
        new: b.id.clone(),
        noise,
        environment_diff: env_diff(a, b),
        regressions: regressed(false),
        suspect_regressions: regressed(true),
        pairs,
        unpaired,
        method: format!(
            "ratio of medians with a bootstrap 95% CI widened by the between-run noise of the \
             point on this machine (learned from other stored runs, else assumed); no claim \
             below {MIN_TRIALS} trials per run; verdicts on trials the validity guard flagged \
             are marked suspect"
        ),
    }
}
