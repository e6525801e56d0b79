//! The one measurement loop: warm-up, then trials until every arm's medians
//! are precise enough, the maximum count, or the time budget — with a
//! schedule that decides in which order the arms (points, knob values,
//! commands) take their trials.
//!
//! The loop knows nothing about experiments, knobs or programs: a caller
//! hands it a trial function `(arm, warm-up?) -> values` and gets back every
//! value, per arm, and a typed reason for stopping. `run`, `tune` and `time`
//! all measure through it, so the stop rules are written (and tested) once.

use std::collections::BTreeMap;
use std::fmt;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::runner::Plan;
use crate::stats::{self, summary::relative_half_width};
use crate::{Error, Result};

/// Why repetition stopped. Stored (as its string) in every metric summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Every metric's 95% CI of the median is within the precision target.
    Precision,
    /// The maximum number of trials (or rounds) was reached first.
    MaxTrials,
    /// The time budget ran out first.
    Budget,
    /// A fixed number of trials was asked for (`--trials N`, `--runs N`).
    Fixed,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Precision => "precision",
            StopReason::MaxTrials => "max_trials",
            StopReason::Budget => "budget",
            StopReason::Fixed => "fixed",
        }
    }

    /// The rule itself: after `n` measured trials (rounds), stop or go on.
    pub fn after(
        n: usize,
        plan: &Plan,
        precise: bool,
        over_budget: bool,
        fixed: bool,
    ) -> Option<Self> {
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
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
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

/// One trial's values, metric by metric.
pub type Values = Vec<(&'static str, f64)>;

/// Every value one arm produced.
#[derive(Debug, Clone, Default)]
pub struct ArmSamples {
    pub warmup: BTreeMap<&'static str, Vec<f64>>,
    pub samples: BTreeMap<&'static str, Vec<f64>>,
    /// Warm-up trials run (fewer than planned when the budget ran out).
    pub warmed: usize,
    /// Why this arm stopped; `None` when the loop ended with an error first.
    pub reason: Option<StopReason>,
}

impl ArmSamples {
    fn precise(&self, precision: f64) -> bool {
        !self.samples.is_empty()
            && self
                .samples
                .values()
                .all(|s| relative_half_width(&stats::summarize(s)) <= precision)
    }
    fn measured(&self) -> usize {
        self.samples.values().map(Vec::len).max().unwrap_or(0)
    }
}

/// What the loop measured, and the error that stopped it early, if any
/// (interrupt or failure): values measured before the error are kept.
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
pub struct Monotonic(std::time::Instant);

impl Monotonic {
    pub fn start() -> Self {
        Monotonic(std::time::Instant::now())
    }
}

impl Clock for Monotonic {
    fn elapsed(&mut self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}

/// Callbacks a caller may want between trials (progress bars).
pub trait Observer {
    /// A measured (not warm-up) trial of `arm` finished; `n` of at most `max`.
    fn trial(&mut self, _arm: usize, _n: usize, _max: usize) {}
    /// An arm is about to start (sequential schedule only).
    fn arm_started(&mut self, _arm: usize) {}
    /// An arm stopped (sequential) or, for rounds, every arm stopped.
    fn arm_done(&mut self, _arm: usize, _reason: StopReason) {}
}

/// Does nothing.
pub struct Quiet;
impl Observer for Quiet {}

/// The loop. `trial(arm, warm)` runs one trial; `plan` carries warm-up, the
/// trial bounds, the precision target and the budget (seconds for all arms).
pub fn measure(
    arms: usize,
    schedule: Schedule,
    plan: &Plan,
    fixed: bool,
    clock: &mut dyn Clock,
    observer: &mut dyn Observer,
    trial: &mut dyn FnMut(usize, bool) -> Result<Values>,
) -> Measured {
    let mut out = Measured {
        arms: vec![ArmSamples::default(); arms],
        error: None,
    };
    let result = match schedule {
        Schedule::Sequential => sequential(&mut out.arms, plan, fixed, clock, observer, trial),
        Schedule::Interleaved => rounds(&mut out.arms, None, plan, fixed, clock, observer, trial),
        Schedule::Shuffled { seed } => rounds(
            &mut out.arms,
            Some(SmallRng::seed_from_u64(seed)),
            plan,
            fixed,
            clock,
            observer,
            trial,
        ),
    };
    out.error = result.err();
    out
}

fn record(into: &mut BTreeMap<&'static str, Vec<f64>>, values: Values) {
    for (name, v) in values {
        into.entry(name).or_default().push(v);
    }
}

fn sequential(
    arms: &mut [ArmSamples],
    plan: &Plan,
    fixed: bool,
    clock: &mut dyn Clock,
    observer: &mut dyn Observer,
    trial: &mut dyn FnMut(usize, bool) -> Result<Values>,
) -> Result<()> {
    let total = arms.len();
    for (i, arm) in arms.iter_mut().enumerate() {
        observer.arm_started(i);
        // Share what is left of the budget among the arms still to run.
        let left = (plan.budget - clock.elapsed()).max(0.0);
        let budget = left / (total - i) as f64;
        let arm_start = clock.elapsed();
        // Warm-up is bounded by the budget too (after its first trial): a
        // large --warmup must not run for ever.
        while arm.warmed < plan.warmup {
            if arm.warmed > 0 && clock.elapsed() - arm_start >= budget {
                break;
            }
            record(&mut arm.warmup, trial(i, true)?);
            arm.warmed += 1;
        }
        // The budget clock starts after warm-up, so a slow first trial does
        // not eat the measurement's share.
        let measure_start = clock.elapsed();
        let mut n = 0;
        let reason = loop {
            record(&mut arm.samples, trial(i, false)?);
            n += 1;
            observer.trial(i, n, plan.max_trials);
            let over = clock.elapsed() - measure_start >= budget;
            if let Some(r) = StopReason::after(n, plan, arm.precise(plan.precision), over, fixed) {
                break r;
            }
        };
        arm.reason = Some(reason);
        observer.arm_done(i, reason);
    }
    Ok(())
}

fn rounds(
    arms: &mut [ArmSamples],
    mut shuffle: Option<SmallRng>,
    plan: &Plan,
    fixed: bool,
    clock: &mut dyn Clock,
    observer: &mut dyn Observer,
    trial: &mut dyn FnMut(usize, bool) -> Result<Values>,
) -> Result<()> {
    let mut order: Vec<usize> = (0..arms.len()).collect();
    let mut next_order = |order: &mut Vec<usize>| {
        if let Some(rng) = shuffle.as_mut() {
            order.shuffle(rng);
        }
    };
    let start = clock.elapsed();
    for w in 0..plan.warmup {
        if w > 0 && clock.elapsed() - start >= plan.budget {
            break;
        }
        next_order(&mut order);
        for &i in &order {
            record(&mut arms[i].warmup, trial(i, true)?);
            arms[i].warmed += 1;
        }
    }
    let measure_start = clock.elapsed();
    let mut n = 0;
    let reason = loop {
        next_order(&mut order);
        for &i in &order {
            record(&mut arms[i].samples, trial(i, false)?);
            observer.trial(i, arms[i].measured(), plan.max_trials);
        }
        n += 1;
        let precise = arms.iter().all(|a| a.precise(plan.precision));
        let over = clock.elapsed() - measure_start >= plan.budget;
        if let Some(r) = StopReason::after(n, plan, precise, over, fixed) {
            break r;
        }
    };
    for (i, arm) in arms.iter_mut().enumerate() {
        arm.reason = Some(reason);
        observer.arm_done(i, reason);
    }
    Ok(())
}

/// A trial function's undeclared metric is a bug in the experiment; the
/// loop's callers check names with this before recording.
pub fn check_declared(exp: &str, declared: &[&str], values: &Values) -> Result<()> {
    match values.iter().find(|(name, _)| !declared.contains(name)) {
        Some((name, _)) => Err(Error::measurement(format!(
            "internal: {exp} produced undeclared metric {name}"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::cell::Cell;
    use std::rc::Rc;

    /// A fake clock the fake experiment advances: no test waits for real time.
    struct Fake(Rc<Cell<f64>>);
    impl Clock for Fake {
        fn elapsed(&mut self) -> f64 {
            self.0.get()
        }
    }

    fn plan(warmup: usize, min: usize, max: usize, budget: f64) -> Plan {
        Plan {
            warmup,
            min_trials: min,
            max_trials: max,
            precision: 0.02,
            budget,
        }
    }

    /// Runs the loop on a fake experiment: every trial costs `cost` fake
    /// seconds and returns `100 × (arm + 1)` plus `jitter` times a wobble;
    /// the log records (arm, warm-up?) in call order.
    fn run(
        arms: usize,
        schedule: Schedule,
        p: &Plan,
        fixed: bool,
        cost: f64,
        jitter: f64,
    ) -> (Measured, Vec<(usize, bool)>) {
        let now = Rc::new(Cell::new(0.0));
        let mut clock = Fake(now.clone());
        let mut log = Vec::new();
        let m = measure(
            arms,
            schedule,
            p,
            fixed,
            &mut clock,
            &mut Quiet,
            &mut |arm, warm| {
                now.set(now.get() + cost);
                log.push((arm, warm));
                let k = log.len() as f64;
                Ok(vec![(
                    "t",
                    100.0 * (arm + 1) as f64 + jitter * (k * 2.7).sin(),
                )])
            },
        );
        (m, log)
    }

    #[test]
    fn stop_rule_order() {
        let p = plan(1, 5, 10, 10.0);
        assert_eq!(
            StopReason::after(3, &p, true, false, false),
            None,
            "min trials first"
        );
        assert_eq!(
            StopReason::after(5, &p, true, false, false),
            Some(StopReason::Precision)
        );
        assert_eq!(
            StopReason::after(10, &p, false, false, false),
            Some(StopReason::MaxTrials)
        );
        assert_eq!(
            StopReason::after(2, &p, false, true, false),
            Some(StopReason::Budget)
        );
        assert_eq!(
            StopReason::after(5, &p, true, true, true),
            None,
            "fixed ignores precision"
        );
        assert_eq!(
            StopReason::after(10, &p, false, false, true),
            Some(StopReason::Fixed)
        );
    }

    #[test]
    fn sequential_warms_each_arm_before_its_own_trials() {
        let (m, log) = run(
            2,
            Schedule::Sequential,
            &plan(2, 3, 3, 100.0),
            true,
            0.1,
            5.0,
        );
        assert!(m.error.is_none());
        let expect: Vec<(usize, bool)> = [(0, true), (0, true), (0, false), (0, false), (0, false)]
            .into_iter()
            .chain([(1, true), (1, true), (1, false), (1, false), (1, false)])
            .collect();
        assert_eq!(log, expect);
        for arm in &m.arms {
            assert_eq!(arm.reason, Some(StopReason::Fixed));
            assert_eq!(arm.samples["t"].len(), 3);
            assert_eq!(arm.warmup["t"].len(), 2);
        }
    }

    #[test]
    fn interleaved_rounds_alternate_arms() {
        let (m, log) = run(
            3,
            Schedule::Interleaved,
            &plan(1, 2, 2, 100.0),
            true,
            0.1,
            5.0,
        );
        assert!(m.error.is_none());
        let arms: Vec<usize> = log.iter().map(|(a, _)| *a).collect();
        assert_eq!(arms, vec![0, 1, 2, 0, 1, 2, 0, 1, 2]);
        assert!(log[..3].iter().all(|(_, w)| *w), "warm-up round first");
        assert!(log[3..].iter().all(|(_, w)| !*w));
    }

    #[test]
    fn shuffled_rounds_visit_every_arm_once_per_round_and_replay_by_seed() {
        let p = plan(0, 6, 6, 100.0);
        let (_, a) = run(4, Schedule::Shuffled { seed: 7 }, &p, true, 0.1, 5.0);
        let (_, b) = run(4, Schedule::Shuffled { seed: 7 }, &p, true, 0.1, 5.0);
        assert_eq!(a, b, "same seed, same order");
        for round in a.chunks(4) {
            let mut arms: Vec<usize> = round.iter().map(|(x, _)| *x).collect();
            arms.sort();
            assert_eq!(arms, vec![0, 1, 2, 3]);
        }
        let orders: std::collections::BTreeSet<Vec<usize>> = a
            .chunks(4)
            .map(|r| r.iter().map(|(x, _)| *x).collect())
            .collect();
        assert!(orders.len() > 1, "the order changes between rounds");
    }

    #[test]
    fn precise_arms_stop_at_the_minimum() {
        // No jitter: the CI is zero wide after the minimum trials.
        let (m, log) = run(
            1,
            Schedule::Sequential,
            &plan(0, 5, 30, 100.0),
            false,
            0.1,
            0.0,
        );
        assert_eq!(m.arms[0].reason, Some(StopReason::Precision));
        assert_eq!(log.len(), 5);
    }

    #[test]
    fn noisy_arms_run_to_the_maximum() {
        let (m, log) = run(
            1,
            Schedule::Sequential,
            &plan(0, 5, 12, 1000.0),
            false,
            0.1,
            40.0,
        );
        assert_eq!(m.arms[0].reason, Some(StopReason::MaxTrials));
        assert_eq!(log.len(), 12);
    }

    #[test]
    fn sequential_arms_share_the_budget() {
        // 10 s for 2 arms, 1 s a trial, noisy: each arm gets about 5 s.
        let (m, log) = run(
            2,
            Schedule::Sequential,
            &plan(0, 2, 100, 10.0),
            false,
            1.0,
            40.0,
        );
        for arm in &m.arms {
            assert_eq!(arm.reason, Some(StopReason::Budget));
        }
        let first = log.iter().filter(|(a, _)| *a == 0).count();
        let second = log.iter().filter(|(a, _)| *a == 1).count();
        assert_eq!(first, 5, "first arm: half of 10 s");
        assert_eq!(second, 5, "second arm: what is left");
    }

    #[test]
    fn warmup_is_bounded_by_the_budget() {
        let (m, log) = run(
            1,
            Schedule::Sequential,
            &plan(1000, 1, 1, 3.0),
            false,
            1.0,
            0.0,
        );
        assert_eq!(m.arms[0].warmed, 3, "stops once the budget is spent");
        assert_eq!(log.iter().filter(|(_, w)| !*w).count(), 1);
    }

    #[test]
    fn an_error_keeps_what_was_measured() {
        let p = plan(0, 3, 3, 100.0);
        let mut clock = Fake(Rc::new(Cell::new(0.0)));
        let mut calls = 0;
        let m = measure(
            2,
            Schedule::Sequential,
            &p,
            true,
            &mut clock,
            &mut Quiet,
            &mut |_, _| {
                calls += 1;
                if calls == 5 {
                    Err(Error::measurement("boom"))
                } else {
                    Ok(vec![("t", 1.0)])
                }
            },
        );
        assert!(m.error.is_some());
        assert_eq!(m.arms[0].reason, Some(StopReason::Fixed));
        assert_eq!(m.arms[0].samples["t"].len(), 3);
        assert_eq!(m.arms[1].reason, None);
        assert_eq!(m.arms[1].samples["t"].len(), 1);
    }

    #[test]
    fn undeclared_metrics_are_refused() {
        let v: Values = vec![("a", 1.0), ("zz", 2.0)];
        assert!(check_declared("x.y", &["a"], &v).is_err());
        assert!(check_declared("x.y", &["a", "zz"], &v).is_ok());
    }
}
