//! `tunelab tune KNOB --values a,b,… --experiment EXP`: an interleaved,
//! randomised A/B sweep of one knob, always restored.

use std::path::PathBuf;

use super::run::{begin_session, finish, LabArgs, MeasureArgs};
use super::{Cli, Out};
use crate::engine::params::{expand_points, split_assignment};
use crate::engine::pipeline::for_each_target;
use crate::engine::runner::Outcome;
use crate::experiments::registry;
use crate::report::table;
use crate::tune::apply::{ENV_DEVICE, ENV_KNOB, ENV_LAB, ENV_METRIC, ENV_NOISE, ENV_ORIGINAL};
use crate::tune::knobs::{is_known, Knob, KnobGuard, NAMES};
use crate::tune::sweep::{best_value, default_metric, sweep, Sweep};
use crate::units::human;
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

pub fn exec(args: &Args, out: &Out, cli: &Cli, argv: &[String]) -> Result<i32> {
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
    let exp = registry::find(&args.experiment)?;
    let overrides = args
        .params
        .iter()
        .map(|p| split_assignment(p))
        .collect::<Result<Vec<_>>>()?;
    let points = expand_points(&exp.params(), &overrides)?;
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
    if !crate::safety::is_root() {
        return Err(Error::privilege(format!(
            "tune changes {} and needs root (run with sudo)",
            args.knob
        )));
    }
    if exp.needs().root && !crate::safety::is_root() {
        return Err(Error::privilege(format!("{} needs root", exp.name())));
    }
    // Resolve and validate against the real target before measuring anything.
    let probe_dir = args.target.clone().unwrap_or_else(std::env::temp_dir);
    if args.lab.fs.is_none() {
        let knob = Knob::resolve(&args.knob, &probe_dir, args.device.as_deref())?;
        for v in &values {
            knob.validate(v)?;
        }
    }
    let lab = args.lab.parse()?;
    let plan = args.measure.options().plan(exp.defaults())?;
    let mut store = args.measure.store(cli)?;
    let mut session = begin_session(&args.measure, args.target.as_deref(), argv, out);
    let mut restored = Vec::new();
    let mut used: Vec<Used> = Vec::new();
    let error = for_each_target(
        exp.as_ref(),
        &points,
        args.target.as_deref(),
        &lab,
        out,
        &mut session,
        &mut |ctx| {
            let guard =
                Knob::resolve(&args.knob, &ctx.target, args.device.as_deref()).and_then(|k| {
                    values.iter().try_for_each(|v| k.validate(v))?;
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
            let probed = probe(&mut guard, &args.knob, &values);
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
            for n in &notes {
                out.warn(n);
            }
            out.info(&format!(
                "{}: original value {original}; sweeping {}",
                args.knob,
                swept.join(", ")
            ));
            used.push(Used {
                device: device_of(&args.knob, ctx, args.device.as_deref()),
                disk: ctx.device.as_ref().map(|d| d.disk.clone()),
                lab: args.lab.fs.is_some(),
                original,
                target: ctx.target.clone(),
            });
            let sw = Sweep {
                knob: &args.knob,
                values: &swept,
                exp: exp.as_ref(),
                point: &points[0],
            };
            let mut outcome = sweep(&mut guard, &sw, ctx, &plan, &mut |round| {
                if !out.quiet && out.interactive {
                    eprint!("\rround {round}");
                }
            });
            for r in &mut outcome.results {
                let v = r.params.get(&args.knob).map(|v| v.to_string());
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
        out.info(r);
    }
    session.run.warnings.extend(
        restored
            .iter()
            .filter(|r| !r.starts_with("restored"))
            .cloned(),
    );
    record_tune(&mut session.run.environment, args, &metric, &used);
    let run = session.finish(error.as_ref());
    let json = out.json;
    let run = finish(
        run,
        store.as_mut(),
        &Out {
            json,
            quiet: out.quiet,
            interactive: false,
        },
    )?;
    if !json && !run.results.is_empty() {
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
                format!(
                    "{} … {}",
                    human(s.ci95_low, &m.unit),
                    human(s.ci95_high, &m.unit)
                ),
                s.n.to_string(),
            ])
        })
        .collect();
    format!(
        "\n{knob} → {metric}\n{}",
        table::render(&[knob, "median", "95% CI", "n"], rows)
    )
}

/// What one sweep acted on, for the run's environment and header.
struct Used {
    /// The disk a block knob acted on.
    device: Option<String>,
    /// The disk under the measured directory.
    disk: Option<String>,
    lab: bool,
    original: String,
    target: PathBuf,
}

/// The disk a block knob acts on in this context (the lab's loop device
/// when the lab is used).
fn device_of(knob: &str, ctx: &crate::engine::Ctx, given: Option<&str>) -> Option<String> {
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
fn record_tune(
    env: &mut std::collections::BTreeMap<String, String>,
    args: &Args,
    metric: &str,
    used: &[Used],
) {
    env.insert(ENV_KNOB.into(), args.knob.clone());
    env.insert(ENV_METRIC.into(), metric.into());
    env.insert(ENV_NOISE.into(), args.noise.to_string());
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
    let target = args.target.clone().unwrap_or_else(std::env::temp_dir);
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
        point.label(&exp.params()),
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
        crate::safety::journal::path().display()
    ));
    if !crate::safety::is_root() {
        s.push_str("  note:     changing it needs root: the real run would stop with exit 3\n");
    }
    out.data(&s)?;
    Ok(0)
}
