//! Setting up `sched.latency`'s measuring threads: the CPU set they run
//! on, SCHED_FIFO, the cpu_dma_latency request and the clock they read.
//!
//! libc: sched_setscheduler, sched_param, SCHED_FIFO (rustix has no sched_setscheduler)

use crate::experiments::common::child::usable_cpus;
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

pub(super) fn set_fifo(prio: i32) -> std::result::Result<(), String> {
    // Zeroed first: musl's sched_param has more fields than glibc's.
    // SAFETY: sched_param is plain data.
    let mut sp: libc::sched_param = unsafe { std::mem::zeroed() };
    sp.sched_priority = prio;
    // SAFETY: sets the calling thread's policy.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &sp) } == 0 {
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
