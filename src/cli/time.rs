//! `tunelab time [-c CMD]… [-- CMD ARGS…]`: start-up and exit time of
//! programs, hyperfine-class, stored as an `app.time` run.
//!
//! Several commands run interleaved (A B A B …) so a drift of the machine
//! hits all of them alike; warm-up rounds first; then rounds until the 95%
//! CI of every command's median wall time is within --precision, between
//! --min-runs and --max-runs, within --budget: the engine's measurement
//! loop (`engine::measure`) with an interleaved schedule.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use regex::Regex;

use super::{Cli, Out};
use crate::engine::measure::{measure, Loop, Monotonic, Schedule, StopReason, Trials, Values};
use crate::engine::model::{now_rfc3339, MetricResult, PointResult, Run};
use crate::engine::pipeline::store_run;
use crate::engine::runner::RunOptions;
use crate::engine::session::{new_run, status_of};
use crate::engine::{ParamValue, RunDefaults};
use crate::experiments::app::proc::{self, Quit};
use crate::experiments::app::time::{run_once, AppTrial, TimeSpec, METRICS};
use crate::observe::sampler::Sampler;
use crate::report::table::render as table;
use crate::safety::signals;
use crate::stats::{self, summary::relative_half_width};
use crate::units::{human, pct};
use crate::{Error, Result};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuitHow {
    /// Send --signal (default TERM).
    Signal,
    /// Close the program's stdin.
    StdinClose,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A command to time (repeatable; words split like a shell, no expansion).
    #[arg(long = "cmd", short = 'c', value_name = "CMD")]
    pub cmds: Vec<String>,
    /// Run the commands through `sh -c` (the shell's start-up is then included).
    #[arg(long)]
    pub shell: bool,
    /// Exactly N timed runs per command (no precision rule).
    #[arg(long, value_name = "N")]
    pub runs: Option<usize>,
    /// Warm-up runs per command, recorded but not summarised.
    #[arg(long, value_name = "N", default_value = "1")]
    pub warmup: usize,
    #[arg(long, value_name = "N", default_value = "10")]
    pub min_runs: usize,
    #[arg(long, value_name = "N", default_value = "200")]
    pub max_runs: usize,
    /// Stop when the 95% CI of every median wall time is within ±this.
    #[arg(long, value_name = "FRACTION", default_value = "0.02")]
    pub precision: f64,
    /// Time budget for all timed runs (e.g. 30s).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = super::run::positive_duration)]
    pub budget: f64,
    /// Shell command run (sh -c) before every run, untimed (e.g. drop caches).
    #[arg(long, value_name = "CMD")]
    pub prepare: Option<String>,
    /// Time until a line of stdout/stderr matches this regular expression,
    /// then ask the program to quit and time the exit.
    #[arg(long, value_name = "REGEX")]
    pub ready: Option<String>,
    /// How to ask a ready program to quit.
    #[arg(long, value_enum, default_value = "signal", requires = "ready")]
    pub quit: QuitHow,
    /// Signal for --quit signal.
    #[arg(long, default_value = "TERM", value_parser = proc::parse_signal)]
    pub signal: i32,
    /// Give up when no ready line came within this time.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = super::run::positive_duration)]
    pub ready_timeout: f64,
    /// Time programs that exit non-zero too (as hyperfine's -i); without it
    /// the first failing run stops timing and exits 1.
    #[arg(long, short = 'i')]
    pub ignore_failure: bool,
    /// A label stored with the run.
    #[arg(long, default_value = "")]
    pub label: String,
    /// Do not store the run.
    #[arg(long)]
    pub no_store: bool,
    #[command(flatten)]
    pub export: super::export_flags::ExportArgs,
    /// The command to time and its arguments (after --).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// How a run failed: a non-zero exit or a signal (a program asked to quit
/// after its ready line may die of that signal: not a failure).
fn failure(t: &AppTrial) -> Option<String> {
    if t.ready_s.is_some() {
        return None;
    }
    match (t.exit_code, t.signal) {
        (Some(0), _) => None,
        (Some(c), _) => Some(format!("exited with status {c}")),
        (_, Some(s)) => Some(format!("was killed by signal {s}")),
        _ => Some("ended in an unknown way".into()),
    }
}

struct Cmd {
    label: String,
    argv: Vec<String>,
    trials: Vec<AppTrial>,
}

fn shell_quote(w: &str) -> String {
    if !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

fn commands(a: &Args) -> Result<Vec<Cmd>> {
    let mut v = Vec::new();
    if !a.command.is_empty() {
        // With --shell the words are shell text, as `sh -c "$*"` would see them.
        let (label, argv) = if a.shell {
            let text = a.command.join(" ");
            (text.clone(), proc::argv_for(&text, true)?)
        } else {
            let label = a
                .command
                .iter()
                .map(|w| shell_quote(w))
                .collect::<Vec<_>>()
                .join(" ");
            (label, a.command.clone())
        };
        v.push(Cmd {
            label,
            argv,
            trials: Vec::new(),
        });
    }
    for c in &a.cmds {
        v.push(Cmd {
            label: c.clone(),
            argv: proc::argv_for(c, a.shell)?,
            trials: Vec::new(),
        });
    }
    if v.is_empty() {
        return Err(Error::usage(
            "nothing to time: give a command after -- (tunelab time -- sleep 0.1) or with -c",
        ));
    }
    Ok(v)
}

fn metric(
    name: &'static str,
    trials: &[&AppTrial],
    f: &dyn Fn(&AppTrial) -> Option<f64>,
    reason: Option<StopReason>,
) -> Option<MetricResult> {
    let spec = METRICS.iter().find(|m| m.name == name)?;
    let samples: Vec<f64> = trials
        .iter()
        .filter(|t| !t.warmup)
        .filter_map(|t| f(t))
        .collect();
    if samples.is_empty() {
        return None;
    }
    let mut summary = stats::summarize(&samples);
    summary.stop_reason = reason;
    Some(MetricResult {
        name: name.to_string(),
        unit: spec.unit.to_string(),
        better: spec.better,
        samples,
        warmup: trials
            .iter()
            .filter(|t| t.warmup)
            .filter_map(|t| f(t))
            .collect(),
        summary,
    })
}

fn point(c: &Cmd, reason: Option<StopReason>, elapsed: f64) -> PointResult {
    let all: Vec<&AppTrial> = c.trials.iter().collect();
    let metrics = [
        metric("wall_time", &all, &|t| Some(t.wall_s), reason),
        metric("user_time", &all, &|t| Some(t.user_s), reason),
        metric("sys_time", &all, &|t| Some(t.sys_s), reason),
        metric("peak_rss", &all, &|t| Some(t.peak_rss_bytes as f64), reason),
        metric("ready_time", &all, &|t| t.ready_s, reason),
        metric("exit_time", &all, &|t| t.exit_s, reason),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut notes = vec![
        "fork/exec without a shell unless --shell; output to /dev/null (piped and read when --ready); \
         user/sys/peak RSS from wait4"
            .to_string(),
    ];
    let bad: Vec<String> = c
        .trials
        .iter()
        .filter(|t| t.exit_code != Some(0) && t.ready_s.is_none())
        .map(|t| match (t.exit_code, t.signal) {
            (Some(code), _) => format!("exit {code}"),
            (_, Some(s)) => format!("signal {s}"),
            _ => "?".into(),
        })
        .collect();
    if !bad.is_empty() {
        notes.push(format!(
            "{} run(s) did not exit 0: {}",
            bad.len(),
            bad.join(", ")
        ));
    }
    let mut params = BTreeMap::new();
    params.insert("command".to_string(), ParamValue::Text(c.label.clone()));
    PointResult {
        experiment: "app.time".into(),
        params,
        metrics,
        series: Vec::new(),
        histograms: Vec::new(),
        notes,
        elapsed_s: elapsed,
        ..Default::default()
    }
}

/// `time`'s side of the measurement loop: one arm per command; a trial is
/// one run (after --prepare), kept with its exit status in the command's
/// list; a failing run stops the loop unless --ignore-failure.
struct CmdTrials<'a> {
    a: &'a Args,
    spec: &'a TimeSpec,
    cmds: &'a mut Vec<Cmd>,
    seq: usize,
}

impl Trials for CmdTrials<'_> {
    fn check(&mut self) -> Result<()> {
        signals::check()
    }

    fn trial(&mut self, arm: usize, warm: bool) -> Result<Values> {
        if let Some(p) = &self.a.prepare {
            proc::run_shell("--prepare", p)?;
        }
        let c = &mut self.cmds[arm];
        let mut t = run_once(&c.label, &c.argv, self.spec)?;
        t.warmup = warm;
        self.seq += 1;
        t.seq = self.seq;
        let failed = failure(&t);
        let wall = t.wall_s;
        c.trials.push(t);
        match failed {
            Some(how) if !self.a.ignore_failure => Err(Error::measurement(format!(
                "{}: {how}; a failing program is not timed as a success (use --ignore-failure \
                 to time it anyway)",
                c.label
            ))),
            _ => Ok(vec![("wall_time", wall)]),
        }
    }
}

pub fn exec(a: &Args, out: &Out, cli: &Cli, argv: &[String]) -> Result<i32> {
    let mut cmds = commands(a)?;
    let plan = RunOptions {
        warmup: Some(a.warmup),
        min_trials: Some(a.min_runs),
        max_trials: Some(a.max_runs),
        trials: a.runs,
        precision: Some(a.precision),
        budget: Some(a.budget),
        trial_time: None,
    }
    .plan(RunDefaults::default())?;
    let spec = TimeSpec {
        ready: a
            .ready
            .as_deref()
            .map(Regex::new)
            .transpose()
            .map_err(|e| Error::usage(format!("--ready is not a valid regular expression: {e}")))?,
        quit: match a.quit {
            QuitHow::Signal => Quit::Signal(a.signal),
            QuitHow::StdinClose => Quit::StdinClose,
        },
        ready_timeout: Duration::from_secs_f64(a.ready_timeout),
        // One run longer than the whole budget is killed with its group.
        max_run: Some(Duration::from_secs_f64(a.budget)),
    };
    a.export.check()?;
    let mut store = if a.no_store {
        None
    } else {
        Some(super::open_store(cli)?)
    };
    let mut run = new_run(None, &a.label, argv);
    let sampler = Sampler::start(None, Duration::from_secs(1));
    let t0 = Instant::now();
    // Rounds of one run per command, A B A B …, through the engine's loop;
    // only the wall time decides precision (the trials return nothing else).
    let how = Loop {
        schedule: Schedule::Interleaved,
        plan,
        fixed: a.runs.is_some(),
        auto_warmup: false,
    };
    let mut runner = CmdTrials {
        a,
        spec: &spec,
        cmds: &mut cmds,
        seq: 0,
    };
    let measured = measure(
        runner.cmds.len(),
        &how,
        &mut Monotonic::start(),
        &mut runner,
    );
    run.samples = sampler.stop();
    let elapsed = t0.elapsed().as_secs_f64();
    // Every arm of a round schedule stops for the same reason.
    let reason = measured.arms.first().and_then(|arm| arm.reason);
    let outcome: Result<()> = match measured.error {
        Some(e) => Err(e),
        None => Ok(()),
    };
    for c in &cmds {
        if c.trials.iter().any(|t| !t.warmup) {
            run.results
                .push(point(c, reason, elapsed / cmds.len() as f64));
        }
    }
    run.finished = now_rfc3339();
    run.status = status_of(outcome.as_ref().err());
    for c in &cmds {
        let bad = c
            .trials
            .iter()
            .filter(|t| t.exit_code != Some(0) && t.ready_s.is_none())
            .count();
        if bad > 0 {
            let w = format!(
                "{}: {bad} run(s) exited with a non-zero status or a signal",
                c.label
            );
            out.warn(&w);
            run.warnings.push(w);
        }
    }
    // A store that cannot be written must not lose the measurement: the
    // results are printed first, the store failure reported after them.
    let store_error = if run.results.is_empty() {
        None
    } else {
        store_run(&run, store.as_mut(), false, out)
    };
    let comparisons: Vec<serde_json::Value> = cmds
        .iter()
        .skip(1)
        .map(|c| {
            let w = |c: &Cmd| {
                c.trials
                    .iter()
                    .filter(|t| !t.warmup)
                    .map(|t| t.wall_s)
                    .collect::<Vec<_>>()
            };
            let cmp = stats::compare::compare(&w(&cmds[0]), &w(c), false, 0.02);
            serde_json::json!({ "base": cmds[0].label, "command": c.label, "wall_time": cmp })
        })
        .collect();
    // The run with every timed trial and the comparisons (--json, --export-json).
    let json_doc = || -> Result<String> {
        let mut doc = serde_json::to_value(&run)?;
        let mut trials: Vec<&AppTrial> = cmds.iter().flat_map(|c| &c.trials).collect();
        trials.sort_by_key(|t| t.seq);
        doc["trials"] = serde_json::to_value(trials)?;
        doc["comparisons"] = serde_json::Value::Array(comparisons.clone());
        Ok(serde_json::to_string_pretty(&doc)? + "\n")
    };
    if out.json {
        out.data(&json_doc()?)?;
    } else if !run.results.is_empty() {
        out.data(&render(&run, &cmds, &comparisons))?;
    }
    if !run.results.is_empty() {
        use crate::report::export::{export, Format};
        a.export.write(
            &super::export_flags::Texts {
                json: &json_doc,
                csv: &|| export(&run, Format::Csv),
                markdown: &|| export(&run, Format::Md),
            },
            out,
        )?;
    }
    if let Err(Error::Interrupted(sig)) = &outcome {
        out.info(&format!(
            "{sig}: the timed program and its process group were killed"
        ));
    }
    if let (Err(_), Some(se)) = (&outcome, &store_error) {
        out.error(&se.to_string());
    }
    outcome?;
    match store_error {
        Some(e) => Err(e),
        None => Ok(0),
    }
}

fn render(run: &Run, cmds: &[Cmd], comparisons: &[serde_json::Value]) -> String {
    let mut rows = Vec::new();
    for r in &run.results {
        let label = match r.params.get("command") {
            Some(ParamValue::Text(t)) => t.clone(),
            _ => String::new(),
        };
        for m in &r.metrics {
            let s = &m.summary;
            rows.push(vec![
                label.clone(),
                m.name.clone(),
                human(s.mean, &m.unit),
                human(s.median, &m.unit),
                format!(
                    "{} … {}",
                    human(s.ci95_low, &m.unit),
                    human(s.ci95_high, &m.unit)
                ),
                format!("±{}", pct(relative_half_width(s))),
                human(s.min, &m.unit),
                human(s.max, &m.unit),
                s.n.to_string(),
            ]);
        }
    }
    let mut s = format!(
        "run {} app.time ({} command(s), interleaved; stopped by {})\n",
        run.id,
        cmds.len(),
        run.results
            .first()
            .and_then(|r| r.metrics.first())
            .map_or("", |m| m.summary.stop_reason_str())
    );
    s.push_str(&table(
        &[
            "command",
            "metric",
            "mean",
            "median",
            "95% CI of median",
            "±CI",
            "min",
            "max",
            "n",
        ],
        rows,
    ));
    for c in cmds {
        let codes: Vec<String> = {
            let mut v: Vec<String> = c
                .trials
                .iter()
                .map(|t| match (t.exit_code, t.signal) {
                    (Some(e), _) => format!("exit {e}"),
                    (_, Some(sig)) => format!("signal {sig}"),
                    _ => "?".into(),
                })
                .collect();
            v.sort();
            v.dedup();
            v
        };
        s.push_str(&format!("  {}: {}\n", c.label, codes.join(", ")));
    }
    if !comparisons.is_empty() {
        let rows = comparisons
            .iter()
            .map(|c| {
                let w = &c["wall_time"];
                vec![
                    c["command"].as_str().unwrap_or("").to_string(),
                    c["base"].as_str().unwrap_or("").to_string(),
                    format!("{:.3}×", w["ratio"].as_f64().unwrap_or(f64::NAN)),
                    format!(
                        "{:.3}× … {:.3}×",
                        w["ci95_low"].as_f64().unwrap_or(f64::NAN),
                        w["ci95_high"].as_f64().unwrap_or(f64::NAN)
                    ),
                    w["verdict"].as_str().unwrap_or("").replace('_', " "),
                ]
            })
            .collect();
        s.push_str("\nwall time relative to the first command\n");
        s.push_str(&table(
            &["command", "vs", "ratio of medians", "95% CI", "verdict"],
            rows,
        ));
    }
    s
}
