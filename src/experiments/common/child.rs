//! Forked worker processes for the IPC and scheduler experiments, and the
//! few raw system calls they may use after `fork`.
//!
//! tunelab is multi-threaded (signal thread, background sampler), so after
//! `fork` a child may only do async-signal-safe work: `read`, `write`,
//! `poll`, `sched_setaffinity`, touching memory allocated before the fork, and
//! `_exit`. Child bodies must therefore never allocate, lock, print or panic.
//!
//! Every child asks the kernel to kill it when tunelab dies (`PR_SET_PDEATHSIG`)
//! and restores the default action of SIGINT/SIGTERM/SIGHUP, so Ctrl-C stops
//! it at once; [`Children`] kills and reaps whatever is left when dropped, so
//! neither an error nor an interruption leaves processes behind.
//!
//! libc: fork, getpid, getppid, _exit, signal, SIGINT, SIGTERM, SIGHUP, SIG_DFL, prctl, PR_SET_PDEATHSIG, SIGKILL, c_ulong (fork and the child's set-up: async-signal-safe)
//! libc: read, write, c_void, EINTR, sched_getcpu, cpu_set_t, CPU_ZERO, CPU_SET, CPU_ISSET, CPU_SETSIZE, sched_getaffinity, sched_setaffinity (run in forked children: async-signal-safe, no allocation)
//! libc: waitid, siginfo_t, P_ALL, WEXITED, WNOWAIT (rustix's WaitIdStatus does not give the pid), WIFEXITED, WEXITSTATUS, WIFSIGNALED, WTERMSIG (raw wait status)
//! libc: pid_t (the pid type fork returns), pause, kill (test children that wait for a signal)

use std::io;
use std::os::fd::RawFd;

use crate::experiments::common::util::map_anonymous;
use crate::{Error, Result};

/// A set of forked children, killed (SIGKILL) and reaped on drop.
#[derive(Default)]
pub(crate) struct Children {
    pids: Vec<libc::pid_t>,
}

impl Children {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn len(&self) -> usize {
        self.pids.len()
    }

    /// Fork a child that runs `body` and exits with the code it returns.
    ///
    /// `body` runs in the child after `fork`: only async-signal-safe work (see
    /// the module documentation); it must not allocate or panic.
    pub(crate) fn spawn<F: FnOnce() -> i32>(&mut self, body: F) -> Result<libc::pid_t> {
        self.pids.reserve(1); // no allocation between fork and push
                              // SAFETY: getpid/fork have no preconditions.
        let parent = unsafe { libc::getpid() };
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let e = io::Error::last_os_error();
            return Err(Error::environment(format!(
                "cannot fork a worker process: {e} (too many processes? see `ulimit -u` and \
                 /proc/sys/kernel/pid_max, or ask for fewer processes)"
            )));
        }
        if pid == 0 {
            // SAFETY: in the child only async-signal-safe calls follow.
            unsafe {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                libc::signal(libc::SIGTERM, libc::SIG_DFL);
                libc::signal(libc::SIGHUP, libc::SIG_DFL);
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                if libc::getppid() != parent {
                    libc::_exit(3);
                }
                let code = body();
                libc::_exit(code);
            }
        }
        self.pids.push(pid);
        Ok(pid)
    }

    /// Wait for every child to exit; an error if any failed or was killed.
    ///
    /// Children are reaped in the order they exit; as soon as one fails the
    /// others are killed (a dead sender would otherwise leave its receivers
    /// blocked for ever).
    pub(crate) fn wait_all(&mut self) -> Result<()> {
        let mut first: Option<String> = None;
        while !self.pids.is_empty() {
            // Which child exited? Peek without reaping, so that children that
            // are not ours (another thread's) are left for their owner.
            // SAFETY: waitid fills the siginfo we pass.
            let peek = unsafe {
                let mut info: libc::siginfo_t = std::mem::zeroed();
                let r = libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOWAIT);
                if r == 0 {
                    Some(info.si_pid())
                } else {
                    None
                }
            };
            let (pid, status) = match peek {
                // The common case, one waitid per exit: messaging times this.
                Some(p) if self.pids.contains(&p) => (p, reap(p)),
                None if errno() == libc::EINTR => continue,
                None => {
                    // No child at all (ECHILD): ours cannot be waited for.
                    let p = self.pids[0];
                    (p, None)
                }
                // Another owner's child: never block on one of ours (it may
                // be waiting for a sibling's failure); reap any of ours that
                // has exited, else back off while that zombie waits for its
                // owner (the peek returns at once until it is reaped).
                Some(_) => match self
                    .pids
                    .iter()
                    .find_map(|&p| try_reap(p).map(|status| (p, status)))
                {
                    Some(done) => done,
                    None => {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                        continue;
                    }
                },
            };
            self.pids.retain(|&p| p != pid);
            let ok = status.is_some_and(|s| libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 0);
            if !ok && first.is_none() {
                first = Some(match status {
                    None => format!("cannot wait for worker {pid}"),
                    Some(s) if libc::WIFSIGNALED(s) => {
                        format!("worker {pid} was killed by signal {}", libc::WTERMSIG(s))
                    }
                    Some(s) => format!("worker {pid} exited with code {}", libc::WEXITSTATUS(s)),
                });
                self.kill_all();
            }
        }
        crate::safety::signals::check()?;
        match first {
            Some(why) => Err(Error::measurement(format!(
                "a worker process failed: {why}"
            ))),
            None => Ok(()),
        }
    }

    /// SIGKILL and reap every child still running.
    pub(crate) fn kill_all(&mut self) {
        use rustix::process::{kill_process, waitpid, Pid, Signal, WaitOptions};
        for pid in std::mem::take(&mut self.pids) {
            let Some(p) = Pid::from_raw(pid) else {
                continue;
            };
            // Our own unreaped child, so the pid cannot have been reused.
            let _ = kill_process(p, Signal::KILL);
            while matches!(
                waitpid(Some(p), WaitOptions::empty()),
                Err(rustix::io::Errno::INTR)
            ) {}
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// One shared page in which forked children report the CPU they run on,
/// so the parent can see placement without reading /proc/PID/stat of a
/// running process: that read, every 10 ms, cost ~9% of cross-CPU pipe
/// bandwidth on a 2-vCPU VM (bench/truth_vs_reference.sh, a C reader with
/// and without it). Writing a slot is one `sched_getcpu` (rseq/vDSO on
/// most systems) and a relaxed store: async-signal-safe, no allocation.
pub(crate) struct CpuReports {
    slots: *mut std::sync::atomic::AtomicI32,
    len: usize,
}

// SAFETY: the page holds only atomics; it is unmapped once, on drop.
unsafe impl Send for CpuReports {}

impl CpuReports {
    /// A MAP_SHARED page with `len` slots, all "not reported yet" (-1).
    pub(crate) fn new(len: usize) -> Result<Self> {
        let bytes = Self::bytes(len);
        let p = map_anonymous(bytes, rustix::mm::MapFlags::SHARED).map_err(|e| {
            Error::environment(format!("cannot map a shared page for CPU reports: {e}"))
        })?;
        let r = CpuReports {
            slots: p as *mut std::sync::atomic::AtomicI32,
            len,
        };
        for i in 0..len {
            r.slot(i).store(-1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(r)
    }

    /// Size of the mapping for `len` slots: whole pages.
    fn bytes(len: usize) -> usize {
        (len.max(1) * std::mem::size_of::<std::sync::atomic::AtomicI32>()).next_multiple_of(4096)
    }

    fn slot(&self, i: usize) -> &std::sync::atomic::AtomicI32 {
        debug_assert!(i < self.len, "CPU report slot {i} of {}", self.len);
        // SAFETY: i < len slots, inside the mapping, which lives as long as self.
        unsafe { &*self.slots.add(i) }
    }

    /// In a child: record the CPU this process is on now in slot `i`.
    #[inline]
    pub(crate) fn report(&self, i: usize) {
        // SAFETY: sched_getcpu has no preconditions.
        let cpu = unsafe { libc::sched_getcpu() };
        self.slot(i)
            .store(cpu, std::sync::atomic::Ordering::Relaxed);
    }

    /// In a child's loop: report in slot `i` on the first and then every
    /// `every`-th call (`count` is the loop's own counter), so a sample is
    /// at most `every` iterations old.
    #[inline]
    pub(crate) fn report_every(&self, i: usize, count: &mut u32, every: u32) {
        if count.is_multiple_of(every) {
            self.report(i);
        }
        *count = count.wrapping_add(1);
    }

    /// The CPU last reported in slot `i`, if any.
    pub(crate) fn get(&self, i: usize) -> Option<usize> {
        let c = self.slot(i).load(std::sync::atomic::Ordering::Relaxed);
        (c >= 0).then_some(c as usize)
    }
}

impl Drop for CpuReports {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new(), unmapped once.
        let _ = unsafe { rustix::mm::munmap(self.slots.cast(), Self::bytes(self.len)) };
    }
}

/// Move `len` bytes with `step(done)`, one read()/write() call per step that
/// returns its result, retrying short transfers and EINTR; false on EOF or
/// error. Async-signal-safe: no allocation, only the given system call.
#[inline]
fn transfer_all(len: usize, mut step: impl FnMut(usize) -> isize) -> bool {
    let mut done = 0usize;
    while done < len {
        let r = step(done);
        if r > 0 {
            done += r as usize;
        } else if r < 0 && errno() == libc::EINTR {
            continue;
        } else {
            return false;
        }
    }
    true
}

/// Write all of `buf` (retrying short writes and EINTR). Async-signal-safe.
#[inline]
pub(crate) fn write_all(fd: RawFd, buf: &[u8]) -> bool {
    transfer_all(buf.len(), |done| {
        // SAFETY: the pointer range lies inside buf.
        unsafe {
            libc::write(
                fd,
                buf.as_ptr().add(done) as *const libc::c_void,
                buf.len() - done,
            )
        }
    })
}

/// Read exactly `buf.len()` bytes; false on EOF or error. Async-signal-safe.
#[inline]
pub(crate) fn read_exact(fd: RawFd, buf: &mut [u8]) -> bool {
    let len = buf.len();
    let ptr = buf.as_mut_ptr();
    transfer_all(len, |done| {
        // SAFETY: the pointer range lies inside buf, which outlives the call.
        unsafe { libc::read(fd, ptr.add(done) as *mut libc::c_void, len - done) }
    })
}

/// One read() call of at most `buf.len()` bytes: bytes read, 0 on EOF or error.
#[inline]
pub(crate) fn read_some(fd: RawFd, buf: &mut [u8]) -> usize {
    loop {
        // SAFETY: the pointer range lies inside buf.
        let r = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        if r >= 0 {
            return r as usize;
        }
        if errno() != libc::EINTR {
            return 0;
        }
    }
}

/// Non-blocking waitpid: None while `pid` runs; Some(Some(status)) once
/// reaped; Some(None) when it cannot be waited for.
fn try_reap(pid: libc::pid_t) -> Option<Option<i32>> {
    use rustix::process::{waitpid, Pid, WaitOptions};
    let p = Pid::from_raw(pid)?;
    loop {
        return match waitpid(Some(p), WaitOptions::NOHANG) {
            Ok(Some((_, status))) => Some(Some(status.as_raw())),
            Ok(None) => None,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => Some(None),
        };
    }
}

/// Blocking waitpid on one child: its status, or None if it cannot be waited for.
fn reap(pid: libc::pid_t) -> Option<i32> {
    use rustix::process::{waitpid, Pid, WaitOptions};
    let p = Pid::from_raw(pid)?;
    loop {
        return match waitpid(Some(p), WaitOptions::empty()) {
            Ok(Some((_, status))) => Some(status.as_raw()),
            Err(rustix::io::Errno::INTR) => continue,
            _ => None,
        };
    }
}

#[inline]
fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A CPU set naming one CPU, built before `fork` so that a child can pin
/// itself with [`pin_self`] without allocating.
#[derive(Clone, Copy)]
pub(crate) struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    pub(crate) fn one(cpu: usize) -> Self {
        // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write into it.
        unsafe {
            let mut s: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_ZERO(&mut s);
            libc::CPU_SET(cpu, &mut s);
            CpuSet(s)
        }
    }

    /// The calling thread's current affinity.
    pub(crate) fn current() -> Result<Self> {
        // SAFETY: the kernel fills the set we pass.
        unsafe {
            let mut s: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut s) != 0 {
                return Err(Error::environment(format!(
                    "sched_getaffinity: {}",
                    io::Error::last_os_error()
                )));
            }
            Ok(CpuSet(s))
        }
    }

    /// The CPUs in this set.
    pub(crate) fn cpus(&self) -> Vec<usize> {
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: reading a plain bit set.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &self.0) })
            .collect()
    }
}

/// Pin the calling thread (or child process) to `set`. Async-signal-safe.
pub(crate) fn pin_self(set: &CpuSet) -> bool {
    // SAFETY: passes a valid cpu_set_t of the right size.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set.0) == 0 }
}

/// Pins the calling thread for as long as it lives, then restores the
/// previous affinity.
pub(crate) struct PinGuard {
    saved: Option<CpuSet>,
}

impl PinGuard {
    /// Pin to `cpu`, or do nothing for `None`.
    pub(crate) fn new(cpu: Option<usize>) -> Result<Self> {
        let Some(cpu) = cpu else {
            return Ok(PinGuard { saved: None });
        };
        let saved = CpuSet::current()?;
        if !pin_self(&CpuSet::one(cpu)) {
            return Err(Error::environment(format!(
                "cannot pin to CPU {cpu}: {}",
                io::Error::last_os_error()
            )));
        }
        Ok(PinGuard { saved: Some(saved) })
    }
}

impl Drop for PinGuard {
    fn drop(&mut self) {
        if let Some(s) = &self.saved {
            pin_self(s);
        }
    }
}

/// CPUs this process may run on (at least one entry).
pub(crate) fn usable_cpus() -> Vec<usize> {
    let v = CpuSet::current().map(|s| s.cpus()).unwrap_or_default();
    if v.is_empty() {
        vec![0]
    } else {
        v
    }
}

/// Refuse a point whose `need` descriptors, open in tunelab at once, leave
/// fewer than 64 of the soft open-file limit (`ulimit -n`) for tunelab's
/// own; `refuse` words the usage error from the limit.
pub(crate) fn check_open_files(need: u64, refuse: impl FnOnce(u64) -> String) -> Result<()> {
    // None: unlimited.
    let nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    match nofile {
        Some(lim) if need + 64 > lim => Err(Error::usage(refuse(lim))),
        _ => Ok(()),
    }
}

/// Refuse to start `need` more processes when the system limits cannot
/// allow them: pid_max, threads-max, and (for non-root) RLIMIT_NPROC.
pub(crate) fn check_process_limit(exp: &str, need: u64) -> Result<()> {
    use crate::system::proc as proc_;
    let pid_max = proc_::sysctl_u64("kernel.pid_max");
    let threads_max = proc_::sysctl_u64("kernel.threads-max");
    let running = proc_::pids().len() as u64;
    // `current` is None when the limit is unlimited.
    let nproc = rustix::process::getrlimit(rustix::process::Resource::Nproc).current;
    let root = rustix::process::geteuid().is_root();
    process_limit_verdict(
        exp,
        need,
        running,
        pid_max,
        threads_max,
        if root { None } else { nproc },
    )
}

/// Pure part of [`check_process_limit`].
pub(crate) fn process_limit_verdict(
    exp: &str,
    need: u64,
    running: u64,
    pid_max: Option<u64>,
    threads_max: Option<u64>,
    nproc: Option<u64>,
) -> Result<()> {
    let limits = [
        (
            crate::system::proc::proc_path!("sys/kernel/pid_max"),
            pid_max,
        ),
        (
            crate::system::proc::proc_path!("sys/kernel/threads-max"),
            threads_max,
        ),
        ("the per-user process limit (ulimit -u)", nproc),
    ];
    for (what, lim) in limits {
        if let Some(lim) = lim {
            let room = lim.saturating_sub(running);
            if need > room {
                return Err(Error::usage(format!(
                    "{exp}: needs {need} processes but {what} allows {lim} and about {running} \
                     already exist; ask for fewer processes (or raise the limit)"
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_refuse_too_many_processes() {
        let e = process_limit_verdict("x", 5000, 100, Some(4096), None, None).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("pid_max"), "{e}");
        let e = process_limit_verdict("x", 50, 100, Some(1 << 22), Some(1 << 20), Some(120))
            .unwrap_err();
        assert!(e.to_string().contains("ulimit -u"), "{e}");
        assert!(process_limit_verdict("x", 400, 100, Some(1 << 22), Some(1 << 20), None).is_ok());
    }

    #[test]
    fn a_child_reports_the_cpu_it_is_pinned_to() {
        let cpu = *usable_cpus().last().unwrap();
        let r = CpuReports::new(2).unwrap();
        assert_eq!(r.get(0), None, "nothing reported yet");
        let mut c = Children::new();
        let set = CpuSet::one(cpu);
        let reports = &r;
        c.spawn(move || {
            if !pin_self(&set) {
                return 1;
            }
            reports.report(1);
            0
        })
        .unwrap();
        c.wait_all().unwrap();
        assert_eq!(r.get(1), Some(cpu), "the child's report reaches the parent");
        assert_eq!(r.get(0), None, "other slots untouched");
    }

    #[test]
    fn children_are_reaped_and_failures_reported() {
        let mut c = Children::new();
        c.spawn(|| 0).unwrap();
        c.spawn(|| 7).unwrap();
        let e = c.wait_all().unwrap_err();
        assert!(e.to_string().contains("code 7"), "{e}");
        let mut c = Children::new();
        c.spawn(|| {
            // SAFETY: pause is async-signal-safe; this child would wait for ever.
            unsafe { libc::pause() };
            0
        })
        .unwrap();
        c.spawn(|| 9).unwrap();
        let e = c.wait_all().unwrap_err();
        assert!(
            e.to_string().contains("code 9"),
            "a failure stops the others: {e}"
        );
        assert_eq!(c.len(), 0);
        let mut c = Children::new();
        let pid = c
            .spawn(|| {
                // SAFETY: pause is async-signal-safe.
                unsafe { libc::pause() };
                0
            })
            .unwrap();
        drop(c);
        // SAFETY: probing a pid that we reaped.
        assert!(
            unsafe { libc::kill(pid, 0) } != 0,
            "child still exists after drop"
        );
    }
}
