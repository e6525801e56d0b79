//! `tunelab memory`: the memory of a program (RSS, PSS, VSZ, shared,
//! private, peak) and of the whole system like `free`, "before" and "after",
//! as the classic start-up studies reported it.
//!
//! - `--pid PID`: the process now (and, with `--for DUR`, its peak over that time);
//! - `-- CMD …`: system before; the program sampled every --interval from
//!   one interval after its exec to its exit (peak from the samples and
//!   from its own ru_maxrss, taken by the exec helper so that tunelab's
//!   memory is not in it);
//!   system after;
//! - `--ready REGEX [--task CMD]`: sampled until the ready line, snapshot,
//!   then the task (sh -c) runs, snapshot again ("after a normal task"), then
//!   the program is asked to quit (SIGTERM).

use serde_json::json;

use super::Out;
use crate::engine::verbs::memory::{self, Memory, ProcMem, Request, SystemMem};
use crate::units::human;
use crate::Result;

#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// An existing process to measure.
    #[arg(long, conflicts_with = "command")]
    pub(crate) pid: Option<u32>,
    /// With --pid: keep sampling for this long and report the peak.
    #[arg(long = "for", value_name = "DURATION", value_parser = super::run::positive_duration)]
    pub(crate) for_: Option<f64>,
    /// Sampling interval.
    #[arg(long, default_value = "100ms", value_parser = super::run::positive_duration)]
    pub(crate) interval: f64,
    /// Run the command through sh -c.
    #[arg(long)]
    pub(crate) shell: bool,
    /// Sample until a stdout/stderr line matches this regular expression.
    #[arg(long, value_name = "REGEX")]
    pub(crate) ready: Option<String>,
    /// After ready: run this shell command (the "normal task"), then measure again.
    #[arg(long, value_name = "CMD", requires = "ready")]
    pub(crate) task: Option<String>,
    /// Give up waiting for the ready line after this long.
    #[arg(long, default_value = "30s", value_parser = super::run::positive_duration)]
    pub(crate) ready_timeout: f64,
    /// The program to start and its arguments (after --).
    #[arg(last = true, value_name = "CMD")]
    pub(crate) command: Vec<String>,
}

fn proc_row(label: &str, m: &ProcMem) -> Vec<String> {
    let o = |v: Option<u64>| v.map_or("–".into(), |b| human(b as f64, "B"));
    vec![
        label.to_string(),
        human(m.rss as f64, "B"),
        o(m.pss),
        human(m.vsz as f64, "B"),
        o(m.shared),
        o(m.private),
        human(m.peak_rss as f64, "B"),
    ]
}

fn sys_row(label: &str, s: &SystemMem) -> Vec<String> {
    let h = |v: u64| human(v as f64, "B");
    vec![
        label.to_string(),
        h(s.total),
        h(s.used),
        h(s.free),
        h(s.shared),
        h(s.buff_cache),
        h(s.available),
    ]
}

pub(crate) fn exec(a: &Args, out: &Out) -> Result<i32> {
    let Memory {
        procs,
        times,
        peak,
        systems,
        notes,
    } = memory::plan(Request {
        pid: a.pid,
        for_s: a.for_,
        interval_s: a.interval,
        shell: a.shell,
        ready: a.ready.clone(),
        task: a.task.clone(),
        ready_timeout_s: a.ready_timeout,
        command: a.command.clone(),
    })?
    .measure()?;
    if out.json {
        out.json_data(&json!({
            "process": procs.iter().enumerate().map(|(i, (l, m))| {
                let mut o = json!({"when": l, "memory": m});
                if let Some(Some(t)) = times.get(i) {
                    o["at_s"] = json!(t);
                }
                o
            }).collect::<Vec<_>>(),
            "peak": peak,
            "system": systems.iter().map(|(l, m)| json!({"when": l, "memory": m})).collect::<Vec<_>>(),
            "notes": notes,
        }))?;
        return Ok(0);
    }
    let mut text = String::from("process memory\n");
    let mut rows: Vec<Vec<String>> = procs.iter().map(|(l, m)| proc_row(l, m)).collect();
    rows.push(vec![
        format!("peak ({} samples)", peak.samples),
        human(peak.rss as f64, "B"),
        human(peak.pss as f64, "B"),
        human(peak.vsz as f64, "B"),
        String::new(),
        String::new(),
        String::new(),
    ]);
    text.push_str(&out.table(
        &[
            "",
            "RSS",
            "PSS",
            "VSZ",
            "shared",
            "private",
            "peak RSS (VmHWM)",
        ],
        rows,
    ));
    text.push_str("\nsystem memory (like free; used = total − free − buff/cache)\n");
    text.push_str(&out.table(
        &[
            "",
            "total",
            "used",
            "free",
            "shared",
            "buff/cache",
            "available",
        ],
        systems.iter().map(|(l, s)| sys_row(l, s)).collect(),
    ));
    for n in notes {
        text.push_str(&format!("  note: {n}\n"));
    }
    out.data(&text)?;
    Ok(0)
}
