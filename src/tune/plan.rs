//! `tune KNOB`, in run's shape: [`plan`] checks everything a sweep needs
//! before anything is changed — the knob, the values, the experiment's one
//! point, the metric, the rounds, the lab, the target, and (on the target)
//! the knob resolved and each value validated; [`Planned::measure`] sweeps
//! in one session, stores the run and decides each value against the live
//! one. The CLI parses, calls and prints.

use std::path::Path;

use super::decide::{per_group, rounds_for_a_claim, rounds_to_plan, Decision, ENV_LIVE};
use super::knobs::{is_known, Knob, NAMES};
use super::sweep::default_metric;
use crate::engine::catalog::Catalog;
use crate::engine::observer::Observer;
use crate::engine::pipeline::{self, Finished, Lab};
use crate::engine::runner::{Plan, RunOptions};
use crate::engine::session::Watch;
use crate::engine::{Experiment, Point};
use crate::store::Store;
use crate::{Error, Result};

/// What `tune` was asked for, as parsed.
pub(crate) struct Request<'a> {
    pub(crate) knob: &'a str,
    /// `--values`, comma-separated as typed.
    pub(crate) values: &'a str,
    pub(crate) experiment: &'a str,
    /// `-p key=value` (one value each: the knob is what sweeps).
    pub(crate) params: &'a [String],
    pub(crate) target: Option<&'a Path>,
    /// `--device`: the disk a block knob acts on instead of the target's.
    pub(crate) device: Option<&'a str>,
    /// `--metric` (None: the knob's default for the experiment).
    pub(crate) metric: Option<&'a str>,
    pub(crate) noise: f64,
    pub(crate) options: RunOptions,
    /// `--fs`, `--fs-size`, `--throttle`.
    pub(crate) fs: Option<&'a str>,
    pub(crate) fs_size: u64,
    pub(crate) throttle: Option<&'a str>,
    /// `--dry-run`: planned and described, nothing changed (no root needed).
    pub(crate) dry_run: bool,
}

/// A sweep checked and planned, nothing changed yet.
pub(crate) struct Planned<'a> {
    pub(crate) knob: &'a str,
    pub(crate) values: Vec<String>,
    pub(crate) exp: Box<dyn Experiment>,
    /// The one point every value is measured at.
    pub(crate) point: Point,
    pub(crate) metric: String,
    /// The metric is the knob's default (no `--metric`).
    pub(crate) default_metric: bool,
    pub(crate) plan: Plan,
    /// What planning found worth saying (too few rounds for a claim).
    pub(crate) notes: Vec<String>,
    /// The knob on the target, resolved (None on the lab: its loop devices
    /// do not exist yet).
    pub(crate) resolved: Option<Knob>,
    pub(crate) device: Option<&'a str>,
    pub(crate) target: Option<&'a Path>,
    pub(crate) noise: f64,
    pub(crate) fs: Option<&'a str>,
    pub(crate) fs_size: u64,
    lab: Lab,
}

/// A finished sweep: the run (stored unless told not to) and each lab file
/// system's decision against its live value (one without `--fs`).
pub(crate) struct Swept {
    pub(crate) finished: Finished,
    pub(crate) decisions: Vec<(Option<String>, Result<Decision>)>,
}

/// Check and plan a sweep: each refusal is one error, before anything is
/// changed or created.
pub(crate) fn plan<'a>(req: &Request<'a>, experiments: &Catalog) -> Result<Planned<'a>> {
    if !is_known(req.knob) {
        return Err(Error::usage(format!(
            "unknown knob '{}' (knobs: {})",
            req.knob,
            NAMES.join(", ")
        )));
    }
    let values: Vec<String> = req
        .values
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    if values.len() < 2 {
        return Err(Error::usage(
            "--values needs at least two values to compare (e.g. --values 128,1024)",
        ));
    }
    let exp = experiments.find(req.experiment)?;
    let mut points = crate::engine::verbs::run::points(exp.as_ref(), req.params)?;
    if points.len() != 1 {
        // Name the parameters that sweep (by default or from -p).
        let sweeping: Vec<String> = points[0]
            .0
            .iter()
            .filter(|(k, v)| points.iter().any(|p| p.0.get(*k) != Some(*v)))
            .map(|(k, v)| format!("-p {k}={v}"))
            .collect();
        return Err(Error::usage(format!(
            "tune sweeps only the knob, but {} makes {} points; give each of its sweeping \
             parameters one value, e.g. {}",
            exp.name(),
            points.len(),
            sweeping.join(" ")
        )));
    }
    let point = points.remove(0);
    exp.validate(&point)?;
    let (metric, default_metric) = match req.metric {
        Some(m) if exp.metrics().iter().any(|x| x.name == m) => (m.to_string(), false),
        Some(m) => return Err(Error::usage(format!("{} has no metric '{m}'", exp.name()))),
        None => {
            let metrics: Vec<(String, String)> = exp
                .metrics()
                .iter()
                .map(|m| (m.name.to_string(), m.unit.to_string()))
                .collect();
            (default_metric(req.knob, &metrics), true)
        }
    };
    let (plan, notes) = rounds_plan(&req.options, exp.defaults(), values.len())?;
    let lab = Lab::from_flags(req.fs, req.fs_size, req.throttle)?;
    if let Some(t) = req.target {
        crate::safety::scratch::check_target(t, crate::safety::scratch::Use::Write)?;
    }
    // On the target the knob exists now: resolve it and validate every
    // value before measuring anything (the lab's devices come later).
    let resolved = match req.fs {
        Some(_) => None,
        None => {
            let dir = crate::engine::session::target_or_temp(req.target);
            let knob = Knob::resolve(req.knob, &dir, req.device)?;
            for v in &values {
                knob.validate(v)?;
            }
            Some(knob)
        }
    };
    let planned = Planned {
        knob: req.knob,
        values,
        exp,
        point,
        metric,
        default_metric,
        plan,
        notes,
        resolved,
        device: req.device,
        target: req.target,
        noise: req.noise,
        fs: req.fs,
        fs_size: req.fs_size,
        lab,
    };
    if !req.dry_run {
        planned.require_root()?;
    }
    Ok(planned)
}

/// The repetition plan: the experiment's, with enough rounds by default
/// (up to its maximum) for a 95% claim against the live value among
/// `values`; a count the user gave is kept, with a note when it is too few.
fn rounds_plan(
    options: &RunOptions,
    defaults: crate::engine::RunDefaults,
    values: usize,
) -> Result<(Plan, Vec<String>)> {
    let mut plan = options.plan(defaults)?;
    let mut notes = Vec::new();
    // Up to `values` comparisons with the live arm (one fewer when it is swept).
    let (claim, planned) = (rounds_for_a_claim(values), rounds_to_plan(values));
    let given = options.trials.is_some() || options.min_trials.is_some();
    if !given && plan.min_trials < planned {
        // Within the experiment's maximum: a one-recording experiment keeps
        // its one trial (and the note below says what that means).
        plan.min_trials = planned.min(plan.max_trials);
    }
    if plan.max_trials < claim {
        notes.push(format!(
            "at most {} round(s): too few for a 95% claim against the live value with {values} \
             value(s) (at least {claim} are needed): the sweep shows figures but names no winner",
            plan.max_trials
        ));
    }
    Ok((plan, notes))
}

impl Planned<'_> {
    /// Whether tunelab may change the knob (and run the experiment) here:
    /// the one root check of a sweep.
    pub(crate) fn require_root(&self) -> Result<()> {
        crate::safety::require_root(|| {
            format!("tune changes {} and needs root (run with sudo)", self.knob)
        })
    }

    /// The directory the workload runs in (the temp default decided once,
    /// by the session's rule).
    pub(crate) fn workdir(&self) -> std::path::PathBuf {
        crate::engine::session::target_or_temp(self.target)
    }

    /// Sweep in one session (watched as `watch` says, labelled `label`),
    /// restore the knob, store the run unless `store` is None, and decide.
    pub(crate) fn measure(
        &self,
        watch: &Watch,
        label: &str,
        argv: &[String],
        store: Option<&mut Store>,
        obs: &dyn Observer,
    ) -> Swept {
        let session = pipeline::begin_session(watch, label, self.target, argv, obs);
        let req = super::run::Request {
            knob: self.knob,
            values: &self.values,
            device: self.device,
            exp: self.exp.as_ref(),
            points: std::slice::from_ref(&self.point),
            target: self.target,
            lab: &self.lab,
            plan: &self.plan,
            metric: &self.metric,
            noise: self.noise,
        };
        let (run, error) = super::run::run(&req, session, obs);
        let store_error = pipeline::store_run(&run, store, false, obs);
        let live = run.environment.get(ENV_LIVE).map(String::as_str);
        let decisions = per_group(self.knob, &run.results, &self.metric, self.noise, live);
        Swept {
            finished: Finished {
                run,
                error,
                store_error,
            },
            decisions,
        }
    }
}
