//! `tunelab diagnose`'s session: profile the machine, a process or a
//! command (`crate::diagnose`), keep the diagnosis as a run and store it.
//! The CLI prints the sections and the findings.

use crate::diagnose::{self, Options};
use crate::engine::observer::Observer;
use crate::engine::pipeline::{close, Finished};
use crate::engine::session::Session;
use crate::model::run::now_rfc3339;
use crate::safety::signals;
use crate::store::Store;
use crate::{Error, Result};

// The CLI names what to diagnose; the type is the profiler's own.
pub(crate) use crate::diagnose::What;

/// Diagnose what `opts` says; the run (closed, stored in `store` when
/// given) holds the diagnosis. A diagnosis that fails leaves no run.
pub(crate) fn run(
    what: What,
    hz: u32,
    startup_runs: u32,
    label: &str,
    argv: &[String],
    store: Option<&mut Store>,
    obs: &dyn Observer,
) -> Result<Finished> {
    let mut opts = Options::new(what);
    opts.hz = hz;
    opts.startup_runs = startup_runs;
    let started = now_rfc3339();
    let d = diagnose::diagnose(&opts, &|m: &str| obs.info(m))?;
    // The environment is read after the diagnosis, as it ends; the run
    // starts when the diagnosis did.
    let mut session = Session::open(label, argv, None);
    session.run.started = started;
    session.run.diagnosis = Some(Box::new(d));
    // A signal that cut the interval short: the diagnosis of the time
    // covered is stored, marked interrupted, and the verb exits 130.
    let interrupted = signals::caught().map(|s| Error::Interrupted(s.into()));
    Ok(close(session, interrupted, store, true, obs))
}

/// The flame graph of folded stacks, as SVG (the report draws it through
/// this, never calling the profiler itself).
pub(crate) fn flame(
    stacks: &[crate::model::profile::FoldedStack],
    title: &str,
) -> std::result::Result<String, String> {
    diagnose::profile::flamegraph_svg(stacks, title)
}
