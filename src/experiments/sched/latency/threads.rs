//! `sched.latency`'s measuring threads: the CPU set they run on,
//! SCHED_FIFO, the cpu_dma_latency request, the clock they read and their
//! loop.
//!
//! libc: syscall, SYS_sched_setscheduler (rustix has no sched_setscheduler; musl's is an ENOSYS stub)
//! libc: sched_param, SCHED_FIFO (the call's argument and policy)

use std::sync::atomic::{AtomicBool, Ordering};

use crate::experiments::common::child::usable_cpus;
use crate::experiments::common::latency_cause::{SpikeBoard, Trigger};
use crate::stats::LatencyRecorder;
use crate::{Error, Result};
use rustix::io::Errno;

/// `all`, `N`, `N-M`, `N+M+…` (combinations too), checked against the CPUs
/// tunelab may use.
pub(crate) fn parse_cpus(s: &str) -> Result<Vec<usize>> {
    let usable = usable_cpus();
    if s == "all" {
        return Ok(usable);
    }
    let bad = |why: String| {
        Error::usage(format!(
            "sched.latency: cpus '{s}': {why}; use all, N, N-M or N+M (usable: {})",
            usable
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        ))
    };
    let mut v = Vec::new();
    for part in s.split('+') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (Ok(a), Ok(b)) = (a.trim().parse::<usize>(), b.trim().parse::<usize>()) else {
            return Err(bad(format!("'{part}' is not a CPU number or range")));
        };
        if a > b {
            return Err(bad(format!("range {a}-{b} is backwards")));
        }
        for c in a..=b {
            if !usable.contains(&c) {
                return Err(bad(format!("CPU {c} is not online or not allowed")));
            }
            if !v.contains(&c) {
                v.push(c);
            }
        }
    }
    Ok(v)
}

/// Whether a thread may take SCHED_FIFO `prio` (tried on a short-lived thread).
pub(super) fn try_fifo(prio: i32) -> std::result::Result<(), String> {
    std::thread::spawn(move || set_fifo(prio))
        .join()
        .unwrap_or_else(|_| Err("probe thread failed".into()))
}

fn set_fifo(prio: i32) -> std::result::Result<(), String> {
    // Zeroed first: musl's sched_param has more fields than glibc's.
    // SAFETY: sched_param is plain data.
    let mut sp: libc::sched_param = unsafe { std::mem::zeroed() };
    sp.sched_priority = prio;
    // The system call, not libc's wrapper: musl's sched_setscheduler is a
    // stub returning ENOSYS (POSIX defines it per process, Linux per
    // thread), so the static board build measured every board as
    // SCHED_OTHER, 50 µs of timer slack later than cyclictest.
    // SAFETY: sets the calling thread's policy; the kernel reads the
    // priority, the first field of either libc's sched_param.
    let sp: *const libc::sched_param = &sp;
    if unsafe { libc::syscall(libc::SYS_sched_setscheduler, 0, libc::SCHED_FIFO, sp) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error().to_string())
    }
}

/// Open /dev/cpu_dma_latency and write 0: the PM QoS request lasts while
/// the descriptor is open.
pub(super) fn hold_dma_latency() -> Result<std::fs::File> {
    use std::io::Write;
    let path = "/dev/cpu_dma_latency";
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| match Errno::from_io_error(&e) {
            Some(Errno::ACCESS) | Some(Errno::PERM) => Error::privilege(format!(
                "cpu_dma_latency=0 needs root to open {path} ({e}); run as root or drop the \
                 parameter"
            )),
            _ => Error::environment(format!("cannot open {path}: {e}")),
        })?;
    f.write_all(&0i32.to_ne_bytes())
        .map_err(|e| Error::environment(format!("cannot write {path}: {e}")))?;
    Ok(f)
}

pub(super) fn mono_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What one measuring thread hands back.
pub(super) struct ThreadOut {
    pub(super) rec: LatencyRecorder,
    pub(super) overruns: u64,
    pub(super) setup: std::result::Result<(), String>,
}

/// The measuring loop of one CPU: one wake-up per period from one period
/// after it starts until `end_ns`. No allocation, no logging, no lock inside
/// the loop; the only syscall besides the sleep and the clock arms or
/// disarms the switch tracer after a late wake-up (`trigger`), once its
/// latency is taken.
#[allow(clippy::too_many_arguments)]
pub(super) fn measure(
    cpu: usize,
    fifo: Option<i32>,
    period_ns: u64,
    end_ns: u64,
    threshold_ns: u64,
    board: &SpikeBoard,
    stop: &AtomicBool,
    mut rec: LatencyRecorder,
    mut trigger: Option<Trigger>,
) -> ThreadOut {
    // Through rustix (the raw syscall): a static musl build can link libc's
    // gettid() as a null weak symbol (the x86_64 board binary crashed on it).
    board.tid.store(
        rustix::thread::gettid().as_raw_nonzero().get(),
        Ordering::Relaxed,
    );
    let set = crate::experiments::common::child::CpuSet::one(cpu);
    let mut setup = if crate::experiments::common::child::pin_self(&set) {
        Ok(())
    } else {
        Err(format!(
            "cannot pin to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        ))
    };
    if let (Some(prio), Ok(())) = (fifo, &setup) {
        setup = set_fifo(prio);
    }
    let mut overruns = 0u64;
    let mut next = mono_ns() + period_ns;
    while setup.is_ok() && next < end_ns && !stop.load(Ordering::Relaxed) {
        let ts = rustix::time::Timespec {
            tv_sec: (next / 1_000_000_000) as i64,
            tv_nsec: (next % 1_000_000_000) as _,
        };
        // Absolute sleep on CLOCK_MONOTONIC; EINTR just retries.
        while rustix::thread::clock_nanosleep_absolute(rustix::thread::ClockId::Monotonic, &ts)
            == Err(rustix::io::Errno::INTR)
        {}
        let now = mono_ns();
        let lat = now.saturating_sub(next);
        rec.record_ns(lat);
        let late = lat > threshold_ns;
        if late {
            board.push(next, now, trigger.as_ref().is_some_and(|t| t.armed()));
        }
        if let Some(t) = &mut trigger {
            t.after_wake(late);
        }
        next += period_ns;
        if now >= next {
            let missed = (now - next) / period_ns + 1;
            overruns += missed;
            next += missed * period_ns;
        }
    }
    ThreadOut {
        rec,
        overruns,
        setup,
    }
}
