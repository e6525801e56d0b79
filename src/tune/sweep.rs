//! A one-knob A/B sweep: the experiment is prepared once, then every round
//! runs one trial per value in a fresh random order (so drift and noise hit
//! all values alike), until every value's median is precise, the maximum
//! rounds, or the budget — the engine's measurement loop with a shuffled
//! schedule. The knob guard restores the original at the end.

use serde::Serialize;

use super::knobs::KnobGuard;
use crate::engine::measure::{measure, Clock, Loop, Monotonic, Schedule, Trials, Values};
use crate::engine::observer::{Event, Observer};
use crate::engine::params::ParamValue;
use crate::engine::runner::{Outcome, Plan};
use crate::engine::{Better, Ctx, Experiment, Point, PointRun};
use crate::model::run::{MetricResult, PointResult};
use crate::stats::{compare, Verdict};
use crate::{Error, Result};

/// What a sweep compares: the knob's values on one experiment point.
pub struct Sweep<'a> {
    pub knob: &'a str,
    pub values: &'a [String],
    pub exp: &'a dyn Experiment,
    pub point: &'a Point,
}

/// Run the sweep; results are one point per value, tagged `<knob>=<value>`.
/// The round order is shuffled with a fresh seed, stated in the notes.
pub fn sweep(
    guard: &mut KnobGuard,
    sw: &Sweep,
    ctx: &Ctx,
    plan: &Plan,
    obs: &dyn Observer,
) -> Outcome {
    let seed = rand::random();
    sweep_with(
        |v| {
            guard.set(v)?;
            // Read back after every write: a point is only ever measured
            // at the value it is stored under.
            match guard.applied() {
                Some(got) if got != v => Err(Error::environment(format!(
                    "{}: the kernel holds {got} after {v} was written (changed since the probe)",
                    sw.knob
                ))),
                _ => Ok(()),
            }
        },
        sw,
        ctx,
        plan,
        seed,
        &mut Monotonic::start(),
        obs,
    )
}

/// [`sweep`] with the knob set by `set`, a given shuffle seed and clock
/// (tests: a fake knob, a fixed seed, a fake clock).
pub fn sweep_with(
    set: impl FnMut(&str) -> Result<()>,
    sw: &Sweep,
    ctx: &Ctx,
    plan: &Plan,
    seed: u64,
    clock: &mut dyn Clock,
    obs: &dyn Observer,
) -> Outcome {
    let mut out = Outcome {
        results: Vec::new(),
        warnings: Vec::new(),
        error: None,
    };
    match run(set, sw, ctx, plan, seed, clock, obs) {
        Ok(results) => out.results = results,
        Err(e) => out.error = Some(e),
    }
    out
}

/// The sweep's side of the loop: one arm per knob value, all on the one
/// prepared point; the knob is set before every trial.
struct KnobTrials<'a, S> {
    set: S,
    values: &'a [String],
    state: &'a mut Box<dyn PointRun>,
    ctx: &'a Ctx,
    obs: &'a dyn Observer,
}

impl<S: FnMut(&str) -> Result<()>> Trials for KnobTrials<'_, S> {
    fn check(&mut self) -> Result<()> {
        self.ctx.check_cancel()
    }
    fn trial(&mut self, arm: usize, _warm: bool) -> Result<Values> {
        (self.set)(&self.values[arm])?;
        Ok(self.state.trial(self.ctx)?.0)
    }
    fn round_done(&mut self, rounds: usize) {
        self.obs.progress(Event::Round(rounds));
    }
}

fn run(
    set: impl FnMut(&str) -> Result<()>,
    sw: &Sweep,
    ctx: &Ctx,
    plan: &Plan,
    seed: u64,
    clock: &mut dyn Clock,
    obs: &dyn Observer,
) -> Result<Vec<PointResult>> {
    let Sweep {
        knob,
        values,
        exp,
        point,
    } = *sw;
    let t0 = std::time::Instant::now();
    let mut state = exp.prepare(ctx, point)?;
    let how = Loop {
        schedule: Schedule::Shuffled { seed },
        plan: *plan,
        fixed: false,
        auto_warmup: false,
    };
    let m = measure(
        values.len(),
        &how,
        clock,
        &mut KnobTrials {
            set,
            values,
            state: &mut state,
            ctx,
            obs,
        },
    );
    if let Some(e) = m.error {
        return Err(e);
    }
    let mut extras = state.finish(ctx)?;
    drop(state);
    extras
        .notes
        .push(format!("rounds in shuffled order, seed {seed}"));
    let elapsed = t0.elapsed().as_secs_f64() / values.len() as f64;
    let specs = exp.metrics();
    Ok(values
        .iter()
        .zip(m.arms)
        .map(|(v, arm)| {
            let mut params = point.stored(exp.params());
            params.insert(knob.to_string(), ParamValue::Text(v.clone()));
            let metrics = arm.metric_results(specs);
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

/// The metric that judges a knob when none is given: the read throughput
/// for read-ahead, the write throughput for the dirty-page sysctls, else the
/// experiment's first metric. `metrics` are (name, unit).
pub fn default_metric(knob: &str, metrics: &[(String, String)]) -> String {
    let want = match knob {
        "read_ahead_kb" => Some("read"),
        k if k.starts_with("vm.dirty") => Some("write"),
        _ => None,
    };
    let first = metrics.first().map(|m| m.0.clone()).unwrap_or_default();
    let Some(w) = want else { return first };
    let rate = |m: &&(String, String)| m.1.ends_with("/s");
    metrics
        .iter()
        .filter(|m| m.0.contains(w))
        .find(rate)
        .or_else(|| metrics.iter().find(|m| m.0.contains(w)))
        .map(|m| m.0.clone())
        .unwrap_or(first)
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

#[cfg(test)]
mod tests {
    use super::default_metric;

    #[test]
    fn the_default_metric_follows_the_knob() {
        let m: Vec<(String, String)> = [("write_throughput", "B/s"), ("read_throughput", "B/s")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(default_metric("read_ahead_kb", &m), "read_throughput");
        assert_eq!(default_metric("vm.dirty_ratio", &m), "write_throughput");
        assert_eq!(default_metric("nr_requests", &m), "write_throughput");
        let only_write = &m[..1];
        assert_eq!(
            default_metric("read_ahead_kb", only_write),
            "write_throughput"
        );
    }
}
