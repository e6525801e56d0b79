//! The measurement loop (`engine::measure`) tested as hyperfine tests its
//! scheduler: a fake experiment records every call in order and advances a
//! fake clock, so schedule, warm-up, budget and stop rules are checked
//! exactly and no test waits for real time.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tunelab::engine::measure::{
    measure, ArmSamples, Clock, FnTrials, Loop, Measured, Plan, Schedule, StopReason, Trials,
    Values,
};
use tunelab::engine::observer::{Event, Observer, Silent};
use tunelab::engine::runner::run_points_with;

/// The tests' observer: each progress event as a line (messages dropped).
#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl Observer for Recorder {
    fn info(&self, _msg: &str) {}
    fn warn(&self, _msg: &str) {}
    fn progress(&self, event: Event) {
        let line = match event {
            Event::Started { index, .. } => format!("start {index}"),
            Event::Trial { n, .. } => format!("{n}"),
            Event::Done { stop_reason, .. } => format!("done {stop_reason}"),
            Event::Round(n) => format!("round {n}"),
            _ => return,
        };
        self.0.lock().unwrap().push(line);
    }
}
use tunelab::engine::{
    Ctx, Experiment, MetricSpec, ParamSpec, ParamValue, Point, PointRun, TrialValues,
};
use tunelab::{Error, Result};

/// Seconds on a fake clock shared by the clock and the fake experiment.
#[derive(Clone, Default)]
struct Now(Arc<Mutex<f64>>);

impl Now {
    fn advance(&self, s: f64) {
        *self.0.lock().unwrap() += s;
    }
}

impl Clock for Now {
    fn elapsed(&mut self) -> f64 {
        *self.0.lock().unwrap()
    }
}

fn plan(warmup: usize, min: usize, max: usize, budget: f64) -> Plan {
    Plan {
        warmup,
        min_trials: min,
        max_trials: max,
        precision: 0.02,
        budget,
        trial_time: tunelab::engine::DEFAULT_TRIAL_TIME,
    }
}

fn how(schedule: Schedule, plan: Plan) -> Loop {
    Loop {
        schedule,
        plan,
        fixed: false,
        auto_warmup: false,
    }
}

/// What the fake experiment does in one trial of an arm.
#[derive(Clone, Copy)]
enum Arm {
    /// Always the same value: precise at the minimum.
    Steady(f64),
    /// A value that wobbles by ±40%: never precise at 2%.
    Noisy(f64),
}

/// A fake experiment: every trial costs `cost` fake seconds; the log has
/// every call as (arm, warm-up?) and every hook as text.
struct Fake {
    arms: Vec<Arm>,
    cost: f64,
    now: Now,
    log: Vec<(usize, bool)>,
    hooks: Vec<String>,
    /// `check` says Interrupted before trial number `interrupt_at` (1-based).
    interrupt_at: Option<usize>,
    /// Trial number `fail_at` returns an error.
    fail_at: Option<usize>,
}

impl Fake {
    fn new(arms: &[Arm], cost: f64) -> Self {
        Fake {
            arms: arms.to_vec(),
            cost,
            now: Now::default(),
            log: Vec::new(),
            hooks: Vec::new(),
            interrupt_at: None,
            fail_at: None,
        }
    }

    fn run(&mut self, how: &Loop) -> Measured {
        let mut clock = self.now.clone();
        measure(self.arms.len(), how, &mut clock, self)
    }

    fn arms_called(&self) -> Vec<usize> {
        self.log.iter().map(|(a, _)| *a).collect()
    }

    fn trials_of(&self, arm: usize) -> usize {
        self.log.iter().filter(|(a, w)| *a == arm && !*w).count()
    }
}

impl Trials for Fake {
    fn check(&mut self) -> Result<()> {
        if self.interrupt_at == Some(self.log.len() + 1) {
            return Err(Error::Interrupted("SIGINT".into()));
        }
        Ok(())
    }
    fn begin(&mut self, arm: usize) -> Result<()> {
        self.hooks.push(format!("begin {arm}"));
        Ok(())
    }
    fn trial(&mut self, arm: usize, warm: bool) -> Result<Values> {
        self.now.advance(self.cost);
        self.log.push((arm, warm));
        let k = self.log.len();
        if self.fail_at == Some(k) {
            return Err(Error::measurement("the fake trial failed"));
        }
        let v = match self.arms[arm] {
            Arm::Steady(v) => v,
            Arm::Noisy(v) => v * (1.0 + 0.4 * (k as f64 * 2.7).sin()),
        };
        Ok(vec![("t", v)])
    }
    fn warmup_done(&mut self, arm: usize) {
        self.hooks.push(format!("warm {arm}"));
    }
    fn progress(&mut self, arm: usize, n: usize, max: usize) {
        self.hooks.push(format!("trial {arm} {n}/{max}"));
    }
    fn round_done(&mut self, rounds: usize) {
        self.hooks.push(format!("round {rounds}"));
    }
    fn end(&mut self, arm: usize, s: &ArmSamples) -> Result<()> {
        self.hooks.push(format!("end {arm} {}", s.reason.unwrap()));
        Ok(())
    }
}

#[test]
fn sequential_points_warm_up_then_measure_one_after_the_other() {
    let mut f = Fake::new(&[Arm::Noisy(1.0), Arm::Noisy(2.0)], 0.1);
    let mut h = how(Schedule::Sequential, plan(2, 3, 3, 100.0));
    h.fixed = true;
    let m = f.run(&h);
    assert!(m.error.is_none());
    assert_eq!(
        f.log,
        [
            (0, true),
            (0, true),
            (0, false),
            (0, false),
            (0, false),
            (1, true),
            (1, true),
            (1, false),
            (1, false),
            (1, false)
        ]
    );
    assert_eq!(
        f.hooks,
        [
            "begin 0",
            "warm 0",
            "trial 0 1/3",
            "trial 0 2/3",
            "trial 0 3/3",
            "end 0 fixed",
            "begin 1",
            "warm 1",
            "trial 1 1/3",
            "trial 1 2/3",
            "trial 1 3/3",
            "end 1 fixed"
        ]
    );
    for a in &m.arms {
        assert_eq!(
            (a.warmed, a.warmup["t"].len(), a.samples["t"].len()),
            (2, 2, 3)
        );
    }
}

#[test]
fn interleaved_rounds_go_a_b_a_b_after_a_warm_up_round() {
    let mut f = Fake::new(&[Arm::Noisy(1.0), Arm::Noisy(2.0)], 0.1);
    let mut h = how(Schedule::Interleaved, plan(1, 3, 3, 100.0));
    h.fixed = true;
    let m = f.run(&h);
    assert!(m.error.is_none());
    assert_eq!(f.arms_called(), [0, 1, 0, 1, 0, 1, 0, 1]);
    assert!(f.log[..2].iter().all(|(_, w)| *w), "warm-up round first");
    assert!(f.log[2..].iter().all(|(_, w)| !*w));
    assert_eq!(
        f.hooks,
        [
            "begin 0",
            "begin 1",
            "warm 0",
            "warm 1",
            "trial 0 1/3",
            "trial 1 1/3",
            "round 1",
            "trial 0 2/3",
            "trial 1 2/3",
            "round 2",
            "trial 0 3/3",
            "trial 1 3/3",
            "round 3",
            "end 0 fixed",
            "end 1 fixed"
        ]
    );
    assert!(m.arms.iter().all(|a| a.reason == Some(StopReason::Fixed)));
}

/// The shuffled order of `rounds` rounds of 4 arms with `seed`.
fn shuffled(seed: u64, rounds: usize) -> Vec<Vec<usize>> {
    let mut f = Fake::new(&[Arm::Noisy(1.0); 4], 0.1);
    let mut h = how(Schedule::Shuffled { seed }, plan(1, rounds, rounds, 100.0));
    h.fixed = true;
    f.run(&h);
    f.arms_called().chunks(4).map(<[usize]>::to_vec).collect()
}

#[test]
fn shuffled_rounds_are_permutations_replayed_by_their_seed() {
    let a = shuffled(42, 8);
    assert_eq!(a.len(), 9, "one warm-up round and eight measured ones");
    for round in &a {
        let mut r = round.clone();
        r.sort();
        assert_eq!(r, [0, 1, 2, 3], "every arm once per round: {round:?}");
    }
    assert_eq!(a, shuffled(42, 8), "same seed, same order");
    let orders: std::collections::BTreeSet<&Vec<usize>> = a.iter().collect();
    assert!(orders.len() > 1, "the order changes between rounds: {a:?}");
    assert_ne!(a, shuffled(43, 8), "another seed, another order");
}

#[test]
fn the_budget_is_shared_among_the_points_still_to_run() {
    // 9 s for 3 noisy points, 1 s a trial, no warm-up: 3 s each.
    let mut f = Fake::new(&[Arm::Noisy(1.0); 3], 1.0);
    let m = f.run(&how(Schedule::Sequential, plan(0, 2, 100, 9.0)));
    assert_eq!((f.trials_of(0), f.trials_of(1), f.trials_of(2)), (3, 3, 3));
    assert!(m.arms.iter().all(|a| a.reason == Some(StopReason::Budget)));
    assert_eq!(m.arms[0].budget, 3.0);

    // A first point precise at the minimum (2 s) leaves 7 s: the second
    // gets half (3.5 s: 4 trials), the third what is left (3 s).
    let mut f = Fake::new(&[Arm::Steady(1.0), Arm::Noisy(1.0), Arm::Noisy(1.0)], 1.0);
    let m = f.run(&how(Schedule::Sequential, plan(0, 2, 100, 9.0)));
    assert_eq!((f.trials_of(0), f.trials_of(1), f.trials_of(2)), (2, 4, 3));
    let reasons: Vec<_> = m.arms.iter().map(|a| a.reason.unwrap()).collect();
    assert_eq!(
        reasons,
        [
            StopReason::Precision,
            StopReason::Budget,
            StopReason::Budget
        ]
    );
    assert_eq!(
        m.arms.iter().map(|a| a.budget).collect::<Vec<_>>(),
        [3.0, 3.5, 3.0]
    );
}

#[test]
fn the_budget_clock_starts_after_warm_up_and_bounds_it() {
    // A 5 s warm-up trial does not eat the 3 s of measurement.
    let mut f = Fake::new(&[Arm::Noisy(1.0)], 1.0);
    let mut t = 0;
    let mut clock = f.now.clone();
    let now = f.now.clone();
    let m = measure(
        1,
        &how(Schedule::Sequential, plan(1, 2, 100, 3.0)),
        &mut clock,
        &mut FnTrials(|_, warm: bool| {
            now.advance(if warm { 5.0 } else { 1.0 });
            t += 1;
            Ok(vec![("t", 1.0 + (t as f64 * 2.7).sin())])
        }),
    );
    assert_eq!(m.arms[0].samples["t"].len(), 3);
    assert_eq!(m.arms[0].reason, Some(StopReason::Budget));
    // A large warm-up stops once the budget is spent (rounds too).
    let m = f.run(&how(Schedule::Interleaved, plan(1000, 1, 1, 3.0)));
    assert_eq!(m.arms[0].warmed, 3);
}

#[test]
fn each_stop_rule_says_why() {
    let run = |arm: Arm, p: Plan| {
        let mut f = Fake::new(&[arm], 0.25);
        let m = f.run(&how(Schedule::Sequential, p));
        (m.arms[0].reason, f.trials_of(0))
    };
    assert_eq!(
        run(Arm::Steady(1.0), plan(0, 5, 30, 100.0)),
        (Some(StopReason::Precision), 5),
        "precise: stops at the minimum, not before"
    );
    assert_eq!(
        run(Arm::Noisy(1.0), plan(0, 5, 12, 100.0)),
        (Some(StopReason::MaxTrials), 12)
    );
    assert_eq!(
        run(Arm::Noisy(1.0), plan(0, 2, 1000, 1.0)),
        (Some(StopReason::Budget), 4)
    );
    // Rounds stop when every arm is precise: one noisy arm keeps all going.
    let mut f = Fake::new(&[Arm::Steady(1.0), Arm::Noisy(1.0)], 0.1);
    let m = f.run(&how(Schedule::Interleaved, plan(0, 3, 7, 100.0)));
    assert_eq!((f.trials_of(0), f.trials_of(1)), (7, 7));
    assert!(m
        .arms
        .iter()
        .all(|a| a.reason == Some(StopReason::MaxTrials)));
}

#[test]
fn an_interrupt_stops_the_loop_and_keeps_what_was_measured() {
    // Sequential: the first point is complete, the second cut short.
    let mut f = Fake::new(&[Arm::Noisy(1.0), Arm::Noisy(1.0)], 0.1);
    f.interrupt_at = Some(6);
    let mut h = how(Schedule::Sequential, plan(0, 3, 3, 100.0));
    h.fixed = true;
    let m = f.run(&h);
    assert!(matches!(m.error, Some(Error::Interrupted(_))));
    assert_eq!(f.log.len(), 5, "no trial after the signal");
    assert_eq!(m.arms[0].reason, Some(StopReason::Fixed));
    assert_eq!(m.arms[1].reason, Some(StopReason::Interrupted));
    assert_eq!(m.arms[1].samples["t"].len(), 2);
    // The cut arm is closed so its two trials are kept (issue 42: an
    // interrupted run stores what finished), and closed as interrupted,
    // never as if complete.
    assert!(
        f.hooks.contains(&"end 1 interrupted".to_string())
            && !f
                .hooks
                .iter()
                .any(|h| h.starts_with("end 1 ") && h != "end 1 interrupted"),
        "a cut arm is ended as interrupted, not as complete: {:?}",
        f.hooks
    );
    // Rounds: every command of the round says interrupted.
    let mut f = Fake::new(&[Arm::Noisy(1.0), Arm::Noisy(1.0)], 0.1);
    f.interrupt_at = Some(4);
    let m = f.run(&how(Schedule::Interleaved, plan(0, 5, 5, 100.0)));
    assert!(m
        .arms
        .iter()
        .all(|a| a.reason == Some(StopReason::Interrupted)));
    assert_eq!(
        (m.arms[0].samples["t"].len(), m.arms[1].samples["t"].len()),
        (2, 1)
    );
    // A failing trial: Failed, the error returned.
    let mut f = Fake::new(&[Arm::Noisy(1.0)], 0.1);
    f.fail_at = Some(3);
    let m = f.run(&how(Schedule::Interleaved, plan(1, 5, 5, 100.0)));
    assert!(matches!(m.error, Some(Error::Measurement(_))));
    assert_eq!(m.arms[0].reason, Some(StopReason::Failed));
    assert_eq!(m.arms[0].samples["t"].len(), 1);
}

/// Scripted values per call: a cold first measured trial after warm-up.
fn cold_then_steady() -> Vec<f64> {
    vec![50.0, 30.0, 10.0, 10.2, 9.9, 10.1, 9.8, 10.3, 10.0, 9.9]
}

#[test]
fn a_cold_leading_trial_is_discarded_and_replaced() {
    let values = cold_then_steady();
    let mut k = 0;
    let mut h = how(Schedule::Sequential, plan(1, 5, 5, 100.0));
    h.fixed = true;
    h.auto_warmup = true;
    let m = measure(
        1,
        &h,
        &mut Now::default(),
        &mut FnTrials(|_, _| {
            k += 1;
            Ok(vec![("t", values[k - 1])])
        }),
    );
    let a = &m.arms[0];
    assert_eq!(k, 7, "one warm-up, the cold trial, five kept");
    assert_eq!(a.samples["t"], [10.0, 10.2, 9.9, 10.1, 9.8]);
    assert_eq!(a.warmup["t"], [50.0, 30.0]);
    assert_eq!(a.discarded, 1);
    assert!(
        a.discard_reason.contains("trial 1's t"),
        "{}",
        a.discard_reason
    );
    // Without the rule every measured trial counts.
    let mut k = 0;
    h.auto_warmup = false;
    let m = measure(
        1,
        &h,
        &mut Now::default(),
        &mut FnTrials(|_, _| {
            k += 1;
            Ok(vec![("t", values[k - 1])])
        }),
    );
    assert_eq!(m.arms[0].samples["t"], [30.0, 10.0, 10.2, 9.9, 10.1]);
}

/// A fake experiment for the runner: each point returns steady values
/// around its `level` after one cold trial, costing 1 fake second a trial.
struct ColdStart {
    now: Now,
    prepared: Arc<Mutex<Vec<u64>>>,
}

struct ColdRun {
    now: Now,
    level: f64,
    k: usize,
}

impl PointRun for ColdRun {
    fn trial(&mut self, _ctx: &Ctx) -> Result<TrialValues> {
        self.now.advance(1.0);
        self.k += 1;
        let v = if self.k <= 2 {
            self.level * 5.0
        } else {
            self.level * (1.0 + 0.01 * (self.k as f64 * 2.7).sin())
        };
        Ok(TrialValues::new().with(COLD_T, v))
    }
}

const COLD_T: tunelab::engine::Metric = COLD_START_SPEC.emits("t");

static COLD_START_SPEC: tunelab::engine::Spec = tunelab::engine::Spec {
    name: "test.cold-start",
    summary: "cold first trials, then steady",
    method: "scripted",
    params: &[ParamSpec::new(
        "level",
        tunelab::engine::ParamKind::Count,
        "1",
        "value",
    )],
    metrics: &[MetricSpec::lower("t", "s", "a time")],
    needs: tunelab::engine::Needs::NOTHING,
    defaults: tunelab::engine::RunDefaults::STANDARD,
    hidden: false,
};

impl Experiment for ColdStart {
    fn spec(&self) -> &'static tunelab::engine::Spec {
        &COLD_START_SPEC
    }
    fn prepare(&self, _ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let level = match p.0.get("level") {
            Some(ParamValue::Int(n)) => *n,
            _ => 1,
        };
        self.prepared.lock().unwrap().push(level);
        Ok(Box::new(ColdRun {
            now: self.now.clone(),
            level: level as f64,
            k: 0,
        }))
    }
}

fn point(level: u64) -> Point {
    let mut m = BTreeMap::new();
    m.insert("level".to_string(), ParamValue::Int(level));
    Point(m)
}

#[test]
fn the_runner_discards_cold_trials_and_shares_the_budget_between_points() {
    let now = Now::default();
    let exp = ColdStart {
        now: now.clone(),
        prepared: Arc::default(),
    };
    let ctx = Ctx::new(None, std::env::temp_dir(), None);
    let p = Plan {
        warmup: 1,
        min_trials: 5,
        max_trials: 5,
        precision: 0.5,
        budget: 1000.0,
        trial_time: tunelab::engine::DEFAULT_TRIAL_TIME,
    };
    let events = Recorder::default();
    let out = run_points_with(
        &exp,
        &[point(10), point(20)],
        &ctx,
        &p,
        false,
        &mut now.clone(),
        &events,
    );
    let events = events.0.into_inner().unwrap();
    assert!(out.error.is_none());
    assert_eq!(
        *exp.prepared.lock().unwrap(),
        [10, 20],
        "one prepare per point"
    );
    for r in &out.results {
        let m = &r.metrics[0];
        assert_eq!(m.samples.len(), 5);
        assert_eq!(m.warmup.len(), 2, "warm-up and the cold measured trial");
        assert_eq!(r.validity.warmup_discarded, 1);
        assert_eq!(
            r.validity.trials.len(),
            6,
            "a guard check per measured trial"
        );
        assert_eq!(m.summary.stop_reason, Some(StopReason::Precision));
    }
    // Progress counts only the kept trials: the cold one does not count.
    let first: Vec<&str> = events.iter().take(8).map(String::as_str).collect();
    assert_eq!(
        first,
        ["start 0", "1", "2", "3", "4", "4", "5", "done precision"]
    );

    // A budget of 8 fake seconds for two points never precise enough:
    // the first gets half (4 s measured after its 1 s warm-up trial), the
    // second what is left of the run's budget (8 − 5 = 3 s).
    let noisy = Plan {
        precision: 1e-9,
        budget: 8.0,
        ..p
    };
    let now = Now::default();
    let exp = ColdStart {
        now: now.clone(),
        prepared: Arc::default(),
    };
    let out = run_points_with(
        &exp,
        &[point(10), point(20)],
        &ctx,
        &noisy,
        false,
        &mut now.clone(),
        &Silent,
    );
    let kept: Vec<usize> = out
        .results
        .iter()
        .map(|r| r.metrics[0].samples.len())
        .collect();
    assert_eq!(kept, [4, 3]);
    for r in &out.results {
        assert_eq!(r.metrics[0].summary.stop_reason, Some(StopReason::Budget));
        assert_eq!(
            r.metrics[0].warmup.len(),
            1,
            "too few later trials to judge the cold one"
        );
    }
}

/// A knob sweep through the loop: the fake knob logs every value it is set
/// to, the fake experiment returns a value that depends on the knob.
#[test]
fn a_knob_sweep_shuffles_its_rounds_by_a_stated_seed() {
    use tunelab::tune::sweep::{sweep_with, Sweep};

    struct Knobbed(Arc<Mutex<String>>);
    struct KnobbedRun(Arc<Mutex<String>>);
    impl PointRun for KnobbedRun {
        fn trial(&mut self, _ctx: &Ctx) -> Result<TrialValues> {
            let v = if *self.0.lock().unwrap() == "fast" {
                1.0
            } else {
                2.0
            };
            Ok(TrialValues::new().with(KNOBBED_T, v))
        }
    }
    const KNOBBED_T: tunelab::engine::Metric = KNOBBED_SPEC.emits("t");
    static KNOBBED_SPEC: tunelab::engine::Spec = tunelab::engine::Spec {
        name: "test.knobbed",
        summary: "reads the fake knob",
        method: "scripted",
        params: &[],
        metrics: &[MetricSpec::lower("t", "s", "a time")],
        needs: tunelab::engine::Needs::NOTHING,
        defaults: tunelab::engine::RunDefaults::STANDARD,
        hidden: false,
    };

    impl Experiment for Knobbed {
        fn spec(&self) -> &'static tunelab::engine::Spec {
            &KNOBBED_SPEC
        }
        fn prepare(&self, _ctx: &Ctx, _p: &Point) -> Result<Box<dyn PointRun>> {
            Ok(Box::new(KnobbedRun(self.0.clone())))
        }
    }

    let ctx = Ctx::new(None, std::env::temp_dir(), None);
    let values = ["fast".to_string(), "slow".into(), "mid".into()];
    let sweep = |seed: u64| {
        let knob = Arc::new(Mutex::new(String::new()));
        let exp = Knobbed(knob.clone());
        let mut set_to = Vec::new();
        let rounds = Recorder::default();
        let out = sweep_with(
            |v: &str| {
                set_to.push(v.to_string());
                *knob.lock().unwrap() = v.to_string();
                Ok(())
            },
            &Sweep {
                knob: "fake",
                values: &values,
                exp: &exp,
                point: &Point::default(),
            },
            &ctx,
            &plan(1, 4, 4, 100.0),
            seed,
            &mut Now::default(),
            &rounds,
        );
        assert!(out.error.is_none());
        (out.results, set_to, rounds.0.into_inner().unwrap())
    };
    let (results, order, rounds) = sweep(7);
    assert_eq!(
        rounds,
        ["round 1", "round 2", "round 3", "round 4"],
        "progress once per measured round"
    );
    assert_eq!(order.len(), 15, "a warm-up round and four measured ones");
    for round in order.chunks(3) {
        let mut r = round.to_vec();
        r.sort();
        assert_eq!(r, ["fast", "mid", "slow"]);
    }
    assert_eq!(sweep(7).1, order, "the same seed replays the order");
    for r in &results {
        let m = &r.metrics[0];
        assert_eq!((m.samples.len(), m.warmup.len()), (4, 1));
        assert_eq!(m.summary.stop_reason, Some(StopReason::Precision));
        assert!(
            r.notes
                .iter()
                .any(|n| n == "rounds in shuffled order, seed 7"),
            "{:?}",
            r.notes
        );
    }
    let fast = &results[0];
    assert_eq!(fast.params["fake"], ParamValue::Text("fast".into()));
    assert_eq!(
        fast.metrics[0].samples, [1.0; 4],
        "each trial under its own value"
    );
}
