//! `tunelab tune KNOB --values a,b,… --experiment EXP`: an interleaved,
//! randomised A/B sweep of one knob, always restored.

use std::path::PathBuf;

use super::run::{LabArgs, MeasureArgs};
use super::{Cli, Out};
use crate::engine::catalog::Catalog;
use crate::report::tuneview;
use crate::tune::decide::{Decision, ENV_LIVE};
use crate::tune::plan;
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The knob: read_ahead_kb, scheduler, nr_requests (the target's disk or --device),
    /// vm.dirty_ratio, vm.dirty_background_ratio, vm.dirty_bytes, vm.dirty_background_bytes,
    /// vm.dirty_expire_centisecs, vm.swappiness, governor, mount (values like noatime, strictatime, sync, noatime+async),
    /// kernel.sched_rt_runtime_us (-1 = no RT throttling), irq.N.affinity (CPU lists: 0, 2-3, 0+2).
    pub(crate) knob: String,
    /// Values to compare, comma-separated.
    #[arg(
        long,
        value_name = "A,B,…",
        required = true,
        allow_hyphen_values = true
    )]
    pub(crate) values: String,
    /// The experiment that measures each value.
    #[arg(long, short = 'e', value_name = "EXP")]
    pub(crate) experiment: String,
    /// Experiment parameter key=value (one value each: the knob is what sweeps).
    #[arg(short = 'p', long = "param", value_name = "KEY=V")]
    pub(crate) params: Vec<String>,
    /// Directory to measure in (block knobs act on its disk).
    #[arg(long, value_name = "DIR")]
    pub(crate) target: Option<PathBuf>,
    /// Block device for block knobs instead of the target's disk (e.g. loop3).
    #[arg(long, value_name = "NAME")]
    pub(crate) device: Option<String>,
    /// Metric that decides the best value [default: the experiment's first].
    #[arg(long, value_name = "NAME")]
    pub(crate) metric: Option<String>,
    /// Differences below this are not a win (e.g. 2%).
    #[arg(long, default_value = "2%", value_parser = super::compare::parse_noise)]
    pub(crate) noise: f64,
    /// Say what would be changed, from what to what, for how long and how it
    /// is restored; change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    #[command(flatten)]
    pub(crate) measure: MeasureArgs,
    #[command(flatten)]
    pub(crate) lab: LabArgs,
}

pub(crate) fn exec(
    args: &Args,
    out: &Out,
    cli: &Cli,
    argv: &[String],
    experiments: &Catalog,
) -> Result<i32> {
    let m = &args.measure;
    let req = plan::Request {
        knob: &args.knob,
        values: &args.values,
        experiment: &args.experiment,
        params: &args.params,
        target: args.target.as_deref(),
        device: args.device.as_deref(),
        metric: args.metric.as_deref(),
        noise: args.noise,
        options: m.options(),
        fs: args.lab.fs.as_deref(),
        fs_size: args.lab.fs_size,
        throttle: args.lab.throttle.as_deref(),
        dry_run: args.dry_run,
    };
    let planned = plan::plan(&req, experiments)?;
    for n in &planned.notes {
        out.warn(n);
    }
    if args.dry_run {
        let (text, json) = crate::tune::dry_run::describe(&planned)?;
        if out.json {
            out.json_data(&json)?;
        } else {
            out.data(&text)?;
        }
        return Ok(0);
    }
    let mut store = m.store(cli)?;
    let swept = planned.measure(&m.watch(), &m.label, argv, store.as_mut(), out);
    let (run, decisions) = (&swept.finished.run, swept.decisions);
    // The results are printed before any error is reported.
    if out.json {
        // The run as `run --json` prints it, with the verdicts a user acts
        // on: one decision per lab file system (or the reason there is none).
        let mut v = serde_json::to_value(run)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("decisions".into(), decisions_json(&decisions));
        }
        out.json_data(&v)?;
    } else if !run.results.is_empty() {
        let live = run.environment.get(ENV_LIVE).map(String::as_str);
        out.data(&tuneview::summary(
            &args.knob,
            &run.results,
            &planned.metric,
            live,
            out.term,
        ))?;
        for (fs, d) in decisions {
            let fs = fs.map(|f| format!("fs={f}: ")).unwrap_or_default();
            match d {
                Ok(d) => out.data(&format!("{fs}{}\n", d.explanation))?,
                Err(e) => out.warn(&format!("{fs}{e}")),
            }
        }
        if let Some(Error::Interrupted(_)) = &swept.finished.error {
            out.warn("interrupted: the rounds every value finished are stored with the run (status interrupted)");
        }
    }
    if let Some(e) = swept.finished.store_error {
        return Err(e);
    }
    match swept.finished.error {
        Some(e) => Err(e),
        None => Ok(0),
    }
}

/// The decisions as JSON: each with its lab file system (null without
/// --fs), and a sweep that could not be judged as its reason.
fn decisions_json(decisions: &[(Option<String>, Result<Decision>)]) -> serde_json::Value {
    decisions
        .iter()
        .map(|(fs, d)| match d {
            Ok(d) => serde_json::json!({"fs": fs, "decision": d}),
            Err(e) => serde_json::json!({"fs": fs, "error": e.to_string()}),
        })
        .collect()
}
