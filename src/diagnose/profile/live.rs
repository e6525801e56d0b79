//! The sampler: one perf_event_open ring buffer per CPU (the kernel refuses
//! to mmap an inherited per-task event opened for all CPUs), a reader thread
//! that drains them and keeps only distinct stacks with counts, and
//! `finish`, which stops, symbolises and aggregates.

use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use perf_event::data::Record as Rec;
use perf_event::events::{Hardware, Software};
use perf_event::{Builder, Counter, SampleFlag, Sampler};

use super::aggregate::{self, Limits};
use super::collected::{Collected, FrameKey};
use super::common::{self, explain};
use super::maps::{self, AddressSpace, Mapping};
use super::symbols;
use super::{Event, Request, Scope};
use crate::model::profile::{Profile, ProfileOverhead};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Cycles,
    CpuClock,
    CacheMisses,
    /// Every switch out of a task (the context-switches software event,
    /// fired at the same point as the sched:sched_switch tracepoint, with
    /// its call chain) plus SWITCH records for the switch back in: weights
    /// are µs blocked, not samples.
    OffCpu,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Cycles => "cycles",
            Kind::CpuClock => "cpu-clock",
            Kind::CacheMisses => "cache-misses",
            Kind::OffCpu => "off-cpu",
        }
    }
}

struct Meta {
    kind: Kind,
    event_reason: String,
    frequency_hz: u64,
    scope_words: String,
    kernel_included: bool,
    call_graph: bool,
    ring_bytes: u64,
}

pub struct Live {
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<Collected>>,
    started: Instant,
    meta: Meta,
}

const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
const PERF_CONTEXT_USER: u64 = -512i64 as u64;
const MISC_CPUMODE_MASK: u16 = 7;
const MISC_KERNEL: u16 = 1;
const MISC_COMM_EXEC: u16 = 1 << 13;
const MISC_MMAP_DATA: u16 = 1 << 13;
/// User stack bytes copied per switch for the return-address scan.
const STACK_SCAN_BYTES: u32 = 512;
/// Return addresses taken from the scan, at most.
const SCAN_FRAMES: usize = 6;
/// Distinct full stacks kept while sampling (~20 frames × 16 bytes each,
/// a few MiB at most).
const MAX_STACKS: usize = 20_000;
// _IO('$', 5): send this event's records to another event's ring buffer.
const PERF_EVENT_IOC_SET_OUTPUT: libc::c_ulong = 0x2405;

/// Ring buffer data size per CPU: 128 KiB holds >1 s of 1 kHz samples with
/// deep stacks; kept within the 512 KiB the kernel lets an unprivileged
/// user lock (perf_event_mlock_kb) over all CPUs.
fn ring_data_bytes(ncpus: usize) -> usize {
    let budget = 512 * 1024 / ncpus.max(1);
    let mut size = 128 * 1024;
    while size > budget && size > 8 * 1024 {
        size /= 2;
    }
    size
}

fn max_sample_rate() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()?
        .trim()
        .parse()
        .ok()
}

struct Opened {
    samplers: Vec<Sampler>,
    /// Events of further threads whose records go to a sampler's buffer.
    redirected: Vec<Counter>,
}

fn builder(
    kind: Kind,
    req: &Request,
    freq: u64,
    include_kernel: bool,
    wake: usize,
) -> Builder<'static> {
    let mut b = match kind {
        Kind::Cycles => Builder::new(Hardware::CPU_CYCLES),
        Kind::CpuClock => Builder::new(Software::CPU_CLOCK),
        Kind::CacheMisses => Builder::new(Hardware::CACHE_MISSES),
        Kind::OffCpu => Builder::new(Software::CONTEXT_SWITCHES),
    };
    let mut flags = SampleFlag::IP | SampleFlag::TID | SampleFlag::TIME | SampleFlag::CPU;
    if req.call_graph {
        flags |= SampleFlag::CALLCHAIN;
    }
    b.sample(flags);
    if kind == Kind::OffCpu {
        // Every switch, and the switch back in (SWITCH records), on the
        // monotonic clock so a wait still open at the end is closed at
        // "now". The top of the user stack is copied too: the C library's
        // wait functions keep no frame pointer, so the frame-pointer chain
        // skips their caller (pthread_mutex_lock's caller is the function
        // of interest); its return address is found on the stack.
        b.sample(flags | SampleFlag::STACK_USER)
            .sample_stack_user(STACK_SCAN_BYTES)
            .sample_period(1)
            .context_switch(true)
            .clockid(perf_event::Clock::MONOTONIC);
    } else {
        b.sample_frequency(freq);
    }
    b.exclude_kernel(!include_kernel)
        .exclude_hv(true)
        .mmap(true)
        .mmap2(true)
        .comm(true)
        .comm_exec(true)
        .task(true)
        .sample_id_all(true)
        .inherit(matches!(req.scope, Scope::Process { .. }))
        .wakeup_watermark(wake)
        .enabled(true);
    b
}

fn open_all(kind: Kind, req: &Request, freq: u64, include_kernel: bool) -> io::Result<Opened> {
    let cpus = common::online_cpus();
    let data = ring_data_bytes(cpus.len());
    let mut out = Opened {
        samplers: Vec::new(),
        redirected: Vec::new(),
    };
    let tids = match req.scope {
        Scope::Process { pid } => {
            common::threads_of(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?
        }
        Scope::System => Vec::new(),
    };
    for &cpu in &cpus {
        let mut b = builder(kind, req, freq, include_kernel, data / 4);
        b.one_cpu(cpu);
        match req.scope {
            Scope::System => {
                b.any_pid();
                out.samplers.push(b.build()?.sampled(data)?);
            }
            Scope::Process { pid } => {
                let mut leader: Option<Sampler> = None;
                for &tid in &tids {
                    b.observe_pid(tid);
                    let c = match b.build() {
                        Ok(c) => c,
                        // A thread that exited since it was listed.
                        Err(e) if e.raw_os_error() == Some(libc::ESRCH) && tid != pid => continue,
                        Err(e) => return Err(e),
                    };
                    match &leader {
                        None => leader = Some(c.sampled(data)?),
                        Some(l) => {
                            // SAFETY: both fds are open perf events owned here.
                            let rc = unsafe {
                                libc::ioctl(
                                    c.as_raw_fd(),
                                    PERF_EVENT_IOC_SET_OUTPUT as _,
                                    l.as_raw_fd(),
                                )
                            };
                            if rc != 0 {
                                return Err(io::Error::last_os_error());
                            }
                            out.redirected.push(c);
                        }
                    }
                }
                out.samplers.extend(leader);
            }
        }
    }
    Ok(out)
}

impl Live {
    pub fn start(req: &Request) -> Result<Live, String> {
        let started = Instant::now();
        if let Scope::Process { pid } = req.scope {
            if pid <= 0 {
                return Err(format!("invalid pid {pid}"));
            }
        }
        let mut reasons: Vec<String> = Vec::new();
        let mut freq = req.frequency_hz.max(1);
        if let Some(max) = max_sample_rate() {
            if freq > max {
                reasons.push(format!(
                    "{freq} Hz asked, clamped to kernel.perf_event_max_sample_rate={max}"
                ));
                freq = max;
            }
        }
        let mut kind = match req.event {
            Event::Auto => Kind::Cycles,
            Event::CacheMisses => Kind::CacheMisses,
            Event::OffCpu => Kind::OffCpu,
        };
        if kind == Kind::OffCpu && req.scope == Scope::System {
            return Err(
                "off-CPU tracing follows one process tree (every switch of the whole machine \
                 would cost more than it shows): the sampled wchan table is used"
                    .into(),
            );
        }
        let mut include_kernel = true;
        let opened = loop {
            match open_all(kind, req, freq, include_kernel) {
                Ok(o) => break o,
                Err(e) => {
                    let errno = e.raw_os_error().unwrap_or(0);
                    let unsupported =
                        matches!(errno, libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV);
                    let denied = matches!(errno, libc::EACCES | libc::EPERM);
                    if kind == Kind::Cycles && unsupported {
                        reasons.insert(
                            0,
                            format!(
                                "no hardware cycles event ({e}; {}): sampling the cpu-clock software event",
                                common::pmu_words()
                            ),
                        );
                        kind = Kind::CpuClock;
                    } else if denied && include_kernel && matches!(req.scope, Scope::Process { .. })
                    {
                        // paranoid=2 still allows user-space profiling of
                        // one's own processes: better than nothing.
                        reasons.push(format!(
                            "kernel excluded: {}",
                            explain(&e, "kernel samples", &req.scope)
                        ));
                        include_kernel = false;
                    } else {
                        return Err(explain(&e, kind.name(), &req.scope));
                    }
                }
            }
        };
        if kind == Kind::Cycles {
            reasons.insert(0, format!("hardware cycles ({})", common::pmu_words()));
        }
        let ncpus = common::online_cpus().len();
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let ring_bytes = (opened.samplers.len() * (ring_data_bytes(ncpus) + page)) as u64;
        let meta = Meta {
            kind,
            event_reason: reasons.join("; "),
            frequency_hz: freq,
            scope_words: common::scope_words(&req.scope, ncpus),
            kernel_included: include_kernel,
            call_graph: req.call_graph,
            ring_bytes,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let scope = req.scope;
        let off = kind == Kind::OffCpu;
        let reader = std::thread::Builder::new()
            .name("tunelab-profile".into())
            .spawn(move || read_loop(opened, &stop2, scope, off))
            .map_err(|e| format!("cannot start the profile reader thread: {e}"))?;
        Ok(Live {
            stop,
            reader: Some(reader),
            started,
            meta,
        })
    }

    /// Off-CPU tracing: the µs-weighted profile (for the flame graph and
    /// the blocked-time tables) and every distinct wait stack with its
    /// count and longest wait.
    pub fn finish_offcpu(mut self) -> Result<super::OffCpuTrace, String> {
        self.stop.store(true, Ordering::SeqCst);
        let collected = self
            .reader
            .take()
            .expect("reader joined only here")
            .join()
            .map_err(|_| "the off-CPU reader thread panicked".to_string())?;
        let sampling_ms = self.started.elapsed().as_secs_f64() * 1e3;
        let cpu0 = common::thread_cpu_ns();
        let stacks = symbols::resolve(&collected);
        // resolve keeps the map's iteration order.
        let waits: Vec<super::WaitStack> = collected
            .stacks
            .keys()
            .zip(&stacks)
            .map(|(k, st)| {
                let (count, max_ns) = collected.waits.get(k).copied().unwrap_or((0, 0));
                super::WaitStack {
                    comm: st.comm.clone(),
                    frames: st
                        .frames
                        .iter()
                        .map(|f| (f.image.clone(), f.symbol.clone()))
                        .collect(),
                    total_s: st.samples as f64 * 1e-6,
                    count,
                    max_s: max_ns as f64 * 1e-9,
                    tids: collected.wait_tids.get(k).cloned().unwrap_or_default(),
                    by_pid: collected
                        .wait_pid_ns
                        .get(k)
                        .map(|m| m.iter().map(|(p, ns)| (*p, *ns as f64 * 1e-9)).collect())
                        .unwrap_or_default(),
                }
            })
            .collect();
        let agg = aggregate::aggregate(&stacks, Limits::default());
        let symbolise_cpu_ms = (common::thread_cpu_ns().saturating_sub(cpu0)) as f64 / 1e6;
        let reader_cpu_ms = collected.reader_cpu_ns as f64 / 1e6;
        let pct = if sampling_ms > 0.0 {
            reader_cpu_ms * 100.0 / sampling_ms
        } else {
            0.0
        };
        let switches: u64 = collected.waits.values().map(|w| w.0).sum();
        let m = &self.meta;
        let summary = format!(
            "while tracing {:.0} ms, the reader used {:.1} ms CPU ({pct:.2}% of one CPU) for {} \
             blocking switches; symbolising {} distinct stacks took {:.1} ms CPU; {} KiB ring \
             buffers; {} records lost{}",
            sampling_ms,
            reader_cpu_ms,
            switches,
            collected.stacks.len(),
            symbolise_cpu_ms,
            m.ring_bytes / 1024,
            collected.lost,
            if collected.errors.is_empty() {
                String::new()
            } else {
                format!(", {} unreadable records", collected.errors.len())
            }
        );
        let runqueue = collected
            .runqueue_ns
            .iter()
            .map(|(c, ns)| {
                (
                    collected
                        .comms
                        .get(*c as usize)
                        .cloned()
                        .unwrap_or_default(),
                    *ns as f64 * 1e-9,
                )
            })
            .collect();
        Ok(super::OffCpuTrace {
            profile: Profile {
                event: m.kind.name().to_string(),
                event_reason: m.event_reason.clone(),
                frequency_hz: 0,
                samples: agg.samples,
                user_samples: agg.user_samples,
                kernel_samples: agg.kernel_samples,
                lost: collected.lost,
                symbols: agg.symbols,
                callgraph: agg.callgraph,
                folded: agg.folded,
                scope: m.scope_words.clone(),
                kernel_included: m.kernel_included,
                call_graph: m.call_graph,
                throttled: collected.throttled,
                overhead: ProfileOverhead {
                    summary,
                    interval_ms: sampling_ms,
                    reader_cpu_ms,
                    symbolise_cpu_ms,
                    cpu_percent_of_one_cpu: pct,
                    ring_bytes: m.ring_bytes,
                    distinct_stacks: collected.stacks.len() as u64,
                },
            },
            waits,
            runqueue,
            lifetimes: collected
                .lifetimes_ns
                .iter()
                .map(|(t, ns)| (*t, *ns as f64 * 1e-9))
                .collect(),
            runqueue_by_pid: collected
                .runqueue_pid_ns
                .iter()
                .map(|(p, ns)| (*p, *ns as f64 * 1e-9))
                .collect(),
            tid_pid: collected.tid_pid.clone(),
            pid_comm: collected
                .pid_comm
                .iter()
                .map(|(p, c)| {
                    let name = collected.comms.get(*c as usize).cloned();
                    (*p, name.unwrap_or_default())
                })
                .collect(),
            open_at_end: collected.open_at_end,
            lost: collected.lost,
        })
    }

    pub fn finish(mut self) -> Result<Profile, String> {
        self.stop.store(true, Ordering::SeqCst);
        let collected = self
            .reader
            .take()
            .expect("reader joined only here")
            .join()
            .map_err(|_| "the profile reader thread panicked".to_string())?;
        let sampling_ms = self.started.elapsed().as_secs_f64() * 1e3;
        let cpu0 = common::thread_cpu_ns();
        let distinct = collected.stacks.len() as u64;
        let stacks = symbols::resolve(&collected);
        let agg = aggregate::aggregate(&stacks, Limits::default());
        let symbolise_cpu_ms = (common::thread_cpu_ns().saturating_sub(cpu0)) as f64 / 1e6;
        let reader_cpu_ms = collected.reader_cpu_ns as f64 / 1e6;
        // What competes with the workload is the reader while sampling;
        // symbolising runs after the workload's interval.
        let pct = if sampling_ms > 0.0 {
            reader_cpu_ms * 100.0 / sampling_ms
        } else {
            0.0
        };
        let m = &self.meta;
        let mut summary = format!(
            "while sampling {:.0} ms, the reader used {:.1} ms CPU ({pct:.2}% of one CPU) for {} samples; \
             afterwards symbolising {} distinct stacks took {:.1} ms CPU; {} KiB ring buffers; \
             {} samples lost, {} throttled (kernel-side sampling cost is not included: \
             see bench/profile_vs_perf.sh)",
            sampling_ms,
            reader_cpu_ms,
            agg.samples,
            distinct,
            symbolise_cpu_ms,
            m.ring_bytes / 1024,
            collected.lost,
            collected.throttled
        );
        if collected.truncated > 0 {
            summary.push_str(&format!(
                "; {} samples kept only their leaf frame (over {MAX_STACKS} distinct stacks)",
                collected.truncated
            ));
        }
        if !collected.errors.is_empty() {
            summary.push_str(&format!("; {} unreadable records", collected.errors.len()));
        }
        Ok(Profile {
            event: m.kind.name().to_string(),
            event_reason: m.event_reason.clone(),
            frequency_hz: m.frequency_hz,
            samples: agg.samples,
            user_samples: agg.user_samples,
            kernel_samples: agg.kernel_samples,
            lost: collected.lost,
            symbols: agg.symbols,
            callgraph: agg.callgraph,
            folded: agg.folded,
            scope: m.scope_words.clone(),
            kernel_included: m.kernel_included,
            call_graph: m.call_graph,
            throttled: collected.throttled,
            overhead: ProfileOverhead {
                summary,
                interval_ms: sampling_ms,
                reader_cpu_ms,
                symbolise_cpu_ms,
                cpu_percent_of_one_cpu: pct,
                ring_bytes: m.ring_bytes,
                distinct_stacks: distinct,
            },
        })
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        // Dropped without finish (an error path): stop the reader.
        self.stop.store(true, Ordering::SeqCst);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// Per-process state the reader keeps while sampling.
struct Reader {
    out: Collected,
    spaces: HashMap<u32, AddressSpace>,
    comm_of_pid: HashMap<u32, u32>,
    comm_index: HashMap<String, u32>,
    /// Off-CPU tracing: switch events waiting to be paired.
    off: Option<OffState>,
}

const PERF_RECORD_SWITCH: u32 = 14;
const MISC_SWITCH_OUT: u16 = 1 << 13;
const MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;
/// Events are paired in time order; the ring buffers of different CPUs are
/// drained one after the other, so events younger than this stay queued
/// until the next pass.
const HOLD_BACK_NS: u64 = 300_000_000;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum OffKind {
    /// The call chain at a switch out (the context-switches sample).
    Stack(u32, Vec<FrameKey>),
    /// The switch out: preempted (still runnable) or blocked.
    Out {
        preempt: bool,
    },
    /// Back on a CPU.
    In,
    Exit,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct OffEvent {
    pub time: u64,
    pub pid: u32,
    pub tid: u32,
    pub kind: OffKind,
}

#[derive(Default)]
struct TidState {
    pid: u32,
    /// First and last event seen: the thread's traced lifetime.
    first: u64,
    last: u64,
    stack: Vec<FrameKey>,
    /// Switched out at, and whether preempted.
    out: Option<(u64, bool)>,
}

#[derive(Default)]
pub(super) struct OffState {
    queue: Vec<OffEvent>,
    newest: u64,
    tids: HashMap<u32, TidState>,
}

impl OffState {
    pub(super) fn push(&mut self, e: OffEvent) {
        self.newest = self.newest.max(e.time);
        self.queue.push(e);
    }

    /// Pair the queued events older than `upto` (all with u64::MAX), in
    /// time order: a switch in closes the task's open switch out, its
    /// length is one wait charged to the stack of that switch out (or to
    /// the run queue when it was a preemption).
    pub(super) fn pair(
        &mut self,
        upto: u64,
        out: &mut Collected,
        comm: &mut dyn FnMut(u32) -> u32,
    ) {
        self.queue.sort_by_key(|e| e.time);
        let n = self.queue.partition_point(|e| e.time < upto);
        let ready: Vec<OffEvent> = self.queue.drain(..n).collect();
        for e in ready {
            let t = self.tids.entry(e.tid).or_default();
            t.pid = e.pid;
            out.tid_pid.insert(e.tid, e.pid);
            out.pid_comm.entry(e.pid).or_insert_with(|| comm(e.pid));
            if t.first == 0 {
                t.first = e.time;
            }
            t.last = t.last.max(e.time);
            match e.kind {
                OffKind::Stack(_, frames) => t.stack = frames,
                OffKind::Out { preempt } => t.out = Some((e.time, preempt)),
                OffKind::Exit => {
                    if let Some(t) = self.tids.remove(&e.tid) {
                        *out.lifetimes_ns.entry(e.tid).or_default() += t.last - t.first;
                    }
                }
                OffKind::In => {
                    let Some((t0, preempt)) = t.out.take() else {
                        // Blocked since before tracing began (the command's
                        // pre-exec handshake): no known start, not charged.
                        continue;
                    };
                    let ns = e.time.saturating_sub(t0);
                    let c = comm(e.pid);
                    if preempt {
                        *out.runqueue_ns.entry(c).or_default() += ns;
                        *out.runqueue_pid_ns.entry(e.pid).or_default() += ns;
                        continue;
                    }
                    charge(out, c, (e.pid, e.tid), std::mem::take(&mut t.stack), ns);
                }
            }
        }
    }

    /// Waits still open at `now` (monotonic ns) are charged up to it.
    pub(super) fn close_open(
        &mut self,
        now: u64,
        out: &mut Collected,
        comm: &mut dyn FnMut(u32) -> u32,
    ) {
        for (tid, t) in self.tids.iter_mut() {
            let mut end = t.last;
            if let Some((t0, preempt)) = t.out.take() {
                let ns = now.saturating_sub(t0);
                end = now.max(t0);
                let c = comm(t.pid);
                if preempt {
                    *out.runqueue_ns.entry(c).or_default() += ns;
                    *out.runqueue_pid_ns.entry(t.pid).or_default() += ns;
                } else {
                    charge(out, c, (t.pid, *tid), std::mem::take(&mut t.stack), ns);
                    out.open_at_end += 1;
                }
            }
            *out.lifetimes_ns.entry(*tid).or_default() += end.saturating_sub(t.first);
        }
    }
}

/// One wait of `ns` on a stack: µs as the stack's weight, plus its count
/// and longest single wait.
fn charge(out: &mut Collected, comm: u32, (pid, tid): (u32, u32), frames: Vec<FrameKey>, ns: u64) {
    let us = ns / 1000;
    let key = (comm, frames);
    *out.wait_pid_ns
        .entry(key.clone())
        .or_default()
        .entry(pid)
        .or_default() += ns;
    let tids = out.wait_tids.entry(key.clone()).or_default();
    if !tids.contains(&tid) {
        tids.push(tid);
    }
    let w = out.waits.entry(key.clone()).or_default();
    w.0 += 1;
    w.1 = w.1.max(ns);
    let e = out.stacks.entry(key).or_default();
    e.0 += us;
    e.1 += us;
}

/// The sample_id trailer of a SWITCH record (TID, TIME, CPU asked):
/// pid, tid, time.
fn switch_ids(body: &[u8]) -> Option<(u32, u32, u64)> {
    let u32_at = |i: usize| Some(u32::from_ne_bytes(body.get(i..i + 4)?.try_into().ok()?));
    let time = u64::from_ne_bytes(body.get(8..16)?.try_into().ok()?);
    Some((u32_at(0)?, u32_at(4)?, time))
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Reader {
    fn comm_id(&mut self, name: &str) -> u32 {
        if let Some(i) = self.comm_index.get(name) {
            return *i;
        }
        let i = self.out.comms.len() as u32;
        self.out.comms.push(name.to_string());
        self.comm_index.insert(name.to_string(), i);
        i
    }

    fn pid_comm(&mut self, pid: u32) -> u32 {
        if let Some(c) = self.comm_of_pid.get(&pid) {
            return *c;
        }
        let name = if pid == 0 {
            // The idle task of each CPU, named as perf names it.
            "swapper".to_string()
        } else {
            common::comm_of(pid as i32).unwrap_or_else(|| format!("[pid {pid}]"))
        };
        let c = self.comm_id(&name);
        self.comm_of_pid.insert(pid, c);
        c
    }

    /// The address space of pid, reading /proc/PID/maps the first time a
    /// sample needs it (MMAP2 records only cover mappings made after start).
    fn space(&mut self, pid: u32) -> &mut AddressSpace {
        let files = &mut self.out.files;
        let sp = self.spaces.entry(pid).or_default();
        if !sp.proc_read {
            sp.proc_read = true;
            if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) {
                sp.add_older(maps::parse_proc_maps(&text, files));
            }
        }
        sp
    }

    fn record(&mut self, rec: &perf_event::Record) {
        let misc = rec.misc();
        if rec.ty() == PERF_RECORD_SWITCH {
            if let (Some(off), Some((pid, tid, time))) =
                (self.off.as_mut(), switch_ids(&rec.to_contiguous()))
            {
                let kind = if misc & MISC_SWITCH_OUT != 0 {
                    OffKind::Out {
                        preempt: misc & MISC_SWITCH_OUT_PREEMPT != 0,
                    }
                } else {
                    OffKind::In
                };
                off.push(OffEvent {
                    time,
                    pid,
                    tid,
                    kind,
                });
            }
            return;
        }
        let parsed = match rec.parse_record() {
            Ok(r) => r,
            Err(e) => {
                if self.out.errors.len() < 10 {
                    self.out.errors.push(e.to_string());
                }
                return;
            }
        };
        match parsed {
            Rec::Sample(s) => self.sample(&s, misc),
            Rec::Mmap2(m) if m.prot & libc::PROT_EXEC as u32 != 0 => {
                self.mapping(m.pid, m.addr, m.len, m.pgoff, &m.filename);
            }
            Rec::Mmap(m) if misc & MISC_MMAP_DATA == 0 => {
                self.mapping(m.pid, m.addr, m.len, m.pgoff, &m.filename);
            }
            Rec::Comm(c) => {
                let name = String::from_utf8_lossy(&c.comm).into_owned();
                let id = self.comm_id(&name);
                // Only the process's main thread names the process.
                if c.pid == c.tid {
                    self.comm_of_pid.insert(c.pid, id);
                }
                if misc & MISC_COMM_EXEC != 0 {
                    let sp = self.spaces.entry(c.pid).or_default();
                    sp.clear();
                    sp.proc_read = true;
                }
            }
            // A new process (not a thread): it starts with its parent's
            // mappings and name.
            Rec::Fork(f) if f.pid != f.ppid => {
                if let Some(parent) = self.spaces.get(&f.ppid).cloned() {
                    self.spaces.insert(f.pid, parent);
                }
                if let Some(c) = self.comm_of_pid.get(&f.ppid).copied() {
                    self.comm_of_pid.insert(f.pid, c);
                }
            }
            Rec::Exit(x) => {
                if let Some(off) = self.off.as_mut() {
                    off.push(OffEvent {
                        time: x.time,
                        pid: x.pid,
                        tid: x.tid,
                        kind: OffKind::Exit,
                    });
                }
            }
            Rec::Lost(l) => self.out.lost += l.lost,
            Rec::LostSamples(l) => self.out.lost += l.lost,
            Rec::Throttle(_) => self.out.throttled += 1,
            _ => {}
        }
    }

    fn mapping(&mut self, pid: u32, addr: u64, len: u64, pgoff: u64, name: &[u8]) {
        let name = String::from_utf8_lossy(name);
        if name.is_empty() || name.starts_with("//anon") {
            return;
        }
        let file = self.out.files.intern(&name);
        self.spaces.entry(pid).or_default().add(Mapping {
            start: addr,
            end: addr.saturating_add(len),
            pgoff,
            file,
        });
    }

    fn sample(&mut self, s: &perf_event::data::Sample, misc: u16) {
        let pid = s.pid().unwrap_or(0);
        let leaf_kernel = misc & MISC_CPUMODE_MASK == MISC_KERNEL;
        let mut frames: Vec<FrameKey> = Vec::new();
        let mut raw: Vec<(u64, bool)> = Vec::new();
        match s.callchain() {
            Some(chain) if !chain.is_empty() => {
                let mut kernel = leaf_kernel;
                for &ip in chain {
                    if ip >= PERF_CONTEXT_MAX {
                        kernel = match ip {
                            PERF_CONTEXT_KERNEL => true,
                            PERF_CONTEXT_USER => false,
                            // hypervisor/guest contexts: not ours to resolve
                            _ => kernel,
                        };
                        continue;
                    }
                    raw.push((ip, kernel));
                }
            }
            _ => {
                if let Some(ip) = s.ip() {
                    raw.push((ip, leaf_kernel));
                }
            }
        }
        for (i, (ip, kernel)) in raw.into_iter().enumerate() {
            // Callers' entries are return addresses: step back into the
            // call instruction so a call at a function's very end resolves.
            let addr = if i > 0 { ip.saturating_sub(1) } else { ip };
            if kernel {
                frames.push(FrameKey::Kernel(addr));
            } else {
                let key = match self.space(pid).lookup(addr) {
                    Some((file, off)) => FrameKey::User(file, off),
                    None => FrameKey::Unmapped(pid, addr),
                };
                frames.push(key);
            }
        }
        if self.off.is_some() {
            if let Some(stack) = s.stack_user() {
                let found = self.scan_stack(pid, stack, &frames);
                splice_scanned(&mut frames, found);
            }
        }
        if let Some(off) = self.off.as_mut() {
            off.push(OffEvent {
                time: s.time().unwrap_or(0),
                pid,
                tid: s.tid().unwrap_or(pid),
                kind: OffKind::Stack(pid, frames),
            });
            return;
        }
        let comm = self.pid_comm(pid);
        add_stack(&mut self.out, comm, frames, leaf_kernel, MAX_STACKS);
    }

    /// Words of the copied user stack that point into executable code of
    /// the process: return addresses of the callers the frame-pointer
    /// chain missed, nearest first (at most SCAN_FRAMES, stopping at the
    /// chain's own next frame).
    fn scan_stack(&mut self, pid: u32, stack: &[u8], frames: &[FrameKey]) -> Vec<FrameKey> {
        let first_user = frames
            .iter()
            .position(|f| !matches!(f, FrameKey::Kernel(_)));
        let next = first_user.and_then(|i| frames.get(i + 1)).copied();
        let leaf = first_user.map(|i| frames[i]);
        let mut out = Vec::new();
        for w in stack.chunks_exact(8) {
            let v = u64::from_ne_bytes(w.try_into().expect("8 bytes"));
            if v < 4096 {
                continue;
            }
            // A return address: look up the call instruction (v - 1).
            let Some((file, off)) = self.space(pid).lookup(v - 1) else {
                continue;
            };
            let key = FrameKey::User(file, off);
            if Some(key) == next {
                break;
            }
            if Some(key) == leaf || out.contains(&key) {
                continue;
            }
            out.push(key);
            if out.len() == SCAN_FRAMES {
                break;
            }
        }
        out
    }

    /// Pair the off-CPU events older than `upto`.
    fn pair(&mut self, upto: u64) {
        let Some(mut off) = self.off.take() else {
            return;
        };
        let mut out = std::mem::take(&mut self.out);
        off.pair(upto, &mut out, &mut |pid| self.pid_comm(pid));
        if upto == u64::MAX {
            off.close_open(monotonic_ns(), &mut out, &mut |pid| self.pid_comm(pid));
        }
        self.out = out;
        self.off = Some(off);
    }
}

/// Put the scanned callers right after the leaf user frame.
fn splice_scanned(frames: &mut Vec<FrameKey>, found: Vec<FrameKey>) {
    if found.is_empty() {
        return;
    }
    let at = frames
        .iter()
        .position(|f| !matches!(f, FrameKey::Kernel(_)))
        .map_or(frames.len(), |i| i + 1);
    frames.splice(at..at, found);
}

/// Count one sample. Memory stays bounded on a long system-wide run: past
/// `cap` distinct stacks, new ones keep only their leaf frame (the flat
/// profile stays exact, the call graph loses those callers).
fn add_stack(out: &mut Collected, comm: u32, mut frames: Vec<FrameKey>, kernel: bool, cap: usize) {
    if out.stacks.len() >= cap
        && frames.len() > 1
        && !out.stacks.contains_key(&(comm, frames.clone()))
    {
        frames.truncate(1);
        out.truncated += 1;
    }
    let e = out.stacks.entry((comm, frames)).or_default();
    e.0 += 1;
    if kernel {
        e.1 += 1;
    }
}

fn drain(sampler: &mut Sampler, reader: &mut Reader) {
    while let Some(rec) = sampler.next_record() {
        reader.record(&rec);
    }
}

fn read_loop(mut opened: Opened, stop: &AtomicBool, scope: Scope, off: bool) -> Collected {
    let mut reader = Reader {
        out: Collected::default(),
        spaces: HashMap::new(),
        comm_of_pid: HashMap::new(),
        comm_index: HashMap::new(),
        off: off.then(OffState::default),
    };
    if let Scope::Process { pid } = scope {
        // The target's current mappings and name, while it surely exists.
        reader.space(pid as u32);
        reader.pid_comm(pid as u32);
    }
    // Fds whose task has gone (POLLHUP) are not polled again: poll would
    // return at once for them forever.
    let mut live: Vec<bool> = vec![true; opened.samplers.len()];
    while !stop.load(Ordering::SeqCst) {
        let idx: Vec<usize> = (0..live.len()).filter(|i| live[*i]).collect();
        if idx.is_empty() {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        let mut fds: Vec<libc::pollfd> = idx
            .iter()
            .map(|&i| libc::pollfd {
                fd: opened.samplers[i].as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: fds is a valid array of fds.len() pollfd structs.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
        if n < 0 {
            continue; // EINTR
        }
        for (k, &i) in idx.iter().enumerate() {
            if fds[k].revents & libc::POLLHUP != 0 {
                live[i] = false;
            }
            drain(&mut opened.samplers[i], &mut reader);
        }
        if let Some(o) = &reader.off {
            let upto = o.newest.saturating_sub(HOLD_BACK_NS);
            reader.pair(upto);
        }
    }
    for s in &mut opened.samplers {
        let _ = s.disable();
    }
    for c in &mut opened.redirected {
        let _ = c.disable();
    }
    for i in 0..opened.samplers.len() {
        drain(&mut opened.samplers[i], &mut reader);
    }
    reader.pair(u64::MAX);
    resolve_late(&mut reader.out, &reader.spaces);
    reader.out.reader_cpu_ns = common::thread_cpu_ns();
    reader.out
}

/// Look unmapped user addresses up again in the final address spaces: a
/// process that moved to another CPU right after an mmap or exec has samples
/// in one ring buffer and the MMAP2 record in another, and the buffers are
/// drained one after the other.
fn resolve_late(out: &mut Collected, spaces: &HashMap<u32, AddressSpace>) {
    let has_unmapped =
        |k: &(u32, Vec<FrameKey>)| k.1.iter().any(|f| matches!(f, FrameKey::Unmapped(..)));
    if !out.stacks.keys().any(has_unmapped) {
        return;
    }
    let remap = |frames: Vec<FrameKey>| -> Vec<FrameKey> {
        frames
            .into_iter()
            .map(|f| match f {
                FrameKey::Unmapped(pid, addr) => spaces
                    .get(&pid)
                    .and_then(|sp| sp.lookup(addr))
                    .map_or(f, |(file, off)| FrameKey::User(file, off)),
                other => other,
            })
            .collect()
    };
    let old = std::mem::take(&mut out.stacks);
    for ((comm, frames), (n, k)) in old {
        let e = out.stacks.entry((comm, remap(frames))).or_default();
        e.0 += n;
        e.1 += k;
    }
    let old = std::mem::take(&mut out.waits);
    for ((comm, frames), (n, max)) in old {
        let e = out.waits.entry((comm, remap(frames))).or_default();
        e.0 += n;
        e.1 = e.1.max(max);
    }
    let old = std::mem::take(&mut out.wait_tids);
    for ((comm, frames), tids) in old {
        let e = out.wait_tids.entry((comm, remap(frames))).or_default();
        for t in tids {
            if !e.contains(&t) {
                e.push(t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_past_the_cap_keep_their_leaf_and_every_sample_counts() {
        let mut out = Collected::default();
        let st = |leaf: u64| vec![FrameKey::Kernel(leaf), FrameKey::User(0, 0x10)];
        add_stack(&mut out, 0, st(1), true, 2);
        add_stack(&mut out, 0, st(2), false, 2);
        // At the cap: a known stack still counts in full…
        add_stack(&mut out, 0, st(1), true, 2);
        // …a new one is cut to its leaf.
        add_stack(&mut out, 0, st(3), false, 2);
        add_stack(&mut out, 0, st(3), false, 2);
        assert_eq!(out.truncated, 2);
        assert_eq!(out.stacks[&(0, st(1))], (2, 2));
        assert_eq!(out.stacks[&(0, vec![FrameKey::Kernel(3)])], (2, 0));
        assert_eq!(out.stacks.values().map(|v| v.0).sum::<u64>(), 5);
    }

    #[test]
    fn addresses_unmapped_when_read_resolve_from_later_mmap_records() {
        let mut out = Collected::default();
        let libc = out.files.intern("/usr/lib/libc.so.6");
        let early = vec![FrameKey::Unmapped(7, 0x7f00_0000_12ad), FrameKey::Kernel(1)];
        let known = vec![FrameKey::User(libc, 0xf82ad), FrameKey::Kernel(1)];
        out.stacks.insert((0, early), (3, 0));
        out.stacks.insert((0, known.clone()), (5, 0));
        out.stacks
            .insert((0, vec![FrameKey::Unmapped(8, 0x1234)]), (1, 0));
        let mut spaces: HashMap<u32, AddressSpace> = HashMap::new();
        spaces.entry(7).or_default().add(Mapping {
            start: 0x7f00_0000_0000,
            end: 0x7f00_0010_0000,
            pgoff: 0xf7000,
            file: libc,
        });
        resolve_late(&mut out, &spaces);
        // Merged with the stack that resolved at once; pid 8 has no mapping.
        assert_eq!(out.stacks[&(0, known)], (8, 0));
        assert_eq!(
            out.stacks[&(0, vec![FrameKey::Unmapped(8, 0x1234)])],
            (1, 0)
        );
        assert_eq!(out.stacks.len(), 2);
    }

    #[test]
    fn ring_size_fits_the_unprivileged_lock_budget() {
        assert_eq!(ring_data_bytes(1), 128 * 1024);
        assert_eq!(ring_data_bytes(4), 128 * 1024);
        assert_eq!(ring_data_bytes(8), 64 * 1024);
        assert_eq!(ring_data_bytes(256), 8 * 1024);
        for n in [1, 2, 3, 8, 64] {
            assert!(ring_data_bytes(n).is_power_of_two());
        }
    }
}
