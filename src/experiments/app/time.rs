//! app.time — application start-up and exit time, hyperfine-class.
//!
//! One trial starts the program through tunelab's exec helper (a small
//! fresh process that fork/execs it, no shell unless asked: the words of
//! `command` are the argv), with stdin and output on /dev/null, and reaps
//! it with wait4(2) there. Measured per trial:
//! - `wall_time`: monotonic clock from just before the fork to wait4 returning;
//! - `user_time`, `sys_time`: the child's own CPU time (rusage of wait4);
//! - `peak_rss`: the child's ru_maxrss (KiB from the kernel, stored in B);
//!   spawned from the helper, not from tunelab, so that it is the program's
//!   own and not tunelab's (see `engine::process::exec_helper`).
//!
//! `tunelab time --ready REGEX` adds `ready_time` (spawn → first output line
//! on stdout or stderr matching REGEX, timestamped by the thread reading the
//! pipe) and `exit_time` (quit request → wait4 returning).
//! A non-zero exit code is recorded and reported, not hidden.

use crate::engine::process::once::{run_once, TimeSpec, METRICS};
use crate::engine::process::{self as proc};
use crate::engine::{
    Ctx, Experiment, ParamKind, ParamSpec, ParamValue, Point, PointRun, RunDefaults, TrialValues,
};
use crate::engine::{Needs, Spec};
use crate::{Error, Result};

pub(crate) struct AppTime;
struct State {
    label: String,
    argv: Vec<String>,
}

impl PointRun for State {
    fn trial(&mut self, _ctx: &Ctx) -> Result<TrialValues> {
        Ok(run_once(&self.label, &self.argv, &TimeSpec::default())?.values())
    }
}

/// A point's parameters, read by name once, here: the command as given
/// (the label) and the argv it runs.
struct Params {
    label: String,
    argv: Vec<String>,
}

impl Params {
    fn parse(point: &Point) -> Result<Params> {
        let text = match point.0.get("command") {
            Some(ParamValue::Text(t)) => t.clone(),
            _ => return Err(Error::usage("app.time needs -p command=…")),
        };
        let shell = matches!(point.0.get("shell"), Some(ParamValue::Bool(true)));
        Ok(Params {
            argv: proc::argv_for(&text, shell)?,
            label: text,
        })
    }
}

pub(crate) static SPEC: Spec = Spec {
    name: "app.time",
    summary: "application start-up/exit time: wall, user, sys, peak RSS (see also `tunelab time`)",
    method: "Each trial fork/execs the command without a shell (unless shell=yes: sh -c), stdin and \
         output on /dev/null, and reaps it with wait4: wall time on the monotonic clock from just \
         before the fork to wait4 returning, user/sys CPU time and ru_maxrss from the child's \
         rusage. The fork is done by a small helper (tunelab re-executed), not by tunelab \
         itself: at exec the kernel keeps the larger of the old and the new address space's peak \
         RSS, so a program spawned by tunelab reported tunelab's peak; from the helper the floor \
         is the helper's few copied pages (about 1 MiB), as with /usr/bin/time. `tunelab time` runs several commands interleaved and can time start-up to a \
         ready line and the exit.",
    params: &[
            ParamSpec::new(
                "command",
                ParamKind::Text,
                // tunelab itself doing nothing: every board has it (not
                // always `true`); /proc/self/exe is resolved in the child.
                concat!(crate::system::proc::proc_path!("self/exe"), " __noop"),
                "the command line (words, quotes allowed; no shell); default: tunelab's own no-op",
            ),
            ParamSpec::new(
                "shell",
                ParamKind::Bool,
                "no",
                "run the command through sh -c",
            ),
        ],
    metrics: &METRICS,
    needs: Needs::NOTHING,
    defaults: RunDefaults::new(1, 10, 200, 60.0),
    hidden: false,
};

impl Experiment for AppTime {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, point: &Point) -> Result<()> {
        Params::parse(point).map(|_| ())
    }
    fn prepare(&self, _ctx: &Ctx, point: &Point) -> Result<Box<dyn PointRun>> {
        let Params { label, argv } = Params::parse(point)?;
        Ok(Box::new(State { label, argv }))
    }
}
