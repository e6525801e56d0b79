//! `tunelab study PROFILE|FILE.toml`: run a profile's key issues and judge
//! each against its pass criteria.

use std::path::PathBuf;

use super::run::{print_run, LabArgs, MeasureArgs};
use super::{Cli, Out};
use crate::study::{self, profile::parse_sets, Profile};
use crate::Result;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// A built-in profile (quick, storage, micro, set-top, pvr, full) or a TOML file.
    pub(crate) profile: String,
    /// Directory to measure in (scratch files go in a private directory inside it).
    #[arg(long, value_name = "DIR")]
    pub(crate) target: Option<PathBuf>,
    /// Set a profile variable, e.g. --set command=/usr/bin/myapp (set-top, quick).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub(crate) set: Vec<String>,
    /// Print the profile's key issues and exit without measuring.
    #[arg(long)]
    pub(crate) dry_run: bool,
    #[command(flatten)]
    pub(crate) measure: MeasureArgs,
    #[command(flatten)]
    pub(crate) lab: LabArgs,
    #[command(flatten)]
    pub(crate) export: super::export_flags::ExportArgs,
}

pub(crate) fn exec(args: &Args, out: &Out, cli: &Cli, argv: &[String]) -> Result<i32> {
    // The whole profile is validated before anything runs.
    let profile = study::load(&args.profile, &parse_sets(&args.set)?)?;
    let planned = study::plan::plan(study::plan::Request {
        profile: &profile,
        target: args.target.as_deref(),
        lab: args.lab.parse()?,
        options: args.measure.options(),
    })?;
    if args.dry_run {
        return dry_run(&planned, &profile, out);
    }
    args.export.check()?;
    let mut store = args.measure.store(cli)?;
    let label = if args.measure.label.is_empty() {
        format!("study {}", profile.name)
    } else {
        args.measure.label.clone()
    };
    out.info(&format!(
        "study {}: {} ({} key issues)",
        profile.name,
        profile.title,
        profile.issues.len()
    ));
    out.info(&planned.footprint());
    let finished = planned.measure(&args.measure.watch(), &label, argv, store.as_mut(), out);
    print_run(&finished.run, out)?;
    if args.export.wanted() {
        args.export.write_run(&finished.run, out)?;
    }
    if let Some(e) = finished.store_error {
        return Err(e);
    }
    if !out.json {
        if let Some(s) = &finished.run.study {
            out.data(&study::summary_table(s, out.term))?;
            if let Some(times) = study::step_times(s, out.term) {
                out.data(&times)?;
            }
        }
    }
    match finished.error {
        Some(e) => Err(e),
        None => Ok(0),
    }
}

/// `study --dry-run`: each key issue with its points, trials and criteria,
/// and the longest the study can take (the sum of the issues' budgets on
/// every target; no bound when an issue has a fixed count and no budget).
fn dry_run(planned: &study::plan::Planned, profile: &Profile, out: &Out) -> Result<i32> {
    let (total, most_trials) = planned.longest();
    let issues: Vec<_> = planned
        .issues
        .iter()
        .map(|(i, plan, longest)| {
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
            (i, plan, longest, crit)
        })
        .collect();
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
