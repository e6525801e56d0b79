//! `study PROFILE`, in run's shape: [`plan`] checks what the study needs
//! before anything is created (the target, each key issue's repetition
//! plan) and says what it will take; [`Planned::measure`] begins the
//! session, runs the key issues (storing the growing run after each) and
//! stores the finished run over them, for the caller to print.

use std::path::Path;

use super::profile::{KeyIssue, Profile};
use super::run::{self, issue_options};
use crate::engine::observer::Observer;
use crate::engine::pipeline::{self, Finished, Lab};
use crate::engine::runner::{longest, Plan, RunOptions};
use crate::engine::session::Watch;
use crate::safety::scratch::{check_target, Use};
use crate::store::Store;
use crate::Result;

/// What `study` was asked for, as parsed.
pub(crate) struct Request<'a> {
    pub(crate) profile: &'a Profile,
    pub(crate) target: Option<&'a Path>,
    pub(crate) lab: Lab,
    /// The command line's repetition settings; a key issue's own win.
    pub(crate) options: RunOptions,
}

/// A study checked and planned, not begun.
pub(crate) struct Planned<'a> {
    req: Request<'a>,
    /// Each key issue with its repetition plan and the longest it can take
    /// on every target (None: a fixed trial count with no budget).
    pub(crate) issues: Vec<(&'a KeyIssue, Plan, Option<f64>)>,
}

/// Check and plan a study: a target that cannot be used fails every key
/// issue, so it is one error up front.
pub(crate) fn plan(req: Request) -> Result<Planned> {
    if let Some(t) = req.target {
        check_target(t, Use::Write)?;
    }
    let targets = req.lab.fs.len().max(1) as f64;
    let mut issues = Vec::new();
    for i in &req.profile.issues {
        let opts = issue_options(i, &req.options);
        let plan = opts.plan(i.experiment.defaults())?;
        let most = longest(&plan, opts.fixed()).map(|s| s * targets);
        issues.push((i, plan, most));
    }
    Ok(Planned { req, issues })
}

impl Planned<'_> {
    /// The longest the whole study can take (None: some key issue has no
    /// bound) and the most trials any point takes.
    pub(crate) fn longest(&self) -> (Option<f64>, usize) {
        let total = self
            .issues
            .iter()
            .try_fold(0.0, |t, (_, _, l)| l.map(|l| t + l));
        let trials = self.issues.iter().map(|(_, p, _)| p.max_trials).max();
        (total, trials.unwrap_or(0))
    }

    /// What the study writes and holds at most, against the room there is.
    pub(crate) fn footprint(&self) -> String {
        super::footprint::estimate(self.req.profile, self.req.target, self.req.options.trials)
            .describe()
    }

    /// Measure in one session (watched as `watch` says, labelled `label`),
    /// storing the growing run after each key issue and the finished one
    /// over it unless `store` is None.
    pub(crate) fn measure(
        &self,
        watch: &Watch,
        label: &str,
        argv: &[String],
        mut store: Option<&mut Store>,
        obs: &dyn Observer,
    ) -> Finished {
        let session = pipeline::begin_session(watch, label, self.req.target, argv, obs);
        let req = run::Request {
            profile: self.req.profile,
            target: self.req.target,
            lab: &self.req.lab,
            options: &self.req.options,
        };
        let (run, error) = run::run(&req, session, store.as_deref_mut(), obs);
        let store_error = pipeline::store_run(&run, store, true, obs);
        Finished {
            run,
            error,
            store_error,
        }
    }
}
