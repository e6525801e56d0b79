//! A one-knob A/B sweep: the experiment is prepared once, then every round
//! runs one trial per value in a fresh random order (so drift and noise hit
//! all values alike), until every value's median is precise, the maximum
//! rounds, or the budget. The knob guard restores the original at the end.

use std::collections::BTreeMap;
use std::time::Instant;

use rand::seq::SliceRandom;
use serde::Serialize;

use super::knobs::KnobGuard;
use crate::engine::model::{MetricResult, PointResult};
use crate::engine::params::ParamValue;
use crate::engine::runner::{Outcome, Plan};
use crate::engine::{Better, Ctx, Experiment, Point};
use crate::stats::{self, compare, summary::relative_half_width, Verdict};
use crate::{Error, Result};

type Samples = BTreeMap<&'static str, Vec<f64>>;

/// What a sweep compares: the knob's values on one experiment point.
pub struct Sweep<'a> {
    pub knob: &'a str,
    pub values: &'a [String],
    pub exp: &'a dyn Experiment,
    pub point: &'a Point,
}

/// Run the sweep; results are one point per value, tagged `<knob>=<value>`.
pub fn sweep(
    guard: &mut KnobGuard,
    sw: &Sweep,
    ctx: &Ctx,
    plan: &Plan,
    progress: &mut dyn FnMut(usize),
) -> Outcome {
    let mut out = Outcome {
        results: Vec::new(),
        warnings: Vec::new(),
        error: None,
    };
    match run(guard, sw, ctx, plan, progress) {
        Ok(results) => out.results = results,
        Err(e) => out.error = Some(e),
    }
    out
}

fn run(
    guard: &mut KnobGuard,
    sw: &Sweep,
    ctx: &Ctx,
    plan: &Plan,
    progress: &mut dyn FnMut(usize),
) -> Result<Vec<PointResult>> {
    let Sweep {
        knob,
        values,
        exp,
        point,
    } = *sw;
    let t0 = Instant::now();
    let mut state = exp.prepare(ctx, point)?;
    let mut warm: Vec<Samples> = vec![Samples::new(); values.len()];
    let mut samples: Vec<Samples> = vec![Samples::new(); values.len()];
    let mut order: Vec<usize> = (0..values.len()).collect();
    let mut rng = rand::thread_rng();
    let mut trial = |i: usize,
                     into: &mut Vec<Samples>,
                     state: &mut Box<dyn crate::engine::PointRun>|
     -> Result<()> {
        ctx.check_cancel()?;
        guard.set(&values[i])?;
        for (name, v) in state.trial(ctx)?.0 {
            into[i].entry(name).or_default().push(v);
        }
        Ok(())
    };
    for _ in 0..plan.warmup {
        order.shuffle(&mut rng);
        for &i in &order {
            trial(i, &mut warm, &mut state)?;
        }
    }
    let measure_start = Instant::now();
    let mut rounds = 0;
    let reason = loop {
        order.shuffle(&mut rng);
        for &i in &order {
            trial(i, &mut samples, &mut state)?;
        }
        rounds += 1;
        progress(rounds);
        let precise = samples.iter().all(|s| {
            !s.is_empty()
                && s.values()
                    .all(|v| relative_half_width(&stats::summarize(v)) <= plan.precision)
        });
        if rounds >= plan.min_trials && precise {
            break "precision";
        }
        if rounds >= plan.max_trials {
            break "max_trials";
        }
        if measure_start.elapsed().as_secs_f64() >= plan.budget {
            break "budget";
        }
    };
    let extras = state.finish(ctx)?;
    drop(state);
    let elapsed = t0.elapsed().as_secs_f64() / values.len() as f64;
    let specs = exp.metrics();
    Ok(values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mut params = point.0.clone();
            params.insert(knob.to_string(), ParamValue::Text(v.clone()));
            let metrics = specs
                .iter()
                .filter_map(|m| {
                    let s = samples[i].remove(m.name)?;
                    let mut summary = stats::summarize(&s);
                    summary.stop_reason = reason.to_string();
                    Some(MetricResult {
                        name: m.name.into(),
                        unit: m.unit.into(),
                        better: m.better,
                        samples: s,
                        warmup: warm[i].remove(m.name).unwrap_or_default(),
                        summary,
                    })
                })
                .collect();
            PointResult {
                experiment: exp.name().into(),
                params,
                metrics,
                series: extras.series.clone(),
                histograms: Vec::new(),
                notes: extras.notes.clone(),
                elapsed_s: elapsed,
                ..Default::default()
            }
        })
        .collect())
}

/// The sweep's conclusion for one metric.
#[derive(Debug, Serialize)]
pub struct Verdicts {
    pub metric: String,
    /// The value better than every other one with 95% confidence, if any.
    pub best: Option<String>,
    pub explanation: String,
}

/// Name the best value only when it beats every other value significantly.
pub fn best_value(
    knob: &str,
    results: &[PointResult],
    metric: &str,
    noise: f64,
) -> Result<Verdicts> {
    let rows: Vec<(String, &MetricResult)> = results
        .iter()
        .filter_map(|r| Some((r.params.get(knob)?.to_string(), r.metric(metric)?)))
        .collect();
    let first = rows
        .first()
        .ok_or_else(|| Error::measurement(format!("no results for metric {metric}")))?;
    let higher = first.1.better == Better::Higher;
    let best = rows
        .iter()
        .max_by(|a, b| {
            let (x, y) = (a.1.summary.median, b.1.summary.median);
            if higher {
                x.total_cmp(&y)
            } else {
                y.total_cmp(&x)
            }
        })
        .ok_or_else(|| Error::measurement("no values"))?;
    let losers: Vec<String> = rows
        .iter()
        .filter(|r| r.0 != best.0)
        .filter(|r| {
            compare(&r.1.samples, &best.1.samples, higher, noise).verdict != Verdict::Improved
        })
        .map(|r| r.0.clone())
        .collect();
    Ok(if losers.is_empty() && rows.len() > 1 {
        Verdicts {
            metric: metric.into(),
            best: Some(best.0.clone()),
            explanation: format!(
                "{knob}={} is significantly better than every other value for {metric}",
                best.0
            ),
        }
    } else {
        Verdicts {
            metric: metric.into(),
            best: None,
            explanation: format!(
                "no value is significantly better for {metric}: {knob}={} has the best median but does not \
                 beat {} beyond the ±{:.0}% noise with 95% confidence",
                best.0,
                losers.join(", "),
                noise * 100.0
            ),
        }
    })
}
