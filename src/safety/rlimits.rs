//! Resource limits (`ulimit`) checked before measuring, so a shell with a
//! tiny limit gets a clear exit 4 instead of a failure halfway through:
//! RLIMIT_NOFILE (descriptors) and RLIMIT_NPROC (processes of this user).
//! RLIMIT_FSIZE cannot be judged up front (it depends on the sizes a run
//! writes): SIGXFSZ is ignored instead, so a write past it fails with
//! EFBIG, which `Error::io` explains (exit 4), and the run cleans up.
//!
//! libc: signal, SIGXFSZ, SIG_IGN (rustix has no signal-disposition call)

use rustix::process::Resource;

use crate::{Error, Result};

/// Descriptors a measuring command needs at least: the database, the
/// journal, scratch files, pipes to children, /proc readers.
pub(crate) const MIN_NOFILE: u64 = 32;
/// Processes a measuring command may need besides those already running:
/// helpers, children of the IPC experiments, ssh.
pub(crate) const MIN_FREE_PROCS: u64 = 8;

/// The soft limit of `resource` (None: unlimited).
fn soft(resource: Resource) -> Option<u64> {
    rustix::process::getrlimit(resource).current
}

/// Processes (threads count too) of the real user, from /proc.
fn user_tasks(uid: u32) -> u64 {
    use crate::system::proc as proc_;
    proc_::pids()
        .into_iter()
        .filter_map(|pid| proc_::read_pid(pid, "status").ok())
        .filter(|s| proc_::keyed::number(s, "Uid") == Some(u64::from(uid)))
        .map(|s| proc_::keyed::number(&s, "Threads").unwrap_or(1))
        .sum()
}

/// Ignore SIGXFSZ: past RLIMIT_FSIZE a write then fails with EFBIG (a
/// clean error and cleanup) instead of the kernel killing tunelab.
pub(crate) fn ignore_sigxfsz() {
    // SAFETY: setting a signal's disposition to SIG_IGN.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
}

/// Refuse (exit 4) when the descriptor or process limit leaves too little.
pub(crate) fn check() -> Result<()> {
    if let Some(n) = soft(Resource::Nofile).filter(|n| *n < MIN_NOFILE) {
        return Err(Error::environment(format!(
            "the open-file limit (ulimit -n) is {n}: tunelab needs at least {MIN_NOFILE} \
             (raise it: ulimit -n 1024)"
        )));
    }
    // Root is not held to RLIMIT_NPROC.
    let uid = rustix::process::getuid().as_raw();
    if uid != 0 {
        if let Some(max) = soft(Resource::Nproc) {
            let used = user_tasks(uid);
            if used + MIN_FREE_PROCS > max {
                return Err(Error::environment(format!(
                    "the process limit (ulimit -u) is {max} and this user already runs {used} \
                     processes and threads: tunelab needs room for {MIN_FREE_PROCS} more \
                     (raise it: ulimit -u 4096)"
                )));
            }
        }
    }
    Ok(())
}
