//! What both the sampler and the counters need: which CPUs and threads to
//! open events on, and turning a failed perf_event_open into a reason a
//! person can act on.

use std::io;

use rustix::io::Errno;

use super::Scope;

/// Online CPUs from /sys ("0-3,6"), else 0..available_parallelism.
pub(crate) fn online_cpus() -> Vec<usize> {
    if let Ok(text) = std::fs::read_to_string("/sys/devices/system/cpu/online") {
        let cpus = crate::system::cpu::cpu_list(&text);
        if !cpus.is_empty() {
            return cpus;
        }
    }
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..n).collect()
}

/// The threads of a process now (new ones are followed through inherit).
pub(crate) fn threads_of(pid: i32) -> Result<Vec<i32>, String> {
    let dir = crate::system::proc::Root::live().pid_file(pid, "task");
    let rd = std::fs::read_dir(&dir).map_err(|e| {
        let dir = dir.display();
        if e.kind() == io::ErrorKind::NotFound {
            format!("process {pid} not found (no {dir})")
        } else {
            format!("cannot list the threads of process {pid} ({dir}: {e})")
        }
    })?;
    let mut tids: Vec<i32> = rd
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    // The main thread first: it owns the ring buffer the others write to.
    if let Some(i) = tids.iter().position(|t| *t == pid) {
        tids.remove(i);
        tids.insert(0, pid);
    }
    if tids.is_empty() {
        return Err(format!("process {pid} has no threads left"));
    }
    Ok(tids)
}

pub(crate) fn comm_of(pid: i32) -> Option<String> {
    crate::system::proc::read_pid(pid, "comm")
        .ok()
        .map(|s| s.trim_end().to_string())
}

pub(crate) fn paranoid() -> Option<i32> {
    crate::system::proc::read("sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

pub(crate) fn scope_words(scope: &Scope, cpus: usize) -> String {
    match scope {
        Scope::Process { pid } => match comm_of(*pid) {
            Some(c) => format!("process {pid} ({c}), its threads and children"),
            None => format!("process {pid}, its threads and children"),
        },
        Scope::System => format!("whole system, {cpus} CPUs"),
    }
}

/// A PMU the kernel exposes to perf ("cpu" on x86, "armv8_pmuv3…" on arm64).
pub(crate) fn pmu_words() -> String {
    let names: Vec<String> = std::fs::read_dir("/sys/bus/event_source/devices")
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n == "cpu" || n.starts_with("cpu_") || n.starts_with("armv"))
                .collect()
        })
        .unwrap_or_default();
    if names.is_empty() {
        "no CPU PMU in /sys/bus/event_source/devices (usual in a VM)".to_string()
    } else {
        format!("PMU {}", names.join(", "))
    }
}

/// Why perf_event_open failed, in words, with what to do.
pub(crate) fn explain(err: &io::Error, what: &str, scope: &Scope) -> String {
    let errno = Errno::from_raw_os_error(err.raw_os_error().unwrap_or(0));
    let par = paranoid();
    match errno {
        Errno::ACCESS | Errno::PERM => {
            let level = par.map_or("unknown".to_string(), |p| p.to_string());
            let need = match scope {
                Scope::System => "≤ 0 (or root/CAP_PERFMON) for the whole system",
                Scope::Process { .. } => "≤ 1 for kernel samples, ≤ 2 for user-only",
            };
            format!(
                "{what}: perf_event_open denied ({err}); kernel.perf_event_paranoid={level}, \
                 needs {need}: run as root or lower it with sysctl"
            )
        }
        Errno::NOSYS => format!(
            "{what}: this kernel has no perf_event_open (CONFIG_PERF_EVENTS is off)"
        ),
        Errno::NOENT | Errno::OPNOTSUPP | Errno::NODEV => {
            format!("{what}: not supported here ({err}; {})", pmu_words())
        }
        Errno::SRCH => match scope {
            Scope::Process { pid } => format!("{what}: process {pid} has exited"),
            Scope::System => format!("{what}: {err}"),
        },
        Errno::MFILE | Errno::NFILE => {
            format!("{what}: out of file descriptors ({err}); raise `ulimit -n`")
        }
        _ if par.is_none() => format!(
            "{what}: {err} (no /proc/sys/kernel/perf_event_paranoid: perf events missing from this kernel)"
        ),
        _ => format!("{what}: perf_event_open failed: {err}"),
    }
}

/// CPU time this thread has used so far, in ns.
pub(crate) fn thread_cpu_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn online_cpus_are_found() {
        assert!(!online_cpus().is_empty());
    }

    #[test]
    fn reasons_name_the_cause() {
        let s = Scope::System;
        let e = explain(&io::Error::from(Errno::ACCESS), "cycles", &s);
        assert!(e.contains("perf_event_paranoid"), "{e}");
        let e = explain(&io::Error::from(Errno::NOENT), "cache-misses", &s);
        assert!(e.starts_with("cache-misses: not supported here"), "{e}");
        let p = Scope::Process { pid: 42 };
        let e = explain(&io::Error::from(Errno::SRCH), "cycles", &p);
        assert_eq!(e, "cycles: process 42 has exited");
    }

    #[test]
    fn threads_of_self_and_missing() {
        let me = std::process::id() as i32;
        let t = threads_of(me).unwrap();
        assert_eq!(t[0], me);
        assert!(threads_of(i32::MAX).unwrap_err().contains("not found"));
    }
}
