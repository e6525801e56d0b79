//! A measurement session: what every command that measures does around the
//! trials — quietness check, environment snapshot, background sampler,
//! scratch space, and closing the run with its status. `run`, `tune` and
//! `study` share it; the verbs that measure programs rather than
//! experiments (`time`, `boot`, `diagnose`, in `engine::verbs`) open one
//! without a target ([`Session::open`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::params::{ParamSpec, ParamValue};
use super::runner::Outcome;
use super::{Ctx, Experiment, Point};
use crate::model::run::{
    new_run_id, now_rfc3339, PointResult, Run, RunStatus, StorageFact, RUN_SCHEMA,
};
use crate::observe::sampler::Sampler;
pub(crate) use crate::safety::scratch::target_or_temp;
use crate::safety::Scratch;
use crate::system::{self, device_for_path};
use crate::{Error, Result};

/// How to watch the machine around a run.
#[derive(Debug, Clone)]
pub(crate) struct Watch {
    /// Seconds of quietness check before the run (0 = skip).
    pub(crate) quiet_check: f64,
    /// Background sampler interval in seconds.
    pub(crate) sample_interval: f64,
}

/// An open run: environment recorded, sampler running.
pub(crate) struct Session {
    pub(crate) run: Run,
    sampler: Option<Sampler>,
}

impl Session {
    /// Start a run measured on `target` (None: the temp directory).
    pub(crate) fn begin(
        target: Option<&Path>,
        label: &str,
        argv: &[String],
        watch: &Watch,
        warn: &dyn Fn(&str),
    ) -> Session {
        let target = target_or_temp(target);
        let disk = device_for_path(&target).map(|d| d.name);
        let mut run = new_run(Some(&target), label, argv);
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

    /// A session for a verb that measures outside the experiment runner:
    /// no target (the environment snapshot has no storage), no quietness
    /// check, a background sampler every `sample` when asked.
    pub(crate) fn open(label: &str, argv: &[String], sample: Option<Duration>) -> Session {
        Session {
            run: new_run(None, label, argv),
            sampler: sample.map(|d| Sampler::start(None, d)),
        }
    }

    /// Stop the background sampler now (its samples go to the run), before
    /// the results are put together.
    pub(crate) fn stop_sampler(&mut self) {
        if let Some(s) = self.sampler.take() {
            self.run.samples = s.stop();
        }
    }

    /// Add what a measurement produced; returns its error, if any.
    /// (`stamp_kinds` has given each result its parameters' kinds.)
    pub(crate) fn absorb(&mut self, outcome: Outcome) -> Option<Error> {
        self.run.results.extend(outcome.results);
        self.run.warnings.extend(outcome.warnings);
        outcome.error
    }

    /// Stop the sampler and set the status from the error that ended the run.
    pub(crate) fn finish(mut self, error: Option<&Error>) -> Run {
        if let Some(s) = self.sampler.take() {
            self.run.samples = s.stop();
        }
        self.run.finished = now_rfc3339();
        self.run.status = status_of(error);
        self.run
    }
}

/// A new run, started now, with the environment snapshot (of `target`'s
/// file system when given): the one place a `Run` is built, for every
/// session (`Session::begin`, `Session::open`).
pub(crate) fn new_run(target: Option<&Path>, label: &str, argv: &[String]) -> Run {
    Run {
        schema: RUN_SCHEMA.to_string(),
        id: new_run_id(),
        label: label.to_string(),
        status: RunStatus::Complete,
        started: now_rfc3339(),
        finished: String::new(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        argv: argv.to_vec(),
        environment: system::snapshot(target, argv),
        quietness: Default::default(),
        results: Vec::new(),
        samples: Vec::new(),
        warnings: Vec::new(),
        study: None,
        diagnosis: None,
    }
}

/// A run's status from the error that ended it (None: complete).
pub(crate) fn status_of(error: Option<&Error>) -> RunStatus {
    match error {
        None => RunStatus::Complete,
        Some(Error::Interrupted(_)) => RunStatus::Interrupted,
        Some(_) => RunStatus::Failed,
    }
}

/// Whether a finished run is worth storing: complete, or partial with data
/// (points, or a diagnosis of the interval it covered).
pub(crate) fn worth_storing(run: &Run) -> bool {
    run.status == RunStatus::Complete || !run.results.is_empty() || run.diagnosis.is_some()
}

/// Scratch space and context for an experiment on `target` (checked in the
/// verb's plan): creates the private directory and verifies free space for the
/// largest point before anything runs.
pub(crate) fn prepare_ctx(
    exp: &dyn Experiment,
    points: &[Point],
    target: Option<&Path>,
) -> Result<Ctx> {
    let scratch = if exp.needs().scratch {
        let s = Scratch::create(target)?;
        let need = points
            .iter()
            .map(|p| exp.scratch_bytes(p))
            .max()
            .unwrap_or(0);
        // On tmpfs/ramfs/zram the files are memory: the room there is no
        // more than the memory budget (a 16 MiB tmpfs on a board with 14 MiB
        // available got a study OOM-killed in io.stream's recording).
        let room = super::Room::read(Some(s.path()));
        match (&room.ram, room.disk_free) {
            (Some(ram), Some(free)) => s.ensure_space_in(
                need,
                free,
                &format!(
                    " (the target is {ram}: its files are memory; {})",
                    room.memory_why
                ),
            )?,
            _ => s.ensure_space(need)?,
        }
        Some(Arc::new(s))
    } else {
        // The target was checked when the verb was planned
        // (`safety::scratch::check_target`).
        None
    };
    let dir: PathBuf = match (target, &scratch) {
        (Some(t), _) => t.to_path_buf(),
        (None, Some(s)) => s.path().parent().unwrap_or(Path::new("/")).to_path_buf(),
        (None, None) => target_or_temp(None),
    };
    let device = device_for_path(&dir);
    Ok(Ctx::new(scratch, dir, device))
}

/// What the storage under `ctx` is, when the experiment did I/O in a scratch
/// directory there: device, file system and mount options, plus the lab file
/// system (`--fs` label) and throttle limits in force. Advice uses it to keep
/// a lab or throttled device's figures away from the host's disk.
pub(crate) fn storage_of(
    ctx: &Ctx,
    lab: Option<&str>,
    throttle: Option<String>,
) -> Option<StorageFact> {
    ctx.scratch().ok()?;
    let dir = &ctx.target;
    let mount = system::mount_for_path(dir);
    Some(StorageFact {
        path: dir.display().to_string(),
        device: ctx
            .device
            .as_ref()
            .map(|d| d.name.clone())
            .unwrap_or_default(),
        disk: ctx
            .device
            .as_ref()
            .map(|d| d.disk.clone())
            .unwrap_or_default(),
        fs: mount
            .as_ref()
            .map(|m| m.fs_type.clone())
            .unwrap_or_default(),
        mount_options: mount.map(|m| m.options.join(",")).unwrap_or_default(),
        lab: lab.map(String::from),
        throttle,
    })
}

/// Record on every result where its I/O went (see [`storage_of`]).
pub(crate) fn stamp_storage(results: &mut [PointResult], storage: Option<&StorageFact>) {
    for r in results {
        if r.storage.is_none() {
            r.storage = storage.cloned();
        }
    }
}

/// `--throttle` limits as text (`read=20000000B/s,write_iops=100`).
pub(crate) fn throttle_text(
    read_bps: Option<u64>,
    write_bps: Option<u64>,
    read_iops: Option<u64>,
    write_iops: Option<u64>,
) -> String {
    [
        ("read", read_bps, "B/s"),
        ("write", write_bps, "B/s"),
        ("read_iops", read_iops, ""),
        ("write_iops", write_iops, ""),
    ]
    .iter()
    .filter_map(|(k, v, u)| v.map(|v| format!("{k}={v}{u}")))
    .collect::<Vec<_>>()
    .join(",")
}

/// Tag every result with an extra parameter (the lab's `fs`, a tuned knob's
/// value) so that runs pair and display by it.
pub(crate) fn tag(results: &mut [PointResult], key: &str, value: &str) {
    for r in results {
        r.params
            .insert(key.to_string(), ParamValue::Text(value.to_string()));
    }
}

/// Record the kind of every parameter the experiment declares, so a result
/// displays the same wherever it is imported, without any registry.
pub(crate) fn stamp_kinds(results: &mut [PointResult], specs: &[ParamSpec]) {
    for r in results {
        for spec in specs {
            if r.params.contains_key(spec.name) {
                r.param_kinds
                    .entry(spec.name.to_string())
                    .or_insert_with(|| spec.kind.stored_name().to_string());
            }
        }
    }
}
