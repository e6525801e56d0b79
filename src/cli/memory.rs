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

use std::time::{Duration, Instant};

use regex::Regex;
use serde_json::json;

use super::Out;
use crate::experiments::app::proc::{self, Quit, ReadyOutcome};
use crate::observe::procmem::{self, ProcMem, ProcPeak, SystemMem};
use crate::report::table::render as table;
use crate::safety::signals;
use crate::units::human;
use crate::{Error, Result};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// An existing process to measure.
    #[arg(long, conflicts_with = "command")]
    pub pid: Option<u32>,
    /// With --pid: keep sampling for this long and report the peak.
    #[arg(long = "for", value_name = "DURATION", value_parser = super::run::positive_duration)]
    pub for_: Option<f64>,
    /// Sampling interval.
    #[arg(long, default_value = "100ms", value_parser = super::run::positive_duration)]
    pub interval: f64,
    /// Run the command through sh -c.
    #[arg(long)]
    pub shell: bool,
    /// Sample until a stdout/stderr line matches this regular expression.
    #[arg(long, value_name = "REGEX")]
    pub ready: Option<String>,
    /// After ready: run this shell command (the "normal task"), then measure again.
    #[arg(long, value_name = "CMD", requires = "ready")]
    pub task: Option<String>,
    /// Give up waiting for the ready line after this long.
    #[arg(long, default_value = "30s", value_parser = super::run::positive_duration)]
    pub ready_timeout: f64,
    /// The program to start and its arguments (after --).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

fn sys() -> Result<SystemMem> {
    procmem::read_system()
        .map_err(|e| Error::environment(format!("cannot read /proc/meminfo: {e}")))
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

pub fn exec(a: &Args, out: &Out) -> Result<i32> {
    let mut procs: Vec<(String, ProcMem)> = Vec::new();
    // Seconds after the program's exec of each `procs` entry, where known.
    let mut times: Vec<Option<f64>> = Vec::new();
    let mut systems: Vec<(String, SystemMem)> = vec![("before".into(), sys()?)];
    let mut peak = ProcPeak::default();
    let interval = Duration::from_secs_f64(a.interval);
    let mut notes = Vec::new();

    if let Some(pid) = a.pid {
        let m = procmem::read_proc(pid).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::usage(format!("no process with pid {pid}")),
            std::io::ErrorKind::PermissionDenied => {
                Error::privilege(format!("cannot read the memory of pid {pid}: {e}"))
            }
            _ => Error::measurement(format!("pid {pid}: {e}")),
        })?;
        peak.add(&m);
        procs.push(("now".into(), m));
        if let Some(d) = a.for_ {
            let end = Instant::now() + Duration::from_secs_f64(d);
            let mut last = None;
            while Instant::now() < end && signals::caught().is_none() {
                std::thread::sleep(interval.min(end.saturating_duration_since(Instant::now())));
                match procmem::read_proc(pid) {
                    Ok(m) => {
                        peak.add(&m);
                        last = Some(m);
                    }
                    Err(_) => {
                        notes.push(format!("process {pid} exited while sampling"));
                        break;
                    }
                }
            }
            if let Some(m) = last {
                procs.push(("end".into(), m));
            }
            systems.push(("after".into(), sys()?));
        }
        systems[0].0 = "now".into();
    } else {
        if a.command.is_empty() {
            return Err(Error::usage(
                "give --pid PID or a command after -- (tunelab memory -- CMD …)",
            ));
        }
        let argv = if a.shell {
            proc::argv_for(&a.command.join(" "), true)?
        } else {
            a.command.clone()
        };
        let re = a
            .ready
            .as_deref()
            .map(Regex::new)
            .transpose()
            .map_err(|e| Error::usage(format!("--ready is not a valid regular expression: {e}")))?;
        let mut s = proc::start(
            &argv,
            re.as_ref(),
            re.as_ref().map(|_| Quit::Signal(libc::SIGTERM)),
        )?;
        let mut first = true;
        let mut last: Option<ProcMem> = None;
        // Sample until ready (or exit). The first sample is taken one
        // interval after the exec, not at once: right after execve the new
        // program has mapped almost nothing yet (a 4 KiB "first sample").
        let reaped = loop {
            if signals::caught().is_some() {
                s.kill();
                let _ = s.reap();
                return Err(Error::Interrupted("SIGINT".into()));
            }
            if re.is_some() {
                match s.wait_ready_for(interval) {
                    ReadyOutcome::Ready(at, line) => {
                        notes.push(format!(
                            "ready after {} (line: {line})",
                            human(at.duration_since(s.t0).as_secs_f64(), "s")
                        ));
                        break None;
                    }
                    ReadyOutcome::Closed | ReadyOutcome::Timeout | ReadyOutcome::Interrupted => {}
                }
                if s.t0.elapsed().as_secs_f64() > a.ready_timeout {
                    s.kill();
                    let _ = s.reap();
                    return Err(Error::measurement(
                        "no line matched --ready within --ready-timeout",
                    ));
                }
            } else {
                std::thread::sleep(interval);
            }
            if let Some(r) = s.try_reap()? {
                break Some(r);
            }
            if let Ok(m) = procmem::read_proc(s.pid as u32) {
                peak.add(&m);
                if first {
                    let at = s.t0.elapsed().as_secs_f64();
                    procs.push((format!("first sample (+{})", human(at, "s")), m.clone()));
                    times.push(Some(at));
                    first = false;
                }
                last = Some(m);
            }
        };
        match reaped {
            Some(r) => {
                if let Some(m) = last {
                    procs.push(("last sample before exit".into(), m));
                    times.push(None);
                }
                if first {
                    notes.push(format!(
                        "the program exited before the first sample (--interval {}): the peak is \
                         its ru_maxrss only",
                        human(a.interval, "s")
                    ));
                }
                notes.push(format!(
                    "exited ({}) after {}; ru_maxrss {}",
                    match (r.exit_code, r.signal) {
                        (Some(c), _) => format!("code {c}"),
                        (_, Some(sig)) => format!("signal {sig}"),
                        _ => "?".into(),
                    },
                    human(
                        r.at.unwrap_or_else(Instant::now)
                            .duration_since(s.t0)
                            .as_secs_f64(),
                        "s"
                    ),
                    human(r.peak_rss as f64, "B")
                ));
                peak.rss = peak.rss.max(r.peak_rss);
                if re.is_some() {
                    return Err(Error::measurement(
                        "the program exited before printing a line matching --ready",
                    ));
                }
            }
            None => {
                let m = procmem::read_proc(s.pid as u32).unwrap_or_default();
                peak.add(&m);
                procs.push(("at ready".into(), m));
                systems.push(("at ready".into(), sys()?));
                if let Some(t) = &a.task {
                    proc::run_shell("--task", t)?;
                    let m = procmem::read_proc(s.pid as u32).unwrap_or_default();
                    peak.add(&m);
                    procs.push(("after task".into(), m));
                    systems.push(("after task".into(), sys()?));
                }
                s.quit(Quit::Signal(libc::SIGTERM));
                let r = s.reap()?;
                peak.rss = peak.rss.max(r.peak_rss);
            }
        }
        systems.push(("after exit".into(), sys()?));
    }

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
    text.push_str(&table(
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
    text.push_str(&table(
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
