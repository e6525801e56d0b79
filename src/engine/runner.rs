//! The runner: warm-up, then trials until the 95% CI of every metric's median
//! is within the precision target (or max trials, or the time budget), and
//! the reason it stopped.

use std::collections::BTreeMap;
use std::time::Instant;

use super::model::{MetricResult, PointResult};
use super::{Ctx, Experiment, Point, RunDefaults};
use crate::observe::validity::{Guard, Roots, Validity};
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
    out.warnings
        .extend(suspect_warning(exp.name(), &out.results));
    out
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
    // The validity guard reads its sources before and after every measured
    // trial, outside the experiment's own timing.
    let guard = Guard::new(Roots::system(), ctx.scratch_dir().ok());
    let mut checks = Vec::new();
    // The budget clock starts after warm-up so a slow first trial does not
    // eat the measurement's share.
    let measure_start = Instant::now();
    let mut n = 0;
    let mut discard = Discard::default();
    let reason = loop {
        ctx.check_cancel()?;
        let before = guard.read();
        let t = Instant::now();
        let values = state.trial(ctx)?;
        let seconds = t.elapsed().as_secs_f64();
        checks.push(guard.check(&before, &guard.read(), seconds));
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
        // Leading trials that are outliers against the rest are warm-up:
        // they do not count towards the trial targets nor the precision.
        // A trial once judged warm-up stays discarded (a fixed --trials N
        // then gives exactly N summarised trials).
        discard = leading_warmup(&samples, discard);
        let kept = n - discard.count.min(n);
        progress(Event::Trial {
            n: kept,
            max: plan.max_trials,
        });
        let precise = !samples.is_empty()
            && samples.values().all(|s| {
                let s = &s[discard.count.min(s.len())..];
                relative_half_width(&stats::summarize(s)) <= plan.precision
            });
        let over = measure_start.elapsed().as_secs_f64() >= budget;
        if let Some(r) = stop_reason(kept, plan, precise, over, fixed_trials) {
            break r;
        }
    };
    let extras = state.finish(ctx)?;
    drop(state);
    let metrics = metric_specs
        .iter()
        .filter_map(|spec| {
            let mut s = samples.remove(spec.name)?;
            let mut warmup = warm.remove(spec.name).unwrap_or_default();
            warmup.extend(s.drain(..discard.count.min(s.len())));
            let mut summary = stats::summarize(&s);
            summary.stop_reason = reason.to_string();
            Some(MetricResult {
                name: spec.name.to_string(),
                unit: spec.unit.to_string(),
                better: spec.better,
                samples: s,
                warmup,
                summary,
            })
        })
        .collect();
    let discard_note = (discard.count > 0).then(|| {
        format!(
            "{} measured trial{} discarded as warm-up (kept in the run with the warm-up \
             trials): {}",
            discard.count,
            if discard.count == 1 { "" } else { "s" },
            discard.reason
        )
    });
    Ok(PointResult {
        experiment: exp.name().to_string(),
        params: point.0.clone(),
        metrics,
        series: extras.series,
        histograms: extras.histograms,
        notes: warmup_note
            .into_iter()
            .chain(discard_note)
            .chain(extras.notes)
            .collect(),
        elapsed_s: t0.elapsed().as_secs_f64(),
        validity: Validity {
            warmup_discarded: discard.count,
            warmup_reason: discard.reason,
            trials: checks,
            skipped: guard.skipped.clone(),
        },
        ..Default::default()
    })
}

/// Most measured trials the runner discards as warm-up; beyond that the
/// point is unstable, not warming up, and every trial is kept.
pub const AUTO_WARMUP_CAP: usize = 3;
/// A leading trial is only judged against at least this many later ones:
/// the MAD of fewer values is too rough to call anything an outlier.
pub const AUTO_WARMUP_MIN_REST: usize = 4;

/// Leading measured trials judged to be warm-up, and why.
#[derive(Debug, Clone, Default, PartialEq)]
struct Discard {
    count: usize,
    reason: String,
}

/// Trial k (k = 0, 1, … up to [`AUTO_WARMUP_CAP`]) is warm-up when, in any
/// metric, it is an outlier against the trials after it by the same MAD rule
/// the summaries use (modified z-score above 3.5, MAD scaled by 1.4826),
/// judged only with at least [`AUTO_WARMUP_MIN_REST`] later trials and a
/// non-zero MAD, and lies outside the range of those later trials. The
/// first trial that is not an outlier ends the warm-up.
/// `so_far` (the previous decision) is kept: the search goes on after it.
fn leading_warmup(samples: &BTreeMap<&'static str, Vec<f64>>, so_far: Discard) -> Discard {
    let mut out = so_far;
    let mut reasons: Vec<String> = Vec::new();
    if !out.reason.is_empty() {
        reasons.push(std::mem::take(&mut out.reason));
    }
    'trials: for k in out.count..AUTO_WARMUP_CAP {
        for (name, v) in samples {
            let Some(&x) = v.get(k) else { continue };
            let rest: Vec<f64> = v[k + 1..]
                .iter()
                .copied()
                .filter(|x| x.is_finite())
                .collect();
            if !x.is_finite() || rest.len() < AUTO_WARMUP_MIN_REST {
                continue;
            }
            let med = stats::median(&rest);
            let dev: Vec<f64> = rest.iter().map(|r| (r - med).abs()).collect();
            let mad = stats::median(&dev);
            if mad <= 0.0 || med == 0.0 {
                continue;
            }
            let z = (x - med).abs() / (1.4826 * mad);
            // ... and more extreme than every later trial: with 4-5 tight
            // later values the MAD alone would call a trial 10% off warm-up.
            let (lo, hi) = rest
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
                    (l.min(*v), h.max(*v))
                });
            if z > 3.5 && (x < lo || x > hi) {
                reasons.push(format!(
                    "trial {}'s {name} was {:.2}× the median of the {} trials after it \
                     (modified z-score {z:.1} > 3.5)",
                    k + 1,
                    x / med,
                    rest.len()
                ));
                out.count = k + 1;
                continue 'trials;
            }
        }
        break;
    }
    out.reason = reasons.join("; ");
    out
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

    /// An experiment whose trials return scripted values, in order.
    struct Scripted(Vec<f64>);

    struct ScriptedRun {
        values: std::vec::IntoIter<f64>,
    }

    impl super::super::PointRun for ScriptedRun {
        fn trial(&mut self, _ctx: &Ctx) -> Result<super::super::TrialValues> {
            let v = self.values.next().unwrap_or(10.0);
            Ok(super::super::TrialValues::new().with("t", v))
        }
    }

    impl Experiment for Scripted {
        fn name(&self) -> &'static str {
            "test.scripted"
        }
        fn summary(&self) -> &'static str {
            "scripted values"
        }
        fn method(&self) -> &'static str {
            "returns the values it was given"
        }
        fn params(&self) -> Vec<super::super::ParamSpec> {
            Vec::new()
        }
        fn metrics(&self) -> Vec<super::super::MetricSpec> {
            vec![super::super::MetricSpec::lower("t", "s", "a time")]
        }
        fn prepare(&self, _ctx: &Ctx, _p: &Point) -> Result<Box<dyn super::super::PointRun>> {
            Ok(Box::new(ScriptedRun {
                values: self.0.clone().into_iter(),
            }))
        }
    }

    fn run_scripted(values: &[f64], plan: &Plan, fixed: bool) -> PointResult {
        let ctx = Ctx::new(None, std::env::temp_dir(), None);
        let exp = Scripted(values.to_vec());
        let out = run_points(&exp, &[Point::default()], &ctx, plan, fixed, &mut |_| {});
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
        let p = Plan {
            warmup: 1,
            min_trials: 5,
            max_trials: 5,
            precision: 1e-9,
            budget: 60.0,
        };
        let r = run_scripted(&values, &p, true);
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
        assert_eq!(m.summary.stop_reason, "fixed");
    }

    #[test]
    fn steady_trials_are_all_kept() {
        let values = [10.0, 10.1, 9.9, 10.2, 9.8, 10.0, 10.1];
        let p = Plan {
            warmup: 0,
            min_trials: 5,
            max_trials: 5,
            precision: 1e-9,
            budget: 60.0,
        };
        let r = run_scripted(&values, &p, true);
        assert_eq!(r.metrics[0].samples.len(), 5);
        assert_eq!(r.validity.warmup_discarded, 0);
        assert!(r.metrics[0].warmup.is_empty());
    }

    #[test]
    fn warmup_detection_is_capped_and_needs_evidence() {
        let m = |v: &[f64]| {
            let mut b = BTreeMap::new();
            b.insert("t", v.to_vec());
            leading_warmup(&b, Discard::default()).count
        };
        // Too few later trials to judge.
        assert_eq!(m(&[100.0, 10.0, 10.1, 9.9]), 0);
        assert_eq!(m(&[100.0, 10.0, 10.1, 9.9, 10.2]), 1);
        // Two cold trials.
        assert_eq!(m(&[100.0, 50.0, 10.0, 10.1, 9.9, 10.2]), 2);
        // A slow drift over many trials is not warm-up beyond the cap.
        assert_eq!(
            m(&[90.0, 80.0, 70.0, 60.0, 10.0, 10.1, 9.9, 10.2, 10.0]),
            AUTO_WARMUP_CAP
        );
        // A faster first trial is a transient too (e.g. writes before the
        // dirty limit).
        assert_eq!(m(&[2.0, 10.0, 10.1, 9.9, 10.2]), 1);
        // Identical later values (a count, a quantised time): no spread to
        // judge against, nothing discarded.
        assert_eq!(m(&[1.0, 0.0, 0.0, 0.0, 0.0, 0.0]), 0);
        // An ordinary first trial ends the search.
        assert_eq!(m(&[10.05, 100.0, 10.0, 10.1, 9.9, 10.2]), 0);
        // Tight later trials make the MAD tiny: a first trial inside their
        // range is not warm-up even with a large modified z-score.
        assert_eq!(m(&[11.0, 10.0, 10.01, 10.02, 12.0, 10.03]), 0);
        // A decision stands when later trials would have made the first
        // one look ordinary: the search resumes after it.
        let mut b = BTreeMap::new();
        b.insert("t", vec![13.0, 10.0, 10.1, 9.9, 10.2]);
        let first = leading_warmup(&b, Discard::default());
        assert_eq!(first.count, 1);
        b.insert(
            "t",
            vec![13.0, 10.0, 10.1, 9.9, 10.2, 12.5, 13.5, 11.8, 12.9],
        );
        assert_eq!(leading_warmup(&b, Discard::default()).count, 0);
        let again = leading_warmup(&b, first.clone());
        assert_eq!(again, first);
    }
}
