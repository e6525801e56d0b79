//! `tunelab memory`: [`plan`] decides what is measured (a process, or a
//! program resolved with its ready rule) before anything starts;
//! [`Planned::measure`] takes the memory of a process now (and its peak
//! over a while), or of a program from its exec to its exit or its ready
//! line (and after a task), with the system's memory before and after.
//! Nothing is stored; the CLI prints.

use std::time::{Duration, Instant};

use regex::Regex;

use crate::diagnose;
use crate::engine::process::{argv_for, ready_regex, run_shell, start, Quit, ReadyOutcome};
use crate::observe::procmem::{self};
use crate::safety::signals;
use crate::units::human;
use crate::{Error, Result};

// The CLI prints these (plain data, named there).
pub(crate) use crate::observe::procmem::{ProcMem, ProcPeak, SystemMem};

/// What to measure, as the CLI parsed it.
pub(crate) struct Request {
    pub(crate) pid: Option<u32>,
    /// With `pid`: seconds to keep sampling for the peak.
    pub(crate) for_s: Option<f64>,
    pub(crate) interval_s: f64,
    pub(crate) shell: bool,
    /// Sample until a line of the program's output matches this regular expression.
    pub(crate) ready: Option<String>,
    pub(crate) task: Option<String>,
    pub(crate) ready_timeout_s: f64,
    pub(crate) command: Vec<String>,
}

/// What is measured, decided.
enum Subject {
    /// A running process, sampled for `for_s` seconds when given.
    Pid { pid: u32, for_s: Option<f64> },
    /// A program started for the measurement (argv resolved).
    Program {
        argv: Vec<String>,
        ready: Option<Regex>,
        task: Option<String>,
        ready_timeout_s: f64,
    },
}

/// The measurement decided and checked, nothing started.
pub(crate) struct Planned {
    subject: Subject,
    interval_s: f64,
}

/// Decide what `memory` measures: the `--pid`, or the command (through
/// `sh -c` with `--shell`) with its `--ready` rule checked.
pub(crate) fn plan(req: Request) -> Result<Planned> {
    let subject = match req.pid {
        Some(pid) => Subject::Pid {
            pid,
            for_s: req.for_s,
        },
        None => {
            if req.command.is_empty() {
                return Err(Error::usage(
                    "give --pid PID or a command after -- (tunelab memory -- CMD …)",
                ));
            }
            let argv = if req.shell {
                argv_for(&req.command.join(" "), true)?
            } else {
                req.command
            };
            Subject::Program {
                argv,
                ready: ready_regex(req.ready.as_deref())?,
                task: req.task,
                ready_timeout_s: req.ready_timeout_s,
            }
        }
    };
    Ok(Planned {
        subject,
        interval_s: req.interval_s,
    })
}

/// The process's memory at each moment, its peak, the system's memory at
/// each moment, and notes on how it went.
pub(crate) struct Memory {
    pub(crate) procs: Vec<(String, ProcMem)>,
    /// Seconds after the program's exec of each `procs` entry, where known.
    pub(crate) times: Vec<Option<f64>>,
    pub(crate) peak: ProcPeak,
    pub(crate) systems: Vec<(String, SystemMem)>,
    pub(crate) notes: Vec<String>,
}

fn sys() -> Result<SystemMem> {
    procmem::read_system()
        .map_err(|e| Error::environment(format!("cannot read /proc/meminfo: {e}")))
}

impl Planned {
    /// Measure as planned (nothing is stored).
    pub(crate) fn measure(&self) -> Result<Memory> {
        let mut mem = Memory {
            procs: Vec::new(),
            times: Vec::new(),
            peak: ProcPeak::default(),
            systems: vec![("before".into(), sys()?)],
            notes: Vec::new(),
        };
        let interval = Duration::from_secs_f64(self.interval_s);
        match &self.subject {
            Subject::Pid { pid, for_s } => of_pid(&mut mem, *pid, *for_s, interval)?,
            Subject::Program {
                argv,
                ready,
                task,
                ready_timeout_s,
            } => of_program(
                &mut mem,
                argv,
                ready.as_ref(),
                task.as_deref(),
                *ready_timeout_s,
                self.interval_s,
            )?,
        }
        Ok(mem)
    }
}

/// A running process now, and its peak over `for_s` seconds when given.
fn of_pid(mem: &mut Memory, pid: u32, for_s: Option<f64>, interval: Duration) -> Result<()> {
    let root = std::path::Path::new("/");
    let m = procmem::read_proc(pid).map_err(|e| match e.kind() {
        _ if i32::try_from(pid).is_ok_and(|p| diagnose::kernel_thread(root, p)) => {
            let p = pid as i32;
            let name = diagnose::comm(root, p).unwrap_or_default();
            diagnose::kernel_thread_refusal(p, &name, "memory use")
        }
        std::io::ErrorKind::NotFound => Error::usage(format!(
            "no process with pid {pid} (nothing in /proc/{pid}); give the pid of a running process"
        )),
        std::io::ErrorKind::PermissionDenied => {
            Error::privilege(format!("cannot read the memory of pid {pid}: {e}"))
        }
        _ => Error::measurement(format!("pid {pid}: {e}")),
    })?;
    mem.peak.add(&m);
    mem.procs.push(("now".into(), m));
    if let Some(d) = for_s {
        let end = Instant::now() + Duration::from_secs_f64(d);
        let mut last = None;
        while Instant::now() < end && signals::caught().is_none() {
            std::thread::sleep(interval.min(end.saturating_duration_since(Instant::now())));
            match procmem::read_proc(pid) {
                Ok(m) => {
                    mem.peak.add(&m);
                    last = Some(m);
                }
                Err(_) => {
                    mem.notes
                        .push(format!("process {pid} exited while sampling"));
                    break;
                }
            }
        }
        if let Some(m) = last {
            mem.procs.push(("end".into(), m));
        }
        mem.systems.push(("after".into(), sys()?));
    }
    mem.systems[0].0 = "now".into();
    Ok(())
}

/// A program from its exec to its exit, or to its ready line and after
/// the task; the system's memory after its exit.
fn of_program(
    mem: &mut Memory,
    argv: &[String],
    re: Option<&Regex>,
    task: Option<&str>,
    ready_timeout_s: f64,
    interval_s: f64,
) -> Result<()> {
    let interval = Duration::from_secs_f64(interval_s);
    let mut s = start(
        argv,
        re,
        re.map(|_| Quit::Signal(rustix::process::Signal::TERM.as_raw())),
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
                    mem.notes.push(format!(
                        "ready after {} (line: {line})",
                        human(at.duration_since(s.t0).as_secs_f64(), "s")
                    ));
                    break None;
                }
                ReadyOutcome::Closed | ReadyOutcome::Timeout | ReadyOutcome::Interrupted => {}
            }
            if s.t0.elapsed().as_secs_f64() > ready_timeout_s {
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
            mem.peak.add(&m);
            if first {
                let at = s.t0.elapsed().as_secs_f64();
                mem.procs
                    .push((format!("first sample (+{})", human(at, "s")), m.clone()));
                mem.times.push(Some(at));
                first = false;
            }
            last = Some(m);
        }
    };
    match reaped {
        Some(r) => {
            if let Some(m) = last {
                mem.procs.push(("last sample before exit".into(), m));
                mem.times.push(None);
            }
            if first {
                mem.notes.push(format!(
                    "the program exited before the first sample (--interval {}): the peak is \
                     its ru_maxrss only",
                    human(interval_s, "s")
                ));
            }
            mem.notes.push(format!(
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
            mem.peak.rss = mem.peak.rss.max(r.peak_rss);
            if re.is_some() {
                return Err(Error::measurement(
                    "the program exited before printing a line matching --ready",
                ));
            }
        }
        None => {
            let m = procmem::read_proc(s.pid as u32).unwrap_or_default();
            mem.peak.add(&m);
            mem.procs.push(("at ready".into(), m));
            mem.systems.push(("at ready".into(), sys()?));
            if let Some(t) = task {
                run_shell("--task", t)?;
                let m = procmem::read_proc(s.pid as u32).unwrap_or_default();
                mem.peak.add(&m);
                mem.procs.push(("after task".into(), m));
                mem.systems.push(("after task".into(), sys()?));
            }
            s.quit(Quit::Signal(rustix::process::Signal::TERM.as_raw()));
            let r = s.reap()?;
            mem.peak.rss = mem.peak.rss.max(r.peak_rss);
        }
    }
    mem.systems.push(("after exit".into(), sys()?));
    Ok(())
}
