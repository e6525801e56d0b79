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
use crate::tune::knobs::{Knob, KnobGuard, NAMES};
use crate::tune::sweep::{best_value, sweep, Sweep};
use crate::units::human;
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The knob: read_ahead_kb, scheduler, nr_requests (the target's disk or --device),
    /// vm.dirty_ratio, vm.dirty_background_ratio, vm.dirty_bytes, vm.dirty_background_bytes,
    /// vm.dirty_expire_centisecs, governor, mount (values like noatime, strictatime, sync, noatime+async).
    pub knob: String,
    /// Values to compare, comma-separated.
    #[arg(long, value_name = "A,B,…", required = true)]
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
    #[command(flatten)]
    pub measure: MeasureArgs,
    #[command(flatten)]
    pub lab: LabArgs,
}

pub fn exec(args: &Args, out: &Out, cli: &Cli, argv: &[String]) -> Result<i32> {
    if !NAMES.contains(&args.knob.as_str()) {
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
        None => exp
            .metrics()
            .first()
            .map(|m| m.name.to_string())
            .unwrap_or_default(),
    };
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
            out.info(&format!(
                "{}: original value {}; sweeping {}",
                args.knob,
                guard.original(),
                values.join(", ")
            ));
            let sw = Sweep {
                knob: &args.knob,
                values: &values,
                exp: exp.as_ref(),
                point: &points[0],
            };
            let outcome = sweep(&mut guard, &sw, ctx, &plan, &mut |round| {
                if !out.quiet && out.interactive {
                    eprint!("\rround {round}");
                }
            });
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
