//! `tunelab diagnose`: [`plan`] decides what is diagnosed (the machine for
//! a while, a process, a command) before anything runs;
//! [`Planned::measure`] profiles it (`crate::diagnose`), keeps the
//! diagnosis as a run and stores it. The CLI prints the sections and the
//! findings.

use std::time::Duration;

use crate::diagnose::{self, Options, What};
use crate::engine::observer::Observer;
use crate::engine::pipeline::{close, Finished};
use crate::engine::session::Session;
use crate::model::run::now_rfc3339;
use crate::safety::signals;
use crate::store::Store;
use crate::{Error, Result};

/// What `diagnose` was asked for, as parsed.
pub(crate) struct Request {
    /// `--for`, seconds.
    pub(crate) duration: Option<f64>,
    pub(crate) pid: Option<i32>,
    /// The command after `--`.
    pub(crate) command: Vec<String>,
    /// Whether the command line had a `--` (with nothing after it, the
    /// refusal says so).
    pub(crate) dashdash: bool,
    /// `--hz`, `--startup-runs`.
    pub(crate) hz: u32,
    pub(crate) startup_runs: u32,
    pub(crate) label: String,
}

/// What to diagnose and how, decided; nothing profiled yet.
pub(crate) struct Planned {
    opts: Options,
    label: String,
}

fn what(req: &Request) -> Result<What> {
    let dur = |d: Option<f64>| Duration::from_secs_f64(d.unwrap_or(10.0));
    match (req.pid, req.command.is_empty(), req.duration) {
        (Some(p), _, d) => Ok(What::Pid(p, dur(d))),
        (None, false, Some(_)) => Err(Error::usage(
            "--for and -- CMD exclude each other: a command is diagnosed from exec to exit",
        )),
        (None, false, None) => Ok(What::Command(req.command.clone())),
        (None, true, Some(d)) => Ok(What::System(dur(Some(d)))),
        (None, true, None) => Err(Error::usage(if req.dashdash {
            "no command after --: say what to run (tunelab diagnose -- CMD ARGS…)"
        } else {
            "say what to diagnose: --for 10s (the whole machine), --pid PID, or -- CMD ARGS…"
        })),
    }
}

/// Decide what is diagnosed (the machine for `--for`, a `--pid` for at
/// most `--for` (10 s by default), or the command) and the sampling rates.
pub(crate) fn plan(req: Request) -> Result<Planned> {
    let mut opts = Options::new(what(&req)?);
    opts.hz = req.hz;
    opts.startup_runs = req.startup_runs;
    Ok(Planned {
        opts,
        label: req.label,
    })
}

impl Planned {
    /// Diagnose as planned; the run (closed, stored in `store` when given)
    /// holds the diagnosis. A diagnosis that fails leaves no run.
    pub(crate) fn measure(
        &self,
        argv: &[String],
        store: Option<&mut Store>,
        obs: &dyn Observer,
    ) -> Result<Finished> {
        let started = now_rfc3339();
        let d = diagnose::diagnose(&self.opts, &|m: &str| obs.info(m))?;
        // The environment is read after the diagnosis, as it ends; the run
        // starts when the diagnosis did.
        let mut session = Session::open(&self.label, argv, None);
        session.run.started = started;
        session.run.diagnosis = Some(Box::new(d));
        // A signal that cut the interval short: the diagnosis of the time
        // covered is stored, marked interrupted, and the verb exits 130.
        let interrupted = signals::caught().map(|s| Error::Interrupted(s.into()));
        Ok(close(session, interrupted, store, true, obs))
    }
}

/// The flame graph of folded stacks, as SVG (the report draws it through
/// this, never calling the profiler itself).
pub(crate) fn flame(
    stacks: &[crate::model::profile::FoldedStack],
    title: &str,
) -> std::result::Result<String, String> {
    diagnose::profile::flamegraph_svg(stacks, title)
}
