//! Tests of the runner: warm-up discard, fitted parameters, options.

use super::*;

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
    // The trial time: the default, a chosen one, and one out of range.
    assert_eq!(
        RunOptions::default().plan(d).unwrap().trial_time,
        crate::engine::DEFAULT_TRIAL_TIME
    );
    let o = RunOptions {
        trial_time: Some(0.05),
        ..Default::default()
    };
    assert_eq!(o.plan(d).unwrap().trial_time.as_millis(), 50);
    let o = RunOptions {
        trial_time: Some(600.0),
        ..Default::default()
    };
    let e = o.plan(d).unwrap_err();
    assert!(
        e.exit_code() == 2 && e.to_string().contains("1ms to 60s"),
        "{e}"
    );
}

/// An experiment whose trials return scripted values, in order.
struct Scripted(Vec<f64>);

struct ScriptedRun {
    values: std::vec::IntoIter<f64>,
}

impl super::super::PointRun for ScriptedRun {
    fn trial(&mut self, _ctx: &Ctx) -> Result<super::super::TrialValues> {
        let v = self.values.next().unwrap_or(10.0);
        Ok(super::super::TrialValues::new().with(T, v))
    }
}

const T: crate::engine::Metric = SCRIPTED_SPEC.emits("t");

/// The test experiments' declaration: one time metric "t", no needs.
const SCRIPTED_SPEC: crate::engine::Spec = crate::engine::Spec {
    name: "test.scripted",
    summary: "scripted values",
    method: "returns the values it was given",
    params: &[],
    metrics: &[super::super::MetricSpec::lower("t", "s", "a time")],
    needs: crate::engine::Needs::NOTHING,
    defaults: crate::engine::RunDefaults::STANDARD,
    hidden: false,
};

impl Experiment for Scripted {
    fn spec(&self) -> &'static crate::engine::Spec {
        &SCRIPTED_SPEC
    }
    fn prepare(&self, _ctx: &Ctx, _p: &Point) -> Result<Box<dyn super::super::PointRun>> {
        Ok(Box::new(ScriptedRun {
            values: self.0.clone().into_iter(),
        }))
    }
}

/// Exactly five measured trials after `warmup` warm-up trials.
fn five_trials(warmup: usize) -> Plan {
    Plan {
        warmup,
        min_trials: 5,
        max_trials: 5,
        precision: 1e-9,
        budget: 60.0,
        trial_time: crate::engine::DEFAULT_TRIAL_TIME,
    }
}

fn run_scripted(values: &[f64], plan: &Plan, fixed: bool) -> PointResult {
    let ctx = Ctx::new(None, crate::safety::scratch::target_or_temp(None), None);
    let exp = Scripted(values.to_vec());
    let out = run_points(
        &exp,
        &[Point::default()],
        &ctx,
        plan,
        fixed,
        &crate::engine::observer::Silent,
    );
    assert!(out.error.is_none());
    assert!(
        out.warnings.iter().all(|w| !w.contains("--warmup")),
        "no warm-up advice is pushed onto the user: {:?}",
        out.warnings
    );
    out.results.into_iter().next().unwrap()
}

#[test]
fn a_cold_first_trial_is_discarded_and_replaced() {
    // Warm-up 1 (value 50), then a measured trial still cold (30), then
    // steady values around 10.
    let values = [50.0, 30.0, 10.0, 10.2, 9.9, 10.1, 9.8, 10.3, 10.0, 9.9];
    let r = run_scripted(&values, &five_trials(1), true);
    let m = &r.metrics[0];
    // Five kept trials as asked, the cold one moved to the warm-up list.
    assert_eq!(m.samples, [10.0, 10.2, 9.9, 10.1, 9.8]);
    assert_eq!(m.warmup, [50.0, 30.0]);
    assert_eq!(r.validity.warmup_discarded, 1);
    assert!(
        r.validity
            .warmup_reason
            .contains("trial 1's t was 2.99× the median of the 4 trials after it"),
        "{}",
        r.validity.warmup_reason
    );
    assert!(r
        .notes
        .iter()
        .any(|n| n.contains("1 measured trial discarded as warm-up")));
    assert!(!m.summary.first_is_outlier);
    // Every measured trial (discarded included) has a guard check.
    assert_eq!(r.validity.trials.len(), 6);
    assert_eq!(m.summary.stop_reason, Some(StopReason::Fixed));
}

#[test]
fn steady_trials_are_all_kept() {
    let values = [10.0, 10.1, 9.9, 10.2, 9.8, 10.0, 10.1];
    let r = run_scripted(&values, &five_trials(0), true);
    assert_eq!(r.metrics[0].samples.len(), 5);
    assert_eq!(r.validity.warmup_discarded, 0);
    assert!(r.metrics[0].warmup.is_empty());
}

/// A point that ran with a smaller size than asked, as the memory and
/// disk fitting does on a small board.
struct Fitting;

struct FittingRun;

impl super::super::PointRun for FittingRun {
    fn trial(&mut self, _ctx: &Ctx) -> Result<super::super::TrialValues> {
        Ok(super::super::TrialValues::new().with(T, 1.0))
    }
    fn fitted(&self) -> Vec<Fitted> {
        vec![Fitted {
            param: "size",
            used: ParamValue::Int(48 << 20),
            why: "memory budget 48 MiB".into(),
        }]
    }
}

static FITTING_SPEC: crate::engine::Spec = crate::engine::Spec {
    name: "test.fitting",
    summary: "fits its size",
    method: "returns 1",
    params: &[ParamSpec::new(
        "size",
        super::super::ParamKind::Size,
        "256M",
        "buffer size",
    )],
    ..SCRIPTED_SPEC
};

impl Experiment for Fitting {
    fn spec(&self) -> &'static crate::engine::Spec {
        &FITTING_SPEC
    }
    fn prepare(&self, _ctx: &Ctx, _p: &Point) -> Result<Box<dyn PointRun>> {
        Ok(Box::new(FittingRun))
    }
}

#[test]
fn a_fitted_size_is_stored_as_used_with_a_note() {
    let ctx = Ctx::new(None, crate::safety::scratch::target_or_temp(None), None);
    let mut params = BTreeMap::new();
    params.insert("size".to_string(), ParamValue::Int(256 << 20));
    let p = Plan {
        warmup: 0,
        min_trials: 2,
        max_trials: 2,
        precision: 0.02,
        budget: 60.0,
        trial_time: crate::engine::DEFAULT_TRIAL_TIME,
    };
    let out = run_points(
        &Fitting,
        &[Point(params)],
        &ctx,
        &p,
        true,
        &crate::engine::observer::Silent,
    );
    assert!(out.error.is_none());
    let r = &out.results[0];
    assert_eq!(r.params["size"], ParamValue::Int(48 << 20));
    assert!(
        r.notes.iter().any(|n| n
            == "size=48 MiB was measured (fitted: memory budget 48 MiB; size=256 MiB was \
                asked for)"),
        "{:?}",
        r.notes
    );
}
