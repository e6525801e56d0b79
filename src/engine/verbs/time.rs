//! `tunelab time`: [`plan`] resolves the commands, the repetition plan and
//! the ready rule before anything runs; [`Planned::measure`] runs the
//! commands interleaved (A B A B …) through the engine's measurement loop
//! until every median wall time is precise enough, each command one
//! `app.time` point of the run; the CLI renders.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::engine::measure::{
    measure, Loop, Monotonic, Plan, Schedule, StopReason, Trials, Values,
};
use crate::engine::observer::Observer;
use crate::engine::pipeline::{close, Finished};
use crate::engine::process::once::{run_once, AppTrial, TimeSpec, METRICS};
use crate::engine::process::{argv_for, ready_regex, run_shell, Quit};
use crate::engine::runner::RunOptions;
use crate::engine::session::Session;
use crate::engine::{ParamValue, RunDefaults};
use crate::model::run::{PointResult, Run};
use crate::safety::signals;
use crate::store::Store;
use crate::{Error, Result};

/// What `time` was asked for, as parsed.
pub(crate) struct Request {
    /// The command after `--`, word by word.
    pub(crate) command: Vec<String>,
    /// Each `-c CMD`, unsplit.
    pub(crate) cmds: Vec<String>,
    /// Run the commands through `sh -c` (`--shell`).
    pub(crate) shell: bool,
    /// `--warmup`, `--min-runs`, `--max-runs`, `--runs`, `--precision`, `--budget`.
    pub(crate) options: RunOptions,
    /// Shell command run before every run, untimed (`--prepare`).
    pub(crate) prepare: Option<String>,
    /// `--ready REGEX`, unparsed.
    pub(crate) ready: Option<String>,
    pub(crate) quit: Quit,
    /// Seconds to wait for the ready line.
    pub(crate) ready_timeout: f64,
    /// Time programs that exit non-zero too (`--ignore-failure`).
    pub(crate) ignore_failure: bool,
    pub(crate) label: String,
}

/// The commands resolved and the plan checked, nothing run yet.
pub(crate) struct Planned {
    pub(crate) commands: Vec<Command>,
    pub(crate) plan: Plan,
    /// Exactly `plan.max_trials` runs per command (`--runs`).
    pub(crate) fixed: bool,
    spec: TimeSpec,
    prepare: Option<String>,
    ignore_failure: bool,
    label: String,
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

/// The commands to time, labelled as the user wrote them: the one after
/// `--` first, then each `-c`.
fn commands(req: &Request) -> Result<Vec<Command>> {
    let mut v = Vec::new();
    if !req.command.is_empty() {
        // With --shell the words are shell text, as `sh -c "$*"` would see them.
        let (label, argv) = if req.shell {
            let text = req.command.join(" ");
            (text.clone(), argv_for(&text, true)?)
        } else {
            let label = req
                .command
                .iter()
                .map(|w| shell_quote(w))
                .collect::<Vec<_>>()
                .join(" ");
            (label, req.command.clone())
        };
        v.push(Command::new(label, argv));
    }
    for c in &req.cmds {
        v.push(Command::new(c.clone(), argv_for(c, req.shell)?));
    }
    if v.is_empty() {
        return Err(Error::usage(
            "nothing to time: give a command after -- (tunelab time -- sleep 0.1) or with -c",
        ));
    }
    Ok(v)
}

/// Check and plan `time`: the commands, the repetition plan and the ready
/// rule, each refusal one error before any command runs.
pub(crate) fn plan(req: Request) -> Result<Planned> {
    let commands = commands(&req)?;
    let plan = req.options.plan(RunDefaults::default())?;
    let spec = TimeSpec {
        ready: ready_regex(req.ready.as_deref())?,
        quit: req.quit,
        ready_timeout: Duration::from_secs_f64(req.ready_timeout),
        // One run longer than the whole budget is killed with its group.
        max_run: Some(Duration::from_secs_f64(plan.budget)),
    };
    Ok(Planned {
        commands,
        plan,
        // --runs: that many runs, whatever the budget.
        fixed: req.options.trials.is_some(),
        spec,
        prepare: req.prepare,
        ignore_failure: req.ignore_failure,
        label: req.label,
    })
}

/// One command timed: its label (as the user wrote it), argv, and every
/// run of it, warm-up ones included.
pub(crate) struct Command {
    pub(crate) label: String,
    pub(crate) argv: Vec<String>,
    pub(crate) trials: Vec<AppTrial>,
}

impl Command {
    pub(crate) fn new(label: String, argv: Vec<String>) -> Command {
        Command {
            label,
            argv,
            trials: Vec::new(),
        }
    }

    fn walls(&self) -> Vec<f64> {
        self.trials
            .iter()
            .filter(|t| !t.warmup)
            .map(|t| t.wall_s)
            .collect()
    }
}

/// What `time` measured: the run (closed, stored), the commands with
/// their runs, and each command's wall time against the first's.
pub(crate) struct Timed {
    pub(crate) finished: Finished,
    pub(crate) commands: Vec<Command>,
    pub(crate) comparisons: Vec<serde_json::Value>,
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

fn point(c: &Command, reason: Option<StopReason>, elapsed: f64) -> PointResult {
    let values = |f: &dyn Fn(&AppTrial) -> Option<f64>, warm: bool| -> Vec<f64> {
        c.trials
            .iter()
            .filter(|t| t.warmup == warm)
            .filter_map(f)
            .collect()
    };
    let metric = |name: &'static str, f: &dyn Fn(&AppTrial) -> Option<f64>| {
        let spec = METRICS.iter().find(|m| m.name == name)?;
        super::metric(
            name.to_string(),
            spec.unit,
            spec.better,
            values(f, false),
            values(f, true),
            reason,
        )
    };
    let metrics = [
        metric("wall_time", &|t| Some(t.wall_s)),
        metric("user_time", &|t| Some(t.user_s)),
        metric("sys_time", &|t| Some(t.sys_s)),
        metric("peak_rss", &|t| Some(t.peak_rss_bytes as f64)),
        metric("ready_time", &|t| t.ready_s),
        metric("exit_time", &|t| t.exit_s),
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
    super::point("app.time", params, metrics, notes, elapsed)
}

/// `time`'s side of the measurement loop: one arm per command; a trial is
/// one run (after --prepare), kept with its exit status in the command's
/// list; a failing run stops the loop unless --ignore-failure.
struct CmdTrials<'a> {
    req: &'a Planned,
    cmds: &'a mut Vec<Command>,
    seq: usize,
}

impl Trials for CmdTrials<'_> {
    fn check(&mut self) -> Result<()> {
        signals::check()
    }

    fn trial(&mut self, arm: usize, warm: bool) -> Result<Values> {
        if let Some(p) = &self.req.prepare {
            run_shell("--prepare", p)?;
        }
        let c = &mut self.cmds[arm];
        let mut t = run_once(&c.label, &c.argv, &self.req.spec)?;
        t.warmup = warm;
        self.seq += 1;
        t.seq = self.seq;
        let failed = failure(&t);
        let wall = t.wall_s;
        c.trials.push(t);
        match failed {
            Some(how) if !self.req.ignore_failure => Err(Error::measurement(format!(
                "{}: {how}; a failing program is not timed as a success (use --ignore-failure \
                 to time it anyway)",
                c.label
            ))),
            _ => Ok(vec![("wall_time", wall)]),
        }
    }
}

impl Planned {
    /// Time the planned commands, store the run in `store` (when given).
    pub(crate) fn measure(
        mut self,
        argv: &[String],
        store: Option<&mut Store>,
        obs: &dyn Observer,
    ) -> Timed {
        let mut session = Session::open(&self.label, argv, Some(Duration::from_secs(1)));
        let mut cmds = std::mem::take(&mut self.commands);
        let t0 = Instant::now();
        // Rounds of one run per command, A B A B …, through the engine's loop;
        // only the wall time decides precision (the trials return nothing else).
        let how = Loop {
            schedule: Schedule::Interleaved,
            plan: self.plan,
            fixed: self.fixed,
            auto_warmup: false,
        };
        let mut runner = CmdTrials {
            req: &self,
            cmds: &mut cmds,
            seq: 0,
        };
        let measured = measure(
            runner.cmds.len(),
            &how,
            &mut Monotonic::start(),
            &mut runner,
        );
        session.stop_sampler();
        let elapsed = t0.elapsed().as_secs_f64();
        // Every arm of a round schedule stops for the same reason.
        let reason = measured.arms.first().and_then(|arm| arm.reason);
        for c in &cmds {
            if c.trials.iter().any(|t| !t.warmup) {
                session
                    .run
                    .results
                    .push(point(c, reason, elapsed / cmds.len() as f64));
            }
        }
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
                obs.warn(&w);
                session.run.warnings.push(w);
            }
        }
        let finished = close(session, measured.error, store, false, obs);
        let comparisons = cmds
            .iter()
            .skip(1)
            .map(|c| {
                let cmp = crate::stats::compare::compare(&cmds[0].walls(), &c.walls(), false, 0.02);
                serde_json::json!({ "base": cmds[0].label, "command": c.label, "wall_time": cmp })
            })
            .collect();
        Timed {
            finished,
            commands: cmds,
            comparisons,
        }
    }
}

impl Timed {
    /// The run with every timed trial and the comparisons (`--json`,
    /// `--export-json`).
    pub(crate) fn json(&self) -> Result<String> {
        let mut doc = serde_json::to_value(&self.finished.run)?;
        let mut trials: Vec<&AppTrial> = self.commands.iter().flat_map(|c| &c.trials).collect();
        trials.sort_by_key(|t| t.seq);
        doc["trials"] = serde_json::to_value(trials)?;
        doc["comparisons"] = serde_json::Value::Array(self.comparisons.clone());
        Ok(serde_json::to_string_pretty(&doc)? + "\n")
    }

    pub(crate) fn run(&self) -> &Run {
        &self.finished.run
    }
}
