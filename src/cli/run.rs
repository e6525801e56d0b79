//! `tunelab run EXP`: check everything, sample the machine, run the points,
//! store and print the run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use super::{Cli, Out};
use crate::engine::model::{new_run_id, now_rfc3339, Run, RunStatus, RUN_SCHEMA};
use crate::engine::params::{expand_points, parse_duration, split_assignment};
use crate::engine::runner::{run_points, Event, RunOptions};
use crate::engine::{registry, Ctx, Experiment};
use crate::observe::sampler::Sampler;
use crate::report::runview;
use crate::safety::{is_root, Scratch};
use crate::system::{self, device_for_path};
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Experiment to run (see `tunelab list`); `tunelab run EXP --help` describes its parameters.
    pub experiment: String,
    /// Parameter: key=value, or key=v1,v2,… to sweep (every combination is one point).
    #[arg(short = 'p', long = "param", value_name = "KEY=V[,V…]")]
    pub params: Vec<String>,
    /// Directory to measure in; tunelab creates (and removes) a private scratch directory inside it.
    #[arg(long, value_name = "DIR")]
    pub target: Option<PathBuf>,
    /// Run exactly N trials per point (no precision rule).
    #[arg(long, value_name = "N")]
    pub trials: Option<usize>,
    /// Minimum trials per point before the precision rule may stop [default: per experiment, usually 5].
    #[arg(long, value_name = "N")]
    pub min_trials: Option<usize>,
    /// Maximum trials per point [default: per experiment, usually 30].
    #[arg(long, value_name = "N")]
    pub max_trials: Option<usize>,
    /// Warm-up trials per point, recorded but not summarised [default: per experiment, usually 1].
    #[arg(long, value_name = "N")]
    pub warmup: Option<usize>,
    /// Stop when the 95% CI of every median is within ±this (e.g. 2% or 0.02).
    #[arg(long, value_name = "FRACTION", value_parser = parse_fraction)]
    pub precision: Option<f64>,
    /// Time budget for the whole run, shared among points (e.g. 30s, 2m) [default: per experiment].
    #[arg(long, value_name = "DURATION", value_parser = parse_secs)]
    pub budget: Option<f64>,
    /// A label stored with the run (e.g. "before noatime").
    #[arg(long, default_value = "")]
    pub label: String,
    /// Do not store the run in the database.
    #[arg(long)]
    pub no_store: bool,
    /// How long to watch the machine for competing processes before starting (0 to skip).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_secs)]
    pub quiet_check: f64,
    /// Background sampler interval (vmstat, diskstats, dirty pages).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_positive_secs)]
    pub sample_interval: f64,
}

fn parse_secs(s: &str) -> std::result::Result<f64, String> {
    parse_duration(s).ok_or_else(|| format!("'{s}' is not a duration (e.g. 500ms, 30s, 2m)"))
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
pub fn help_for_experiment(args: &[String]) -> Option<i32> {
    let run_at = args.iter().position(|a| a == "run")?;
    let rest = &args[run_at + 1..];
    if !rest.iter().any(|a| a == "--help" || a == "-h") {
        return None;
    }
    let name = rest.iter().find(|a| !a.starts_with('-'))?;
    let exp = registry::find(name).ok()?;
    print!("{}", super::list::experiment_help(exp.as_ref()));
    println!("\nUsage: tunelab run {} [-p KEY=V[,V…]]… [--target DIR] [--trials N] [--budget DUR] [--label L]", exp.name());
    println!("Common options: tunelab run --help");
    Some(0)
}

pub fn exec(args: &Args, out: &Out, cli: &Cli, argv: &[String]) -> Result<i32> {
    let exp = registry::find(&args.experiment)?;
    let overrides = args
        .params
        .iter()
        .map(|p| split_assignment(p))
        .collect::<Result<Vec<_>>>()?;
    let points = expand_points(&exp.params(), &overrides)?;
    for p in &points {
        exp.validate(p)?;
    }
    let opts = RunOptions {
        warmup: args.warmup,
        min_trials: args.min_trials,
        max_trials: args.max_trials,
        trials: args.trials,
        precision: args.precision,
        budget: args.budget,
    };
    let plan = opts.plan(exp.defaults())?;
    if exp.needs().root && !is_root() {
        return Err(Error::privilege(format!(
            "{} needs root (run it with sudo)",
            exp.name()
        )));
    }
    // Open the store first: a bad --db should fail before minutes of measuring.
    let mut store = if args.no_store {
        None
    } else {
        Some(super::open_store(cli)?)
    };
    let scratch = if exp.needs().scratch {
        let s = Scratch::create(args.target.as_deref())?;
        let need = points
            .iter()
            .map(|p| exp.scratch_bytes(p))
            .max()
            .unwrap_or(0);
        s.ensure_space(need)?;
        Some(Arc::new(s))
    } else {
        if let Some(t) = &args.target {
            if !t.is_dir() {
                return Err(Error::usage(format!(
                    "target {} is not an existing directory",
                    t.display()
                )));
            }
        }
        None
    };
    let target: PathBuf = match (&args.target, &scratch) {
        (Some(t), _) => t.clone(),
        (None, Some(s)) => s.path().parent().unwrap_or(Path::new("/")).to_path_buf(),
        (None, None) => std::env::temp_dir(),
    };
    let device = device_for_path(&target);
    let disk = device.as_ref().map(|d| d.name.clone());

    let mut run = Run {
        schema: RUN_SCHEMA.to_string(),
        id: new_run_id(),
        label: args.label.clone(),
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
    };
    if args.quiet_check > 0.0 {
        out.info(&format!(
            "checking the machine is quiet for {:.1} s…",
            args.quiet_check
        ));
        run.quietness =
            system::quietness_check(Duration::from_secs_f64(args.quiet_check), disk.as_deref());
        for w in &run.quietness.warnings {
            out.warn(w);
        }
        run.warnings.extend(run.quietness.warnings.iter().cloned());
    }

    let ctx = Ctx::new(scratch.clone(), target.clone(), device);
    let sampler = Sampler::start(disk, Duration::from_secs_f64(args.sample_interval));
    let outcome = run_with_progress(
        exp.as_ref(),
        &points,
        &ctx,
        &plan,
        args.trials.is_some(),
        out,
    );
    run.samples = sampler.stop();
    drop(ctx);
    drop(scratch); // removes the scratch directory before we report
    run.finished = now_rfc3339();
    run.results = outcome.results;
    run.warnings.extend(outcome.warnings);
    run.status = match &outcome.error {
        None => RunStatus::Complete,
        Some(Error::Interrupted(_)) => RunStatus::Interrupted,
        Some(_) => RunStatus::Failed,
    };
    for w in run.warnings.iter().skip(run.quietness.warnings.len()) {
        out.warn(w);
    }

    let keep = run.status == RunStatus::Complete || !run.results.is_empty();
    if let (Some(store), true) = (store.as_mut(), keep) {
        store.save(&run)?;
        out.info(&format!(
            "stored run {} ({}) in {}",
            run.id,
            run.status.as_str(),
            store.path().display()
        ));
    }
    if out.json {
        out.json_data(&run)?;
    } else if !run.results.is_empty() {
        out.data(&runview::render(&run))?;
    }
    match outcome.error {
        Some(e) => Err(e),
        None => Ok(0),
    }
}

fn run_with_progress(
    exp: &dyn Experiment,
    points: &[crate::engine::Point],
    ctx: &Ctx,
    plan: &crate::engine::runner::Plan,
    fixed: bool,
    out: &Out,
) -> crate::engine::runner::Outcome {
    let bar = if out.interactive {
        let b = ProgressBar::new(points.len() as u64);
        b.set_style(
            ProgressStyle::with_template(
                "{spinner} [{bar:30}] {pos}/{len} points · {msg} · {elapsed} (ETA {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        b.enable_steady_tick(Duration::from_millis(200));
        Some(b)
    } else {
        None
    };
    let mut label = String::new();
    let outcome = run_points(exp, points, ctx, plan, fixed, &mut |ev| match ev {
        Event::PointStarted {
            index,
            total,
            label: l,
        } => {
            label = l.to_string();
            match &bar {
                Some(b) => b.set_message(format!("{l} · warm-up")),
                None => out.info(&format!("[{}/{total}] {} {l}", index + 1, exp.name())),
            }
        }
        Event::Trial { n, max } => {
            if let Some(b) = &bar {
                b.set_message(format!("{label} · trial {n} (≤{max})"));
            }
        }
        Event::PointDone { .. } => {
            if let Some(b) = &bar {
                b.inc(1);
            }
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    outcome
}
