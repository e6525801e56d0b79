//! Tests of the measurement loop, on a fake clock and a fake experiment.

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

fn how(schedule: Schedule, warmup: usize, min: usize, max: usize, budget: f64) -> Loop {
    Loop {
        schedule,
        plan: Plan {
            warmup,
            min_trials: min,
            max_trials: max,
            precision: 0.02,
            budget,
            trial_time: crate::engine::DEFAULT_TRIAL_TIME,
        },
        fixed: false,
        auto_warmup: false,
    }
}

/// Runs the loop on a fake experiment: every trial costs `cost` fake
/// seconds and returns `100 × (arm + 1)` plus `jitter` times a wobble;
/// the log records (arm, warm-up?) in call order.
fn run(arms: usize, how: &Loop, cost: f64, jitter: f64) -> (Measured, Vec<(usize, bool)>) {
    let now = Rc::new(Cell::new(0.0));
    let mut clock = Fake(now.clone());
    let mut log = Vec::new();
    let m = measure(
        arms,
        how,
        &mut clock,
        &mut FnTrials(|arm: usize, warm: bool| {
            now.set(now.get() + cost);
            log.push((arm, warm));
            let k = log.len() as f64;
            Ok(vec![(
                "t",
                100.0 * (arm + 1) as f64 + jitter * (k * 2.7).sin(),
            )])
        }),
    );
    (m, log)
}

#[test]
fn stop_rule_order() {
    let p = how(Schedule::Sequential, 1, 5, 10, 10.0).plan;
    assert_eq!(stop_after(3, &p, true, false, false), None, "min first");
    assert_eq!(
        stop_after(5, &p, true, false, false),
        Some(StopReason::Precision)
    );
    assert_eq!(
        stop_after(10, &p, false, false, false),
        Some(StopReason::MaxTrials)
    );
    assert_eq!(
        stop_after(2, &p, false, true, false),
        Some(StopReason::Budget)
    );
    assert_eq!(
        stop_after(5, &p, true, true, true),
        None,
        "fixed ignores precision and budget"
    );
    assert_eq!(
        stop_after(10, &p, false, false, true),
        Some(StopReason::Fixed)
    );
}

#[test]
fn precision_is_only_computed_when_it_can_stop_the_arm() {
    let mut h = how(Schedule::Sequential, 1, 5, 10, 10.0);
    assert!(!wants_precision(4, &h), "below the minimum");
    assert!(wants_precision(5, &h));
    h.fixed = true;
    assert!(!wants_precision(10, &h), "a fixed count ignores precision");
    // Same stops as when the precision was computed after every trial:
    // a steady arm still stops at the minimum, a fixed one at its count.
    let (m, log) = run(1, &how(Schedule::Interleaved, 0, 5, 30, 100.0), 0.1, 0.0);
    assert_eq!(m.arms[0].reason, Some(StopReason::Precision));
    assert_eq!(log.len(), 5);
    let (m, log) = run(2, &h, 0.1, 0.0);
    assert_eq!(m.arms[1].reason, Some(StopReason::Fixed));
    assert_eq!(log.iter().filter(|(_, w)| !*w).count(), 20);
}

#[test]
fn sequential_warms_each_arm_before_its_own_trials() {
    let mut h = how(Schedule::Sequential, 2, 3, 3, 100.0);
    h.fixed = true;
    let (m, log) = run(2, &h, 0.1, 5.0);
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
fn precise_arms_stop_at_the_minimum() {
    // No jitter: the CI is zero wide after the minimum trials.
    let (m, log) = run(1, &how(Schedule::Sequential, 0, 5, 30, 100.0), 0.1, 0.0);
    assert_eq!(m.arms[0].reason, Some(StopReason::Precision));
    assert_eq!(log.len(), 5);
}

#[test]
fn noisy_arms_run_to_the_maximum() {
    let (m, log) = run(1, &how(Schedule::Sequential, 0, 5, 12, 1000.0), 0.1, 40.0);
    assert_eq!(m.arms[0].reason, Some(StopReason::MaxTrials));
    assert_eq!(log.len(), 12);
}

/// A skipped point returns no values: before, its trials never counted
/// and the loop spun for ever (io.pregrow's fallocate on ext2).
#[test]
fn trials_without_values_still_count() {
    let now = Rc::new(Cell::new(0.0));
    let mut clock = Fake(now.clone());
    let mut calls = 0;
    let m = measure(
        1,
        &how(Schedule::Sequential, 1, 2, 5, 1e9),
        &mut clock,
        &mut FnTrials(|_arm: usize, _warm: bool| {
            calls += 1;
            Ok(vec![])
        }),
    );
    assert_eq!(m.arms[0].reason, Some(StopReason::MaxTrials));
    assert_eq!(m.arms[0].counted(), 5);
    assert_eq!(calls, 6);
}

#[test]
fn warmup_is_bounded_by_the_budget() {
    let (m, log) = run(1, &how(Schedule::Sequential, 1000, 1, 1, 3.0), 1.0, 0.0);
    assert_eq!(m.arms[0].warmed, 3, "stops once the budget is spent");
    assert_eq!(log.iter().filter(|(_, w)| !*w).count(), 1);
}

#[test]
fn undeclared_metrics_are_refused() {
    let v: Values = vec![("a", 1.0), ("zz", 2.0)];
    assert!(check_declared("x.y", &["a"], &v).is_err());
    assert!(check_declared("x.y", &["a", "zz"], &v).is_ok());
}
