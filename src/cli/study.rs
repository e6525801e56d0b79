//! `tunelab study PROFILE|FILE.toml`: run a profile's key issues and judge
//! each against its pass criteria.

use std::path::PathBuf;

use super::run::{begin_session, finish_with, LabArgs, MeasureArgs};
use super::{Cli, Out};
use crate::study::{self, profile::parse_sets};
use crate::Result;

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
        return dry_run(&profile, args, out);
    }
    let lab = args.lab.parse()?;
    // A target that cannot be used fails every key issue: say so up front.
    if let Some(t) = &args.target {
        crate::engine::host::check_target(t)?;
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
    let session = begin_session(&measure, args.target.as_deref(), argv, out);
    let options = args.measure.options();
    let req = study::run::Request {
        profile: &profile,
        target: args.target.as_deref(),
        lab: &lab,
        options: &options,
    };
    let (run, stop) = study::run::run(&req, session, store.as_mut(), out);
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

/// `study --dry-run`: each key issue with its points, trials and criteria,
/// and the longest the study can take (the sum of the issues' budgets on
/// every target; no bound when an issue has a fixed count and no budget).
fn dry_run(profile: &study::profile::Profile, args: &Args, out: &Out) -> Result<i32> {
    let targets = args.lab.parse()?.fs.len().max(1) as f64;
    let options = args.measure.options();
    let mut issues = Vec::new();
    let mut total = Some(0.0);
    let mut most_trials = 0;
    for i in &profile.issues {
        let opts = study::run::issue_options(i, &options);
        let plan = opts.plan(i.experiment.defaults())?;
        let longest = crate::engine::runner::longest(&plan, opts.fixed()).map(|s| s * targets);
        total = total.zip(longest).map(|(t, l)| t + l);
        most_trials = most_trials.max(plan.max_trials);
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
        issues.push((i, plan, longest, crit));
    }
    if out.json {
        let docs: Vec<serde_json::Value> = issues
            .iter()
            .map(|(i, plan, longest, crit)| {
                serde_json::json!({
                    "name": i.name,
                    "experiment": i.experiment.name(),
                    "points": i.points.len(),
                    "min_trials": plan.min_trials,
                    "max_trials": plan.max_trials,
                    "longest_s": longest,
                    "criteria": crit,
                })
            })
            .collect();
        out.json_data(&serde_json::json!({
            "schema": "tunelab.study-plan/1",
            "profile": profile.name,
            "issues": docs,
            "longest_s": total,
        }))?;
        return Ok(0);
    }
    let mut text = String::new();
    for (i, _, _, crit) in &issues {
        text.push_str(&format!(
            "{}: {} ({} points) {}\n",
            i.name,
            i.experiment.name(),
            i.points.len(),
            crit.join(", ")
        ));
    }
    text.push_str(&super::run::longest_line(total, most_trials));
    out.data(&text)?;
    Ok(0)
}
