//! Running a tune: on the target (or each lab file system) the knob is
//! resolved, each value probed, the values swept in shuffled rounds and
//! the original always written back; the run records what `apply` needs.
//! Printing is the caller's: messages and rounds go to an [`Observer`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::apply::{ENV_DEVICE, ENV_KNOB, ENV_LAB, ENV_METRIC, ENV_NOISE, ENV_ORIGINAL};
use super::decide::ENV_LIVE;
use super::knobs::{Knob, KnobGuard};
use super::relevance::{self, ENV_RELEVANCE};
use super::sweep::{sweep, Sweep};
use crate::engine::observer::Observer;
use crate::engine::pipeline::{for_each_target, Lab};
use crate::engine::runner::{Outcome, Plan};
use crate::engine::session::Session;
use crate::engine::{Ctx, Experiment, Point};
use crate::model::run::Run;
use crate::{Error, Result};

/// What a tune sweeps, with what and where.
pub(crate) struct Request<'a> {
    pub(crate) knob: &'a str,
    /// The values asked for (the kernel may clamp some: probed first).
    pub(crate) values: &'a [String],
    /// The block device a block knob acts on instead of the target's disk.
    pub(crate) device: Option<&'a str>,
    pub(crate) exp: &'a dyn Experiment,
    /// The one point measured for every value.
    pub(crate) points: &'a [Point],
    pub(crate) target: Option<&'a Path>,
    pub(crate) lab: &'a Lab,
    pub(crate) plan: &'a Plan,
    /// The metric that decides the best value, and the noise below which a
    /// difference is no win: recorded for `apply`.
    pub(crate) metric: &'a str,
    pub(crate) noise: f64,
}

/// Sweep the knob into `session` and finish the run; the error that
/// stopped it, if any, is returned beside it (the caller stores and prints
/// first).
pub(crate) fn run(req: &Request, mut session: Session, obs: &dyn Observer) -> (Run, Option<Error>) {
    let mut restored = Vec::new();
    let mut used: Vec<Used> = Vec::new();
    let error = for_each_target(
        req.exp,
        req.points,
        req.target,
        req.lab,
        obs,
        &mut session,
        &mut |ctx| {
            let guard = Knob::resolve(req.knob, &ctx.target, req.device).and_then(|k| {
                req.values.iter().try_for_each(|v| k.validate(v))?;
                KnobGuard::new(k)
            });
            let mut guard = match guard {
                Ok(g) => g,
                Err(e) => {
                    return Outcome {
                        results: vec![],
                        warnings: vec![],
                        error: Some(e),
                    }
                }
            };
            let original = guard.original();
            // Probe: write each value once and read it back, so a value the
            // kernel clamps or rounds is measured and stored as what it set.
            let probed = probe(&mut guard, req.knob, req.values);
            let (swept, notes) = match probed {
                Ok(p) => p,
                Err(e) => {
                    restored.push(guard.restore());
                    return Outcome {
                        results: vec![],
                        warnings: vec![],
                        error: Some(e),
                    };
                }
            };
            let (swept, live, mut notes) = with_live_arm(&guard, req.knob, swept, notes);
            let device = device_of(req.knob, ctx, req.device);
            // Before measuring: does the workload exercise the knob at all?
            let irrelevant =
                relevance::check_at(req.knob, req.exp, &req.points[0], &ctx.target, req.device);
            for w in &irrelevant {
                notes.push(format!("{}: this sweep may measure nothing: {w}", req.knob));
            }
            for n in &notes {
                obs.warn(n);
            }
            obs.info(&format!(
                "{}: original value {original}; sweeping {}{}",
                req.knob,
                swept.join(", "),
                live.as_ref()
                    .map(|l| format!("; every value is judged against the live value ({l})"))
                    .unwrap_or_default()
            ));
            used.push(Used {
                device,
                disk: ctx.device.as_ref().map(|d| d.disk.clone()),
                lab: !req.lab.fs.is_empty(),
                original,
                live: live.clone(),
                irrelevant,
                target: ctx.target.clone(),
            });
            let sw = Sweep {
                knob: req.knob,
                values: &swept,
                exp: req.exp,
                point: &req.points[0],
            };
            let mut outcome = sweep(&mut guard, &sw, ctx, req.plan, obs);
            for r in &mut outcome.results {
                let v = r.params.get(req.knob).map(|v| v.to_string());
                if v.is_some() && v == live {
                    r.notes.push(
                        "the live value when the sweep began (the baseline of every verdict)"
                            .into(),
                    );
                }
                for n in &notes {
                    if v.as_ref()
                        .is_some_and(|v| n.ends_with(&format!("stored as {v}")))
                    {
                        r.notes.push(n.clone());
                    }
                }
            }
            outcome.warnings.extend(notes);
            restored.push(guard.restore());
            outcome
        },
    );
    for r in &restored {
        obs.info(r);
    }
    session.run.warnings.extend(
        restored
            .iter()
            .filter(|r| !r.starts_with("restored"))
            .cloned(),
    );
    record_tune(&mut session.run.environment, req, &used);
    let run = session.finish(error.as_ref());
    (run, error)
}

/// What one sweep acted on, for the run's environment and header.
struct Used {
    /// The disk a block knob acted on.
    device: Option<String>,
    /// The disk under the measured directory.
    disk: Option<String>,
    lab: bool,
    original: String,
    /// The live value as measured, when it could be one arm.
    live: Option<String>,
    /// Why the experiment may not exercise the knob.
    irrelevant: Vec<String>,
    target: PathBuf,
}

/// Add the live value to the swept values when the user's lack it, so every
/// value is measured against what is in use now, in the same rounds.
fn with_live_arm(
    guard: &KnobGuard,
    knob: &str,
    mut swept: Vec<String>,
    mut notes: Vec<String>,
) -> (Vec<String>, Option<String>, Vec<String>) {
    match guard.live_arm(&swept) {
        Ok(l) => {
            if !swept.contains(&l) {
                notes.push(format!(
                    "{knob}: the live value {l} is not among --values: it is measured too, \
                     interleaved with them, as the baseline (\"live\")"
                ));
                swept.push(l.clone());
            }
            (swept, Some(l), notes)
        }
        Err(why) => {
            notes.push(format!(
                "{why}; no value can be judged against the live setting (apply will refuse this run)"
            ));
            (swept, None, notes)
        }
    }
}

/// The disk a block knob acts on in this context (the lab's loop device
/// when the lab is used).
fn device_of(knob: &str, ctx: &Ctx, given: Option<&str>) -> Option<String> {
    if !matches!(knob, "read_ahead_kb" | "nr_requests" | "scheduler") {
        return None;
    }
    given
        .map(|d| d.trim_start_matches("/dev/").to_string())
        .or_else(|| ctx.device.as_ref().map(|d| d.disk.clone()))
}

/// Record what `apply` needs (knob, metric, noise, disk, original value) and
/// make the header show the device the sweep used, not the host disk under
/// the lab's image.
fn record_tune(env: &mut BTreeMap<String, String>, req: &Request, used: &[Used]) {
    env.insert(ENV_KNOB.into(), req.knob.to_string());
    env.insert(ENV_METRIC.into(), req.metric.into());
    env.insert(ENV_NOISE.into(), req.noise.to_string());
    let join = |f: &dyn Fn(&Used) -> Option<String>| {
        let v: Vec<String> = used.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| v.join(", "))
    };
    if let Some(d) = join(&|u| u.device.clone()) {
        env.insert(ENV_DEVICE.into(), d);
    }
    if let Some(o) = join(&|u| Some(u.original.clone())) {
        env.insert(ENV_ORIGINAL.into(), o);
    }
    // Every sweep's live arm, or none: a partial record would let apply
    // judge one file system's values against another's live value.
    if used.iter().all(|u| u.live.is_some()) {
        if let Some(l) = join(&|u| u.live.clone()) {
            env.insert(ENV_LIVE.into(), l);
        }
    }
    let mut irrelevant: Vec<String> = used.iter().flat_map(|u| u.irrelevant.clone()).collect();
    irrelevant.dedup();
    if !irrelevant.is_empty() {
        env.insert(ENV_RELEVANCE.into(), irrelevant.join("; "));
    }
    if used.iter().any(|u| u.lab) {
        env.insert(ENV_LAB.into(), "yes".into());
        if let Some(d) = join(&|u| u.disk.clone()) {
            env.insert("target.device".into(), format!("{d} (lab loop device)"));
        }
        if let Some(t) = join(&|u| Some(u.target.display().to_string())) {
            env.insert("target.path".into(), t);
        }
        let mounts: Vec<_> = used
            .iter()
            .filter_map(|u| crate::system::mount_for_path(&u.target))
            .collect();
        if !mounts.is_empty() {
            let fs: Vec<String> = mounts.iter().map(|m| m.fs_type.clone()).collect();
            let opts: Vec<String> = mounts.iter().map(|m| m.options.join(",")).collect();
            env.insert("target.fs".into(), fs.join(", "));
            env.insert("target.mount_options".into(), opts.join("; "));
        }
        for (key, attr) in [
            ("block.scheduler", "scheduler"),
            ("block.read_ahead_kb", "read_ahead_kb"),
        ] {
            if let Some(v) = join(&|u| {
                let d = u.disk.as_ref()?;
                let raw = std::fs::read_to_string(format!("/sys/block/{d}/queue/{attr}")).ok()?;
                let raw = raw.trim();
                Some(crate::system::device::active_choice(raw).unwrap_or_else(|| raw.to_string()))
            }) {
                env.insert(key.into(), v);
            }
        }
    }
}

/// Write each value once and read it back: the values the kernel really
/// holds (duplicates merged) and a note for each it clamped or rounded.
fn probe(
    guard: &mut KnobGuard,
    knob: &str,
    values: &[String],
) -> Result<(Vec<String>, Vec<String>)> {
    let mut swept: Vec<String> = Vec::new();
    let mut notes = Vec::new();
    for v in values {
        guard.set(v)?;
        let got = guard.applied().unwrap_or_else(|| v.clone());
        if got != *v {
            notes.push(format!(
                "{knob}={v}: the kernel set {got} instead (clamped or rounded); measured and stored as {got}"
            ));
        }
        if !swept.contains(&got) {
            swept.push(got);
        }
    }
    if swept.len() < 2 {
        return Err(Error::usage(format!(
            "{knob}: the kernel holds {} for every value of --values {}: nothing to compare",
            swept.join(", "),
            values.join(",")
        )));
    }
    Ok((swept, notes))
}
