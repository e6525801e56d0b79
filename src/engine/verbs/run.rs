//! `run EXP`: an experiment's points measured in one session. [`plan`]
//! checks everything a run needs before anything is created (the
//! experiment, its points, the repetition plan, privileges, the lab, the
//! target); [`Planned::measure`] begins the session, measures on the target
//! or each lab file system, stores the run and hands it back with its
//! errors, for the caller to print first and report after.

use std::path::Path;

use crate::engine::catalog::Catalog;
use crate::engine::observer::{Event, Observer};
use crate::engine::params::{expand_points, split_assignment};
use crate::engine::pipeline::{self, for_each_target, Finished, Lab};
use crate::engine::runner::{run_points, Plan, RunOptions};
use crate::engine::session::Watch;
use crate::engine::{Experiment, Point};
use crate::safety::scratch::{check_target, Use};
use crate::store::Store;
use crate::Result;

/// What `run` was asked for, as parsed.
pub(crate) struct Request<'a> {
    pub(crate) experiment: &'a str,
    /// `-p key=value[,value…]`, unsplit.
    pub(crate) params: &'a [String],
    pub(crate) options: RunOptions,
    pub(crate) target: Option<&'a Path>,
    /// `--fs`, `--fs-size`, `--throttle`.
    pub(crate) fs: Option<&'a str>,
    pub(crate) fs_size: u64,
    pub(crate) throttle: Option<&'a str>,
}

/// A run checked and planned, not begun.
pub(crate) struct Planned<'a> {
    pub(crate) exp: Box<dyn Experiment>,
    pub(crate) points: Vec<Point>,
    pub(crate) plan: Plan,
    /// A fixed trial count (no budget): the points keep to no budget.
    pub(crate) fixed: bool,
    lab: Lab,
    target: Option<&'a Path>,
}

/// The points `-p key=value[,value…]` asks of `exp` (every combination of
/// the values given, the defaults for the rest): shared by run and tune.
pub fn points(exp: &dyn Experiment, params: &[String]) -> Result<Vec<Point>> {
    let overrides = params
        .iter()
        .map(|p| split_assignment(p))
        .collect::<Result<Vec<_>>>()?;
    expand_points(exp.params(), &overrides)
}

/// Check and plan a run: each refusal is one error, before anything is
/// created (a target that cannot be used, too).
pub(crate) fn plan<'a>(req: &Request<'a>, experiments: &Catalog) -> Result<Planned<'a>> {
    let exp = experiments.find(req.experiment)?;
    let points = points(exp.as_ref(), req.params)?;
    for p in &points {
        exp.validate(p)?;
    }
    let plan = req.options.plan(exp.defaults())?;
    if exp.needs().root {
        crate::safety::require_root(|| format!("{} needs root (run it with sudo)", exp.name()))?;
    }
    let lab = Lab::from_flags(req.fs, req.fs_size, req.throttle)?;
    if let Some(t) = req.target {
        check_target(t, Use::Write)?;
    }
    Ok(Planned {
        exp,
        points,
        plan,
        fixed: req.options.fixed(),
        lab,
        target: req.target,
    })
}

impl Planned<'_> {
    /// File systems the points are measured on, one after another: each
    /// `--fs` of the lab, or the target alone.
    pub(crate) fn targets(&self) -> usize {
        self.lab.fs.len().max(1)
    }

    /// The longest the whole run can take (every target), in seconds; None
    /// for a fixed count of trials without a budget.
    pub(crate) fn longest(&self) -> Option<f64> {
        crate::engine::runner::longest(&self.plan, self.fixed).map(|s| s * self.targets() as f64)
    }

    /// Measure in one session (watched as `watch` says, labelled `label`),
    /// store the run unless `store` is None, and return it: the warnings
    /// found while measuring are said again through `obs` once it is over.
    pub(crate) fn measure(
        &self,
        watch: &Watch,
        label: &str,
        argv: &[String],
        store: Option<&mut Store>,
        obs: &dyn Observer,
    ) -> Finished {
        let exp = self.exp.as_ref();
        let points = &self.points;
        let mut session = pipeline::begin_session(watch, label, self.target, argv, obs);
        let quiet_warnings = session.run.warnings.len();
        // The runner shares the budget equally among the points.
        let weights = vec![self.plan.budget / points.len().max(1) as f64; points.len()];
        let error = for_each_target(
            exp,
            points,
            self.target,
            &self.lab,
            obs,
            &mut session,
            &mut |ctx| {
                obs.progress(Event::Begin {
                    what: "points",
                    weights: &weights,
                    budget: (!self.fixed).then_some(self.plan.budget),
                    expected: false,
                });
                let outcome = run_points(exp, points, ctx, &self.plan, self.fixed, obs);
                obs.progress(Event::End);
                outcome
            },
        );
        let run = session.finish(error.as_ref());
        for w in run.warnings.iter().skip(quiet_warnings) {
            obs.run_warning(w);
        }
        let store_error = pipeline::store_run(&run, store, false, obs);
        Finished {
            run,
            error,
            store_error,
        }
    }
}
