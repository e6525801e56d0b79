//! A measurement session: what every command that measures does around the
//! trials — quietness check, environment snapshot, background sampler,
//! scratch space, and closing the run with its status. `run`, `tune` and
//! `study` share it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::model::{new_run_id, now_rfc3339, PointResult, Run, RunStatus, RUN_SCHEMA};
use super::params::ParamValue;
use super::runner::Outcome;
use super::{Ctx, Experiment, Point};
use crate::observe::sampler::Sampler;
use crate::safety::Scratch;
use crate::system::{self, device_for_path};
use crate::{Error, Result};

/// How to watch the machine around a run.
#[derive(Debug, Clone)]
pub struct Watch {
    /// Seconds of quietness check before the run (0 = skip).
    pub quiet_check: f64,
    /// Background sampler interval in seconds.
    pub sample_interval: f64,
}

/// An open run: environment recorded, sampler running.
pub struct Session {
    pub run: Run,
    sampler: Option<Sampler>,
}

impl Session {
    /// Start a run measured on `target` (None: the temp directory).
    pub fn begin(
        target: Option<&Path>,
        label: &str,
        argv: &[String],
        watch: &Watch,
        warn: &dyn Fn(&str),
    ) -> Session {
        let target = target
            .map(Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir);
        let disk = device_for_path(&target).map(|d| d.name);
        let mut run = Run {
            schema: RUN_SCHEMA.to_string(),
            id: new_run_id(),
            label: label.to_string(),
            status: RunStatus::Complete,
            started: now_rfc3339(),
            finished: String::new(),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            argv: argv.to_vec(),
            environment: system::snapshot(Some(&target), argv),
            quietness: Default::default(),
            results: Vec::new(),
            samples: Vec::new(),
            warnings: Vec::new(),
            study: None,
        };
        if watch.quiet_check > 0.0 {
            run.quietness = system::quietness_check(
                Duration::from_secs_f64(watch.quiet_check),
                disk.as_deref(),
            );
            for w in &run.quietness.warnings {
                warn(w);
            }
            run.warnings.extend(run.quietness.warnings.iter().cloned());
        }
        let sampler = Sampler::start(disk, Duration::from_secs_f64(watch.sample_interval));
        Session {
            run,
            sampler: Some(sampler),
        }
    }

    /// Add what a measurement produced; returns its error, if any.
    pub fn absorb(&mut self, outcome: Outcome) -> Option<Error> {
        self.run.results.extend(outcome.results);
        self.run.warnings.extend(outcome.warnings);
        outcome.error
    }

    /// Stop the sampler and set the status from the error that ended the run.
    pub fn finish(mut self, error: Option<&Error>) -> Run {
        if let Some(s) = self.sampler.take() {
            self.run.samples = s.stop();
        }
        self.run.finished = now_rfc3339();
        self.run.status = match error {
            None => RunStatus::Complete,
            Some(Error::Interrupted(_)) => RunStatus::Interrupted,
            Some(_) => RunStatus::Failed,
        };
        self.run
    }
}

/// Whether a finished run is worth storing: complete, or partial with data.
pub fn worth_storing(run: &Run) -> bool {
    run.status == RunStatus::Complete || !run.results.is_empty()
}

/// Scratch space and context for an experiment on `target`: checks the
/// target, creates the private directory and verifies free space for the
/// largest point before anything runs.
pub fn prepare_ctx(exp: &dyn Experiment, points: &[Point], target: Option<&Path>) -> Result<Ctx> {
    let scratch = if exp.needs().scratch {
        let s = Scratch::create(target)?;
        let need = points
            .iter()
            .map(|p| exp.scratch_bytes(p))
            .max()
            .unwrap_or(0);
        s.ensure_space(need)?;
        Some(Arc::new(s))
    } else {
        if let Some(t) = target {
            if !t.is_dir() {
                return Err(Error::usage(format!(
                    "target {} is not an existing directory (create it or choose another --target)",
                    t.display()
                )));
            }
        }
        None
    };
    let dir: PathBuf = match (target, &scratch) {
        (Some(t), _) => t.to_path_buf(),
        (None, Some(s)) => s.path().parent().unwrap_or(Path::new("/")).to_path_buf(),
        (None, None) => std::env::temp_dir(),
    };
    let device = device_for_path(&dir);
    Ok(Ctx::new(scratch, dir, device))
}

/// Tag every result with an extra parameter (the lab's `fs`, a tuned knob's
/// value) so that runs pair and display by it.
pub fn tag(results: &mut [PointResult], key: &str, value: &str) {
    for r in results {
        r.params
            .insert(key.to_string(), ParamValue::Text(value.to_string()));
    }
}
