//! `tunelab diagnose`: why is it slow? One interval (a duration, a running
//! process, or a command from exec to exit) observed by several sections at
//! once — USE table, CPU profile and counters (`profile`), lock contention,
//! blocking causes, slab churn, wake-ups — plus the start-up anatomy of a
//! short command. Each section is present with its measured overhead, or
//! skipped with the reason (kernel option missing, no privileges, …).
//!
//! Kernel files are read below a root ("/" normally; a fixture tree in
//! tests, or `TUNELAB_DIAGNOSE_ROOT` for the integration tests of the
//! journalled knobs), as `system::board` does.

pub(crate) mod blocking;
pub(crate) mod budget;
mod child;
pub(crate) mod knob;
pub(crate) mod locks;
pub(crate) mod offcpu;
pub(crate) mod procs;
pub mod profile;
pub(crate) mod selfcost;
pub(crate) mod slab;
pub(crate) mod startup;
#[cfg(test)]
mod test_support;
mod ticker;
pub(crate) mod usetable;
pub(crate) mod wakeups;
pub(crate) mod workload;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) use ticker::{every, Sampled, Ticker};

use crate::model::diagnosis::{Diagnosis, Overhead, Section, Target};
use crate::safety::signals;
use crate::units::{seconds, sig};
use crate::{Error, Result};

/// What to diagnose.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum What {
    /// The whole machine for this long.
    System(Duration),
    /// One running process (all its threads and descendants) for this long,
    /// or until it exits.
    Pid(i32, Duration),
    /// Run this command and diagnose it from exec to exit.
    Command(Vec<String>),
}

#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) what: What,
    /// Sampling rate of the blocking section (wchan/stack), Hz.
    pub(crate) hz: u32,
    /// Profiler sampling frequency, Hz.
    pub(crate) profile_hz: u64,
    /// Runs per mode for the start-up anatomy of a command (0: skip it).
    pub(crate) startup_runs: u32,
    /// Where kernel files are read ("/" normally).
    pub(crate) root: PathBuf,
}

impl Options {
    pub(crate) fn new(what: What) -> Options {
        Options {
            what,
            hz: 100,
            profile_hz: 999,
            startup_runs: 5,
            root: default_root(),
        }
    }
}

/// "/" unless TUNELAB_DIAGNOSE_ROOT names a fixture tree (tests).
pub(crate) fn default_root() -> PathBuf {
    std::env::var_os("TUNELAB_DIAGNOSE_ROOT")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// Progress messages for the user (stderr), passed down by the CLI.
pub(crate) type Say<'a> = &'a dyn Fn(&str);

/// CPU time (user + system) of the calling thread, s.
pub(crate) fn thread_cpu_s() -> f64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The overhead of a section in numbers and words.
pub(crate) fn overhead(cpu_s: f64, interval_s: f64, readings: u64, what: &str) -> Overhead {
    let mut o = Overhead {
        cpu_s,
        interval_s,
        readings,
        words: String::new(),
    };
    o.words = format!(
        "{} of tunelab CPU over {}: {}% of one CPU{}{}",
        seconds(cpu_s),
        seconds(interval_s),
        sig(o.percent_of_cpu()),
        if readings > 0 {
            format!(", {readings} readings")
        } else {
            String::new()
        },
        if what.is_empty() {
            String::new()
        } else {
            format!(" ({what})")
        }
    );
    o
}

/// Number of CPUs online.
pub(crate) fn cpus() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

/// The process name of `pid` (from /proc/PID/comm).
pub(crate) fn comm(root: &Path, pid: i32) -> Option<String> {
    crate::system::proc::Root::under(root)
        .read_pid(pid, "comm")
        .ok()
        .map(|s| s.trim().to_string())
}

/// Whether `pid` is a kernel thread (PF_KTHREAD in /proc/PID/stat's flags,
/// the ninth field): it has no user memory and no user stack.
pub(crate) fn kernel_thread(root: &Path, pid: i32) -> bool {
    crate::system::proc::Root::under(root)
        .read_pid(pid, "stat")
        .ok()
        .and_then(|s| crate::system::proc::Stat::parse(&s)?.flags())
        .is_some_and(|flags| flags & 0x0020_0000 != 0)
}

/// The refusal for a kernel thread's pid, naming it.
pub(crate) fn kernel_thread_refusal(pid: i32, name: &str, what: &str) -> Error {
    Error::usage(format!(
        "pid {pid} ({name}) is a kernel thread: it has no user memory and no user stack, \
         so there is no {what} of it; give the pid of a user process, or diagnose the \
         whole system (kernel time shows there)"
    ))
}

/// Run the diagnosis. `say` gets progress lines for the user.
pub(crate) fn diagnose(opts: &Options, say: Say) -> Result<Diagnosis> {
    let root = opts.root.as_path();
    let mut target = Target::default();
    let scope_pid = match &opts.what {
        What::System(_) => {
            target.kind = "system".into();
            None
        }
        What::Pid(pid, _) => {
            let name = comm(root, *pid).ok_or_else(|| {
                Error::usage(format!(
                    "no process with pid {pid} (nothing in /proc/{pid}); give the pid of a running process"
                ))
            })?;
            if kernel_thread(root, *pid) {
                return Err(kernel_thread_refusal(*pid, &name, "diagnosis"));
            }
            target.kind = "pid".into();
            target.pid = Some(*pid);
            target.name = name;
            Some(*pid)
        }
        What::Command(argv) => {
            if argv.is_empty() {
                return Err(Error::usage(
                    "no command after --: say what to run (tunelab diagnose -- CMD ARGS…)",
                ));
            }
            target.kind = "command".into();
            target.command = argv.clone();
            None
        }
    };

    // The command is forked now, stopped before exec, so the samplers and
    // the profiler can follow it from its first instruction.
    let mut pending = match &opts.what {
        What::Command(argv) => Some(child::Stopped::spawn(argv)?),
        _ => None,
    };
    let pid = pending.as_ref().map(|c| c.pid()).or(scope_pid);
    if let Some(p) = pid {
        target.pid = Some(p);
    }
    let scope = match pid {
        Some(p) => procs::Scope::Tree(p),
        None => procs::Scope::System,
    };
    let pscope = || match pid {
        Some(p) => profile::Scope::Process { pid: p },
        None => profile::Scope::System,
    };

    // The readers' CPU over the interval, held to the budget as a whole.
    let pace = Arc::new(budget::Pace::default());
    // Kernel facilities switched on through the journal for the interval.
    let lock_session = locks::Session::begin(root);
    let latency_session = blocking::LatencySession::begin(root, &scope, Some(pace.clone()));

    let cpu0 = thread_cpu_s();
    // The rate starts lower on one CPU (the reader shares it with the
    // workload) and each reader then fits its share of the budget.
    let profile_hz = budget::initial_rate(opts.profile_hz, cpus(), budget::read_cost_s());
    let command = matches!(opts.what, What::Command(_));
    let prof = profile::start_paced(
        &profile::Request {
            scope: pscope(),
            event: profile::Event::Auto,
            frequency_hz: profile_hz,
            call_graph: true,
            budget_share: budget::PROFILE_SHARE,
            own_until_exec: command,
        },
        &pace,
    );
    // Where cache misses come from needs fewer samples than where time
    // goes: a quarter of the rate halves what the two samplers cost a
    // busy workload (each sample is a call chain the reader walks).
    let cache = profile::start_paced(
        &profile::Request {
            scope: pscope(),
            event: profile::Event::CacheMisses,
            frequency_hz: (profile_hz / 4).max(budget::MIN_PROFILE_HZ),
            call_graph: true,
            budget_share: budget::CACHE_SHARE,
            own_until_exec: command,
        },
        &pace,
    );
    let counters = profile::start_counters(&pscope());
    // Off-CPU time by call chain: scheduler switch events of the tree.
    let off = profile::start_paced(
        &profile::Request {
            scope: pscope(),
            event: profile::Event::OffCpu,
            frequency_hz: 0,
            call_graph: true,
            budget_share: 0.0,
            own_until_exec: command,
        },
        &pace,
    );
    let profile_start_cpu = thread_cpu_s() - cpu0;
    // Set once a command exec'd: samplers leave out tunelab's pre-exec
    // handshake (the fork blocked reading its release pipe).
    let exec_done = Arc::new(AtomicBool::new(!matches!(opts.what, What::Command(_))));

    let hz = if pid.is_some() {
        // With switch events traced the sampled /proc stacks are only a
        // cross-check: a tenth of the reads (each reads every thread's
        // stack and wchan, the cost that disturbs a slow board).
        if off.is_ok() {
            opts.hz.clamp(1, 10)
        } else {
            opts.hz.max(1)
        }
    } else {
        // Every task of the machine is read per sample: a lower rate keeps
        // the overhead small on a busy system.
        opts.hz.clamp(1, 20)
    };
    let use_t = usetable::Collector::start(root, Some(pace.clone()));
    let block_t = latency_session
        .is_err()
        .then(|| blocking::Sampler::new(root, scope.clone(), hz).gated(exec_done.clone()))
        .map(|s| {
            let base = Duration::from_secs_f64(1.0 / hz as f64);
            Ticker::adaptive(
                "blocking",
                s,
                base,
                // A cross-check of the switch events: up to 5 s apart.
                Duration::from_secs(5),
                budget::READER_SHARE,
                Some(pace.clone()),
            )
        });
    let slab_t = slab::Collector::start(root, Some(pace.clone()));
    let wake_t = wakeups::Collector::start(root, scope.clone(), Some(pace.clone()));
    let work_t = pid.map(|_| {
        workload::Collector::start(
            root,
            scope.clone(),
            Some(exec_done.clone()),
            Some(pace.clone()),
        )
    });
    let mut usage = None;

    // Every reader has made its first reading: tunelab's own CPU from here
    // on is what competed with the workload.
    // Said before the interval: a line on a board's serial console costs
    // milliseconds of CPU.
    say(&match &opts.what {
        What::System(d) => format!(
            "diagnosing the whole machine for {}…",
            seconds(d.as_secs_f64())
        ),
        What::Pid(p, d) => format!(
            "diagnosing pid {p} ({}) for {} or until it exits…",
            target.name,
            seconds(d.as_secs_f64())
        ),
        What::Command(_) => format!(
            "diagnosing `{}` from exec to exit…",
            target.command.join(" ")
        ),
    });
    // Its threads' clocks are read first: reading them (two /proc files a
    // thread, milliseconds on an emulated board) is not in the interval.
    let threads_start = selfcost::snapshot();
    let own_start = workload::own_cpu_s();
    let setup_main = thread_cpu_s() - cpu0;
    let t0 = Instant::now();
    pace.begin();
    let mut outcome: Result<()> = Ok(());
    match &opts.what {
        What::System(d) => {
            outcome = wait_for(*d, None);
        }
        What::Pid(p, d) => {
            outcome = wait_for(*d, Some((root, *p)));
        }
        What::Command(_) => {
            let c = pending.take().expect("the command was forked");
            match c.release_and_wait(&exec_done) {
                Ok(st) => {
                    target.exit = Some(st.words());
                    target.exit_code = st.code;
                    usage = st.usage;
                }
                Err(e) => outcome = Err(e),
            }
        }
    }
    let interval = t0.elapsed().as_secs_f64();
    let own_end = workload::own_cpu_s();
    let threads_end = selfcost::snapshot();
    // The samplers stop first (nothing more to sample); their kernel
    // addresses are named from one read of /proc/kallsyms, after the
    // interval, for all three.
    let cpu_stop = thread_cpu_s();
    let (mut prof, mut cache, mut off) = (prof, cache, off);
    for r in [&mut prof, &mut cache, &mut off].into_iter().flatten() {
        let _ = r.stop();
    }
    let stop_cpu = thread_cpu_s() - cpu_stop;

    // Stop everything before any error is returned: knobs restored first.
    let locks = match lock_session {
        Ok(s) => s.finish(interval),
        Err(why) => Section::skipped(why),
    };
    let blocking = match (latency_session, block_t) {
        (Ok(l), _) => l.finish(interval),
        (Err(why), Some(t)) => {
            let (s, cpu, n) = t.stop();
            let mut b = s.finish(interval, cpu, n);
            if let Section::Present { data, .. } = &mut b {
                data.method = format!("LatencyTOP unavailable ({why}); {}", data.method);
            }
            b
        }
        (Err(why), None) => Section::skipped(why),
    };
    let resources = use_t.finish(interval);
    let slab = slab_t.finish(interval);
    let wakeups = wake_t.finish(interval);
    let workload = match work_t {
        Some(w) => {
            let own = (own_end - own_start).max(0.0);
            let by_thread = selfcost::spent(&threads_start, &threads_end, own);
            w.finish(interval, usage, own, &selfcost::words(&by_thread, 6))
        }
        None => Section::skipped(
            "the whole machine was diagnosed: there is no one workload (give --pid or -- CMD)",
        ),
    };
    let cpu1 = thread_cpu_s();
    let names = profile::kernel_names([&prof, &cache, &off].into_iter().flatten());
    let names_cpu = thread_cpu_s() - cpu1;
    let profile_section = |r: std::result::Result<profile::Running, String>| match r {
        Ok(run) => match run.finish_named(Some(&names)) {
            Ok(p) => Section::Present {
                data: p,
                overhead: Overhead::default(),
            },
            Err(e) => Section::skipped(e),
        },
        Err(e) => Section::skipped(e),
    };
    let mut profile = profile_section(prof);
    let mut cache_profile = profile_section(cache);
    let program = program_name(&opts.what, &target);
    let offcpu = offcpu::section(off, &names, &blocking, &program, command, interval);
    let mut counters = match counters {
        Ok(c) => Section::Present {
            data: c.finish(),
            overhead: Overhead::default(),
        },
        Err(e) => Section::skipped(e),
    };
    // The profiler's start and finish (reading, symbolising) ran on this
    // thread; shared evenly between the sections it served (the present
    // ones: a skipped cache-miss profile cost nothing to read).
    let prof_cpu = profile_start_cpu + stop_cpu + thread_cpu_s() - cpu1;
    let served: Vec<&mut Overhead> = [
        section_overhead(&mut profile),
        section_overhead(&mut cache_profile),
        section_overhead(&mut counters),
    ]
    .into_iter()
    .flatten()
    .collect();
    if selfcost::debug() {
        eprintln!(
            "tunelab cost: main thread: {:.1} ms before the interval (perf events opened in \
             {:.1} ms, then the readers' first readings), {:.1} ms stopping the samplers, \
             {:.1} ms naming kernel addresses (kallsyms), {:.1} ms symbolising and aggregating; \
             tunelab in all {:.1} ms before the interval, {:.1} ms in it",
            setup_main * 1e3,
            profile_start_cpu * 1e3,
            stop_cpu * 1e3,
            names_cpu * 1e3,
            (thread_cpu_s() - cpu1 - names_cpu) * 1e3,
            own_start * 1e3,
            (own_end - own_start) * 1e3
        );
    }
    let share = prof_cpu / served.len().max(1) as f64;
    for o in served {
        *o = overhead(
            share,
            interval,
            0,
            "starting, reading and symbolising, on tunelab's main thread",
        );
    }
    // Each sampler's reader thread ran while the workload did: its own.
    for p in [&mut profile, &mut cache_profile] {
        if let Section::Present { data, overhead: o } = p {
            let reader_s = data.overhead.reader_cpu_ms * 1e-3;
            *o = self::overhead(
                o.cpu_s + reader_s,
                interval,
                0,
                &format!(
                    "its reader thread {} while sampling (last rate {} Hz), and a share of \
                     starting, reading and symbolising on tunelab's main thread",
                    seconds(reader_s),
                    data.frequency_hz
                ),
            );
        }
    }
    // An interval cut short by a signal (--for, --pid) is still a diagnosis
    // of the time it covered: kept (the caller marks its run interrupted).
    // A command cut short is not: its start-up would be half measured.
    match outcome {
        Err(Error::Interrupted(_)) if !matches!(opts.what, What::Command(_)) => {}
        other => other?,
    }
    if let What::Command(_) = &opts.what {
        // Samples taken between the fork and the exec carry tunelab's name:
        // they are the command's start, under its name.
        rename_root(&mut profile, &own_comm(), &program);
        rename_root(&mut cache_profile, &own_comm(), &program);
    }

    let mut d = Diagnosis {
        target,
        interval_s: interval,
        cpus: cpus(),
        resources,
        profile,
        counters,
        cache_profile,
        locks,
        blocking,
        slab,
        wakeups,
        startup: Section::skipped("start-up anatomy is for `diagnose -- CMD` only"),
        workload,
        offcpu,
    };
    if let What::Command(argv) = &opts.what {
        d.startup = startup::analyse(argv, interval, opts.startup_runs, say);
    }
    Ok(d)
}

/// The process name the diagnosed program runs under.
fn program_name(what: &What, target: &Target) -> String {
    match what {
        What::Command(argv) => {
            let base = argv[0].rsplit('/').next().unwrap_or(&argv[0]);
            // The kernel's comm is at most 15 bytes.
            base.chars().take(15).collect()
        }
        _ => target.name.clone(),
    }
}

fn own_comm() -> String {
    crate::system::proc::read_pid("self", "comm")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Folded stacks rooted at `from` are rooted at `to` instead.
fn rename_root(p: &mut Section<crate::model::profile::Profile>, from: &str, to: &str) {
    let Section::Present { data, .. } = p else {
        return;
    };
    if from.is_empty() || from == to {
        return;
    }
    let prefix = format!("{from};");
    for f in &mut data.folded {
        if let Some(rest) = f.stack.strip_prefix(&prefix) {
            f.stack = format!("{to};{rest}");
        }
    }
}

fn section_overhead<T>(s: &mut Section<T>) -> Option<&mut Overhead> {
    match s {
        Section::Present { overhead, .. } => Some(overhead),
        Section::Skipped { .. } => None,
    }
}

/// Sleep for `d`, ending early when the watched process exits or a signal
/// asks to stop.
fn wait_for(d: Duration, watch: Option<(&Path, i32)>) -> Result<()> {
    let end = Instant::now() + d;
    loop {
        signals::check()?;
        let now = Instant::now();
        if now >= end {
            return Ok(());
        }
        if let Some((root, pid)) = watch {
            if !procs::alive(root, pid) {
                return Ok(());
            }
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
}
