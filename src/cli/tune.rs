//! `tunelab tune KNOB --values a,b,… --experiment EXP`: an interleaved,
//! randomised A/B sweep of one knob, always restored.

use std::path::PathBuf;

use super::run::{begin_session, finish, LabArgs, MeasureArgs};
use super::{Cli, Out};
use crate::engine::catalog::Catalog;
use crate::engine::session::target_or_temp;
use crate::report::table;
use crate::tune::knobs::{is_known, Knob, NAMES};
use crate::tune::sweep::{best_value, default_metric};
use crate::units::{human, human_range};
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The knob: read_ahead_kb, scheduler, nr_requests (the target's disk or --device),
    /// vm.dirty_ratio, vm.dirty_background_ratio, vm.dirty_bytes, vm.dirty_background_bytes,
    /// vm.dirty_expire_centisecs, governor, mount (values like noatime, strictatime, sync, noatime+async),
    /// kernel.sched_rt_runtime_us (-1 = no RT throttling), irq.N.affinity (CPU lists: 0, 2-3, 0+2).
    pub knob: String,
    /// Values to compare, comma-separated.
    #[arg(
        long,
        value_name = "A,B,…",
        required = true,
        allow_hyphen_values = true
    )]
    pub values: String,
    /// The experiment that measures each value.
    #[arg(long, short = 'e', value_name = "EXP")]
    pub experiment: String,
    /// Experiment parameter key=value (one value each: the knob is what sweeps).
    #[arg(short = 'p', long = "param", value_name = "KEY=V")]
    pub params: Vec<String>,
    /// Directory to measure in (block knobs act on its disk).
    #[arg(long, value_name = "DIR")]
    pub target: Option<PathBuf>,
    /// Block device for block knobs instead of the target's disk (e.g. loop3).
    #[arg(long, value_name = "NAME")]
    pub device: Option<String>,
    /// Metric that decides the best value [default: the experiment's first].
    #[arg(long, value_name = "NAME")]
    pub metric: Option<String>,
    /// Differences below this are not a win (e.g. 2%).
    #[arg(long, default_value = "2%", value_parser = super::compare::parse_noise)]
    pub noise: f64,
    /// Say what would be changed, from what to what, for how long and how it
    /// is restored; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub measure: MeasureArgs,
    #[command(flatten)]
    pub lab: LabArgs,
}

pub fn exec(
    args: &Args,
    out: &Out,
    cli: &Cli,
    argv: &[String],
    experiments: &Catalog,
) -> Result<i32> {
    if !is_known(&args.knob) {
        return Err(Error::usage(format!(
            "unknown knob '{}' (knobs: {})",
            args.knob,
            NAMES.join(", ")
        )));
    }
    let values: Vec<String> = args
        .values
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    if values.len() < 2 {
        return Err(Error::usage(
            "--values needs at least two values to compare (e.g. --values 128,1024)",
        ));
    }
    let exp = experiments.find(&args.experiment)?;
    let points = crate::engine::verbs::run::points(exp.as_ref(), &args.params)?;
    if points.len() != 1 {
        // Name the parameters that sweep (by default or from -p).
        let sweeping: Vec<String> = points[0]
            .0
            .iter()
            .filter(|(k, v)| points.iter().any(|p| p.0.get(*k) != Some(*v)))
            .map(|(k, v)| format!("-p {k}={v}"))
            .collect();
        return Err(Error::usage(format!(
            "tune sweeps only the knob, but {} makes {} points; give each of its sweeping \
             parameters one value, e.g. {}",
            exp.name(),
            points.len(),
            sweeping.join(" ")
        )));
    }
    exp.validate(&points[0])?;
    let metric = match &args.metric {
        Some(m) if exp.metrics().iter().any(|x| x.name == m) => m.clone(),
        Some(m) => return Err(Error::usage(format!("{} has no metric '{m}'", exp.name()))),
        None => default_metric(
            &args.knob,
            &exp.metrics()
                .iter()
                .map(|m| (m.name.to_string(), m.unit.to_string()))
                .collect::<Vec<_>>(),
        ),
    };
    if args.dry_run {
        return dry_run(args, &values, exp.as_ref(), &points[0], &metric, out);
    }
    if !crate::engine::host::is_root() {
        return Err(Error::privilege(format!(
            "tune changes {} and needs root (run with sudo)",
            args.knob
        )));
    }
    if exp.needs().root && !crate::engine::host::is_root() {
        return Err(Error::privilege(format!("{} needs root", exp.name())));
    }
    // Resolve and validate against the real target before measuring anything.
    let probe_dir = target_or_temp(args.target.as_deref());
    if args.lab.fs.is_none() {
        let knob = Knob::resolve(&args.knob, &probe_dir, args.device.as_deref())?;
        for v in &values {
            knob.validate(v)?;
        }
    }
    let lab = args.lab.parse()?;
    let plan = args.measure.options().plan(exp.defaults())?;
    let mut store = args.measure.store(cli)?;
    let session = begin_session(&args.measure, args.target.as_deref(), argv, out);
    let req = crate::tune::run::Request {
        knob: &args.knob,
        values: &values,
        device: args.device.as_deref(),
        exp: exp.as_ref(),
        points: &points,
        target: args.target.as_deref(),
        lab: &lab,
        plan: &plan,
        metric: &metric,
        noise: args.noise,
    };
    let (run, error) = crate::tune::run::run(&req, session, out);
    let run = finish(run, store.as_mut(), out)?;
    if !out.json && !run.results.is_empty() {
        out.data(&summary_table(&args.knob, &run.results, &metric))?;
        match best_value(&args.knob, &run.results, &metric, args.noise) {
            Ok(v) => out.data(&format!("{}\n", v.explanation))?,
            Err(e) => out.warn(&e.to_string()),
        }
    }
    match error {
        Some(e) => Err(e),
        None => Ok(0),
    }
}

fn summary_table(knob: &str, results: &[crate::engine::PointResult], metric: &str) -> String {
    let rows = results
        .iter()
        .filter_map(|r| {
            let m = r.metric(metric)?;
            let s = &m.summary;
            let fs = r
                .params
                .get("fs")
                .map(|f| format!(" fs={f}"))
                .unwrap_or_default();
            Some(vec![
                format!("{}{fs}", r.params.get(knob)?),
                human(s.median, &m.unit),
                human_range(s.ci95_low, s.ci95_high, &m.unit),
                s.n.to_string(),
            ])
        })
        .collect();
    format!(
        "\n{knob} → {metric}\n{}",
        table::render(&[knob, "median", "95% CI", "n"], rows)
    )
}

/// `tune --dry-run`: the plan, read only.
fn dry_run(
    args: &Args,
    values: &[String],
    exp: &dyn crate::engine::Experiment,
    point: &crate::engine::Point,
    metric: &str,
    out: &Out,
) -> Result<i32> {
    let plan = args.measure.options().plan(exp.defaults())?;
    let mut s = format!("tune {} — dry run: nothing is changed\n", args.knob);
    let target = target_or_temp(args.target.as_deref());
    if let Some(fs) = &args.lab.fs {
        s.push_str(&format!(
            "  where:    on a new loop-device file system per --fs entry ({fs}, {} each); a block knob acts on that loop device, whose value is read when it exists\n",
            crate::units::format_size(args.lab.fs_size)
        ));
    } else {
        let knob = Knob::resolve(&args.knob, &target, args.device.as_deref())?;
        for v in values {
            knob.validate(v)?;
        }
        s.push_str(&format!(
            "  knob:     {} (now {})\n",
            knob.location(),
            knob.current()?
        ));
    }
    s.push_str(&format!(
        "  values:   {} → each written, read back (a value the kernel clamps is measured and stored as what it set), then measured\n",
        values.join(", ")
    ));
    s.push_str(&format!(
        "  workload: {} {} in {}; judged on {metric}{}\n",
        exp.name(),
        point.label(exp.params()),
        target.display(),
        if args.metric.is_none() {
            " (the default for this knob)"
        } else {
            ""
        }
    ));
    let n = values.len();
    let trial = point
        .0
        .get("duration")
        .and_then(|d| d.as_f64())
        .map(|d| format!(", about {} per trial", crate::units::human(d, "s")))
        .unwrap_or_default();
    s.push_str(&format!(
        "  how long: {n} values × {}…{} shuffled rounds (+{} warm-up){trial}; stops at the {:.0} s budget at the latest ({n}×{}…{}={}…{} trials)\n",
        plan.min_trials,
        plan.max_trials,
        plan.warmup,
        plan.budget,
        plan.min_trials,
        plan.max_trials,
        n * plan.min_trials,
        n * plan.max_trials,
    ));
    s.push_str(&format!(
        "  restore:  the original value is journalled in {} before the first write and written back at the end, on Ctrl-C, and after a kill by the next tunelab ('tunelab restore')\n",
        crate::engine::host::journal_path().display()
    ));
    if !crate::engine::host::is_root() {
        s.push_str("  note:     changing it needs root: the real run would stop with exit 3\n");
    }
    out.data(&s)?;
    Ok(0)
}
