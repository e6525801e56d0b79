//! `diagnose`'s profiler half: a sampled CPU profile with call chains
//! (perf_event_open), symbolised (kernel from /proc/kallsyms, user code from
//! ELF symbols, DWARF with feature `profile-dwarf`), aggregated into the
//! `opreport -l` / `opreport -c` views and folded stacks; `perf stat`-style
//! counters; flame graph SVGs. See docs/diagnose-profile.md.
//!
//! Attaching to a child that `diagnose -- CMD` forked but has not yet let
//! exec: `start(Process { pid })` opens the events enabled at once, with
//! `inherit`, on the child's (single) thread; the child is blocked on its
//! pipe so nothing is sampled until it is released, and everything from the
//! exec on, including its children, is. `enable_on_exec` is not used
//! because the same call must work for `--pid` of a process that never
//! execs again.

pub(crate) mod aggregate;
pub(crate) mod maps;

#[cfg(feature = "profile")]
mod callsite;
#[cfg(feature = "profile")]
mod collected;
#[cfg(feature = "profile")]
mod common;
#[cfg(feature = "profile")]
mod counters;
#[cfg(feature = "flamegraph")]
mod flame;
#[cfg(feature = "profile")]
mod kallsyms;
#[cfg(feature = "profile")]
mod live;
#[cfg(feature = "profile")]
mod symbols;

use crate::model::profile::{Counters, FoldedStack, Profile};

/// What to sample or count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One process: all its threads, and children forked after start
    /// (inherit).
    Process { pid: i32 },
    /// Every CPU, every process.
    System,
}

/// The event that triggers a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Hardware cycles if a PMU exists, else the cpu-clock software event
    /// (the reason is recorded in `Profile::event_reason`).
    Auto,
    /// Last-level cache misses (needs a PMU; otherwise `start` fails with
    /// the reason).
    CacheMisses,
    /// Every switch off a CPU with its call chain, and the switch back:
    /// time blocked per stack (`Running::finish_offcpu`). One process tree
    /// only.
    OffCpu,
}

/// One distinct stack a task blocked in, with what it cost.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WaitStack {
    pub(crate) comm: String,
    /// (image, symbol), leaf first: kernel frames, then user frames.
    pub(crate) frames: Vec<(String, String)>,
    /// Time blocked in this stack, s (all waits, all tasks).
    pub(crate) total_s: f64,
    /// Waits (switch out to switch in).
    pub(crate) count: u64,
    /// Longest single wait, s.
    pub(crate) max_s: f64,
    /// Shortest wait that ended before tracing stopped, s (0: none ended,
    /// or not known).
    pub(crate) min_s: f64,
    /// The threads that waited here.
    pub(crate) tids: Vec<u32>,
    /// Time blocked in this stack per process (pid), s.
    pub(crate) by_pid: Vec<(u32, f64)>,
}

/// What off-CPU tracing collected.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OffCpuTrace {
    /// Weighted in µs blocked (`samples` are µs): the flame graph's input.
    pub(crate) profile: Profile,
    pub(crate) waits: Vec<WaitStack>,
    /// Time preempted (runnable, waiting for a CPU) per process name, s.
    pub(crate) runqueue: Vec<(String, f64)>,
    /// Each traced thread's lifetime in the interval, s.
    pub(crate) lifetimes: std::collections::HashMap<u32, f64>,
    /// Time preempted per process (pid), s.
    pub(crate) runqueue_by_pid: std::collections::HashMap<u32, f64>,
    /// The process (pid) of each traced thread.
    pub(crate) tid_pid: std::collections::HashMap<u32, u32>,
    /// Each traced process's name.
    pub(crate) pid_comm: std::collections::HashMap<u32, String>,
    /// Waits still open when tracing stopped.
    pub(crate) open_at_end: u64,
    pub(crate) lost: u64,
    /// Preempted time by who ran before the switch back in: (waiting
    /// process, holder process, holder's name, s); empty when CPU-wide
    /// switch records could not be opened (`holders_open` says why).
    pub(crate) holders: Vec<(u32, u32, String, f64)>,
    pub(crate) holders_open: Result<usize, String>,
    /// tunelab's own process id (its threads are the observer).
    pub(crate) observer_pid: u32,
    /// Traced time and the span of the interval, s, and whether tracing
    /// ended early to keep to the budget (then the times above, lifetimes
    /// included, are scaled by span / traced).
    pub(crate) traced_s: f64,
    pub(crate) span_s: f64,
    pub(crate) ended_early: bool,
}

impl Default for OffCpuTrace {
    fn default() -> Self {
        OffCpuTrace {
            profile: Profile::default(),
            waits: Vec::new(),
            runqueue: Vec::new(),
            lifetimes: Default::default(),
            runqueue_by_pid: Default::default(),
            tid_pid: Default::default(),
            pid_comm: Default::default(),
            open_at_end: 0,
            lost: 0,
            holders: Vec::new(),
            holders_open: Err("not traced".into()),
            observer_pid: 0,
            traced_s: 0.0,
            span_s: 0.0,
            ended_early: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    pub scope: Scope,
    pub event: Event,
    /// Samples per second per CPU (clamped to the kernel's
    /// perf_event_max_sample_rate, noted in `event_reason`).
    pub frequency_hz: u64,
    /// Sample call chains (frame-pointer based, as `perf record -g`).
    pub call_graph: bool,
    /// Share of one CPU the reader may use (a fraction; 0: the rate stays
    /// as asked): it measures its own CPU time per sample and lowers the
    /// rate until it fits (`diagnose::budget::rate_for`).
    pub budget_share: f64,
    /// The target is a command tunelab forked: until its exec, samples in
    /// tunelab's own executable are tunelab's, not the workload's.
    pub own_until_exec: bool,
}

/// A profile being sampled; `finish` stops it.
pub struct Running {
    #[cfg(feature = "profile")]
    inner: live::Live,
}

/// Kernel names for the addresses of several profiles, from one read of
/// /proc/kallsyms (`kernel_names`).
#[derive(Default)]
pub(crate) struct KernelNames {
    #[cfg(feature = "profile")]
    names: live::Names,
}

/// Read /proc/kallsyms once for the kernel addresses of all these
/// (stopped) profiles.
pub(crate) fn kernel_names<'a>(runs: impl IntoIterator<Item = &'a Running>) -> KernelNames {
    #[cfg(feature = "profile")]
    {
        let mut addrs: Vec<u64> = runs
            .into_iter()
            .flat_map(|r| r.inner.kernel_addrs())
            .collect();
        addrs.sort_unstable();
        addrs.dedup();
        KernelNames {
            names: kallsyms::resolve(&addrs),
        }
    }
    #[cfg(not(feature = "profile"))]
    {
        let _ = runs.into_iter().count();
        KernelNames::default()
    }
}

/// Counters being counted; `finish` stops them.
pub struct RunningCounters {
    #[cfg(feature = "profile")]
    inner: counters::LiveCounters,
}

#[cfg(not(feature = "profile"))]
const NO_FEATURE: &str = "built without the profile feature";

/// Start sampling. `Err` is the reason the profile is skipped, in words
/// (perf_event_paranoid, EACCES, no perf events in the kernel, no PMU for
/// cache misses, no such process…).
pub fn start(req: &Request) -> Result<Running, String> {
    start_inner(req, None)
}

/// `start`, with the reader's CPU charged to diagnose's `pace` (the
/// off-CPU tracer ends early when the readers are over the budget).
pub(crate) fn start_paced(
    req: &Request,
    pace: &std::sync::Arc<crate::diagnose::budget::Pace>,
) -> Result<Running, String> {
    start_inner(req, Some(pace.clone()))
}

fn start_inner(
    req: &Request,
    pace: Option<std::sync::Arc<crate::diagnose::budget::Pace>>,
) -> Result<Running, String> {
    #[cfg(feature = "profile")]
    {
        live::Live::start(req, pace).map(|inner| Running { inner })
    }
    #[cfg(not(feature = "profile"))]
    {
        let _ = (req, pace);
        Err(NO_FEATURE.to_string())
    }
}

impl Running {
    /// Stop sampling: the reader drains its buffers and exits. Naming and
    /// aggregating come after (`finish…`), once for every profile.
    pub(crate) fn stop(&mut self) -> Result<(), String> {
        #[cfg(feature = "profile")]
        {
            self.inner.stop()
        }
        #[cfg(not(feature = "profile"))]
        {
            Err(NO_FEATURE.to_string())
        }
    }

    /// `finish_offcpu` with kernel names read for several profiles.
    pub(crate) fn finish_offcpu_named(
        self,
        names: Option<&KernelNames>,
    ) -> Result<OffCpuTrace, String> {
        #[cfg(feature = "profile")]
        {
            self.inner.finish_offcpu(names.map(|k| &k.names))
        }
        #[cfg(not(feature = "profile"))]
        {
            let _ = names;
            Err(NO_FEATURE.to_string())
        }
    }

    /// Stop sampling, drain the ring buffers, symbolise and aggregate.
    pub fn finish(self) -> Result<Profile, String> {
        self.finish_named(None)
    }

    /// `finish` with kernel names read for several profiles.
    pub(crate) fn finish_named(self, names: Option<&KernelNames>) -> Result<Profile, String> {
        #[cfg(feature = "profile")]
        {
            self.inner.finish(names.map(|k| &k.names))
        }
        #[cfg(not(feature = "profile"))]
        {
            let _ = names;
            Err(NO_FEATURE.to_string())
        }
    }
}

/// Start counting instructions, cycles, cache references/misses, branch
/// misses, task-clock, context switches, CPU migrations and page faults.
/// Each counter that cannot be opened is kept with the reason; `Err` only
/// when none at all can be.
pub fn start_counters(scope: &Scope) -> Result<RunningCounters, String> {
    #[cfg(feature = "profile")]
    {
        counters::LiveCounters::start(scope).map(|inner| RunningCounters { inner })
    }
    #[cfg(not(feature = "profile"))]
    {
        let _ = scope;
        Err(NO_FEATURE.to_string())
    }
}

impl RunningCounters {
    pub fn finish(self) -> Counters {
        #[cfg(feature = "profile")]
        {
            self.inner.finish()
        }
        #[cfg(not(feature = "profile"))]
        {
            Counters::default()
        }
    }
}

/// A flame graph (SVG text) of folded stacks.
/// The static board build leaves the renderer out (it would push the x86_64
/// binary past 6 MiB): the run keeps its folded stacks, and a host that
/// imports it draws the graph.
pub fn flamegraph_svg(folded: &[FoldedStack], title: &str) -> Result<String, String> {
    #[cfg(feature = "flamegraph")]
    {
        flame::svg(folded, title)
    }
    #[cfg(not(feature = "flamegraph"))]
    {
        let _ = (folded, title);
        Err(
            "this tunelab was built without flame graphs (the board build leaves them out): \
             import the run on a host (`tunelab import`) and run `tunelab report` there"
                .to_string(),
        )
    }
}

#[cfg(all(test, not(feature = "profile")))]
mod tests {
    use super::*;

    #[test]
    fn without_the_feature_every_entry_point_says_so() {
        let r = Request {
            scope: Scope::System,
            event: Event::Auto,
            frequency_hz: 99,
            call_graph: true,
            budget_share: 0.0,
            own_until_exec: false,
        };
        assert_eq!(start(&r).err().unwrap(), NO_FEATURE);
        assert_eq!(start_counters(&Scope::System).err().unwrap(), NO_FEATURE);
        assert_eq!(flamegraph_svg(&[], "t").unwrap_err(), NO_FEATURE);
    }
}
