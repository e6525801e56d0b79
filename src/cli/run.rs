//! `tunelab run EXP`: check everything, sample the machine, run the points,
//! store and print the run.

use std::path::PathBuf;

use super::{Cli, Out};
use crate::engine::catalog::Catalog;
use crate::engine::pipeline::Lab;
use crate::engine::runner::RunOptions;
use crate::engine::session::Watch;
use crate::engine::verbs::run;
use crate::model::run::Run;
use crate::report::runview;
use crate::store::Store;
use crate::units::parse_duration;
use crate::Result;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Experiment to run (see `tunelab list`); `tunelab run EXP --help` describes its parameters.
    pub(crate) experiment: String,
    /// Parameter: key=value, or key=v1,v2,… to sweep (every combination is one point).
    #[arg(short = 'p', long = "param", value_name = "KEY=V[,V…]")]
    pub(crate) params: Vec<String>,
    /// Directory to measure in; tunelab creates (and removes) a private scratch directory inside it.
    #[arg(long, value_name = "DIR")]
    pub(crate) target: Option<PathBuf>,
    /// Print the plan (points, trials, the longest it can take) and exit without measuring.
    #[arg(long)]
    pub(crate) dry_run: bool,
    #[command(flatten)]
    pub(crate) measure: MeasureArgs,
    #[command(flatten)]
    pub(crate) lab: LabArgs,
    #[command(flatten)]
    pub(crate) export: super::export_flags::ExportArgs,
}

/// How to repeat and record a measurement: shared by run, tune and study.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct MeasureArgs {
    /// Run exactly N trials per point (no precision rule; a --budget given too still stops it).
    #[arg(long, value_name = "N")]
    pub(crate) trials: Option<usize>,
    /// Minimum trials per point before the precision rule may stop [default: per experiment, usually 5].
    #[arg(long, value_name = "N")]
    pub(crate) min_trials: Option<usize>,
    /// Maximum trials per point [default: per experiment, usually 30].
    #[arg(long, value_name = "N")]
    pub(crate) max_trials: Option<usize>,
    /// Warm-up trials per point, recorded but not summarised [default: per experiment, usually 1].
    #[arg(long, value_name = "N")]
    pub(crate) warmup: Option<usize>,
    /// Stop when the 95% CI of every median is within ±this (e.g. 2% or 0.02).
    #[arg(long, value_name = "FRACTION", value_parser = parse_fraction)]
    pub(crate) precision: Option<f64>,
    /// Time budget for the whole run, shared among points (e.g. 30s, 2m) [default: per experiment].
    #[arg(long, value_name = "DURATION", value_parser = parse_secs)]
    pub(crate) budget: Option<f64>,
    /// Shortest time one trial lasts: quicker work is repeated within it
    /// (e.g. 100ms for a quicker, noisier look) [default: 200ms].
    #[arg(long, value_name = "DURATION", value_parser = parse_secs)]
    pub(crate) trial_time: Option<f64>,
    /// A label stored with the run (e.g. "before noatime"); at most 200 characters.
    #[arg(long, default_value = "", value_parser = label_arg)]
    pub(crate) label: String,
    /// Do not store the run in the database.
    #[arg(long)]
    pub(crate) no_store: bool,
    /// How long to watch the machine for competing processes before starting (0 to skip).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_secs)]
    pub(crate) quiet_check: f64,
    /// Background sampler interval (vmstat, diskstats, dirty pages).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_positive_secs)]
    pub(crate) sample_interval: f64,
}

impl MeasureArgs {
    pub(crate) fn options(&self) -> RunOptions {
        RunOptions {
            warmup: self.warmup,
            min_trials: self.min_trials,
            max_trials: self.max_trials,
            trials: self.trials,
            precision: self.precision,
            budget: self.budget,
            trial_time: self.trial_time,
        }
    }

    pub(crate) fn watch(&self) -> Watch {
        Watch {
            quiet_check: self.quiet_check,
            sample_interval: self.sample_interval,
        }
    }

    /// The store, unless --no-store (opened first: a bad --db fails before measuring).
    pub(crate) fn store(&self, cli: &Cli) -> Result<Option<Store>> {
        store_unless(self.no_store, cli)
    }
}

/// A run's label: at most MAX_LABEL_CHARS characters, so every list of
/// runs stays quick (control characters are escaped where it is printed).
pub(crate) fn label_arg(s: &str) -> std::result::Result<String, String> {
    let max = crate::engine::import::MAX_LABEL_CHARS;
    let n = s.chars().count();
    if n > max {
        return Err(format!(
            "a label is at most {max} characters (this one has {n}): shorten it"
        ));
    }
    Ok(s.to_string())
}

/// What `time`, `boot` and `diagnose` store: a label, or nothing.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct StoreArgs {
    /// A label stored with the run; at most 200 characters.
    #[arg(long, default_value = "", value_parser = label_arg)]
    pub(crate) label: String,
    /// Do not store the run.
    #[arg(long)]
    pub(crate) no_store: bool,
}

impl StoreArgs {
    /// The store, unless --no-store (opened first: a bad --db fails before measuring).
    pub(crate) fn store(&self, cli: &Cli) -> Result<Option<Store>> {
        store_unless(self.no_store, cli)
    }
}

fn store_unless(no_store: bool, cli: &Cli) -> Result<Option<Store>> {
    Ok(if no_store {
        None
    } else {
        Some(super::open_store(cli, crate::store::Access::Write, None)?)
    })
}

pub(crate) fn parse_secs(s: &str) -> std::result::Result<f64, String> {
    parse_duration(s).ok_or_else(|| format!("'{s}' is not a duration (e.g. 500ms, 30s, 2m)"))
}

/// A duration above zero, for `--budget`-like flags of `time`, `boot` and
/// `diagnose` (one message for all three).
pub(crate) fn positive_duration(s: &str) -> std::result::Result<f64, String> {
    match parse_duration(s) {
        Some(v) if v > 0.0 => Ok(v),
        _ => Err(format!(
            "'{s}' is not a duration above zero (e.g. 500ms, 30s, 2m)"
        )),
    }
}

fn parse_positive_secs(s: &str) -> std::result::Result<f64, String> {
    match parse_secs(s)? {
        v if v > 0.0 => Ok(v),
        _ => Err("must be greater than zero".into()),
    }
}

fn parse_fraction(s: &str) -> std::result::Result<f64, String> {
    let v = match s.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => s.parse::<f64>(),
    }
    .map_err(|_| format!("'{s}' is not a fraction (e.g. 2% or 0.02)"))?;
    if v > 0.0 && v < 1.0 {
        Ok(v)
    } else {
        Err(format!("'{s}' must be between 0 and 100%"))
    }
}

/// `tunelab run EXP --help`: print the experiment's own help instead of the
/// generic one. Returns the exit code when it handled the call.
pub(crate) fn help_for_experiment(
    args: &[String],
    experiments: &Catalog,
    term: crate::report::table::Terminal,
) -> Option<i32> {
    let run_at = args.iter().position(|a| a == "run")?;
    let rest = &args[run_at + 1..];
    if !rest.iter().any(|a| a == "--help" || a == "-h") {
        return None;
    }
    let name = rest.iter().find(|a| !a.starts_with('-'))?;
    let exp = experiments.find(name).ok()?;
    print!(
        "{}",
        term.plain(&super::list::experiment_help(exp.as_ref()))
    );
    println!("{}", term.plain(&format!("\nUsage: tunelab run {} [-p KEY=V[,V…]]… [--target DIR] [--trials N] [--budget DUR] [--label L]", exp.name())));
    println!("Common options: tunelab run --help");
    Some(0)
}

pub(crate) fn exec(
    args: &Args,
    out: &Out,
    cli: &Cli,
    argv: &[String],
    experiments: &Catalog,
) -> Result<i32> {
    let m = &args.measure;
    let req = run::Request {
        experiment: &args.experiment,
        params: &args.params,
        options: m.options(),
        target: args.target.as_deref(),
        fs: args.lab.fs.as_deref(),
        fs_size: args.lab.fs_size,
        throttle: args.lab.throttle.as_deref(),
    };
    let planned = run::plan(&req, experiments)?;
    if args.dry_run {
        return dry_run(&planned, out);
    }
    let (points, plan) = (&planned.points, &planned.plan);
    if m.trials.is_none() {
        // Said first, so a slow board's user knows how long to wait.
        out.info(&format!(
            "{}: {} point(s), {}–{} trials each, time budget {} ({} per point; --budget changes it)",
            planned.exp.name(),
            points.len(),
            plan.min_trials,
            plan.max_trials,
            super::progress::clock(plan.budget),
            super::progress::clock(plan.budget / points.len().max(1) as f64),
        ));
    }
    args.export.check()?;
    let mut store = m.store(cli)?;
    let finished = planned.measure(&m.watch(), &m.label, argv, store.as_mut(), out);
    // The results are printed and exported before any error is reported.
    let printed = print_run(&finished.run, out);
    if args.export.wanted() {
        args.export.write_run(&finished.run, out)?;
    }
    printed?;
    if let Some(e) = finished.store_error {
        return Err(e);
    }
    match finished.error {
        Some(e) => Err(e),
        None => Ok(0),
    }
}

/// `run --dry-run`: what would be measured and the longest it can take.
fn dry_run(planned: &run::Planned, out: &Out) -> Result<i32> {
    let (exp, plan) = (planned.exp.as_ref(), &planned.plan);
    let points: Vec<String> = planned
        .points
        .iter()
        .map(|p| p.label(exp.params()))
        .collect();
    let longest = planned.longest();
    if out.json {
        out.json_data(&serde_json::json!({
            "schema": "tunelab.run-plan/1",
            "experiment": exp.name(),
            "points": points,
            "targets": planned.targets(),
            "warmup": plan.warmup,
            "min_trials": plan.min_trials,
            "max_trials": plan.max_trials,
            "budget_s": (!planned.fixed).then_some(plan.budget),
            "longest_s": longest,
        }))?;
        return Ok(0);
    }
    let mut text = format!(
        "{}: {} point(s) on {} target(s), {}–{} trials each after {} warm-up\n",
        exp.name(),
        points.len(),
        planned.targets(),
        plan.min_trials,
        plan.max_trials,
        plan.warmup
    );
    for p in &points {
        text.push_str(&format!(
            "  {}\n",
            if p.is_empty() { "(defaults)" } else { p }
        ));
    }
    text.push_str(&longest_line(longest, plan.max_trials));
    out.data(&text)?;
    Ok(0)
}

/// The dry run's last line: the longest a plan can take, or why there is
/// no bound (shared by run and study).
pub(crate) fn longest_line(longest: Option<f64>, trials: usize) -> String {
    match longest {
        Some(s) => format!(
            "longest: {} (the time budget stops it; a trial under way finishes first)\n",
            super::progress::clock(s)
        ),
        None => format!(
            "longest: no time limit: {trials} trials per point take as long as they take \
             (add --budget to bound it)\n"
        ),
    }
}

/// A finished run on stdout: the JSON, or the run view when it has results.
pub(super) fn print_run(run: &Run, out: &Out) -> Result<()> {
    if out.json {
        out.json_data(run)
    } else if run.results.is_empty() {
        Ok(())
    } else if run.label.chars().any(char::is_control) {
        // The label as typed could act on the terminal: shown escaped.
        let mut safe = run.clone();
        safe.label = super::runs::clean(&run.label);
        out.data(&runview::render(&safe, out.term))
    } else {
        out.data(&runview::render(run, out.term))
    }
}

/// The filesystem lab and throttling flags, shared by run, tune and study.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct LabArgs {
    /// Run on loop-backed file systems created for the run (root), one after another:
    /// FSTYPE[:OPTION…],… e.g. ext4,ext4:noatime,ext4:data=writeback,xfs,btrfs.
    #[arg(long, value_name = "FS[:OPT…],…")]
    pub(crate) fs: Option<String>,
    /// Size of each lab file system image (sparse).
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_size_arg)]
    pub(crate) fs_size: u64,
    /// Emulate a slow device: limit tunelab's own I/O on the target's (or lab's) device
    /// through a blkio cgroup (root), e.g. read=20MB/s,write=20MB/s. cgroup v1 throttles
    /// only direct I/O and reads, not buffered writeback.
    #[arg(long, value_name = "read=R,write=W")]
    pub(crate) throttle: Option<String>,
}

impl LabArgs {
    pub(crate) fn parse(&self) -> Result<Lab> {
        Lab::from_flags(self.fs.as_deref(), self.fs_size, self.throttle.as_deref())
    }
}

fn parse_size_arg(s: &str) -> std::result::Result<u64, String> {
    crate::units::parse_size(s)
        .filter(|v| *v > 0)
        .ok_or_else(|| format!("'{s}' is not a size (e.g. 512M, 2G)"))
}
