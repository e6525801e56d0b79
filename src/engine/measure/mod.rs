//! The one measurement loop: warm-up, then trials until every arm's medians
//! are precise enough, the maximum count, or the time budget — with a
//! schedule that decides in which order the arms (points, knob values,
//! commands) take their trials.
//!
//! The loop knows nothing about experiments, knobs or programs: a caller
//! implements [`Trials`] (run one trial of an arm; optional hooks to set an
//! arm up and down, report progress and poll for signals) and gets back
//! every value, per arm, and a typed reason for stopping. `run` (the
//! runner), `tune` (knob sweeps) and `time` (command timing) all measure
//! through it, so the stop rule, the warm-up handling (including the
//! automatic discard of cold leading trials) and budget sharing are written
//! and tested once.

use std::collections::BTreeMap;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

pub use crate::stats::StopReason;
use crate::stats::{self, summary::relative_half_width};
use crate::{Error, Result};

mod warmup;
pub(crate) use warmup::{leading_warmup, Discard};

/// Repetition settings, after the experiment's (or command's) defaults.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub warmup: usize,
    pub min_trials: usize,
    pub max_trials: usize,
    /// Target relative half-width of the 95% CI of the median (0.02 = 2%).
    pub precision: f64,
    /// Seconds for all arms together.
    pub budget: f64,
    /// Shortest time one trial should take (experiments batch shorter work).
    pub trial_time: std::time::Duration,
}

/// The stop rule itself: after `n` measured trials (rounds), stop or go on.
/// A fixed count ignores precision and budget; otherwise precision counts
/// only from the minimum, then the maximum, then the budget.
pub(crate) fn stop_after(
    n: usize,
    plan: &Plan,
    precise: bool,
    over_budget: bool,
    fixed: bool,
) -> Option<StopReason> {
    if fixed {
        return (n >= plan.max_trials).then_some(StopReason::Fixed);
    }
    if n >= plan.min_trials && precise {
        return Some(StopReason::Precision);
    }
    if n >= plan.max_trials {
        return Some(StopReason::MaxTrials);
    }
    over_budget.then_some(StopReason::Budget)
}

/// Whether [`stop_after`] can use the precision after `n` counted trials:
/// not for a fixed count, nor below the minimum. The precision is a
/// bootstrap CI per metric (2,000 resamples), worth skipping when it cannot
/// decide anything — after every trial of every point, on a board.
pub(crate) fn wants_precision(n: usize, how: &Loop) -> bool {
    !how.fixed && n >= how.plan.min_trials
}

/// In which order the arms take their trials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// Each arm runs to its own stop before the next starts, each with an
    /// equal share of what is left of the budget (sweeps of points).
    Sequential,
    /// Rounds of one trial per arm in a fixed order, A B A B … (hyperfine's
    /// way of comparing commands: drift hits every arm alike).
    Interleaved,
    /// Rounds of one trial per arm in a fresh random order, seeded so a run
    /// can be replayed (knob sweeps: no arm always follows another).
    Shuffled { seed: u64 },
}

/// How to repeat: the schedule, the plan and the rules that vary by caller.
#[derive(Debug, Clone, Copy)]
pub struct Loop {
    pub schedule: Schedule,
    pub plan: Plan,
    /// Exactly `plan.max_trials` trials (rounds): no precision rule.
    pub fixed: bool,
    /// Leading measured trials that are outliers against the later ones are
    /// warm-up: moved to the warm-up values and not counted (see
    /// [`leading_warmup`]).
    pub auto_warmup: bool,
}

/// One trial's values, metric by metric.
pub type Values = Vec<(&'static str, f64)>;

/// What the loop asks of its caller. Only [`Trials::trial`] is required.
pub trait Trials {
    /// Polled before every trial: `Err(Interrupted)` once a signal came.
    fn check(&mut self) -> Result<()> {
        Ok(())
    }
    /// Set an arm up, before its first (warm-up) trial. Sequential: each arm
    /// in turn, after its share of the budget started; rounds: every arm
    /// before the first round.
    fn begin(&mut self, _arm: usize) -> Result<()> {
        Ok(())
    }
    /// Run one trial of `arm`; `warm` for a warm-up trial.
    fn trial(&mut self, arm: usize, warm: bool) -> Result<Values>;
    /// The arm's warm-up trials are done; measured trials follow.
    fn warmup_done(&mut self, _arm: usize) {}
    /// A measured trial of `arm` finished: `n` counted (auto-discarded
    /// warm-up excluded) of at most `max`.
    fn progress(&mut self, _arm: usize, _n: usize, _max: usize) {}
    /// A round of one trial per arm finished (rounds only).
    fn round_done(&mut self, _rounds: usize) {}
    /// The arm stopped (its `reason` is set, discarded warm-up settled).
    /// Sequential: right after its last trial; rounds: every arm after the
    /// last round. Not called when a trial failed or was interrupted.
    fn end(&mut self, _arm: usize, _samples: &ArmSamples) -> Result<()> {
        Ok(())
    }
}

/// [`Trials`] from a closure `(arm, warm) -> values`, no hooks.
pub struct FnTrials<F>(pub F);

impl<F: FnMut(usize, bool) -> Result<Values>> Trials for FnTrials<F> {
    fn trial(&mut self, arm: usize, warm: bool) -> Result<Values> {
        (self.0)(arm, warm)
    }
}

/// Every value one arm produced.
#[derive(Debug, Clone, Default)]
pub struct ArmSamples {
    /// Warm-up values, then the measured ones discarded as warm-up.
    pub warmup: BTreeMap<&'static str, Vec<f64>>,
    /// The measured values that count.
    pub samples: BTreeMap<&'static str, Vec<f64>>,
    /// Warm-up trials run (fewer than planned when the budget ran out).
    pub warmed: usize,
    /// Measured trials moved to `warmup` by the automatic warm-up rule.
    pub discarded: usize,
    /// Why they were (empty when none were).
    pub discard_reason: String,
    /// Seconds of budget this arm had (its share, or the whole budget for
    /// rounds).
    pub budget: f64,
    /// Why this arm stopped; `None` when it never started.
    pub reason: Option<StopReason>,
    /// Measured trials run, whether or not they returned values (a skipped
    /// point returns none, and must still reach its trial count).
    pub(crate) measured: usize,
}

impl ArmSamples {
    /// The arm's metrics, in the order of `specs`, each summarised with the
    /// arm's stop reason (a metric without values is left out).
    pub(crate) fn metric_results(&self, specs: &[super::MetricSpec]) -> Vec<super::MetricResult> {
        specs
            .iter()
            .filter_map(|spec| {
                let s = self.samples.get(spec.name)?.clone();
                let mut summary = stats::summarize(&s);
                summary.stop_reason = self.reason;
                Some(super::MetricResult {
                    name: spec.name.to_string(),
                    unit: spec.unit.to_string(),
                    better: spec.better,
                    samples: s,
                    warmup: self.warmup.get(spec.name).cloned().unwrap_or_default(),
                    summary,
                })
            })
            .collect()
    }

    /// Measured trials that count so far.
    pub(crate) fn counted(&self) -> usize {
        self.measured.saturating_sub(self.discarded)
    }

    fn precise(&self, precision: f64) -> bool {
        !self.samples.is_empty()
            && self.samples.values().all(|s| {
                let s = &s[self.discarded.min(s.len())..];
                relative_half_width(&stats::summarize(s)) <= precision
            })
    }

    fn record(&mut self, values: Values, warm: bool, auto_warmup: bool) {
        if !warm {
            self.measured += 1;
        }
        let into = if warm {
            &mut self.warmup
        } else {
            &mut self.samples
        };
        for (name, v) in values {
            into.entry(name).or_default().push(v);
        }
        if !warm && auto_warmup {
            let d = leading_warmup(
                &self.samples,
                Discard {
                    count: self.discarded,
                    reason: std::mem::take(&mut self.discard_reason),
                },
            );
            self.discarded = d.count;
            self.discard_reason = d.reason;
        }
    }

    /// Move the discarded leading trials to the warm-up values.
    fn settle(&mut self) {
        if self.discarded == 0 {
            return;
        }
        for (name, s) in self.samples.iter_mut() {
            let cut = self.discarded.min(s.len());
            self.warmup.entry(name).or_default().extend(s.drain(..cut));
        }
    }
}

/// What the loop measured, and the error that stopped it early, if any
/// (interrupt or failure): values measured before the error are kept and
/// the arms it cut short say `Interrupted` or `Failed`.
pub struct Measured {
    pub arms: Vec<ArmSamples>,
    pub error: Option<Error>,
}

/// The clock the budget is read from (seconds since the loop started). Real
/// runs pass a monotonic clock; tests pass a fake one.
pub trait Clock {
    fn elapsed(&mut self) -> f64;
}

/// `std::time::Instant` based clock.
pub(crate) struct Monotonic(std::time::Instant);

impl Monotonic {
    pub(crate) fn start() -> Self {
        Monotonic(std::time::Instant::now())
    }
}

impl Clock for Monotonic {
    fn elapsed(&mut self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}

/// The loop: `arms` arms, repeated as `how` says, trials run by `trials`.
pub fn measure(
    arms: usize,
    how: &Loop,
    clock: &mut dyn Clock,
    trials: &mut dyn Trials,
) -> Measured {
    let mut out = Measured {
        arms: vec![ArmSamples::default(); arms],
        error: None,
    };
    if arms == 0 {
        return out;
    }
    let result = match how.schedule {
        Schedule::Sequential => sequential(&mut out.arms, how, clock, trials),
        Schedule::Interleaved => rounds(&mut out.arms, None, how, clock, trials),
        Schedule::Shuffled { seed } => rounds(
            &mut out.arms,
            Some(SmallRng::seed_from_u64(seed)),
            how,
            clock,
            trials,
        ),
    };
    out.error = result.err();
    out
}

/// Why an arm cut short by `e` stopped.
fn cut_short(e: &Error) -> StopReason {
    match e {
        Error::Interrupted(_) => StopReason::Interrupted,
        _ => StopReason::Failed,
    }
}

fn sequential(
    arms: &mut [ArmSamples],
    how: &Loop,
    clock: &mut dyn Clock,
    trials: &mut dyn Trials,
) -> Result<()> {
    let plan = &how.plan;
    let total = arms.len();
    for (i, arm) in arms.iter_mut().enumerate() {
        // Share what is left of the budget among the arms still to run.
        let left = (plan.budget - clock.elapsed()).max(0.0);
        arm.budget = left / (total - i) as f64;
        let arm_start = clock.elapsed();
        let r = one_arm(i, arm, how, clock, trials, arm_start);
        arm.settle();
        match r {
            Ok(reason) => {
                arm.reason = Some(reason);
                trials.end(i, arm)?;
            }
            Err(e) => {
                arm.reason = Some(cut_short(&e));
                // The trials an interrupt cut short are kept: the point's
                // result holds them (its stop reason says "interrupted")
                // and the run is stored marked interrupted. A failure to
                // close the point is dropped: the interrupt is the error.
                if matches!(e, Error::Interrupted(_)) && arm.counted() > 0 {
                    let _ = trials.end(i, arm);
                }
                return Err(e);
            }
        }
    }
    Ok(())
}

fn one_arm(
    i: usize,
    arm: &mut ArmSamples,
    how: &Loop,
    clock: &mut dyn Clock,
    trials: &mut dyn Trials,
    arm_start: f64,
) -> Result<StopReason> {
    let plan = &how.plan;
    trials.begin(i)?;
    // Warm-up is bounded by the budget too (after its first trial): a
    // large --warmup must not run for ever.
    while arm.warmed < plan.warmup {
        if arm.warmed > 0 && clock.elapsed() - arm_start >= arm.budget {
            break;
        }
        trials.check()?;
        let v = trials.trial(i, true)?;
        arm.record(v, true, false);
        arm.warmed += 1;
    }
    trials.warmup_done(i);
    // The budget clock starts after warm-up, so a slow first trial does
    // not eat the measurement's share.
    let measure_start = clock.elapsed();
    loop {
        trials.check()?;
        let v = trials.trial(i, false)?;
        arm.record(v, false, how.auto_warmup);
        let n = arm.counted();
        trials.progress(i, n, plan.max_trials);
        let over = clock.elapsed() - measure_start >= arm.budget;
        let precise = wants_precision(n, how) && arm.precise(plan.precision);
        if let Some(r) = stop_after(n, plan, precise, over, how.fixed) {
            return Ok(r);
        }
    }
}

fn rounds(
    arms: &mut [ArmSamples],
    shuffle: Option<SmallRng>,
    how: &Loop,
    clock: &mut dyn Clock,
    trials: &mut dyn Trials,
) -> Result<()> {
    let r = all_rounds(arms, shuffle, how, clock, trials);
    for arm in arms.iter_mut() {
        arm.settle();
    }
    match r {
        Ok(reason) => {
            for arm in arms.iter_mut() {
                arm.reason = Some(reason);
            }
            for (i, arm) in arms.iter().enumerate() {
                trials.end(i, arm)?;
            }
            Ok(())
        }
        Err(e) => {
            for arm in arms.iter_mut() {
                arm.reason = Some(cut_short(&e));
            }
            Err(e)
        }
    }
}

fn all_rounds(
    arms: &mut [ArmSamples],
    mut shuffle: Option<SmallRng>,
    how: &Loop,
    clock: &mut dyn Clock,
    trials: &mut dyn Trials,
) -> Result<StopReason> {
    let plan = &how.plan;
    let mut order: Vec<usize> = (0..arms.len()).collect();
    let mut next_order = |order: &mut Vec<usize>| {
        if let Some(rng) = shuffle.as_mut() {
            order.shuffle(rng);
        }
    };
    let start = clock.elapsed();
    for (i, arm) in arms.iter_mut().enumerate() {
        arm.budget = plan.budget;
        trials.begin(i)?;
    }
    for w in 0..plan.warmup {
        if w > 0 && clock.elapsed() - start >= plan.budget {
            break;
        }
        next_order(&mut order);
        for &i in &order {
            trials.check()?;
            let v = trials.trial(i, true)?;
            arms[i].record(v, true, false);
            arms[i].warmed += 1;
        }
    }
    for i in 0..arms.len() {
        trials.warmup_done(i);
    }
    let measure_start = clock.elapsed();
    let mut round = 0;
    loop {
        next_order(&mut order);
        for &i in &order {
            trials.check()?;
            let v = trials.trial(i, false)?;
            arms[i].record(v, false, how.auto_warmup);
            trials.progress(i, arms[i].counted(), plan.max_trials);
        }
        round += 1;
        trials.round_done(round);
        // With the automatic warm-up rule an arm may have fewer counted
        // trials than rounds: the least counted decides.
        let n = arms.iter().map(ArmSamples::counted).min().unwrap_or(0);
        let precise = wants_precision(n, how) && arms.iter().all(|a| a.precise(plan.precision));
        let over = clock.elapsed() - measure_start >= plan.budget;
        if let Some(r) = stop_after(n, plan, precise, over, how.fixed) {
            return Ok(r);
        }
    }
}

/// A trial function's undeclared metric is a bug in the experiment; the
/// loop's callers check names with this before recording.
pub(crate) fn check_declared(exp: &str, declared: &[&str], values: &Values) -> Result<()> {
    match values.iter().find(|(name, _)| !declared.contains(name)) {
        Some((name, _)) => Err(Error::measurement(format!(
            "internal: {exp} produced undeclared metric {name}"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
