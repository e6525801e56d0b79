//! Opening the perf events: one sampler per CPU, each thread of a process
//! redirected into it, with the ring size the kernel lets a user lock.

use rustix::io::Errno;
use std::io;
use std::os::fd::AsRawFd;

use perf_event::events::{Hardware, Software};
use perf_event::{Builder, Counter, SampleFlag, Sampler};

use super::super::common;
use super::super::{Request, Scope};
use super::Kind;

/// User stack bytes copied per switch for the return-address scan.
const STACK_SCAN_BYTES: u32 = 512;
// _IO('$', 5): send this event's records to another event's ring buffer.
const PERF_EVENT_IOC_SET_OUTPUT: rustix::ioctl::Opcode = 0x2405;

/// Ring buffer data size per CPU: 128 KiB holds >1 s of 1 kHz samples with
/// deep stacks; kept within the 512 KiB the kernel lets an unprivileged
/// user lock (perf_event_mlock_kb) over all CPUs.
pub(super) fn ring_data_bytes(ncpus: usize) -> usize {
    let budget = 512 * 1024 / ncpus.max(1);
    let mut size = 128 * 1024;
    while size > budget && size > 8 * 1024 {
        size /= 2;
    }
    size
}

pub(super) fn max_sample_rate() -> Option<u64> {
    crate::system::proc::sysctl_u64("kernel.perf_event_max_sample_rate")
}

pub(super) struct Opened {
    pub(super) samplers: Vec<Sampler>,
    /// Events of further threads whose records go to a sampler's buffer.
    pub(super) redirected: Vec<Counter>,
    /// Off-CPU tracing of a process: one CPU-wide switch-record event per
    /// CPU (its switch-in records name the task that ran before), or why
    /// none could be opened.
    pub(super) holders: Result<usize, String>,
}

/// Per CPU, an event that records nothing but the machine's context
/// switches (PERF_RECORD_SWITCH_CPU_WIDE): a switch in names the previous
/// task, who held that CPU while a preempted thread of the workload waited.
fn open_holders(cpus: &[usize], data: usize, out: &mut Opened) -> Result<usize, String> {
    let mut n = 0;
    for &cpu in cpus {
        let mut b = Builder::new(Software::DUMMY);
        b.sample(SampleFlag::TID | SampleFlag::TIME | SampleFlag::CPU)
            .context_switch(true)
            .sample_id_all(true)
            .clockid(perf_event::Clock::MONOTONIC)
            .exclude_kernel(false)
            .exclude_hv(true)
            .any_pid()
            .one_cpu(cpu)
            .wakeup_watermark(data / 2)
            .enabled(true);
        let s = b
            .build()
            .and_then(|c| c.sampled(data))
            .map_err(|e| format!("CPU-wide switch records not available ({e})"))?;
        out.samplers.push(s);
        n += 1;
    }
    Ok(n)
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
        if req.call_graph {
            super::leaf::ask(&mut b, flags);
        }
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

pub(super) fn open_all(
    kind: Kind,
    req: &Request,
    freq: u64,
    include_kernel: bool,
) -> io::Result<Opened> {
    let cpus = common::online_cpus();
    let data = ring_data_bytes(cpus.len());
    let mut out = Opened {
        samplers: Vec::new(),
        redirected: Vec::new(),
        holders: Err("not asked".into()),
    };
    let tids = match req.scope {
        Scope::Process { pid } => {
            common::threads_of(pid).map_err(|_| io::Error::from(Errno::SRCH))?
        }
        Scope::System => Vec::new(),
    };
    for &cpu in &cpus {
        // Woken when half full: a few wake-ups a second, not one per sample.
        let mut b = builder(kind, req, freq, include_kernel, data / 2);
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
                        Err(e) if Errno::from_io_error(&e) == Some(Errno::SRCH) && tid != pid => {
                            continue
                        }
                        Err(e) => return Err(e),
                    };
                    match &leader {
                        None => leader = Some(c.sampled(data)?),
                        Some(l) => {
                            // SAFETY: both fds are open perf events owned here.
                            // The output descriptor goes as an integer argument.
                            unsafe {
                                let fd = std::os::fd::BorrowedFd::borrow_raw(c.as_raw_fd());
                                let out = l.as_raw_fd() as usize;
                                rustix::ioctl::ioctl(
                                    fd,
                                    rustix::ioctl::IntegerSetter::<PERF_EVENT_IOC_SET_OUTPUT>::new_usize(out),
                                )
                            }?;
                            out.redirected.push(c);
                        }
                    }
                }
                out.samplers.extend(leader);
            }
        }
    }
    if kind == Kind::OffCpu && matches!(req.scope, Scope::Process { .. }) {
        let before = out.samplers.len();
        out.holders = open_holders(&cpus, data, &mut out);
        if out.holders.is_err() {
            // All CPUs or none: a partial set would name holders of some CPUs only.
            out.samplers.truncate(before);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
