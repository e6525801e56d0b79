//! The runner: an experiment's points through the measurement loop
//! ([`super::measure`]): warm-up, then trials until the 95% CI of every
//! metric's median is within the precision target (or max trials, or the
//! time budget), and the reason it stopped; plus what only experiments
//! have: prepare/finish per point, the validity guard around every measured
//! trial, and parameters a point fitted to the machine.

use std::collections::BTreeMap;
use std::time::Instant;

use super::measure::{
    check_declared, measure, ArmSamples, Clock, Loop, Monotonic, Schedule, Trials, Values,
};
use super::observer::{Event, Observer};
use super::{
    Ctx, Experiment, Fitted, ParamSpec, ParamValue, Point, PointExtras, PointRun, PointTime,
    RunDefaults,
};
use crate::model::run::PointResult;
use crate::observe::validity::{Guard, Roots, TrialCheck, Validity};
use crate::system::flash::wa::WriteCount;
use crate::{Error, Result};

pub(crate) use super::measure::{Plan, StopReason};

/// Repetition settings from the command line; `None` means the experiment's
/// default.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunOptions {
    pub(crate) warmup: Option<usize>,
    pub(crate) min_trials: Option<usize>,
    pub(crate) max_trials: Option<usize>,
    /// Exactly N trials (sets min = max = N).
    pub(crate) trials: Option<usize>,
    /// Target relative half-width of the 95% CI of the median (0.02 = 2%).
    pub(crate) precision: Option<f64>,
    /// Seconds for the whole run.
    pub(crate) budget: Option<f64>,
    /// Seconds one trial should at least take (default
    /// [`super::DEFAULT_TRIAL_TIME`]).
    pub(crate) trial_time: Option<f64>,
}

/// Most trials (or warm-up trials) a point may be asked for: far above
/// any real plan, low enough that a typo cannot ask for centuries.
pub(crate) const MAX_TRIALS: usize = 1_000_000;

/// Longest budget a run or a profile's issue may have: a week.
pub(crate) const MAX_BUDGET_S: f64 = 7.0 * 86_400.0;

/// Trial counts and a budget within the limits above, else what is wrong
/// with the limit named (`run` flags and study profiles both use it, so a
/// profile is refused when it is read).
pub(crate) fn check_repetition(
    counts: &[(&str, Option<usize>)],
    budget: Option<f64>,
) -> std::result::Result<(), String> {
    for (what, n) in counts {
        if let Some(n) = n.filter(|n| *n > MAX_TRIALS) {
            return Err(format!(
                "{what} {n} is more than {MAX_TRIALS}, the most tunelab runs: give fewer"
            ));
        }
    }
    match budget {
        Some(b) if !b.is_finite() || b > MAX_BUDGET_S => Err(format!(
            "a budget of {b} s is more than {} s (7 days), the longest tunelab runs: give less",
            MAX_BUDGET_S
        )),
        _ => Ok(()),
    }
}

/// The longest a plan's points can take on one target, in seconds: the
/// budget, which stops the loop and bounds warm-up too (a trial under way
/// still finishes). None for a fixed count without a budget: its trials
/// take as long as they take.
pub(crate) fn longest(plan: &Plan, fixed: bool) -> Option<f64> {
    (!fixed).then_some(plan.budget)
}

impl RunOptions {
    /// A fixed count of trials (`--trials N`) that ignores the budget —
    /// unless a budget is given too, which then still stops it.
    pub(crate) fn fixed(&self) -> bool {
        self.trials.is_some() && self.budget.is_none()
    }

    pub(crate) fn plan(&self, d: RunDefaults) -> Result<Plan> {
        if let (Some(lo), Some(hi)) = (self.min_trials, self.max_trials) {
            if lo > hi {
                return Err(Error::usage(format!(
                    "--min-trials {lo} is more than --max-trials {hi}; swap them or drop one"
                )));
            }
        }
        check_repetition(
            &[
                ("--trials", self.trials),
                ("--min-trials", self.min_trials),
                ("--max-trials", self.max_trials),
                ("--warmup", self.warmup),
            ],
            self.budget,
        )
        .map_err(Error::usage)?;
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
        let trial_time = match self.trial_time {
            None => super::DEFAULT_TRIAL_TIME,
            Some(t) => trial_time(t).map_err(Error::usage)?,
        };
        Ok(Plan {
            warmup: self.warmup.unwrap_or(d.warmup),
            min_trials: min.max(1),
            max_trials: max,
            precision,
            budget,
            trial_time,
        })
    }
}

/// A trial time in seconds, checked: 1 ms to 60 s (the message says what
/// to give). `run --trial-time` and a profile's `trial_time` both use it,
/// so a profile is refused before anything runs.
pub(crate) fn trial_time(secs: f64) -> std::result::Result<std::time::Duration, String> {
    if (0.001..=60.0).contains(&secs) {
        Ok(std::time::Duration::from_secs_f64(secs))
    } else {
        Err(format!(
            "a trial time of {secs} s is out of range: give 1ms to 60s (e.g. 100ms for a \
             quicker, noisier look; the default is {} ms)",
            super::DEFAULT_TRIAL_TIME.as_millis()
        ))
    }
}

/// Outcome of running all points: the completed ones, and the error that
/// stopped the run early, if any (interrupt or failure).
pub struct Outcome {
    pub results: Vec<PointResult>,
    pub(crate) warnings: Vec<String>,
    pub error: Option<Error>,
}

/// Run every point of `exp` in turn through the measurement loop
/// ([`measure`], sequential schedule, automatic warm-up discard), each with
/// an equal share of what is left of the budget.
pub(crate) fn run_points(
    exp: &dyn Experiment,
    points: &[Point],
    ctx: &Ctx,
    plan: &Plan,
    fixed_trials: bool,
    obs: &dyn Observer,
) -> Outcome {
    run_points_with(
        exp,
        points,
        ctx,
        plan,
        fixed_trials,
        &mut Monotonic::start(),
        obs,
    )
}

/// [`run_points`] with the budget read from `clock` (tests pass a fake one).
pub fn run_points_with(
    exp: &dyn Experiment,
    points: &[Point],
    ctx: &Ctx,
    plan: &Plan,
    fixed_trials: bool,
    clock: &mut dyn Clock,
    obs: &dyn Observer,
) -> Outcome {
    ctx.set_trial_time(plan.trial_time);
    let how = Loop {
        schedule: Schedule::Sequential,
        plan: *plan,
        fixed: fixed_trials,
        auto_warmup: true,
    };
    let mut pr = PointTrials {
        exp,
        points,
        ctx,
        plan,
        specs: exp.params(),
        declared: exp.metrics().iter().map(|m| m.name).collect(),
        obs,
        state: None,
        guard: None,
        checks: Vec::new(),
        t0: Instant::now(),
        start: Instant::now(),
        fixed: fixed_trials,
        results: Vec::new(),
        writes: None,
    };
    let m = measure(points.len(), &how, clock, &mut pr);
    let results = std::mem::take(&mut pr.results);
    drop(pr);
    Outcome {
        warnings: suspect_warning(exp.name(), &results).into_iter().collect(),
        results,
        error: m.error,
    }
}

/// The runner's side of the loop: one arm per point, prepared when it
/// starts, checked by the validity guard around every measured trial,
/// turned into a [`PointResult`] when it stops.
struct PointTrials<'a> {
    exp: &'a dyn Experiment,
    points: &'a [Point],
    ctx: &'a Ctx,
    plan: &'a Plan,
    specs: &'static [ParamSpec],
    declared: Vec<&'static str>,
    obs: &'a dyn Observer,
    state: Option<Box<dyn PointRun>>,
    guard: Option<Guard>,
    checks: Vec<TrialCheck>,
    t0: Instant,
    /// When the first point began, and whether the count is fixed (no budget).
    start: Instant,
    fixed: bool,
    results: Vec<PointResult>,
    /// Write amplification of the point's trials (None: no block device).
    writes: Option<WriteCount>,
}

impl Trials for PointTrials<'_> {
    fn check(&mut self) -> Result<()> {
        self.ctx.check_cancel()
    }

    fn begin(&mut self, arm: usize) -> Result<()> {
        let label = self.points[arm].label(self.specs);
        self.obs.progress(Event::Started {
            index: arm,
            total: self.points.len(),
            of: self.exp.name(),
            label: &label,
        });
        self.t0 = Instant::now();
        self.checks.clear();
        self.guard = None;
        // The same share the measurement loop gives this point (what is
        // left of the budget over the points left), so it can size itself.
        // Sized for the most trials it may run (not the least): a point that
        // fits only its minimum overruns its share whenever it is not yet
        // precise there, and the points after it are left with nothing.
        let left = (self.plan.budget - self.start.elapsed().as_secs_f64()).max(0.0);
        self.ctx.set_point_time((!self.fixed).then(|| PointTime {
            seconds: left / (self.points.len() - arm) as f64,
            trials: self.plan.warmup + self.plan.max_trials,
        }));
        // Write amplification counts the point's preparation too (a
        // pre-filled file is bytes the device took for this point).
        self.writes = self.ctx.scratch_dir().ok().and_then(WriteCount::for_dir);
        if let Some(w) = self.writes.as_mut() {
            w.start();
        }
        let state = self.exp.prepare(self.ctx, &self.points[arm]);
        self.ctx.set_point_time(None);
        self.state = Some(state?);
        Ok(())
    }

    fn trial(&mut self, _arm: usize, warm: bool) -> Result<Values> {
        let state = self
            .state
            .as_mut()
            .ok_or_else(|| Error::measurement("internal: trial before prepare"))?;
        let values = match (&self.guard, warm) {
            (Some(guard), false) => {
                let before = guard.read();
                let t = Instant::now();
                let values = state.trial(self.ctx)?;
                let seconds = t.elapsed().as_secs_f64();
                self.checks
                    .push(guard.check(&before, &guard.read(), seconds));
                values
            }
            _ => state.trial(self.ctx)?,
        };
        check_declared(self.exp.name(), &self.declared, &values.0)?;
        Ok(values.0)
    }

    fn warmup_done(&mut self, _arm: usize) {
        if let Some(s) = self.state.as_mut() {
            s.warmup_done();
        }
        // The validity guard reads its sources before and after every
        // measured trial, outside the experiment's own timing.
        self.guard = Some(Guard::new(
            Roots::system(),
            self.ctx.scratch_dir().ok(),
            self.ctx.cache_drops.clone(),
        ));
    }

    fn progress(&mut self, _arm: usize, n: usize, max: usize) {
        self.obs.progress(Event::Trial { n, max });
    }

    fn end(&mut self, arm: usize, a: &ArmSamples) -> Result<()> {
        let mut state = self
            .state
            .take()
            .ok_or_else(|| Error::measurement("internal: point ended before prepare"))?;
        // An interrupted point keeps its trials even when its extras
        // cannot be collected any more (the signal stops that work too).
        let extras = match state.finish(self.ctx) {
            Err(_) if a.reason == Some(StopReason::Interrupted) => PointExtras::default(),
            other => other?,
        };
        let fitted = state.fitted();
        drop(state);
        if let Some(w) = self.writes.as_mut() {
            w.stop();
        }
        let r = self.point_result(arm, a, extras, fitted);
        self.obs.progress(Event::Done {
            index: arm,
            stop_reason: r
                .metrics
                .first()
                .map(|m| m.summary.stop_reason_str())
                .unwrap_or(""),
        });
        self.results.push(r);
        Ok(())
    }
}

impl PointTrials<'_> {
    fn point_result(
        &mut self,
        arm: usize,
        a: &ArmSamples,
        extras: PointExtras,
        fitted: Vec<Fitted>,
    ) -> PointResult {
        let plan = self.plan;
        let metrics = a.metric_results(self.exp.metrics());
        // Warm-up stopped early by the budget is said in the point's notes.
        let warmup_note = (a.warmed < plan.warmup).then(|| {
            format!(
                "warm-up stopped after {} of {} trials: it used the whole time budget ({:.0} s)",
                a.warmed, plan.warmup, a.budget
            )
        });
        let discard_note = (a.discarded > 0).then(|| {
            format!(
                "{} measured trial{} discarded as warm-up (kept in the run with the warm-up \
                 trials): {}",
                a.discarded,
                if a.discarded == 1 { "" } else { "s" },
                a.discard_reason
            )
        });
        // A shorter or longer trial than the default changes what one
        // trial averages over: say so where the figures are.
        let trial_note = (plan.trial_time != super::DEFAULT_TRIAL_TIME).then(|| {
            format!(
                "trial time {} ms (default {} ms): work shorter than that is repeated within a trial",
                plan.trial_time.as_millis(),
                super::DEFAULT_TRIAL_TIME.as_millis()
            )
        });
        let mut params = self.points[arm].stored(self.specs);
        let fit_notes = apply_fitted(&mut params, fitted, self.specs);
        PointResult {
            experiment: self.exp.name().to_string(),
            params,
            metrics,
            series: extras.series,
            histograms: extras.histograms,
            notes: warmup_note
                .into_iter()
                .chain(discard_note)
                .chain(trial_note)
                .chain(fit_notes)
                .chain(extras.notes)
                .chain(self.writes.take().and_then(|w| w.note()))
                .collect(),
            elapsed_s: self.t0.elapsed().as_secs_f64(),
            validity: Validity {
                warmup_discarded: a.discarded,
                warmup_reason: a.discard_reason.clone(),
                trials: std::mem::take(&mut self.checks),
                skipped: self
                    .guard
                    .take()
                    .map(|g| g.skipped.clone())
                    .unwrap_or_default(),
            },
            ..Default::default()
        }
    }
}

/// Store the values a point really ran with (a size fitted to the memory or
/// disk there was) in its parameters, and say what was asked for and why.
fn apply_fitted(
    params: &mut BTreeMap<String, ParamValue>,
    fitted: Vec<Fitted>,
    specs: &[ParamSpec],
) -> Vec<String> {
    let show = |name: &str, v: &ParamValue| {
        let mut one = BTreeMap::new();
        one.insert(name.to_string(), v.clone());
        Point(one).label(specs)
    };
    let mut notes = Vec::new();
    for f in fitted {
        let Some(asked) = params.get(f.param) else {
            continue;
        };
        if *asked == f.used {
            continue;
        }
        notes.push(format!(
            "{} was measured (fitted: {}; {} was asked for)",
            show(f.param, &f.used),
            f.why,
            show(f.param, asked)
        ));
        params.insert(f.param.to_string(), f.used);
    }
    notes
}

/// Points whose summarised trials the validity guard flagged are worth one
/// warning per experiment: the user must act (cool the board, stop the
/// other load, add memory or scratch space) for the figures to be trusted.
/// `show` lists every suspect point.
fn suspect_warning(exp: &str, results: &[PointResult]) -> Option<String> {
    let suspect: Vec<String> = results.iter().filter_map(|r| r.suspect_summary()).collect();
    let first = suspect.first()?;
    Some(format!(
        "{exp}: {} of {} points measured on suspect trials ({}{first}); the figures may not \
         be representative",
        suspect.len(),
        results.len(),
        if suspect.len() > 1 { "first: " } else { "" }
    ))
}

#[cfg(test)]
mod tests;
