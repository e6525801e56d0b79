//! `tunelab study PROFILE|FILE.toml`: run a profile's key issues and judge
//! each against its pass criteria.

use std::path::PathBuf;

use super::progress::Progress;

use super::run::{begin_session, finish_with, LabArgs, MeasureArgs};
use super::{Cli, Out};
use crate::engine::model::StudySummary;
use crate::engine::pipeline::for_each_target;
use crate::engine::runner::{run_points, Event, RunOptions};
use crate::safety::is_root;
use crate::study::{self, profile::parse_sets, verdict::judge};
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A built-in profile (quick, storage, micro, set-top, pvr, full) or a TOML file.
    pub profile: String,
    /// Directory to measure in (scratch files go in a private directory inside it).
    #[arg(long, value_name = "DIR")]
    pub target: Option<PathBuf>,
    /// Set a profile variable, e.g. --set command=/usr/bin/myapp (set-top, quick).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Print the profile's key issues and exit without measuring.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub measure: MeasureArgs,
    #[command(flatten)]
    pub lab: LabArgs,
    #[command(flatten)]
    pub export: super::export_flags::ExportArgs,
}

pub fn exec(args: &Args, out: &Out, cli: &Cli, argv: &[String]) -> Result<i32> {
    // The whole profile is validated before anything runs.
    let profile = study::load(&args.profile, &parse_sets(&args.set)?)?;
    if args.dry_run {
        for i in &profile.issues {
            let crit: Vec<String> = i
                .criteria
                .iter()
                .map(|c| {
                    // In the metric's unit, as the verdicts show it: not the
                    // base-unit float (0.000049999999999999996).
                    format!(
                        "{} {} {}",
                        c.metric,
                        c.op.symbol(),
                        crate::units::human(c.value, &c.unit)
                    )
                })
                .collect();
            out.data(&format!(
                "{}: {} ({} points) {}\n",
                i.name,
                i.experiment.name(),
                i.points.len(),
                crit.join(", ")
            ))?;
        }
        return Ok(0);
    }
    let lab = args.lab.parse()?;
    // A target that cannot be used fails every key issue: say so up front.
    if let Some(t) = &args.target {
        crate::safety::scratch::check_target(t)?;
    }
    args.export.check()?;
    let mut store = args.measure.store(cli)?;
    let mut measure = args.measure.clone();
    if measure.label.is_empty() {
        measure.label = format!("study {}", profile.name);
    }
    out.info(&format!(
        "study {}: {} ({} key issues)",
        profile.name,
        profile.title,
        profile.issues.len()
    ));
    out.info(
        &study::footprint::estimate(&profile, args.target.as_deref(), args.measure.trials)
            .describe(),
    );
    let mut session = begin_session(&measure, args.target.as_deref(), argv, out);
    // Each key issue's expected seconds when its points have a fixed
    // duration (0: sized to the machine, forecast from the others).
    let weights = profile
        .issues
        .iter()
        .map(|i| {
            let o = issue_options(i, &args.measure);
            o.plan(i.experiment.defaults())
                .ok()
                .and_then(|p| i.expected_seconds(&p, o.trials.is_some()))
                .unwrap_or(0.0)
        })
        .collect();
    let mut progress = Progress::new(out, "key issues", weights, None).expected();
    let mut verdicts = Vec::new();
    let mut stop = None;
    let mut progress_error: Option<Error> = None;
    for issue in &profile.issues {
        progress.start(&issue.name);
        let exp = issue.experiment.as_ref();
        let before = session.run.results.len();
        let began = std::time::Instant::now();
        let error = if exp.needs().root && !is_root() {
            Some(Error::privilege(format!("{} needs root", exp.name())))
        } else {
            let opts = issue_options(issue, &args.measure);
            match opts.plan(exp.defaults()) {
                Ok(plan) => {
                    let fixed = opts.fixed();
                    for_each_target(
                        exp,
                        &issue.points,
                        args.target.as_deref(),
                        &lab,
                        out,
                        &mut session,
                        &mut |ctx| {
                            run_points(exp, &issue.points, ctx, &plan, fixed, &mut |ev| {
                                if let Event::Trial { n, max } = ev {
                                    progress.tick(&format!("trial {n} (≤{max})"));
                                }
                            })
                        },
                    )
                }
                Err(e) => Some(e),
            }
        };
        let mut verdict = judge(
            issue,
            &session.run.results[before..],
            error.as_ref().map(|e| e.to_string()).as_deref(),
        );
        verdict.seconds = Some(began.elapsed().as_secs_f64());
        verdicts.push(verdict);
        // Store each finished key issue as it goes: a kill loses at most the
        // one in progress. One run grows under one id (see docs/decisions.md).
        if let (Some(st), None) = (store.as_mut(), &progress_error) {
            let snap = in_progress(&session.run, &profile, &verdicts);
            if let Err(e) = st.replace(&snap) {
                out.warn(&format!(
                    "{e} (measuring goes on; the results will be printed)"
                ));
                progress_error = Some(e);
            }
        }
        progress.done();
        match error {
            Some(e @ Error::Interrupted(_)) => {
                stop = Some(e);
                break;
            }
            Some(e) => {
                let w = format!("{}: {e}", issue.name);
                out.run_warning(&w);
                session.run.warnings.push(w);
            }
            None => {}
        }
    }
    progress.finish();
    session.run.study = Some(StudySummary {
        profile: profile.name.clone(),
        title: profile.title.clone(),
        issues: verdicts,
    });
    let run = session.finish(stop.as_ref());
    let copy = args.export.wanted().then(|| run.clone());
    let finished = finish_with(run, store.as_mut(), out, true);
    if let Some(run) = &copy {
        args.export.write_run(run, out)?;
    }
    let run = finished?;
    if !out.json {
        if let Some(s) = &run.study {
            out.data(&study::summary_table(s))?;
            if let Some(times) = study::step_times(s) {
                out.data(&times)?;
            }
        }
    }
    match stop {
        Some(e) => Err(e),
        None => Ok(0),
    }
}

/// The study run as stored after each key issue: marked interrupted (which
/// it is, if this process dies now) with a warning saying how far it got;
/// the final save replaces it. Monitor samples come with the final save.
fn in_progress(
    run: &crate::engine::model::Run,
    profile: &study::Profile,
    verdicts: &[crate::engine::model::IssueVerdict],
) -> crate::engine::model::Run {
    let mut snap = run.clone();
    snap.status = crate::engine::model::RunStatus::Interrupted;
    snap.finished = crate::engine::model::now_rfc3339();
    snap.warnings.push(format!(
        "saved while in progress: {} of {} key issues done; the study did not finish",
        verdicts.len(),
        profile.issues.len()
    ));
    snap.study = Some(StudySummary {
        profile: profile.name.clone(),
        title: profile.title.clone(),
        issues: verdicts.to_vec(),
    });
    snap
}

/// A key issue's repetition settings: its own, else the command line's.
fn issue_options(issue: &study::profile::KeyIssue, m: &MeasureArgs) -> RunOptions {
    RunOptions {
        trials: issue.trials.or(m.trials),
        warmup: issue.warmup.or(m.warmup),
        budget: issue.budget.or(m.budget),
        ..m.options()
    }
}
