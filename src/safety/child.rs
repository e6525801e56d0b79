//! Programs tunelab starts die with it: one mechanism for every verb that
//! runs a command (`time`, `memory`, `diagnose -- CMD`, `boot -- CMD`).
//!
//! - [`contain`]: the child leads its own process group (a terminal's
//!   Ctrl-C reaches tunelab, which then kills the group) and asks the kernel
//!   for SIGKILL when tunelab dies (PR_SET_PDEATHSIG), SIGKILL included.
//!   The death signal follows the *thread* that forked: fork from a thread
//!   that outlives the child.
//! - [`wait_cancellable`]: wait for it, killing its group on the first
//!   SIGINT/SIGTERM/SIGHUP; it is also registered with the signal thread so
//!   a second signal kills it before tunelab exits.
//!
//! libc: prctl, PR_SET_PDEATHSIG, SIGKILL, c_ulong, getppid, _exit, signal, SIGXFSZ, SIG_DFL (between fork and exec: async-signal-safe)
//! libc: wait4, rusage (rustix's waits return no rusage), WIFEXITED, WEXITSTATUS, WIFSIGNALED, WTERMSIG (decode that raw status), EINTR (wait4's errno)

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::process::{
    getpgid, getpgrp, kill_process, kill_process_group, waitid, Pid, Signal, WaitId, WaitIdOptions,
};

use super::signals;

/// Whether stdin is a terminal (a program that may read it stays in
/// tunelab's process group: see [`mortal`]).
pub(crate) fn stdin_is_tty() -> bool {
    rustix::termios::isatty(std::io::stdin())
}

/// Own process group and PR_SET_PDEATHSIG(SIGKILL) for the child of `c`.
pub(crate) fn contain(c: &mut Command) {
    c.process_group(0);
    mortal(c);
}

/// PR_SET_PDEATHSIG(SIGKILL) only: for a program that stays in tunelab's
/// process group because it may read the terminal (a background group
/// would be stopped by SIGTTIN); the terminal's Ctrl-C reaches both.
pub(crate) fn mortal(c: &mut Command) {
    let parent = rustix::process::getpid().as_raw_pid();
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        c.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died before prctl: no signal will come.
            if libc::getppid() != parent {
                libc::_exit(137);
            }
            // tunelab ignores SIGXFSZ (safety::rlimits); the program gets
            // the default back, as the shell would have given it.
            libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
            Ok(())
        });
    }
}

/// SIGKILL `pid`'s process group (the program leads one) and `pid`.
pub(crate) fn kill_group(pid: i32) {
    if pid <= 0 {
        return;
    }
    let Some(p) = Pid::from_raw(pid) else {
        return;
    };
    let _ = kill_process_group(p, Signal::KILL);
    let _ = kill_process(p, Signal::KILL);
}

/// kill(2) signal `sig` (1..=64, as `engine::process::parse_signal` gives) to `pid`, or
/// to the process group it leads. Failures (already gone) are ignored.
pub(crate) fn send_signal(pid: i32, sig: i32, group: bool) {
    use rustix::process::{kill_process, kill_process_group, Pid, Signal};
    let Some(p) = Pid::from_raw(pid) else {
        return;
    };
    if !(1..=64).contains(&sig) {
        return;
    }
    // SAFETY: a number in the kernel's signal range, chosen by the user
    // (realtime signals included, for which rustix has no constant).
    let s = unsafe { Signal::from_raw_unchecked(sig) };
    let _ = if group {
        kill_process_group(p, s)
    } else {
        kill_process(p, s)
    };
}

/// SIGKILL `pid`, and its group when it leads one (never tunelab's own).
fn kill_tree(pid: i32) {
    let Some(p) = Pid::from_raw(pid) else {
        return;
    };
    if getpgid(Some(p)) == Ok(p) && p != getpgrp() {
        kill_group(pid);
    } else {
        let _ = kill_process(p, Signal::KILL);
    }
}

/// How a waited child ended.
pub(crate) struct Waited {
    /// The raw wait status (WIFEXITED & co.).
    pub(crate) status: i32,
    pub(crate) rusage: libc::rusage,
    /// Killed (with its group) because a cancelling signal arrived.
    pub(crate) cancelled: bool,
    /// When the wait saw it exit (before reaping and joining the watchdog).
    pub(crate) exited: Instant,
}

impl Waited {
    pub(crate) fn code(&self) -> Option<i32> {
        libc::WIFEXITED(self.status).then(|| libc::WEXITSTATUS(self.status))
    }

    pub(crate) fn signal(&self) -> Option<i32> {
        libc::WIFSIGNALED(self.status).then(|| libc::WTERMSIG(self.status))
    }
}

/// Wait for (and reap) child `pid`: a watchdog kills it (with its process
/// group when it leads one, see [`contain`]) when a cancelling signal arrives.
/// The pid is not reaped while the watchdog may still signal it (waitid
/// with WNOWAIT first), so a recycled pid is never hit.
pub(crate) fn wait_cancellable(pid: i32) -> std::io::Result<Waited> {
    signals::register_child(pid);
    let reaped = Arc::new(Mutex::new(false));
    let cancelled = Arc::new(AtomicBool::new(false));
    let (r2, c2) = (reaped.clone(), cancelled.clone());
    // Dropping `stop` wakes the watchdog at once (no sleep to wait out).
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let dog = std::thread::Builder::new()
        .name("tunelab-child-watch".into())
        .spawn(move || loop {
            // 100 ms: a signal is acted on soon enough, and a slow board
            // (each wake-up costs it ~0.5 ms of CPU) is not kept busy.
            if stopped.recv_timeout(Duration::from_millis(100)).is_ok()
                || *r2.lock().unwrap_or_else(|e| e.into_inner())
            {
                return;
            }
            if signals::caught().is_some() {
                let done = r2.lock().unwrap_or_else(|e| e.into_inner());
                if !*done {
                    c2.store(true, Ordering::SeqCst);
                    kill_tree(pid);
                }
                return;
            }
        });
    let result = (|| {
        let id = Pid::from_raw(pid).ok_or_else(|| std::io::Error::from(Errno::CHILD))?;
        loop {
            // Waiting for our own child without reaping it.
            match waitid(
                WaitId::Pid(id),
                WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
            ) {
                Ok(_) => break,
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        let exited = Instant::now();
        *reaped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        let mut status = 0;
        // SAFETY: rusage is plain data wait4 fills.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: reaping our own child, which has exited.
            let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
            if r == pid {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        }
        Ok((status, ru, exited))
    })();
    *reaped.lock().unwrap_or_else(|e| e.into_inner()) = true;
    drop(stop);
    if let Ok(d) = dog {
        let _ = d.join();
    }
    signals::unregister_child(pid);
    let (status, rusage, exited) = result?;
    Ok(Waited {
        status,
        rusage,
        exited,
        cancelled: cancelled.load(Ordering::SeqCst),
    })
}
