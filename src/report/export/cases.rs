//! A result as pass/fail cases, the shape CI gates and device farms read
//! (JUnit test cases, LAVA test-case lines): a study's key issues, a run's
//! metrics, a comparison's metric rows.

use super::Subject;
use crate::analysis::compare::RunComparison;
use crate::analysis::devices::DeviceComparison;
use crate::model::run::{Run, RunStatus};
use crate::stats::Verdict;
use crate::units::human;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Pass,
    /// A verdict against the result: FAIL, regressed.
    Fail,
    /// No verdict could be reached: a measurement missing or failed.
    Error,
}

#[derive(Debug, Clone)]
pub(crate) struct Case {
    /// The group: "study NAME", the experiment, "compare A..B".
    pub(crate) suite: String,
    pub(crate) name: String,
    pub(crate) outcome: Outcome,
    /// The figures behind the outcome, in words.
    pub(crate) message: String,
    pub(crate) seconds: Option<f64>,
    /// A figure a device farm can chart: (value, unit).
    pub(crate) measurement: Option<(f64, String)>,
}

pub(crate) fn cases(s: &Subject) -> Vec<Case> {
    match *s {
        Subject::Run(r) | Subject::Timed(r, _) => run_cases(r),
        Subject::Comparison(c) => comparison_cases(c),
        Subject::Devices(c) => devices_cases(c),
    }
}

fn run_cases(run: &Run) -> Vec<Case> {
    let mut out = Vec::new();
    if run.status != RunStatus::Complete {
        out.push(Case {
            suite: format!("run {}", run.id),
            name: "run".into(),
            outcome: Outcome::Error,
            message: format!("the run is {}", run.status.as_str()),
            seconds: None,
            measurement: None,
        });
    }
    if let Some(st) = &run.study {
        for i in &st.issues {
            let outcome = match i.verdict.as_str() {
                "fail" => Outcome::Fail,
                "unknown" => Outcome::Error,
                // marginal and info are not failures: the label says which.
                _ => Outcome::Pass,
            };
            out.push(Case {
                suite: format!("study {}", st.profile),
                name: i.name.clone(),
                outcome,
                message: format!("{}: {} — {}", i.label(), i.result, i.conclusion),
                seconds: i.seconds,
                measurement: None,
            });
        }
    }
    for r in &run.results {
        let params = r.params_label();
        for m in &r.metrics {
            let s = &m.summary;
            out.push(Case {
                suite: r.experiment.clone(),
                name: join(&[&params, &m.name]),
                outcome: Outcome::Pass,
                message: format!(
                    "median {} (95% CI {} … {}, n={})",
                    human(s.median, &m.unit),
                    human(s.ci95_low, &m.unit),
                    human(s.ci95_high, &m.unit),
                    s.n
                ),
                seconds: Some(r.elapsed_s),
                measurement: Some((s.median, m.unit.clone())),
            });
        }
    }
    out
}

fn join(parts: &[&str]) -> String {
    parts
        .iter()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ")
}

fn outcome(v: Verdict) -> Outcome {
    if v == Verdict::Regressed {
        Outcome::Fail
    } else {
        Outcome::Pass
    }
}

fn comparison_cases(c: &RunComparison) -> Vec<Case> {
    let mut out = Vec::new();
    for p in &c.pairs {
        for m in &p.metrics {
            let x = m.comparison();
            out.push(Case {
                suite: p.experiment.clone(),
                name: join(&[&p.params(), &m.name]),
                outcome: outcome(x.verdict),
                message: format!(
                    "{}: {} → {} ({:+.1}%, ratio {:.3}, 95% CI {:.3} … {:.3}); {}",
                    x.verdict.as_str(),
                    human(m.base_median, &m.unit),
                    human(m.new_median, &m.unit),
                    x.change_pct,
                    x.ratio,
                    x.ci95_low,
                    x.ci95_high,
                    x.reason
                ),
                seconds: None,
                measurement: Some((x.ratio, "ratio".into())),
            });
        }
    }
    out
}

fn devices_cases(c: &DeviceComparison) -> Vec<Case> {
    let base = c.devices.get(c.baseline).map_or("", |d| d.name.as_str());
    let mut out = Vec::new();
    for m in &c.metrics {
        for (i, d) in c.devices.iter().enumerate() {
            let (Some(Some(x)), Some(Some(median))) = (m.vs_baseline.get(i), m.medians.get(i))
            else {
                continue;
            };
            out.push(Case {
                suite: m.experiment.clone(),
                name: join(&[&d.name, &m.params, &m.metric]),
                outcome: outcome(x.verdict),
                message: format!(
                    "{} against {base}: {} ({:+.1}%, ratio {:.3}, 95% CI {:.3} … {:.3})",
                    x.verdict.as_str(),
                    human(*median, &m.unit),
                    x.change_pct,
                    x.ratio,
                    x.ci95_low,
                    x.ci95_high
                ),
                seconds: None,
                measurement: Some((x.ratio, "ratio".into())),
            });
        }
    }
    out
}
