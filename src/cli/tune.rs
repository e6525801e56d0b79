//! `tunelab tune KNOB --values a,b,… --experiment EXP`: an interleaved,
//! randomised A/B sweep of one knob, always restored.

use std::path::PathBuf;

use super::run::{begin_session, finish, LabArgs, MeasureArgs};
use super::{Cli, Out};
use crate::engine::catalog::Catalog;
use crate::engine::session::target_or_temp;
use crate::report::table;
use crate::tune::decide::{decide, rounds_for_a_claim, rounds_to_plan, Decision, ENV_LIVE};
use crate::tune::knobs::{is_known, Knob, NAMES};
use crate::tune::relevance;
use crate::tune::sweep::default_metric;
use crate::units::{human, human_range};
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The knob: read_ahead_kb, scheduler, nr_requests (the target's disk or --device),
    /// vm.dirty_ratio, vm.dirty_background_ratio, vm.dirty_bytes, vm.dirty_background_bytes,
    /// vm.dirty_expire_centisecs, vm.swappiness, governor, mount (values like noatime, strictatime, sync, noatime+async),
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
    let plan = rounds_plan(args, exp.defaults(), values.len(), out)?;
    if args.dry_run {
        return dry_run(args, &values, exp.as_ref(), &points[0], &metric, &plan, out);
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
        let live = run.environment.get(ENV_LIVE).map(String::as_str);
        out.data(&summary_table(&args.knob, &run.results, &metric, live))?;
        for (fs, d) in verdicts(&args.knob, &run.results, &metric, args.noise, live) {
            match d {
                Ok(d) => out.data(&format!("{fs}{}\n", d.explanation))?,
                Err(e) => out.warn(&format!("{fs}{e}")),
            }
        }
        if let Some(Error::Interrupted(_)) = &error {
            out.warn("interrupted: the rounds every value finished are stored with the run (status interrupted)");
        }
    }
    match error {
        Some(e) => Err(e),
        None => Ok(0),
    }
}

/// The repetition plan: the experiment's, with enough rounds by default
/// (up to its maximum) for a 95% claim against the live value among
/// `values`; a count the user gave is kept, with a word when it is too few.
fn rounds_plan(
    args: &Args,
    defaults: crate::engine::RunDefaults,
    values: usize,
    out: &Out,
) -> Result<crate::engine::runner::Plan> {
    let mut plan = args.measure.options().plan(defaults)?;
    // Up to `values` comparisons with the live arm (one fewer when it is swept).
    let (claim, planned) = (rounds_for_a_claim(values), rounds_to_plan(values));
    let given = args.measure.trials.is_some() || args.measure.min_trials.is_some();
    if !given && plan.min_trials < planned {
        // Within the experiment's maximum: a one-recording experiment keeps
        // its one trial (and the warning below says what that means).
        plan.min_trials = planned.min(plan.max_trials);
    }
    if plan.max_trials < claim {
        out.warn(&format!(
            "at most {} round(s): too few for a 95% claim against the live value with {values} \
             value(s) (at least {claim} are needed): the sweep shows figures but names no winner",
            plan.max_trials
        ));
    }
    Ok(plan)
}

/// The verdict of each lab file system's sweep (one, without --fs), each
/// against its live value; the prefix names the file system.
fn verdicts(
    knob: &str,
    results: &[crate::engine::PointResult],
    metric: &str,
    noise: f64,
    live: Option<&str>,
) -> Vec<(String, Result<Decision>)> {
    let mut groups: Vec<Option<String>> = Vec::new();
    for r in results {
        let fs = r.params.get("fs").map(|f| f.to_string());
        if !groups.contains(&fs) {
            groups.push(fs);
        }
    }
    let lives: Vec<&str> = live.map(|l| l.split(", ").collect()).unwrap_or_default();
    groups
        .iter()
        .enumerate()
        .map(|(i, fs)| {
            let mine: Vec<_> = results
                .iter()
                .filter(|r| r.params.get("fs").map(|f| f.to_string()) == *fs)
                .cloned()
                .collect();
            let prefix = fs.as_ref().map(|f| format!("fs={f}: ")).unwrap_or_default();
            let d = match lives.get(i).or(lives.first()) {
                Some(l) => decide(knob, &mine, metric, noise, l),
                None => Err(Error::usage(format!(
                    "the live value of {knob} was not measured: no value is judged (apply will \
                     refuse this run)"
                ))),
            };
            (prefix, d)
        })
        .collect()
}

fn summary_table(
    knob: &str,
    results: &[crate::engine::PointResult],
    metric: &str,
    live: Option<&str>,
) -> String {
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
            let v = r.params.get(knob)?.to_string();
            let is_live = live.is_some_and(|l| l.split(", ").any(|l| l == v));
            Some(vec![
                format!("{v}{}{fs}", if is_live { " (live)" } else { "" }),
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

/// `tune --dry-run`: the plan, read only (text, or one JSON object).
fn dry_run(
    args: &Args,
    values: &[String],
    exp: &dyn crate::engine::Experiment,
    point: &crate::engine::Point,
    metric: &str,
    plan: &crate::engine::runner::Plan,
    out: &Out,
) -> Result<i32> {
    let target = target_or_temp(args.target.as_deref());
    let mut j = serde_json::Map::new();
    let mut s = format!("tune {} — dry run: nothing is changed\n", args.knob);
    let mut arms = values.to_vec();
    if let Some(fs) = &args.lab.fs {
        s.push_str(&format!(
            "  where:    on a new loop-device file system per --fs entry ({fs}, {} each); a block knob acts on that loop device, whose value is read when it exists\n",
            crate::units::format_size(args.lab.fs_size)
        ));
        j.insert("lab".into(), fs.clone().into());
    } else {
        let knob = Knob::resolve(&args.knob, &target, args.device.as_deref())?;
        for v in values {
            knob.validate(v)?;
        }
        let now = knob.current()?;
        s.push_str(&format!("  knob:     {} (now {now})\n", knob.location()));
        j.insert("location".into(), knob.location().into());
        j.insert("live".into(), now.clone().into());
        if knob.is_file() && !arms.contains(&now) {
            arms.push(now);
        }
    }
    s.push_str(&format!(
        "  values:   {} → each written, read back (a value the kernel clamps is measured and stored as what it set), then measured; the live value is always one arm, interleaved with the others, and every verdict is against it\n",
        arms.join(", ")
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
    let irrelevant = if args.lab.fs.is_none() {
        relevance::check_at(&args.knob, exp, point, &target, args.device.as_deref())
    } else {
        Vec::new()
    };
    for w in &irrelevant {
        s.push_str(&format!(
            "  warning:  this sweep may measure nothing: {w}\n"
        ));
    }
    let n = arms.len();
    let longest = longest_s(plan);
    s.push_str(&format!(
        "  how long: {n} arms × {}…{} shuffled rounds (+{} warm-up); measuring stops at the {:.0} s budget, warm-up at the budget too: at most about {:.0} s plus one round past each and the preparation ({n}×{}…{}={}…{} trials)\n",
        plan.min_trials,
        plan.max_trials,
        plan.warmup,
        plan.budget,
        longest,
        plan.min_trials,
        plan.max_trials,
        n * plan.min_trials,
        n * plan.max_trials,
    ));
    let journal = crate::engine::host::journal_path();
    s.push_str(&format!(
        "  restore:  the original value is journalled in {} before the first write and written back at the end, on Ctrl-C, and after a kill by the next tunelab ('tunelab restore')\n",
        journal.display()
    ));
    let root = crate::engine::host::is_root();
    if !root {
        s.push_str("  note:     changing it needs root: the real run would stop with exit 3\n");
    }
    if out.json {
        j.insert("dry_run".into(), true.into());
        j.insert("knob".into(), args.knob.clone().into());
        j.insert("values".into(), arms.into());
        j.insert("experiment".into(), exp.name().into());
        j.insert("point".into(), point.label(exp.params()).into());
        j.insert("target".into(), target.display().to_string().into());
        j.insert("metric".into(), metric.into());
        j.insert("warnings".into(), irrelevant.into());
        j.insert(
            "rounds".into(),
            serde_json::json!({"warmup": plan.warmup, "min": plan.min_trials, "max": plan.max_trials}),
        );
        j.insert("budget_s".into(), plan.budget.into());
        j.insert("longest_s".into(), longest.into());
        j.insert("journal".into(), journal.display().to_string().into());
        j.insert("needs_root".into(), (!root).into());
        out.json_data(&serde_json::Value::Object(j))?;
    } else {
        out.data(&s)?;
    }
    Ok(0)
}

/// The longest a sweep measures: the warm-up rounds stop at the budget,
/// then the measured rounds get the whole budget again (each may run one
/// round past it; preparation comes on top).
fn longest_s(plan: &crate::engine::runner::Plan) -> f64 {
    if plan.warmup > 0 {
        2.0 * plan.budget
    } else {
        plan.budget
    }
}
