//! Running a study: each key issue measured in turn on the target (or each
//! lab file system), judged against its criteria, and the growing run
//! stored after each so a kill loses at most the issue in progress.
//! Printing is the caller's: messages and progress go to an [`Observer`]
//! (each key issue is an item; its trials, not its points, show).

use std::path::Path;

use super::profile::{KeyIssue, Profile};
use super::verdict::{judge, Drift, BETWEEN_RUNS};
use crate::analysis::compare::noise_floor;
use crate::engine::observer::{Event, Observer, TrialsOnly};
use crate::engine::pipeline::{for_each_target, Lab};
use crate::engine::runner::{run_points, RunOptions};
use crate::engine::session::Session;
use crate::model::run::{now_rfc3339, IssueVerdict, PointResult, Run, RunStatus, StudySummary};
use crate::stats::calibrate::NoiseFloor;
use crate::store::Store;
use crate::Error;

/// What a study measures with and where.
pub(crate) struct Request<'a> {
    pub(crate) profile: &'a Profile,
    pub(crate) target: Option<&'a Path>,
    pub(crate) lab: &'a Lab,
    /// The command line's repetition settings; a key issue's own win.
    pub(crate) options: &'a RunOptions,
}

/// Each key issue's expected seconds when its points have a fixed duration
/// (0: sized to the machine, forecast from the others).
pub(crate) fn weights(req: &Request) -> Vec<f64> {
    req.profile
        .issues
        .iter()
        .map(|i| {
            let o = issue_options(i, req.options);
            o.plan(i.experiment.defaults())
                .ok()
                .and_then(|p| i.expected_seconds(&p, o.trials.is_some()))
                .unwrap_or(0.0)
        })
        .collect()
}

/// The drift between runs of a point, learned from the stored runs of its
/// experiment on this machine as a run comparison learns it
/// (`analysis::compare::noise_floor`); [`BETWEEN_RUNS`] where fewer are
/// stored.
struct Learned<'a> {
    runs: Vec<Run>,
    judged: &'a Run,
}

impl Drift for Learned<'_> {
    fn of(&self, r: &PointResult, metric: &str) -> NoiseFloor {
        let f = noise_floor(&self.runs, self.judged, r, metric);
        if f.runs == 0 {
            BETWEEN_RUNS.of(r, metric)
        } else {
            f
        }
    }
}

/// The stored runs about `experiment` (none without a store); a store that
/// cannot be read costs the learned drift, not the study.
fn stored_runs(store: Option<&Store>, experiment: &str, obs: &dyn Observer) -> Vec<Run> {
    match store.map(|st| st.runs_about(experiment)) {
        Some(Ok(runs)) => runs,
        Some(Err(e)) => {
            obs.warn(&format!(
                "{e} (the verdict assumes ±{:.0}% between runs)",
                BETWEEN_RUNS * 100.0
            ));
            Vec::new()
        }
        None => Vec::new(),
    }
}

/// Run every key issue into `session`, storing the growing run after each.
/// A key issue that fails is a warning on the run and the study goes on;
/// an interruption stops it and is returned with the finished run (the
/// caller stores it and prints, then reports the interruption).
pub(crate) fn run(
    req: &Request,
    mut session: Session,
    mut store: Option<&mut Store>,
    obs: &dyn Observer,
) -> (Run, Option<Error>) {
    let profile = req.profile;
    let mut verdicts = Vec::new();
    let mut stop = None;
    let mut progress_error: Option<Error> = None;
    let total = profile.issues.len();
    let wear_before = wear(&session.run);
    obs.progress(Event::Begin {
        what: "key issues",
        weights: &weights(req),
        budget: None,
        expected: true,
    });
    for (index, issue) in profile.issues.iter().enumerate() {
        obs.progress(Event::Started {
            index,
            total,
            of: "",
            label: &issue.name,
        });
        let exp = issue.experiment.as_ref();
        let before = session.run.results.len();
        let began = std::time::Instant::now();
        let no_root = exp
            .needs()
            .root
            .then(|| crate::safety::require_root(|| format!("{} needs root", exp.name())))
            .and_then(Result::err);
        let error = if no_root.is_some() {
            no_root
        } else if let Some(why) = does_not_fit(req, issue) {
            Some(Error::environment(why))
        } else {
            let opts = issue_options(issue, req.options);
            match opts.plan(exp.defaults()) {
                Ok(plan) => {
                    let fixed = opts.fixed();
                    for_each_target(
                        exp,
                        &issue.points,
                        req.target,
                        req.lab,
                        obs,
                        &mut session,
                        &mut |ctx| {
                            run_points(exp, &issue.points, ctx, &plan, fixed, &TrialsOnly(obs))
                        },
                    )
                }
                Err(e) => Some(e),
            }
        };
        let drift = Learned {
            // Read only where a criterion will be judged on what was measured.
            runs: if issue.criteria.is_empty() || session.run.results.len() == before {
                Vec::new()
            } else {
                stored_runs(store.as_deref(), exp.name(), obs)
            },
            judged: &session.run,
        };
        let mut verdict = judge(
            issue,
            &session.run.results[before..],
            error.as_ref().map(|e| e.to_string()).as_deref(),
            &drift,
        );
        verdict.seconds = Some(began.elapsed().as_secs_f64());
        verdicts.push(verdict);
        // Store each finished key issue as it goes: a kill loses at most the
        // one in progress. One run grows under one id (see docs/decisions.md).
        if let (Some(st), None) = (store.as_deref_mut(), &progress_error) {
            let snap = in_progress(&session.run, profile, &verdicts);
            if let Err(e) = st.replace(&snap) {
                obs.warn(&format!(
                    "{e} (measuring goes on; the results will be printed)"
                ));
                progress_error = Some(e);
            }
        }
        obs.progress(Event::Done {
            index,
            stop_reason: "",
        });
        match error {
            Some(e @ Error::Interrupted(_)) => {
                stop = Some(e);
                break;
            }
            Some(e) => {
                let w = format!("{}: {e}", issue.name);
                obs.run_warning(&w);
                session.run.warnings.push(w);
            }
            None => {}
        }
    }
    obs.progress(Event::End);
    // The wear the study cost, where the device reports it (shown with the
    // run's environment in its report).
    let wear_after = wear(&session.run);
    let cost = crate::system::flash::wear_cost(&wear_before, &wear_after);
    session.run.environment.extend(cost);
    session.run.study = Some(summary(profile, verdicts));
    let run = session.finish(stop.as_ref());
    (run, stop)
}

/// Why `issue` cannot start now (None: it fits, sized to the room there is).
/// Read afresh before each issue: the memory left changes as a study goes.
/// A file-system lab measures elsewhere (its own image), so it is not judged here.
fn does_not_fit(req: &Request, issue: &KeyIssue) -> Option<String> {
    if !req.lab.fs.is_empty() {
        return None;
    }
    let dir = crate::safety::scratch::target_or_temp(req.target);
    let room = crate::engine::Room::read(Some(&dir));
    super::fit::skip_reason(&super::fit::need(issue, &room), &room)
}

/// The wear figures of the run's target disk, now.
fn wear(run: &Run) -> Vec<(String, String)> {
    run.environment
        .get("target.disk")
        .map(|d| crate::system::flash::wear(Path::new("/"), d))
        .unwrap_or_default()
}

fn summary(profile: &Profile, issues: Vec<IssueVerdict>) -> StudySummary {
    StudySummary {
        profile: profile.name.clone(),
        title: profile.title.clone(),
        issues,
    }
}

/// The study run as stored after each key issue: marked interrupted (which
/// it is, if this process dies now) with a warning saying how far it got;
/// the final save replaces it. Monitor samples come with the final save.
fn in_progress(run: &Run, profile: &Profile, verdicts: &[IssueVerdict]) -> Run {
    let mut snap = run.clone();
    snap.status = RunStatus::Interrupted;
    snap.finished = now_rfc3339();
    snap.warnings.push(format!(
        "saved while in progress: {} of {} key issues done; the study did not finish",
        verdicts.len(),
        profile.issues.len()
    ));
    snap.study = Some(summary(profile, verdicts.to_vec()));
    snap
}

/// A key issue's repetition settings: its own, else the command line's.
pub(crate) fn issue_options(issue: &KeyIssue, base: &RunOptions) -> RunOptions {
    RunOptions {
        trials: issue.trials.or(base.trials),
        warmup: issue.warmup.or(base.warmup),
        budget: issue.budget.or(base.budget),
        trial_time: issue.trial_time.or(base.trial_time),
        ..base.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::testing::run;

    fn on(machine: &str, i: usize, median: f64) -> Run {
        run(
            format!("r{i}"),
            format!("2026-11-0{i}T00:00:00Z"),
            &[("machine.id", machine)],
            vec![median; 6],
        )
    }

    #[test]
    fn the_drift_is_learned_from_this_machines_stored_runs_of_the_point() {
        let judged = on("a", 9, 100.0);
        let p = &judged.results[0];
        // Five quiet runs of the point on this machine: a narrow band,
        // learned from them; another machine's wild runs do not count.
        let mut runs: Vec<Run> = [100.0, 101.0, 99.0, 100.5, 99.5]
            .iter()
            .enumerate()
            .map(|(i, m)| on("a", i + 1, *m))
            .collect();
        runs.extend([10.0, 500.0].iter().map(|m| on("b", 8, *m)));
        let quiet = Learned {
            runs,
            judged: &judged,
        }
        .of(p, "write_throughput");
        assert_eq!(quiet.runs, 5);
        assert!(quiet.band > 0.0 && quiet.band < BETWEEN_RUNS, "{quiet:?}");
        // Runs that drift by half: a band wider than the default.
        let loud = Learned {
            runs: [100.0, 150.0, 70.0, 130.0]
                .iter()
                .enumerate()
                .map(|(i, m)| on("a", i + 1, *m))
                .collect(),
            judged: &judged,
        }
        .of(p, "write_throughput");
        assert_eq!(loud.runs, 4);
        assert!(loud.band > BETWEEN_RUNS, "{loud:?}");
        // Too few stored runs (or another metric): the default.
        let few = Learned {
            runs: vec![on("a", 1, 100.0), on("a", 2, 300.0)],
            judged: &judged,
        };
        assert_eq!(few.of(p, "write_throughput").band, BETWEEN_RUNS);
        assert_eq!(few.of(p, "write_throughput").runs, 0);
        assert_eq!(few.of(p, "no_such_metric").band, BETWEEN_RUNS);
    }

    #[test]
    fn runs_of_the_point_on_another_device_are_not_its_drift() {
        use crate::model::run::StorageFact;
        let on_dev = |i: usize, median: f64, device: &str| {
            let mut r = on("a", i, median);
            r.results[0].storage = Some(StorageFact {
                device: device.into(),
                fs: "ext4".into(),
                ..Default::default()
            });
            r
        };
        let judged = on_dev(9, 100.0, "mmcblk0p2");
        // Four quiet runs on the card, four wild ones on a USB stick.
        let mut runs: Vec<Run> = (1..=4).map(|i| on_dev(i, 100.0, "mmcblk0p2")).collect();
        runs.extend(
            [10.0, 500.0, 40.0, 300.0]
                .iter()
                .enumerate()
                .map(|(k, m)| on_dev(5 + k, *m, "sda1")),
        );
        let f = Learned {
            runs,
            judged: &judged,
        }
        .of(&judged.results[0], "write_throughput");
        assert_eq!((f.runs, f.band), (4, 0.0), "{f:?}");
    }
}
