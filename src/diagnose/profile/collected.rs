//! What the sampler's reader thread collects, before symbolisation: shared
//! by the reader (`live`) and the symboliser (`symbols`).

use std::collections::HashMap;

use super::maps::Files;

/// A frame before symbolisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum FrameKey {
    Kernel(u64),
    /// File index and offset in that file.
    User(u32, u64),
    /// A user address of a process in no mapping known when it was read
    /// (JIT code, or its MMAP2 record sits in another CPU's ring buffer not
    /// drained yet: `resolve_late` retries these at the end).
    Unmapped(u32, u64),
    /// The leaf's caller read from the sampled link register (aarch64) or
    /// the word at the stack pointer (x86-64), as file and offset: the
    /// frame-pointer chain skips it when the leaf sets up no frame
    /// (memcpy). Kept by the symboliser only when it follows a call
    /// instruction and names a function other than its neighbours'.
    Caller(u32, u64),
}

/// Distinct stacks: (comm index, frames leaf first) -> (samples, kernel samples).
pub(super) type StackMap = HashMap<(u32, Vec<FrameKey>), (u64, u64)>;

pub(super) struct Collected {
    pub(crate) stacks: StackMap,
    pub(crate) comms: Vec<String>,
    pub(crate) files: Files,
    pub(crate) lost: u64,
    pub(crate) throttled: u64,
    pub(crate) reader_cpu_ns: u64,
    /// Samples of tunelab itself (its reader and samplers, on a whole
    /// machine): left out of the profile, counted here.
    pub(crate) own_samples: u64,
    pub(crate) errors: Vec<String>,
    /// Samples whose stack was cut to its leaf because MAX_STACKS was hit.
    pub(crate) truncated: u64,
    /// Off-CPU tracing: per stack, its waits' count and extremes; the
    /// stack's weight in `stacks` is µs blocked.
    pub(crate) waits: HashMap<(u32, Vec<FrameKey>), WaitTally>,
    /// Off-CPU tracing: ns preempted (runnable, waiting for a CPU) per comm.
    pub(crate) runqueue_ns: HashMap<u32, u64>,
    /// Waits still open when tracing stopped (charged up to the stop).
    pub(crate) open_at_end: u64,
    /// Off-CPU tracing: the threads that waited in each stack.
    pub(crate) wait_tids: HashMap<(u32, Vec<FrameKey>), Vec<u32>>,
    /// Off-CPU tracing: each thread's traced lifetime, ns.
    pub(crate) lifetimes_ns: HashMap<u32, u64>,
    /// Off-CPU tracing: ns blocked in each stack per process (pid): same-named
    /// processes (a reader and the writer it forked) are judged apart.
    pub(crate) wait_pid_ns: HashMap<(u32, Vec<FrameKey>), HashMap<u32, u64>>,
    /// Off-CPU tracing: ns preempted per process (pid).
    pub(crate) runqueue_pid_ns: HashMap<u32, u64>,
    /// Off-CPU tracing: the process (pid) of each traced thread.
    pub(crate) tid_pid: HashMap<u32, u32>,
    /// Off-CPU tracing: each traced process's comm index.
    pub(crate) pid_comm: HashMap<u32, u32>,
    /// Off-CPU tracing with CPU-wide switch records: ns a process (pid,
    /// first) waited preempted, by the process that ran before it got the
    /// CPU back (pid, second).
    pub(crate) holders_ns: HashMap<(u32, u32), u64>,
    /// Holders' comm indexes (any process, not only traced ones).
    pub(crate) holder_comm: HashMap<u32, u32>,
    /// CPUs with CPU-wide switch records, or why there are none.
    pub(crate) holders_open: Result<usize, String>,
    /// The sampling rates used, in order (the first is the starting rate;
    /// more when the reader fitted its budget), Hz; empty: fixed.
    pub(crate) rates: Vec<u64>,
    /// Off-CPU tracing held to the budget: the time traced and the span of
    /// the interval, ns, and whether it ended early (else traced throughout).
    pub(crate) traced_ns: u64,
    pub(crate) span_ns: u64,
    pub(crate) ended_early: bool,
}

impl Default for Collected {
    fn default() -> Self {
        Collected {
            stacks: StackMap::default(),
            comms: Vec::new(),
            files: Files::default(),
            lost: 0,
            throttled: 0,
            reader_cpu_ns: 0,
            own_samples: 0,
            errors: Vec::new(),
            truncated: 0,
            waits: HashMap::new(),
            runqueue_ns: HashMap::new(),
            open_at_end: 0,
            wait_tids: HashMap::new(),
            lifetimes_ns: HashMap::new(),
            wait_pid_ns: HashMap::new(),
            runqueue_pid_ns: HashMap::new(),
            tid_pid: HashMap::new(),
            pid_comm: HashMap::new(),
            holders_ns: HashMap::new(),
            holder_comm: HashMap::new(),
            holders_open: Err("not traced".into()),
            rates: Vec::new(),
            traced_ns: 0,
            span_ns: 0,
            ended_early: false,
        }
    }
}

/// The waits of one stack: how many, the longest, and the shortest that
/// ended (a wait still open when tracing stopped is cut short, so it does
/// not count as the shortest). The shortest tells a `poll()` that only ever
/// times out (every wait at least the timeout) from one woken by events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct WaitTally {
    pub(crate) count: u64,
    pub(crate) max_ns: u64,
    /// 0 when no wait ended.
    pub(crate) min_ns: u64,
}

impl WaitTally {
    pub(crate) fn add(&mut self, ns: u64, ended: bool) {
        self.count += 1;
        self.max_ns = self.max_ns.max(ns);
        if ended {
            self.min_ns = if self.min_ns == 0 {
                ns
            } else {
                self.min_ns.min(ns)
            };
        }
    }

    pub(crate) fn merge(&mut self, o: WaitTally) {
        self.count += o.count;
        self.max_ns = self.max_ns.max(o.max_ns);
        self.min_ns = match (self.min_ns, o.min_ns) {
            (0, m) | (m, 0) => m,
            (a, b) => a.min(b),
        };
    }
}
