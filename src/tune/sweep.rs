//! A one-knob A/B sweep: the experiment is prepared once, then every round
//! runs one trial per value in a fresh random order (so drift and noise hit
//! all values alike), until every value's median is precise, the maximum
//! rounds, or the budget — the engine's measurement loop with a shuffled
//! schedule. The knob guard restores the original at the end.

use super::knobs::KnobGuard;
use crate::engine::measure::{measure, Clock, Loop, Monotonic, Schedule, Trials, Values};
use crate::engine::observer::{Event, Observer};
use crate::engine::params::ParamValue;
use crate::engine::runner::{Outcome, Plan};
use crate::engine::{Ctx, Experiment, Point, PointRun};
use crate::model::run::PointResult;
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
pub(crate) fn sweep(
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
        Ok(Partial::Complete(results)) => out.results = results,
        Ok(Partial::Interrupted(results, e)) => {
            out.results = results;
            out.error = Some(e);
        }
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
) -> Result<Partial> {
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
    let mut arms = m.arms;
    let interrupted = match m.error {
        // Ctrl-C: keep the rounds every value finished (pairs stay whole),
        // drop the round in progress; the caller stores them, interrupted.
        Some(Error::Interrupted(sig)) if arms.iter().all(|a| a.counted() > 0) => {
            let rounds = arms.iter().map(|a| a.counted()).min().unwrap_or(0);
            for a in &mut arms {
                for v in a.samples.values_mut() {
                    v.truncate(rounds);
                }
            }
            Some((sig, rounds))
        }
        Some(e) => return Err(e),
        None => None,
    };
    let mut extras = match interrupted {
        Some(_) => Default::default(),
        None => state.finish(ctx)?,
    };
    drop(state);
    extras
        .notes
        .push(format!("rounds in shuffled order, seed {seed}"));
    if let Some((sig, rounds)) = &interrupted {
        extras.notes.push(format!(
            "interrupted ({sig}) after {rounds} complete round(s); the unfinished round is not kept"
        ));
    }
    let elapsed = t0.elapsed().as_secs_f64() / values.len() as f64;
    let specs = exp.metrics();
    let results = values
        .iter()
        .zip(arms)
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
        .collect();
    Ok(match interrupted {
        Some((sig, _)) => Partial::Interrupted(results, Error::Interrupted(sig)),
        None => Partial::Complete(results),
    })
}

/// A sweep's results, and whether a signal cut it short.
enum Partial {
    Complete(Vec<PointResult>),
    Interrupted(Vec<PointResult>, Error),
}

/// The metric that judges a knob when none is given: the read throughput
/// for read-ahead, the write throughput for the dirty-page sysctls, else the
/// experiment's first metric. `metrics` are (name, unit).
pub(crate) fn default_metric(knob: &str, metrics: &[(String, String)]) -> String {
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
