//! `compare A B`: pair results by experiment and point, find what differs in
//! the environment, then per metric the ratio of medians with a bootstrap
//! 95% CI and a verdict. `report::compare` renders the result.

use serde::Serialize;

use crate::model::run::{PointResult, Run};
use crate::model::Better;
use crate::stats::{compare, Comparison, Verdict};

/// Facts that change from one minute to the next and say nothing about setup.
pub const VOLATILE: &[&str] = &["mem.available_bytes"];

#[derive(Debug, Clone, Serialize)]
pub struct EnvDiff {
    pub key: String,
    pub base: Option<String>,
    pub new: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct MetricComparison {
    pub name: String,
    pub unit: String,
    pub better: Better,
    pub base_median: f64,
    pub new_median: f64,
    #[serde(flatten)]
    pub comparison: Comparison,
}

#[derive(Debug, Serialize)]
pub struct PairComparison {
    pub experiment: String,
    pub base_params: String,
    pub new_params: String,
    pub metrics: Vec<MetricComparison>,
}

impl PairComparison {
    /// The pair's parameters: one label when both sides agree, else
    /// "base → new".
    pub fn params(&self) -> String {
        if self.base_params == self.new_params {
            self.base_params.clone()
        } else {
            format!("{} → {}", self.base_params, self.new_params)
        }
    }
}

#[derive(Debug, Serialize)]
pub struct RunComparison {
    pub schema: &'static str,
    pub base: String,
    pub new: String,
    pub noise: f64,
    pub environment_diff: Vec<EnvDiff>,
    pub pairs: Vec<PairComparison>,
    /// Results present in only one of the runs.
    pub unpaired: Vec<String>,
    pub regressions: usize,
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
pub fn env_diff(a: &Run, b: &Run) -> Vec<EnvDiff> {
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

pub fn compare_runs(a: &Run, b: &Run, noise: f64) -> RunComparison {
    let (pairs, unpaired) = pair(a, b);
    let pairs: Vec<PairComparison> = pairs
        .into_iter()
        .map(|(ra, rb)| PairComparison {
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
                        comparison: compare(
                            &ma.samples,
                            &mb.samples,
                            ma.better == Better::Higher,
                            noise,
                        ),
                    })
                })
                .collect(),
        })
        .collect();
    let regressions = pairs
        .iter()
        .flat_map(|p| &p.metrics)
        .filter(|m| m.comparison.verdict == Verdict::Regressed)
        .count();
    RunComparison {
        schema: "tunelab.compare/1",
        base: a.id.clone(),
        new: b.id.clone(),
        noise,
        environment_diff: env_diff(a, b),
        pairs,
        unpaired,
        regressions,
    }
}
