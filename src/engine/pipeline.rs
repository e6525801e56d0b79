//! The session pipeline every measuring command shares: start a session
//! (quietness check, environment, sampler), run an experiment's points on the
//! target or on each lab file system in turn, and store the finished run.
//! Printing is the caller's: everything said goes to an [`Observer`].

use std::path::Path;

use super::observer::Observer;
use super::session::{self, prepare_ctx, tag, worth_storing, Session, Watch};
use super::{Ctx, Experiment, Point};
use crate::engine::runner::Outcome;
use crate::lab::throttle::ThrottleLimits;
use crate::lab::{
    mkfs_available, mkfs_missing, parse_fs_list, parse_throttle, throttle_for, FsSpec, LabFs,
};
use crate::model::run::Run;
use crate::safety::scratch::target_or_temp;
use crate::store::Store;
use crate::{Error, Result};

/// How a verb's session ended: the finished run, the error that ended the
/// measurement, and the store's failure. The verb prints the run first and
/// asks [`Finished::result`] last: a measurement is never thrown away
/// because the store could not be written.
pub(crate) struct Finished {
    pub(crate) run: Run,
    pub(crate) error: Option<Error>,
    pub(crate) store_error: Option<Error>,
}

impl Finished {
    /// The verb's result, once its results are printed: the measurement's
    /// error (the store's failure said beside it), else the store's.
    pub(crate) fn result(self, obs: &dyn Observer) -> Result<()> {
        match (self.error, self.store_error) {
            (Some(e), Some(se)) => {
                obs.error(&se.to_string());
                Err(e)
            }
            (Some(e), None) | (None, Some(e)) => Err(e),
            (None, None) => Ok(()),
        }
    }
}

/// Close a verb's session: stop its sampler, set the run's status from
/// `error`, and store it (when `store` is given and the run has results,
/// or, with `empty_too`, even without: a diagnosis has no point results).
pub(crate) fn close(
    session: Session,
    error: Option<Error>,
    store: Option<&mut Store>,
    empty_too: bool,
    obs: &dyn Observer,
) -> Finished {
    let run = session.finish(error.as_ref());
    let store_error = if run.results.is_empty() && !empty_too {
        None
    } else {
        store_run(&run, store, false, obs)
    };
    Finished {
        run,
        error,
        store_error,
    }
}

/// Start a session: say so when the machine is watched for quietness first.
pub(crate) fn begin_session(
    watch: &Watch,
    label: &str,
    target: Option<&Path>,
    argv: &[String],
    obs: &dyn Observer,
) -> Session {
    if watch.quiet_check > 0.0 {
        obs.info(&format!(
            "checking the machine is quiet for {:.1} s…",
            watch.quiet_check
        ));
    }
    Session::begin(target, label, argv, watch, &|w| obs.run_warning(w))
}

/// Store a finished run (when it has anything worth storing); with
/// `replace`, over a copy stored earlier under its id (a study stores its
/// growing run after each key issue). Returns the store's error, if any:
/// the caller still prints the results, a measurement is never thrown away.
pub(crate) fn store_run(
    run: &Run,
    store: Option<&mut Store>,
    replace: bool,
    obs: &dyn Observer,
) -> Option<Error> {
    let store = store?;
    if !worth_storing(run) {
        return None;
    }
    let saved = if replace {
        store.replace(run)
    } else {
        store.save(run)
    };
    match saved {
        Ok(()) => {
            obs.stored(run, store.location());
            None
        }
        Err(e) => Some(e),
    }
}

/// Keep a run measured elsewhere (a host of `tunelab remote`): stored as
/// it came, whatever its status — the host already decided it was worth
/// sending — and a store failure is the caller's error at once.
pub(crate) fn store_received(run: &Run, store: &mut Store) -> Result<()> {
    store.save(run)
}

/// Parsed lab flags.
pub(crate) struct Lab {
    pub(crate) fs: Vec<FsSpec>,
    /// `--fs` entries skipped because their mkfs is not installed.
    pub(crate) missing: Vec<String>,
    pub(crate) fs_size: u64,
    pub(crate) throttle: Option<ThrottleLimits>,
}

impl Lab {
    /// From the `--fs`, `--fs-size` and `--throttle` flags: file systems whose
    /// mkfs is missing are skipped with a note (an error when none is left);
    /// a lab or a throttle needs root.
    pub(crate) fn from_flags(
        fs: Option<&str>,
        fs_size: u64,
        throttle: Option<&str>,
    ) -> Result<Lab> {
        let (fs, missing): (Vec<FsSpec>, Vec<FsSpec>) = match fs {
            Some(list) => parse_fs_list(list)?
                .into_iter()
                .partition(|s| mkfs_available(&s.fs_type)),
            None => (Vec::new(), Vec::new()),
        };
        if fs.is_empty() && !missing.is_empty() {
            let why: Vec<String> = missing
                .iter()
                .map(|s| format!("--fs {}: {}", s.label, mkfs_missing(&s.fs_type)))
                .collect();
            return Err(Error::environment(why.join("; ")));
        }
        let missing: Vec<String> = missing
            .iter()
            .map(|s| format!("--fs {}: skipped: {}", s.label, mkfs_missing(&s.fs_type)))
            .collect();
        let throttle = throttle.map(parse_throttle).transpose()?;
        if !fs.is_empty() || throttle.is_some() {
            crate::safety::require_root(|| {
                "--fs and --throttle need root (loop devices, mounts and cgroups): run with sudo"
                    .into()
            })?;
        }
        Ok(Lab {
            fs,
            missing,
            fs_size,
            throttle,
        })
    }
}

/// Run `measure` on the target, or on each lab file system in turn (results
/// tagged `fs=…`), under the throttle when asked. Returns the error that
/// stopped it; every loop device, mount and cgroup is gone when it returns.
pub(crate) fn for_each_target(
    exp: &dyn Experiment,
    points: &[Point],
    target: Option<&Path>,
    lab: &Lab,
    obs: &dyn Observer,
    session: &mut Session,
    measure: &mut dyn FnMut(&Ctx) -> Outcome,
) -> Option<Error> {
    let mut one = |dir: Option<&Path>, label: Option<&str>, session: &mut Session| -> Result<()> {
        let _throttle = match (&lab.throttle, dir) {
            (Some(l), Some(d)) => Some(throttle_for(d, *l)?),
            (Some(l), None) => Some(throttle_for(&target_or_temp(None), *l)?),
            _ => None,
        };
        let ctx = prepare_ctx(exp, points, dir)?;
        let mut outcome = measure(&ctx);
        let throttle = lab
            .throttle
            .map(|t| session::throttle_text(t.read_bps, t.write_bps, t.read_iops, t.write_iops));
        let storage = session::storage_of(&ctx, label, throttle);
        session::stamp_storage(&mut outcome.results, storage.as_ref());
        session::stamp_kinds(&mut outcome.results, exp.params());
        drop(ctx); // the scratch directory goes before the lab file system
        if let Some(l) = label {
            tag(&mut outcome.results, "fs", l);
        }
        match session.absorb(outcome) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    };
    if lab.fs.is_empty() {
        return one(target, None, session).err();
    }
    // Kept with the run (the run view prints its warnings once).
    for m in &lab.missing {
        session.run.warnings.push(m.clone());
    }
    for spec in &lab.fs {
        obs.info(&format!(
            "lab: {} on a {} loop image",
            spec.label,
            crate::units::format_size(lab.fs_size)
        ));
        let result = LabFs::create(spec, target, lab.fs_size).and_then(|fs| {
            let r = one(Some(fs.mount_point()), Some(&spec.label), session);
            drop(fs);
            r
        });
        if let Err(e) = result {
            return Some(e);
        }
    }
    None
}
