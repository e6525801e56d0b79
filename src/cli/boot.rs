//! `tunelab boot [--runs N] [--ready REGEX] [--marker NAME=REGEX]… -- CMD…`
//! or `… --serial DEV [--baud B] [--reset CMD]`: a board's boot time measured
//! from outside (grabserial-style), repeated N times with the usual
//! statistics and stored as an `app.boot` run (see
//! src/engine/process/console.rs for what each figure means). The boots
//! are `engine::verbs::boot`'s (plan, then measure); this file parses and
//! prints.

use std::path::PathBuf;

use super::{Cli, Out};
use crate::engine::process::parse_signal;
use crate::engine::verbs::boot::{self, Request};
use crate::model::run::{PointResult, Run};
use crate::units::{human, human_range};
use crate::Result;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Timed boots (after the warm-up ones).
    #[arg(long, value_name = "N", default_value = "5")]
    pub(crate) runs: usize,
    /// Boots before the timed ones, recorded but not summarised.
    #[arg(long, value_name = "N", default_value = "0")]
    pub(crate) warmup: usize,
    /// The line that ends a boot (e.g. 'login:' or your application's "started" line).
    /// Without it the boot ends at the last marker (default: the kernel starting init).
    #[arg(long, value_name = "REGEX")]
    pub(crate) ready: Option<String>,
    /// An extra marker (repeatable), NAME=REGEX; the names kernel and init
    /// replace the built-in patterns.
    #[arg(long = "marker", value_name = "NAME=REGEX")]
    pub(crate) markers: Vec<String>,
    /// Read the console from this serial device instead of a command's output.
    #[arg(long, value_name = "DEV", conflicts_with = "command")]
    pub(crate) serial: Option<PathBuf>,
    /// Serial line speed.
    #[arg(
        long,
        value_name = "BAUD",
        default_value = "115200",
        requires = "serial"
    )]
    pub(crate) baud: u32,
    /// Shell command that power-cycles or resets the board before each boot
    /// (time zero is just before it). Without it, power the board on by hand:
    /// time zero is the first byte the serial line receives.
    #[arg(long, value_name = "CMD", requires = "serial")]
    pub(crate) reset: Option<String>,
    /// The kernel image, for its size (default: the -kernel FILE of a qemu command).
    #[arg(long, value_name = "FILE")]
    pub(crate) kernel: Option<PathBuf>,
    /// Give up on a boot that has not reached its last marker after this long.
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = super::run::positive_duration)]
    pub(crate) timeout: f64,
    /// Signal that stops the command once the boot is over.
    #[arg(long, default_value = "TERM", value_parser = parse_signal)]
    pub(crate) signal: i32,
    /// Write every console line with its time (grabserial style) to this new file.
    #[arg(long, value_name = "FILE")]
    pub(crate) log: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) stored: super::run::StoreArgs,
    /// The command whose output is the console (e.g. qemu-system-aarch64 … -nographic), after --.
    #[arg(last = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

pub(crate) fn exec(a: &Args, out: &Out, cli: &Cli, argv: &[String]) -> Result<i32> {
    let planned = boot::plan(Request {
        runs: a.runs,
        warmup: a.warmup,
        ready: a.ready.clone(),
        markers: a.markers.clone(),
        serial: a.serial.clone(),
        baud: a.baud,
        reset: a.reset.clone(),
        kernel: a.kernel.clone(),
        timeout: a.timeout,
        signal: a.signal,
        log: a.log.clone(),
        command: a.command.clone(),
        label: a.stored.label.clone(),
    })?;
    let mut store = a.stored.store(cli)?;
    let booted = planned.measure(argv, store.as_mut(), out);
    let run = &booted.finished.run;
    if out.json {
        let mut doc = serde_json::to_value(run)?;
        doc["trials"] = serde_json::to_value(&booted.trials)?;
        out.json_data(&doc)?;
    } else if let Some(p) = run.results.first() {
        out.data(&render(run, p, out.term))?;
    }
    booted.finished.result(out)?;
    Ok(0)
}

fn render(run: &Run, p: &PointResult, term: crate::report::table::Terminal) -> String {
    let rows = p
        .metrics
        .iter()
        .map(|m| {
            let s = &m.summary;
            vec![
                m.name.clone(),
                human(s.median, &m.unit),
                human_range(s.ci95_low, s.ci95_high, &m.unit),
                human(s.min, &m.unit),
                human(s.max, &m.unit),
                s.n.to_string(),
            ]
        })
        .collect();
    let mut s = format!("run {} app.boot: {}\n", run.id, p.params_label());
    s.push_str(&term.render(
        &["metric", "median", "95% CI of median", "min", "max", "n"],
        rows,
    ));
    for n in &p.notes {
        s.push_str(&format!("  {n}\n"));
    }
    s
}
