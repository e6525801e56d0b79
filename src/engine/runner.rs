//! The runner: warm-up, then trials until the 95% CI of every metric's median
//! is within the precision target (or max trials, or the time budget), and
//! the reason it stopped.

use std::collections::BTreeMap;
use std::time::Instant;

use super::model::{MetricResult, PointResult};
use super::{Ctx, Experiment, Point, RunDefaults};
use crate::stats::{self, summary::relative_half_width};
use crate::{Error, Result};

/// Repetition settings from the command line; `None` means the experiment's
/// default.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub warmup: Option<usize>,
    pub min_trials: Option<usize>,
    pub max_trials: Option<usize>,
    /// Exactly N trials (sets min = max = N).
    pub trials: Option<usize>,
    /// Target relative half-width of the 95% CI of the median (0.02 = 2%).
    pub precision: Option<f64>,
    /// Seconds for the whole run.
    pub budget: Option<f64>,
}

/// Settings after applying the experiment's defaults.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub warmup: usize,
    pub min_trials: usize,
    pub max_trials: usize,
    pub precision: f64,
    pub budget: f64,
}

impl RunOptions {
    pub fn plan(&self, d: RunDefaults) -> Result<Plan> {
        if let (Some(lo), Some(hi)) = (self.min_trials, self.max_trials) {
            if lo > hi {
                return Err(Error::usage(format!(
                    "--min-trials {lo} is more than --max-trials {hi}; swap them or drop one"
                )));
            }
        }
        let (min, max) = match self.trials {
            Some(n) => (n, n),
            None => {
                let max = self.max_trials.unwrap_or(d.max_trials);
                (self.min_trials.unwrap_or(d.min_trials).min(max), max)
            }
        };
        if max == 0 {
            return Err(Error::usage("the number of trials must be at least 1"));
        }
        let precision = self.precision.unwrap_or(0.02);
        if !(precision > 0.0 && precision < 1.0) {
            return Err(Error::usage(
                "--precision must be between 0 and 1 (e.g. 0.02 for 2%)",
            ));
        }
        let budget = self.budget.unwrap_or(d.budget);
        if budget <= 0.0 {
            return Err(Error::usage(
                "--budget must be a positive duration (e.g. 30s)",
            ));
        }
        Ok(Plan {
            warmup: self.warmup.unwrap_or(d.warmup),
            min_trials: min.max(1),
            max_trials: max,
            precision,
            budget,
        })
    }
}

/// Progress events for a bar or a log line.
pub enum Event<'a> {
    PointStarted {
        index: usize,
        total: usize,
        label: &'a str,
    },
    Trial {
        n: usize,
        max: usize,
    },
    PointDone {
        index: usize,
        stop_reason: &'a str,
    },
}

/// Why a point stopped repeating.
fn stop_reason(
    n: usize,
    plan: &Plan,
    precise: bool,
    over_budget: bool,
    fixed: bool,
) -> Option<&'static str> {
    if fixed {
        return (n >= plan.max_trials).then_some("fixed");
    }
    if n >= plan.min_trials && precise {
        return Some("precision");
    }
    if n >= plan.max_trials {
        return Some("max_trials");
    }
    if over_budget {
        return Some("budget");
    }
    None
}

/// Outcome of running all points: the completed ones, and the error that
/// stopped the run early, if any (interrupt or failure).
pub struct Outcome {
    pub results: Vec<PointResult>,
    pub warnings: Vec<String>,
    pub error: Option<Error>,
}

pub fn run_points(
    exp: &dyn Experiment,
    points: &[Point],
    ctx: &Ctx,
    plan: &Plan,
    fixed_trials: bool,
    progress: &mut dyn FnMut(Event),
) -> Outcome {
    let start = Instant::now();
    let mut out = Outcome {
        results: Vec::new(),
        warnings: Vec::new(),
        error: None,
    };
    let specs = exp.params();
    for (i, point) in points.iter().enumerate() {
        let label = point.label(&specs);
        progress(Event::PointStarted {
            index: i,
            total: points.len(),
            label: &label,
        });
        // Share what is left of the budget among the points still to run.
        let left = (plan.budget - start.elapsed().as_secs_f64()).max(0.0);
        let point_budget = left / (points.len() - i) as f64;
        match run_point(exp, point, ctx, plan, fixed_trials, point_budget, progress) {
            Ok(r) => {
                out.warnings.extend(cold_start_warnings(&r, &label));
                progress(Event::PointDone {
                    index: i,
                    stop_reason: r
                        .metrics
                        .first()
                        .map(|m| m.summary.stop_reason.as_str())
                        .unwrap_or(""),
                });
                out.results.push(r);
            }
            Err(e) => {
                out.error = Some(e);
                break;
            }
        }
    }
    out
}

fn run_point(
    exp: &dyn Experiment,
    point: &Point,
    ctx: &Ctx,
    plan: &Plan,
    fixed_trials: bool,
    budget: f64,
    progress: &mut dyn FnMut(Event),
) -> Result<PointResult> {
    let t0 = Instant::now();
    let metric_specs = exp.metrics();
    let mut state = exp.prepare(ctx, point)?;
    let mut warm: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    let mut samples: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    // Warm-up is bounded by the budget too: a large --warmup must not run
    // for ever. Stopping early is said in the point's notes.
    let mut warmed = 0;
    while warmed < plan.warmup {
        if warmed > 0 && t0.elapsed().as_secs_f64() >= budget {
            break;
        }
        ctx.check_cancel()?;
        for (name, v) in state.trial(ctx)?.0 {
            warm.entry(name).or_default().push(v);
        }
        warmed += 1;
    }
    let warmup_note = (warmed < plan.warmup).then(|| {
        format!(
            "warm-up stopped after {warmed} of {} trials: it used the whole time budget ({:.0} s)",
            plan.warmup, budget
        )
    });
    state.warmup_done();
    // The budget clock starts after warm-up so a slow first trial does not
    // eat the measurement's share.
    let measure_start = Instant::now();
    let mut n = 0;
    let reason = loop {
        ctx.check_cancel()?;
        let values = state.trial(ctx)?;
        for (name, v) in values.0 {
            if !metric_specs.iter().any(|m| m.name == name) {
                return Err(Error::measurement(format!(
                    "internal: {} produced undeclared metric {name}",
                    exp.name()
                )));
            }
            samples.entry(name).or_default().push(v);
        }
        n += 1;
        progress(Event::Trial {
            n,
            max: plan.max_trials,
        });
        let precise = !samples.is_empty()
            && samples
                .values()
                .all(|s| relative_half_width(&stats::summarize(s)) <= plan.precision);
        let over = measure_start.elapsed().as_secs_f64() >= budget;
        if let Some(r) = stop_reason(n, plan, precise, over, fixed_trials) {
            break r;
        }
    };
    let extras = state.finish(ctx)?;
    drop(state);
    let metrics = metric_specs
        .iter()
        .filter_map(|spec| {
            let s = samples.remove(spec.name)?;
            let mut summary = stats::summarize(&s);
            summary.stop_reason = reason.to_string();
            Some(MetricResult {
                name: spec.name.to_string(),
                unit: spec.unit.to_string(),
                better: spec.better,
                samples: s,
                warmup: warm.remove(spec.name).unwrap_or_default(),
                summary,
            })
        })
        .collect();
    Ok(PointResult {
        experiment: exp.name().to_string(),
        params: point.0.clone(),
        metrics,
        series: extras.series,
        histograms: extras.histograms,
        notes: warmup_note.into_iter().chain(extras.notes).collect(),
        elapsed_s: t0.elapsed().as_secs_f64(),
        ..Default::default()
    })
}

/// A first measured trial far from the rest usually means cold caches or a
/// CPU still ramping its clock: say so instead of silently averaging it in.
fn cold_start_warnings(r: &PointResult, label: &str) -> Vec<String> {
    r.metrics
        .iter()
        .filter(|m| m.summary.first_is_outlier)
        .map(|m| {
            format!(
                "{} {label}: the first trial of {} is an outlier (cold caches or CPU clock ramp-up?); \
                 it is kept — consider --warmup 2",
                r.experiment, m.name
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            warmup: 1,
            min_trials: 5,
            max_trials: 10,
            precision: 0.02,
            budget: 10.0,
        }
    }

    #[test]
    fn stops_for_the_right_reason() {
        let p = plan();
        assert_eq!(
            stop_reason(3, &p, true, false, false),
            None,
            "min trials first"
        );
        assert_eq!(stop_reason(5, &p, true, false, false), Some("precision"));
        assert_eq!(stop_reason(10, &p, false, false, false), Some("max_trials"));
        assert_eq!(stop_reason(2, &p, false, true, false), Some("budget"));
        assert_eq!(
            stop_reason(5, &p, true, true, true),
            None,
            "fixed count ignores precision"
        );
        assert_eq!(stop_reason(10, &p, false, false, true), Some("fixed"));
    }

    #[test]
    fn options_resolve_against_defaults() {
        let d = RunDefaults::default();
        let o = RunOptions {
            trials: Some(3),
            ..Default::default()
        };
        let p = o.plan(d).unwrap();
        assert_eq!((p.min_trials, p.max_trials), (3, 3));
        let o = RunOptions {
            trials: Some(0),
            ..Default::default()
        };
        assert_eq!(o.plan(d).unwrap_err().exit_code(), 2);
        let o = RunOptions {
            precision: Some(5.0),
            ..Default::default()
        };
        assert!(o.plan(d).is_err());
        let o = RunOptions {
            min_trials: Some(5),
            max_trials: Some(2),
            ..Default::default()
        };
        let e = o.plan(d).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("--min-trials 5"), "{e}");
        // Only --max-trials below the default minimum: the minimum follows.
        let o = RunOptions {
            max_trials: Some(2),
            ..Default::default()
        };
        assert_eq!(o.plan(d).unwrap().min_trials, 2);
    }
}
