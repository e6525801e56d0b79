//! `tunelab time [-c CMD]… [-- CMD ARGS…]`: start-up and exit time of
//! programs, hyperfine-class, stored as an `app.time` run.
//!
//! Several commands run interleaved (A B A B …) so a drift of the machine
//! hits all of them alike; warm-up rounds first; then rounds until the 95%
//! CI of every command's median wall time is within --precision, between
//! --min-runs and --max-runs, within --budget: the engine's measurement
//! loop with an interleaved schedule (`engine::verbs::time`: plan, then
//! measure). This file parses and prints.

use super::{Cli, Out};
use crate::engine::process::{parse_signal, Quit};
use crate::engine::runner::RunOptions;
use crate::engine::verbs::time::{self, Command, Request};
use crate::report::time::render;
use crate::{Error, Result};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QuitHow {
    /// Send --signal (default TERM).
    Signal,
    /// Close the program's stdin.
    StdinClose,
}

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// A command to time (repeatable; words split like a shell, no expansion).
    #[arg(long = "cmd", short = 'c', value_name = "CMD")]
    pub(crate) cmds: Vec<String>,
    /// Run the commands through `sh -c` (the shell's start-up is then included).
    #[arg(long)]
    pub(crate) shell: bool,
    /// Exactly N timed runs per command (no precision rule).
    #[arg(long, value_name = "N")]
    pub(crate) runs: Option<usize>,
    /// Warm-up runs per command, recorded but not summarised.
    #[arg(long, value_name = "N", default_value = "1")]
    pub(crate) warmup: usize,
    #[arg(long, value_name = "N", default_value = "10")]
    pub(crate) min_runs: usize,
    #[arg(long, value_name = "N", default_value = "200")]
    pub(crate) max_runs: usize,
    /// Stop when the 95% CI of every median wall time is within ±this.
    #[arg(long, value_name = "FRACTION", default_value = "0.02")]
    pub(crate) precision: f64,
    /// Time budget for all timed runs (e.g. 30s).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = super::run::positive_duration)]
    pub(crate) budget: f64,
    /// Shell command run (sh -c) before every run, untimed (e.g. drop caches).
    #[arg(long, value_name = "CMD")]
    pub(crate) prepare: Option<String>,
    /// Time until a line of stdout/stderr matches this regular expression,
    /// then ask the program to quit and time the exit.
    #[arg(long, value_name = "REGEX")]
    pub(crate) ready: Option<String>,
    /// How to ask a ready program to quit.
    #[arg(long, value_enum, default_value = "signal", requires = "ready")]
    pub(crate) quit: QuitHow,
    /// Signal for --quit signal.
    #[arg(long, default_value = "TERM", value_parser = parse_signal)]
    pub(crate) signal: i32,
    /// Give up when no ready line came within this time.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = super::run::positive_duration)]
    pub(crate) ready_timeout: f64,
    /// Time programs that exit non-zero too (as hyperfine's -i); without it
    /// the first failing run stops timing and exits 1.
    #[arg(long, short = 'i')]
    pub(crate) ignore_failure: bool,
    #[command(flatten)]
    pub(crate) stored: super::run::StoreArgs,
    #[command(flatten)]
    pub(crate) export: super::export_flags::ExportArgs,
    /// The command to time and its arguments (after --).
    #[arg(last = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

pub(crate) fn exec(a: &Args, out: &Out, cli: &Cli, argv: &[String]) -> Result<i32> {
    let planned = time::plan(Request {
        command: a.command.clone(),
        cmds: a.cmds.clone(),
        shell: a.shell,
        options: RunOptions {
            warmup: Some(a.warmup),
            min_trials: Some(a.min_runs),
            max_trials: Some(a.max_runs),
            trials: a.runs,
            precision: Some(a.precision),
            budget: Some(a.budget),
            trial_time: None,
        },
        prepare: a.prepare.clone(),
        ready: a.ready.clone(),
        quit: match a.quit {
            QuitHow::Signal => Quit::Signal(a.signal),
            QuitHow::StdinClose => Quit::StdinClose,
        },
        ready_timeout: a.ready_timeout,
        ignore_failure: a.ignore_failure,
        label: a.stored.label.clone(),
    })?;
    a.export.check()?;
    let mut store = a.stored.store(cli)?;
    let timed = planned.measure(argv, store.as_mut(), out);
    let run = timed.run();
    if out.json {
        out.data(&timed.json()?)?;
    } else if !run.results.is_empty() {
        out.data(&render(
            run,
            &exits(&timed.commands),
            &timed.comparisons,
            out.term,
        ))?;
    }
    if !run.results.is_empty() {
        let json = || timed.json();
        a.export
            .write(&crate::report::export::Subject::Timed(run, &json), out)?;
    }
    if let Some(Error::Interrupted(sig)) = &timed.finished.error {
        out.info(&format!(
            "{sig}: the timed program and its process group were killed"
        ));
    }
    timed.finished.result(out)?;
    Ok(0)
}

/// Per command, the distinct ways its runs ended ("exit 0", "signal 15").
fn exits(cmds: &[Command]) -> Vec<(&str, Vec<String>)> {
    cmds.iter()
        .map(|c| {
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
            (c.label.as_str(), v)
        })
        .collect()
}
