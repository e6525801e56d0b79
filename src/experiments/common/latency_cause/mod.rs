//! What ran in the way of a late wake-up, for `sched.latency`.
//!
//! Methods, best first (the one used is stated with every cause):
//! - `perf-switch`: per measured CPU, a CPU-wide `perf_event_open` dummy
//!   event with `context_switch` records (PERF_RECORD_SWITCH_CPU_WIDE, the
//!   data of the sched_switch tracepoint without tracefs), timestamped on
//!   CLOCK_MONOTONIC like the measuring threads' clock. For a spike (due at
//!   E, measured awake at W) the tasks that held the CPU between E and the
//!   switch to the measuring thread are summed; the one that held it longest
//!   is the culprit. Needs CAP_PERFMON/root or perf_event_paranoid <= 0.
//! - `irq-deltas`: /proc/interrupts and /proc/softirqs of the spike's CPU,
//!   read every poll (~10 ms): the device IRQs and softirqs that fired in the
//!   poll interval around the spike. Also added as context to perf causes
//!   (then read every ~100 ms, or when a spike came in).
//!
//! The kernel's timerlat/osnoise tracers (rtla) are detected and named, but
//! not driven: tunelab does not mount or switch tracefs (see
//! docs/latency.md).
//!
//! The perf event is armed only around late wake-ups (`arm`): a late
//! wake-up enables it for the next 100 ms of wake-ups, then it stays off
//! for nine times as long, so at most one wake-up in ten pays for the
//! kernel's per-switch record, and none while nothing is late. A spike
//! that came while it was disarmed (the one that armed it, those in the
//! cool-down) is reported as not traced, not guessed at.
//!
//! The measuring threads only store (due, woken, traced) in a preallocated
//! [`SpikeBoard`] and arm their CPU's event through a [`Trigger`];
//! everything else here runs in the trial's main thread.
//!
//! Here: the spike board, the causes and the [`Tracer`] that explains a
//! trial's spikes; each method's source is its own file (`perf`,
//! `irq`).

mod arm;
mod irq;
mod perf;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};

pub(crate) use arm::{Trigger, COOL};
use irq::{grown, IrqSnap};
pub(crate) use perf::occupancy;
use perf::{PerfCpu, IOC_DISABLE};

/// Spikes one CPU can hand over per trial; more are counted, not explained.
pub(crate) const SPIKES_PER_TRIAL: usize = 1024;

/// (due, woken, traced) of late wake-ups, written by one measuring thread without
/// allocating, read by the trial's main thread.
pub(crate) struct SpikeBoard {
    due: Vec<AtomicU64>,
    woken: Vec<AtomicU64>,
    /// Whether the switch tracer was armed from before the due time.
    traced: Vec<AtomicBool>,
    count: AtomicUsize,
    /// Spikes past the board's capacity.
    pub(crate) dropped: AtomicU64,
    /// The measuring thread's tid (0 until it runs).
    pub(crate) tid: AtomicI32,
}

impl Default for SpikeBoard {
    fn default() -> Self {
        SpikeBoard {
            due: (0..SPIKES_PER_TRIAL).map(|_| AtomicU64::new(0)).collect(),
            woken: (0..SPIKES_PER_TRIAL).map(|_| AtomicU64::new(0)).collect(),
            traced: (0..SPIKES_PER_TRIAL)
                .map(|_| AtomicBool::new(false))
                .collect(),
            count: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            tid: AtomicI32::new(0),
        }
    }
}

impl SpikeBoard {
    /// Called by the measuring thread: no allocation, no lock.
    #[inline]
    pub(crate) fn push(&self, due_ns: u64, woken_ns: u64, traced: bool) {
        let i = self.count.load(Ordering::Relaxed);
        if i >= SPIKES_PER_TRIAL {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.due[i].store(due_ns, Ordering::Relaxed);
        self.woken[i].store(woken_ns, Ordering::Relaxed);
        self.traced[i].store(traced, Ordering::Relaxed);
        self.count.store(i + 1, Ordering::Release);
    }
    pub(crate) fn len(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }
    pub(crate) fn get(&self, i: usize) -> (u64, u64, bool) {
        (
            self.due[i].load(Ordering::Relaxed),
            self.woken[i].load(Ordering::Relaxed),
            self.traced[i].load(Ordering::Relaxed),
        )
    }
    /// Start a new trial.
    pub(crate) fn reset(&self) {
        self.count.store(0, Ordering::Release);
        self.dropped.store(0, Ordering::Relaxed);
        self.tid.store(0, Ordering::Relaxed);
    }
}

/// Which method explained the spikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    PerfSwitch,
    IrqDeltas,
}

impl Method {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Method::PerfSwitch => "perf-switch",
            Method::IrqDeltas => "irq-deltas",
        }
    }
}

/// What held a CPU in the way of one wake-up.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Culprit {
    /// Another task ran: its name, pid, tid and scheduling ("FIFO 99").
    Thread {
        comm: String,
        pid: u32,
        tid: u32,
        sched: String,
    },
    /// The CPU was idle until the wake-up (C-state exit, or IRQ work on
    /// an idle CPU that the switch records cannot see).
    Idle,
    /// The hypervisor ran something else on the virtual CPU: steal time in
    /// /proc/stat grew by at least half the delay around the spike.
    Steal,
    /// A device IRQ fired on the CPU around the spike (irq number, device).
    Irq { irq: String, device: String },
    /// A softirq ran on the CPU around the spike.
    Softirq { name: String },
    /// Nothing seen ran in the way: the thread was switched in on time and
    /// the delay came after (IRQ/softirq on return, page fault), or the
    /// records were lost.
    Unknown,
    /// The switch tracer was disarmed when the wake-up was due (this late
    /// wake-up armed it, or it was pausing): counted, not attributed.
    Untraced,
}

impl Culprit {
    /// The culprit in words, in the `culprit=` field of a cause note.
    pub(crate) fn describe(&self) -> String {
        match self {
            Culprit::Thread {
                comm,
                pid,
                tid,
                sched,
            } => {
                if pid == tid {
                    format!("thread '{comm}' pid {pid} ({sched})")
                } else {
                    format!("thread '{comm}' pid {pid} tid {tid} ({sched})")
                }
            }
            Culprit::Idle => "idle CPU (C-state exit)".into(),
            Culprit::Steal => "the hypervisor (steal time on this virtual CPU)".into(),
            Culprit::Irq { irq, device } => format!("IRQ {irq} ({device})"),
            Culprit::Softirq { name } => format!("softirq {name}"),
            Culprit::Unknown => "unknown (nothing else ran on the CPU)".into(),
            Culprit::Untraced => "not traced (the switch tracer was disarmed)".into(),
        }
    }

    /// The knob that addresses this culprit.
    pub(crate) fn knob(&self) -> String {
        let text = match self {
            Culprit::Thread { sched, .. }
                if sched.starts_with("FIFO") || sched.starts_with("RR") =>
            {
                "thread priority: give the measured task a higher real-time priority than this \
                 thread, or move the thread off the CPU (taskset/cpusets), or isolate the CPU \
                 (isolcpus=/nohz_full= at boot)"
            }
            Culprit::Thread { .. } => {
                "the thread held the CPU in the kernel (non-preemptible section): boot with \
                 preempt=full (or a PREEMPT_RT kernel), or move the thread off the CPU \
                 (taskset/cpusets, isolcpus=/nohz_full= at boot)"
            }
            Culprit::Idle => {
                "C-state exit latency: hold /dev/cpu_dma_latency at 0 while latency matters \
                 (-p cpu_dma_latency=0), or set the cpufreq governor to performance"
            }
            Culprit::Steal => {
                "the host: give the VM dedicated (pinned) physical CPUs or fewer \
                 neighbours; nothing inside the guest removes steal"
            }
            Culprit::Irq { irq, .. } => {
                return format!(
                    "IRQ affinity: move IRQ {irq} to another CPU (try it: tunelab tune \
                     irq.{irq}.affinity --values A,B -e sched.latency; for good: echo CPUS > \
                     /proc/irq/{irq}/smp_affinity_list) or isolate the measured CPU"
                )
            }
            Culprit::Softirq { .. } => {
                "softirq work on the CPU: steer its source elsewhere (IRQ affinity, RPS) or \
                 isolate the CPU (isolcpus=/nohz_full= at boot)"
            }
            Culprit::Unknown => {
                "no culprit seen: check IRQ affinity and the preemption model (preempt=full)"
            }
            Culprit::Untraced => {
                "a culprit that comes back within 100 ms of a spike that armed the tracer \
                 is named from its next spike on"
            }
        };
        text.to_string()
    }
}

/// One attributed spike.
#[derive(Debug, Clone)]
pub(crate) struct Cause {
    pub(crate) cpu: usize,
    pub(crate) due_ns: u64,
    pub(crate) latency_ns: u64,
    pub(crate) culprit: Culprit,
    /// Share of the delay the culprit held the CPU (perf-switch), 0..1.
    pub(crate) share: f64,
    /// Device IRQs/softirqs seen on the CPU in the poll interval.
    pub(crate) irq_context: String,
}

/// Explains the spikes of one trial; lives for the point.
pub(crate) struct Tracer {
    pub(crate) method: Method,
    perf: Vec<PerfCpu>,
    cpus: Vec<usize>,
    /// Spikes of each CPU already explained this trial.
    seen: Vec<usize>,
    last: IrqSnap,
    prev: IrqSnap,
    names: HashMap<u32, (String, u32, String)>,
    polls: u64,
    pub(crate) causes: Vec<Cause>,
    /// Why the better methods were not used.
    pub(crate) why: Vec<String>,
}

/// Whether tracefs offers rtla's tracers (named in the notes).
pub(crate) fn tracefs_timerlat() -> Option<String> {
    for dir in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if let Ok(t) = std::fs::read_to_string(format!("{dir}/available_tracers")) {
            let has: Vec<&str> = t
                .split_whitespace()
                .filter(|w| *w == "timerlat" || *w == "osnoise")
                .collect();
            return Some(if has.is_empty() {
                format!(
                    "{dir} has no timerlat/osnoise tracer (kernel without CONFIG_TIMERLAT_TRACER)"
                )
            } else {
                format!("{dir} offers {}; not driven by tunelab", has.join(" and "))
            });
        }
    }
    None
}

impl Tracer {
    /// `mode`: "auto" (perf, else irq deltas), "perf" (perf or error),
    /// "irq".
    pub(crate) fn open(cpus: &[usize], mode: &str) -> Result<Tracer, String> {
        let mut why = Vec::new();
        let mut perf = Vec::new();
        if mode != "irq" {
            for &c in cpus {
                match PerfCpu::open(c) {
                    Ok(p) => perf.push(p),
                    Err(e) => {
                        if mode == "perf" {
                            return Err(e);
                        }
                        why.push(e);
                        perf.clear();
                        break;
                    }
                }
            }
        }
        let method = if perf.is_empty() {
            Method::IrqDeltas
        } else {
            Method::PerfSwitch
        };
        let snap = IrqSnap::read();
        Ok(Tracer {
            method,
            perf,
            cpus: cpus.to_vec(),
            seen: vec![0; cpus.len()],
            last: IrqSnap::read(),
            prev: snap,
            names: HashMap::new(),
            polls: 0,
            causes: Vec::new(),
            why,
        })
    }

    /// The arming handle of `cpus[i]`'s event for its measuring thread
    /// (None without perf, or when the descriptor cannot be duplicated:
    /// then that CPU's spikes are not traced).
    pub(crate) fn trigger(&self, i: usize, period_ns: u64) -> Option<Trigger> {
        let fd = self.perf.get(i)?.fd.try_clone().ok()?;
        Some(Trigger::new(fd, period_ns))
    }

    /// A new trial: the events stay disarmed until a late wake-up.
    pub(crate) fn start_trial(&mut self) {
        self.seen.iter_mut().for_each(|s| *s = 0);
        for p in &mut self.perf {
            p.ioctl(IOC_DISABLE);
            p.drain();
            p.history.clear();
        }
        self.prev = IrqSnap::read();
        self.last = IrqSnap::read();
    }

    pub(crate) fn stop_trial(&mut self, boards: &[&SpikeBoard]) {
        self.poll(boards);
        for p in &mut self.perf {
            p.ioctl(IOC_DISABLE);
        }
    }

    /// Records lost by the perf rings (too many switches between polls).
    pub(crate) fn lost(&self) -> u64 {
        self.perf.iter().map(|p| p.lost).sum()
    }

    /// Drain the rings and explain the spikes handed over since the last
    /// poll. `boards[i]` belongs to `cpus[i]`.
    pub(crate) fn poll(&mut self, boards: &[&SpikeBoard]) {
        // Spikes first: their switch records are already in the rings.
        let counts: Vec<usize> = boards.iter().map(|b| b.len()).collect();
        for p in &mut self.perf {
            p.drain();
        }
        // /proc/interrupts is read in the kernel with the CPU held: with
        // switch records it is only context, so read it every 10th poll.
        self.polls += 1;
        if self.method == Method::IrqDeltas
            || self.polls.is_multiple_of(10)
            || counts.iter().zip(&self.seen).any(|(c, s)| c > s)
        {
            self.prev = std::mem::replace(&mut self.last, IrqSnap::read());
        }
        for (i, b) in boards.iter().enumerate() {
            let cpu = self.cpus[i];
            let me = b.tid.load(Ordering::Relaxed).max(0) as u32;
            for k in self.seen[i]..counts[i] {
                let (due, woken, traced) = b.get(k);
                let c = self.explain(i, cpu, me, due, woken, traced);
                self.causes.push(c);
            }
            self.seen[i] = counts[i];
        }
    }

    fn explain(
        &mut self,
        i: usize,
        cpu: usize,
        me: u32,
        due: u64,
        woken: u64,
        traced: bool,
    ) -> Cause {
        let irqs = grown(&self.prev.irqs, &self.last.irqs, cpu);
        let softs = grown(&self.prev.softirqs, &self.last.softirqs, cpu);
        let irq_context = irqs
            .iter()
            .map(|(r, n)| format!("{n}x IRQ {} ({})", r.name, r.device))
            .chain(softs.iter().map(|(r, n)| format!("{n}x {}", r.name)))
            .take(4)
            .collect::<Vec<_>>()
            .join(", ");
        let latency = woken.saturating_sub(due);
        // Switch records that do not cover the due time would name
        // whatever ran at the last armed moment: not used.
        let untraced = self.method == Method::PerfSwitch && !traced;
        let mut culprit = if untraced {
            Culprit::Untraced
        } else {
            Culprit::Unknown
        };
        let mut share = 0.0;
        let top = self.perf.get_mut(i).filter(|_| !untraced).and_then(|p| {
            let hist = p.history.make_contiguous();
            // The switch to the measuring thread ends the delay window.
            let to = hist
                .iter()
                .find(|s| s.t >= due && s.next == me)
                .map_or(woken, |s| s.t.min(woken));
            occupancy(hist, due, to)?.into_iter().find(|o| o.0 != me)
        });
        if let Some((tid, pid, ns)) = top {
            share = ns as f64 / latency.max(1) as f64;
            culprit = if tid == 0 {
                Culprit::Idle
            } else {
                self.thread(pid, tid)
            };
        }
        // A virtual CPU the host did not run: the task "held" it meanwhile.
        let tick_ns = 1_000_000_000 / crate::observe::hogs::ticks_per_second().max(1);
        let steal_ns = self
            .last
            .steal
            .get(cpu)
            .copied()
            .unwrap_or(0)
            .saturating_sub(self.prev.steal.get(cpu).copied().unwrap_or(0))
            * tick_ns;
        // A real-time thread that ran is its own explanation; an ordinary
        // one cannot hold a CPU against a FIFO thread that long unless the
        // host stopped the virtual CPU under it.
        let rt_culprit = matches!(&culprit, Culprit::Thread { sched, .. }
            if sched.starts_with("FIFO") || sched.starts_with("RR") || sched == "DEADLINE");
        if !rt_culprit && steal_ns > 0 && steal_ns * 2 >= latency {
            culprit = Culprit::Steal;
            share = (steal_ns as f64 / latency.max(1) as f64).min(1.0);
        }
        // Without switch records, or when the CPU idled: a device IRQ or
        // softirq that fired around the spike is the suspect.
        if matches!(culprit, Culprit::Unknown | Culprit::Idle) {
            if let Some((r, _)) = irqs.first() {
                culprit = Culprit::Irq {
                    irq: r.name.clone(),
                    device: r.device.clone(),
                };
            } else if let Some((r, _)) = softs.first() {
                culprit = Culprit::Softirq {
                    name: r.name.clone(),
                };
            }
        }
        Cause {
            cpu,
            due_ns: due,
            latency_ns: latency,
            culprit,
            share,
            irq_context,
        }
    }

    fn thread(&mut self, pid: u32, tid: u32) -> Culprit {
        let (comm, pid, sched) = self
            .names
            .entry(tid)
            .or_insert_with(|| task_identity(pid, tid))
            .clone();
        Culprit::Thread {
            comm,
            pid,
            tid,
            sched,
        }
    }
}

/// Name, thread group id and scheduling policy of `tid`, read now.
fn task_identity(pid: u32, tid: u32) -> (String, u32, String) {
    use crate::system::proc as proc_;
    let comm = proc_::read_pid(tid, "comm")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "exited".into());
    let tgid = proc_::read_pid(tid, "status")
        .ok()
        .and_then(|s| proc_::keyed::number(&s, "Tgid"))
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(pid);
    let sched = proc_::read_pid(tid, "stat")
        .ok()
        .and_then(|s| {
            let st = proc_::Stat::parse(&s)?;
            let (prio, policy) = (st.rt_priority()?, st.policy()?);
            Some(match policy {
                1 => format!("FIFO {prio}"),
                2 => format!("RR {prio}"),
                3 => "BATCH".to_string(),
                5 => "IDLE".to_string(),
                6 => "DEADLINE".to_string(),
                _ => "OTHER".to_string(),
            })
        })
        .unwrap_or_else(|| "policy unknown".into());
    (comm, tgid, sched)
}
