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
//! The measuring threads only store (due, woken) pairs in a preallocated
//! [`SpikeBoard`]; everything here runs in the trial's main thread.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};

/// Spikes one CPU can hand over per trial; more are counted, not explained.
pub const SPIKES_PER_TRIAL: usize = 1024;

/// (due, woken) of late wake-ups, written by one measuring thread without
/// allocating, read by the trial's main thread.
pub struct SpikeBoard {
    due: Vec<AtomicU64>,
    woken: Vec<AtomicU64>,
    count: AtomicUsize,
    /// Spikes past the board's capacity.
    pub dropped: AtomicU64,
    /// The measuring thread's tid (0 until it runs).
    pub tid: AtomicI32,
}

impl Default for SpikeBoard {
    fn default() -> Self {
        SpikeBoard {
            due: (0..SPIKES_PER_TRIAL).map(|_| AtomicU64::new(0)).collect(),
            woken: (0..SPIKES_PER_TRIAL).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            tid: AtomicI32::new(0),
        }
    }
}

impl SpikeBoard {
    /// Called by the measuring thread: no allocation, no lock.
    #[inline]
    pub fn push(&self, due_ns: u64, woken_ns: u64) {
        let i = self.count.load(Ordering::Relaxed);
        if i >= SPIKES_PER_TRIAL {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.due[i].store(due_ns, Ordering::Relaxed);
        self.woken[i].store(woken_ns, Ordering::Relaxed);
        self.count.store(i + 1, Ordering::Release);
    }
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn get(&self, i: usize) -> (u64, u64) {
        (
            self.due[i].load(Ordering::Relaxed),
            self.woken[i].load(Ordering::Relaxed),
        )
    }
    /// Start a new trial.
    pub fn reset(&self) {
        self.count.store(0, Ordering::Release);
        self.dropped.store(0, Ordering::Relaxed);
        self.tid.store(0, Ordering::Relaxed);
    }
}

/// Which method explained the spikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    PerfSwitch,
    IrqDeltas,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::PerfSwitch => "perf-switch",
            Method::IrqDeltas => "irq-deltas",
        }
    }
}

/// What held a CPU in the way of one wake-up.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Culprit {
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
}

impl Culprit {
    /// The culprit in words, in the `culprit=` field of a cause note.
    pub fn describe(&self) -> String {
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
        }
    }

    /// The knob that addresses this culprit.
    pub fn knob(&self) -> String {
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
        };
        text.to_string()
    }
}

/// One attributed spike.
#[derive(Debug, Clone)]
pub struct Cause {
    pub cpu: usize,
    pub due_ns: u64,
    pub latency_ns: u64,
    pub culprit: Culprit,
    /// Share of the delay the culprit held the CPU (perf-switch), 0..1.
    pub share: f64,
    /// Device IRQs/softirqs seen on the CPU in the poll interval.
    pub irq_context: String,
}

// ---------------------------------------------------------------- perf ----

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_DUMMY: u64 = 9;
const SAMPLE_TID: u64 = 1 << 1;
const SAMPLE_TIME: u64 = 1 << 2;
const SAMPLE_CPU: u64 = 1 << 7;
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_SAMPLE_ID_ALL: u64 = 1 << 18;
const FLAG_USE_CLOCKID: u64 = 1 << 25;
const FLAG_CONTEXT_SWITCH: u64 = 1 << 26;
const RECORD_LOST: u32 = 2;
const RECORD_SWITCH_CPU_WIDE: u32 = 15;
const MISC_SWITCH_OUT: u16 = 0x2000;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;
/// Data pages per CPU ring (2^n): 256 KiB, ~6000 switches between polls.
const RING_PAGES: usize = 64;
/// Switches kept per CPU for spikes not yet explained.
const HISTORY: usize = 65_536;

/// perf_event_attr up to PERF_ATTR_SIZE_VER5 (112 bytes).
#[repr(C)]
#[derive(Default)]
struct PerfAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved2: u16,
}

/// One context switch on a CPU: at `t`, `prev` gave the CPU to `next`
/// (tids; 0 is the idle task).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Switch {
    pub t: u64,
    pub prev: u32,
    pub next: u32,
    pub next_pid: u32,
}

struct PerfCpu {
    fd: libc::c_int,
    base: *mut u8,
    len: usize,
    page: usize,
    history: VecDeque<Switch>,
    lost: u64,
}

// SAFETY: the mapping is owned by this struct and used by one thread at a time.
unsafe impl Send for PerfCpu {}

impl PerfCpu {
    fn open(cpu: usize) -> Result<PerfCpu, String> {
        let attr = PerfAttr {
            type_: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<PerfAttr>() as u32,
            config: PERF_COUNT_SW_DUMMY,
            sample_period: 1,
            sample_type: SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU,
            flags: FLAG_DISABLED | FLAG_SAMPLE_ID_ALL | FLAG_USE_CLOCKID | FLAG_CONTEXT_SWITCH,
            clockid: libc::CLOCK_MONOTONIC,
            ..PerfAttr::default()
        };
        // SAFETY: a valid attr; pid -1 with a cpu is a CPU-wide event.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfAttr,
                -1 as libc::pid_t,
                cpu as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        } as libc::c_int;
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EACCES) | Some(libc::EPERM) => format!(
                    "perf_event_open on CPU {cpu}: {e} (needs root/CAP_PERFMON or \
                     kernel.perf_event_paranoid <= 0)"
                ),
                Some(libc::ENOENT) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => {
                    format!("perf_event_open on CPU {cpu}: {e} (kernel without perf events)")
                }
                _ => format!("perf_event_open on CPU {cpu}: {e}"),
            });
        }
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = page * (RING_PAGES + 1);
        // SAFETY: mapping the event's ring buffer read-write (we move the tail).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            // SAFETY: our own descriptor.
            unsafe { libc::close(fd) };
            return Err(format!("mmap of the perf ring on CPU {cpu}: {e}"));
        }
        Ok(PerfCpu {
            fd,
            base: base as *mut u8,
            len,
            page,
            history: VecDeque::new(),
            lost: 0,
        })
    }

    fn ioctl(&self, req: libc::c_ulong) {
        // SAFETY: enable/disable ioctls on our perf descriptor.
        unsafe { libc::ioctl(self.fd, req as _, 0) };
    }

    /// Move every record out of the ring into the history.
    fn drain(&mut self) {
        // SAFETY: the first page is the perf_event_mmap_page; data_head at
        // 1024, data_tail at 1032; the data area follows the first page.
        unsafe {
            let head_p = self.base.add(1024) as *const AtomicU64;
            let tail_p = self.base.add(1032) as *const AtomicU64;
            let head = (*head_p).load(Ordering::Acquire);
            let mut tail = (*tail_p).load(Ordering::Relaxed);
            let data = self.base.add(self.page);
            let size = (self.len - self.page) as u64;
            let mut rec = [0u8; 256];
            while tail < head {
                let at = |off: u64| *data.add(((tail + off) % size) as usize);
                let hdr: Vec<u8> = (0..8).map(at).collect();
                let typ = u32::from_ne_bytes(hdr[0..4].try_into().unwrap_or_default());
                let misc = u16::from_ne_bytes(hdr[4..6].try_into().unwrap_or_default());
                let sz = u16::from_ne_bytes(hdr[6..8].try_into().unwrap_or_default()) as u64;
                if sz < 8 {
                    break;
                }
                let n = (sz as usize).min(rec.len());
                for (i, b) in rec.iter_mut().enumerate().take(n) {
                    *b = at(i as u64);
                }
                self.record(typ, misc, &rec[..n]);
                tail += sz;
            }
            (*tail_p).store(tail, Ordering::Release);
        }
        while self.history.len() > HISTORY {
            self.history.pop_front();
        }
    }

    fn record(&mut self, typ: u32, misc: u16, r: &[u8]) {
        let u32_at = |o: usize| {
            r.get(o..o + 4)
                .map(|b| u32::from_ne_bytes(b.try_into().unwrap_or_default()))
        };
        let u64_at = |o: usize| {
            r.get(o..o + 8)
                .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or_default()))
        };
        match typ {
            RECORD_LOST => self.lost += u64_at(16).unwrap_or(0),
            // header(8) next_prev_pid next_prev_tid | sample_id: pid tid time cpu res
            RECORD_SWITCH_CPU_WIDE if misc & MISC_SWITCH_OUT != 0 => {
                let (Some(next_pid), Some(next), Some(prev), Some(t)) =
                    (u32_at(8), u32_at(12), u32_at(20), u64_at(24))
                else {
                    return;
                };
                self.history.push_back(Switch {
                    t,
                    prev,
                    next,
                    next_pid,
                });
            }
            _ => {}
        }
    }
}

impl Drop for PerfCpu {
    fn drop(&mut self) {
        // SAFETY: unmapping and closing what `open` created.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
            libc::close(self.fd);
        }
    }
}

/// Time each task held the CPU in `[from, to)`, from the switches (sorted):
/// (tid, pid, ns) longest first. The task running at `from` is the `next`
/// of the last switch before it; None when the history does not reach back.
pub fn occupancy(switches: &[Switch], from: u64, to: u64) -> Option<Vec<(u32, u32, u64)>> {
    let before = switches.iter().rposition(|s| s.t <= from)?;
    let mut cur = (switches[before].next, switches[before].next_pid);
    let mut since = from;
    let mut held: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    for s in &switches[before + 1..] {
        if s.t >= to {
            break;
        }
        *held.entry(cur).or_default() += s.t - since;
        cur = (s.next, s.next_pid);
        since = s.t;
    }
    *held.entry(cur).or_default() += to.saturating_sub(since);
    let mut v: Vec<(u32, u32, u64)> = held
        .into_iter()
        .filter(|(_, ns)| *ns > 0)
        .map(|((tid, pid), ns)| (tid, pid, ns))
        .collect();
    v.sort_by_key(|o| std::cmp::Reverse(o.2));
    Some(v)
}

// ---------------------------------------------------------- irq deltas ----

/// Per-CPU counts of one /proc/interrupts or /proc/softirqs row.
#[derive(Debug, Clone, PartialEq)]
pub struct IrqRow {
    pub name: String,
    pub device: String,
    pub counts: Vec<u64>,
}

/// Parse /proc/interrupts or /proc/softirqs (a "CPU0 CPU1 …" header, then
/// "NAME: counts… [description]" rows).
pub fn parse_irq_table(text: &str) -> Vec<IrqRow> {
    let mut lines = text.lines();
    let ncpu = lines
        .next()
        .map(|h| {
            h.split_whitespace()
                .filter(|w| w.starts_with("CPU"))
                .count()
        })
        .unwrap_or(0);
    lines
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let mut words = rest.split_whitespace();
            let mut counts = Vec::with_capacity(ncpu);
            let mut device = Vec::new();
            for w in words.by_ref() {
                match w.parse::<u64>() {
                    Ok(v) if counts.len() < ncpu => counts.push(v),
                    _ => {
                        device.push(w);
                        break;
                    }
                }
            }
            device.extend(words);
            (!counts.is_empty()).then(|| IrqRow {
                name: name.trim().to_string(),
                device: device.join(" "),
                counts,
            })
        })
        .collect()
}

/// Interrupts that are the measurement's own or the scheduler's plumbing,
/// never a culprit: local timer (our own hrtimer fires it), rescheduling,
/// call-function and TLB IPIs, and the timer/hrtimer/sched/RCU softirqs.
fn is_plumbing(name: &str) -> bool {
    matches!(
        name,
        "LOC"
            | "RES"
            | "CAL"
            | "TLB"
            | "IWI"
            | "TIMER"
            | "HRTIMER"
            | "SCHED"
            | "RCU"
            | "NMI"
            | "PMI"
            | "SPU"
            | "THR"
            | "MCP"
    ) || name.starts_with("IPI")
}

#[derive(Default)]
struct IrqSnap {
    irqs: Vec<IrqRow>,
    softirqs: Vec<IrqRow>,
    /// Per CPU steal time in USER_HZ ticks (/proc/stat).
    steal: Vec<u64>,
}

/// Steal ticks per CPU from /proc/stat ("cpuN user nice system idle iowait
/// irq softirq steal …").
pub fn parse_steal(stat: &str) -> Vec<u64> {
    let mut v = Vec::new();
    for l in stat.lines() {
        let mut w = l.split_whitespace();
        let Some(n) = w.next().and_then(|c| c.strip_prefix("cpu")) else {
            continue;
        };
        let Ok(cpu) = n.parse::<usize>() else {
            continue;
        };
        let steal = w.nth(7).and_then(|x| x.parse().ok()).unwrap_or(0);
        if v.len() <= cpu {
            v.resize(cpu + 1, 0);
        }
        v[cpu] = steal;
    }
    v
}

impl IrqSnap {
    fn read() -> IrqSnap {
        let r = |p| std::fs::read_to_string(p).unwrap_or_default();
        IrqSnap {
            irqs: parse_irq_table(&r("/proc/interrupts")),
            softirqs: parse_irq_table(&r("/proc/softirqs")),
            steal: parse_steal(&r("/proc/stat")),
        }
    }
}

/// Rows whose count on `cpu` grew from `old` to `new`, not plumbing, most first.
fn grown(old: &[IrqRow], new: &[IrqRow], cpu: usize) -> Vec<(IrqRow, u64)> {
    let mut v: Vec<(IrqRow, u64)> = new
        .iter()
        .filter(|r| !is_plumbing(&r.name))
        .filter_map(|r| {
            let now = *r.counts.get(cpu)?;
            let was = old
                .iter()
                .find(|o| o.name == r.name)
                .and_then(|o| o.counts.get(cpu).copied())
                .unwrap_or(now);
            (now > was).then(|| (r.clone(), now - was))
        })
        .collect();
    v.sort_by_key(|g| std::cmp::Reverse(g.1));
    v
}

// ------------------------------------------------------------ tracer ----

/// Explains the spikes of one trial; lives for the point.
pub struct Tracer {
    pub method: Method,
    perf: Vec<PerfCpu>,
    cpus: Vec<usize>,
    /// Spikes of each CPU already explained this trial.
    seen: Vec<usize>,
    last: IrqSnap,
    prev: IrqSnap,
    names: HashMap<u32, (String, u32, String)>,
    polls: u64,
    pub causes: Vec<Cause>,
    /// Why the better methods were not used.
    pub why: Vec<String>,
}

/// Whether tracefs offers rtla's tracers (named in the notes).
pub fn tracefs_timerlat() -> Option<String> {
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
    pub fn open(cpus: &[usize], mode: &str) -> Result<Tracer, String> {
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

    pub fn start_trial(&mut self) {
        self.seen.iter_mut().for_each(|s| *s = 0);
        for p in &mut self.perf {
            p.drain();
            p.history.clear();
            p.ioctl(IOC_ENABLE);
        }
        self.prev = IrqSnap::read();
        self.last = IrqSnap::read();
    }

    pub fn stop_trial(&mut self, boards: &[&SpikeBoard]) {
        self.poll(boards);
        for p in &mut self.perf {
            p.ioctl(IOC_DISABLE);
        }
    }

    /// Records lost by the perf rings (too many switches between polls).
    pub fn lost(&self) -> u64 {
        self.perf.iter().map(|p| p.lost).sum()
    }

    /// Drain the rings and explain the spikes handed over since the last
    /// poll. `boards[i]` belongs to `cpus[i]`.
    pub fn poll(&mut self, boards: &[&SpikeBoard]) {
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
                let (due, woken) = b.get(k);
                let c = self.explain(i, cpu, me, due, woken);
                self.causes.push(c);
            }
            self.seen[i] = counts[i];
        }
    }

    fn explain(&mut self, i: usize, cpu: usize, me: u32, due: u64, woken: u64) -> Cause {
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
        let mut culprit = Culprit::Unknown;
        let mut share = 0.0;
        let top = self.perf.get_mut(i).and_then(|p| {
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
        let tick_ns = 1_000_000_000 / user_hz();
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

fn user_hz() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

/// Name, thread group id and scheduling policy of `tid`, read now.
fn task_identity(pid: u32, tid: u32) -> (String, u32, String) {
    let base = format!("/proc/{tid}");
    let comm = std::fs::read_to_string(format!("{base}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "exited".into());
    let tgid = std::fs::read_to_string(format!("{base}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(pid);
    let sched = std::fs::read_to_string(format!("{base}/stat"))
        .ok()
        .and_then(|s| {
            let rest = s[s.rfind(')')? + 1..].to_string();
            let f: Vec<&str> = rest.split_whitespace().collect();
            // Fields 40 (rt_priority) and 41 (policy), 3rd onwards after ')'.
            let prio: u32 = f.get(37)?.parse().ok()?;
            let policy: u32 = f.get(38)?.parse().ok()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sw(t: u64, prev: u32, next: u32) -> Switch {
        Switch {
            t,
            prev,
            next,
            next_pid: next,
        }
    }

    #[test]
    fn occupancy_sums_who_held_the_cpu() {
        // idle until 100, spinner 7 from 100 to 5100, then us (9).
        let s = [sw(10, 3, 0), sw(100, 0, 7), sw(5100, 7, 9)];
        let occ = occupancy(&s, 50, 5100).unwrap();
        assert_eq!(occ, vec![(7, 7, 5000), (0, 0, 50)]);
        // The history must reach back before the window.
        assert_eq!(occupancy(&s, 5, 100), None);
    }

    #[test]
    fn parses_proc_interrupts_and_softirqs() {
        let t = "           CPU0       CPU1\n  0:         22          0   IO-APIC   2-edge      timer\n\
                 LOC:     123456     654321   Local timer interrupts\n 24:  5  7  PCI-MSI 1-edge virtio0-input.0\n";
        let rows = parse_irq_table(t);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].counts, vec![22, 0]);
        assert_eq!(rows[0].device, "IO-APIC 2-edge timer");
        assert_eq!(rows[2].name, "24");
        let mut newer = rows.clone();
        newer[2].counts[1] = 10;
        newer[1].counts[1] += 100; // LOC is our own timer: never a culprit
        let g = grown(&rows, &newer, 1);
        assert_eq!(g.len(), 1);
        assert_eq!((g[0].0.name.as_str(), g[0].1), ("24", 3));
        let s = parse_irq_table("  CPU0 CPU1\n  HI: 1 2\n  NET_RX: 5 6\n");
        assert_eq!(s[1].name, "NET_RX");
        assert_eq!(s[1].counts, vec![5, 6]);
    }

    #[test]
    fn steal_per_cpu() {
        let st = "cpu  1 2 3 4 5 6 7 80 0 0\ncpu0 1 2 3 4 5 6 7 30 0 0\ncpu1 1 2 3 4 5 6 7 50 0 0\nintr 5\n";
        assert_eq!(parse_steal(st), vec![30, 50]);
    }

    #[test]
    fn spike_board_hands_over_without_allocating() {
        let b = SpikeBoard::default();
        b.push(1, 5);
        assert_eq!((b.len(), b.get(0)), (1, (1, 5)));
        for _ in 0..SPIKES_PER_TRIAL {
            b.push(2, 3);
        }
        assert_eq!(b.len(), SPIKES_PER_TRIAL);
        assert_eq!(b.dropped.load(Ordering::Relaxed), 1);
        b.reset();
        assert_eq!(b.len(), 0);
    }
}
