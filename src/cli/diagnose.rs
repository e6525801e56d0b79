//! `tunelab diagnose [--for DUR | --pid P | -- CMD…]`: why is it slow.
//! Thin: parse, plan and measure through `engine::verbs::diagnose` (which
//! decides what is diagnosed, diagnoses and stores the run), print the
//! sections and the headline findings.

use super::{Cli, Out};
use crate::engine::verbs::diagnose::{self, Request};
use crate::report::diagnosis as view;
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Diagnose the whole machine for this long (e.g. 10s), or a --pid for
    /// at most this long.
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_secs)]
    pub(crate) duration: Option<f64>,
    /// Diagnose a running process (its threads and descendants) until it
    /// exits or --for ends (default 10s).
    #[arg(long, value_name = "PID", conflicts_with = "command")]
    pub(crate) pid: Option<i32>,
    /// Sampling rate of the blocking section, Hz (the whole machine: at most 20).
    #[arg(long, value_name = "HZ", default_value = "100", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) hz: u32,
    /// Runs per mode of the start-up anatomy of a short command (0: skip it).
    #[arg(long, value_name = "N", default_value = "5")]
    pub(crate) startup_runs: u32,
    #[command(flatten)]
    pub(crate) stored: super::run::StoreArgs,
    #[command(flatten)]
    pub(crate) export: super::export_flags::ProfileExportArgs,
    /// The command to diagnose, from exec to exit (after --).
    #[arg(last = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

/// At most a day: a longer interval is a monitoring job, not a diagnosis.
fn parse_secs(s: &str) -> std::result::Result<f64, String> {
    match super::run::positive_duration(s)? {
        v if v <= 86_400.0 => Ok(v),
        _ => Err(format!(
            "'{s}' is longer than 24h; diagnose an interval up to a day"
        )),
    }
}

pub(crate) fn exec(a: &Args, out: &Out, cli: &Cli, argv: &[String]) -> Result<i32> {
    let planned = diagnose::plan(Request {
        duration: a.duration,
        pid: a.pid,
        command: a.command.clone(),
        dashdash: argv.iter().any(|w| w == "--"),
        hz: a.hz,
        startup_runs: a.startup_runs,
        label: a.stored.label.clone(),
    })?;
    a.export.check()?;
    let mut store = a.stored.store(cli)?;
    // A store that cannot be written must not lose the diagnosis: it is
    // printed first, the store's failure reported after it.
    let finished = planned.measure(argv, store.as_mut(), out)?;
    let run = &finished.run;
    let Some(d) = run.diagnosis.as_deref() else {
        return Err(Error::measurement("internal: the diagnosis was not kept"));
    };
    let findings = crate::study::advice::diagnosis_findings(&run.id, d);
    if out.json {
        out.json_data(&serde_json::json!({ "run": run, "findings": findings }))?;
        a.export.write(run, out)?;
        finished.result(out)?;
        return Ok(0);
    }
    let mut text = format!("diagnosis {}", run.id);
    if store.is_none() {
        text.push_str(" (not stored)");
    }
    text.push('\n');
    text.push_str(&view::text(d, out.term));
    text.push_str("\n== Findings ==\n");
    if findings.is_empty() {
        text.push_str("no finding: nothing in this diagnosis crosses a rule's threshold\n");
    }
    for f in &findings {
        text.push_str(&format!(
            "[{}] {} ({})\n  evidence: {}\n  why: {}\n  try: {}\n  verify: {}\n",
            f.severity.as_str(),
            f.title,
            f.id,
            f.evidence.join("; "),
            f.why,
            f.command,
            f.verify
        ));
    }
    out.data(&text)?;
    a.export.write(run, out)?;
    finished.result(out)?;
    Ok(0)
}

/// The flame-graph renderer handed to the report (report never calls
/// diagnose/ itself).
pub(crate) fn flame(
    stacks: &[crate::model::profile::FoldedStack],
    title: &str,
) -> std::result::Result<String, String> {
    diagnose::flame(stacks, title)
}
