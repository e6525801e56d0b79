//! The diagnosed command, forked stopped before exec: the child writes its
//! pid and waits on a pipe, so the profiler and the samplers attach to it
//! before its first instruction; then it is released and waited for.
//!
//! std's `spawn` returns only after the child exec'd, so it runs on a
//! helper thread while this one reads the pid and releases the child. That
//! thread also waits for the child: the parent-death signal that makes the
//! command die with tunelab (safety::child) follows the forking thread.
//! The first SIGINT/SIGTERM kills the command (and its process group).
//!
//! libc: getpid, write, read, __errno_location, EINTR (between fork and exec: async-signal-safe)
//! libc: timeval (wait4's rusage, from safety::child)

use rustix::io::Errno;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::thread::JoinHandle;

use crate::safety::child::{self as guard, Waited};
use crate::{Error, Result};

pub(crate) struct Stopped {
    pid: i32,
    release: Option<File>,
    spawner: Option<JoinHandle<std::io::Result<Waited>>>,
    /// Says when std's spawn returned, i.e. the exec happened.
    execed: Option<std::sync::mpsc::Receiver<()>>,
    program: String,
}

/// Never released (an error before the command was let go): it is killed,
/// not left to exec unattended when the pipe closes.
impl Drop for Stopped {
    fn drop(&mut self) {
        if let Some(s) = self.spawner.take() {
            guard::kill_group(self.pid);
            drop(self.release.take());
            let _ = s.join();
        }
    }
}

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Ended {
    pub(crate) code: Option<i32>,
    pub(crate) signal: Option<i32>,
    /// The kernel's account of the command and its reaped children.
    pub(crate) usage: Option<super::workload::Usage>,
}

impl Ended {
    pub(crate) fn words(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exit {c}"),
            (_, Some(s)) => format!("signal {s}"),
            _ => "unknown".into(),
        }
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|e| {
        Error::environment(format!("cannot create a pipe: {}", std::io::Error::from(e)))
    })
}

impl Stopped {
    pub(crate) fn spawn(argv: &[String]) -> Result<Stopped> {
        use std::os::fd::AsRawFd;
        let (pid_r, pid_w) = pipe()?;
        let (go_r, go_w) = pipe()?;
        let (pw, gr) = (pid_w.as_raw_fd(), go_r.as_raw_fd());
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        // Mortal with tunelab before it waits to be released; its own
        // process group unless it may read the terminal.
        if guard::stdin_is_tty() {
            guard::mortal(&mut cmd);
        } else {
            guard::contain(&mut cmd);
        }
        // SAFETY: only async-signal-safe calls (getpid, write, read) run
        // between fork and exec. Both pipes are O_CLOEXEC: the child's
        // copies close at exec.
        unsafe {
            cmd.pre_exec(move || {
                let pid = libc::getpid().to_ne_bytes();
                libc::write(pw, pid.as_ptr().cast(), pid.len());
                let mut b = [0u8; 1];
                loop {
                    let n = libc::read(gr, b.as_mut_ptr().cast(), 1);
                    if n >= 0 || *libc::__errno_location() != libc::EINTR {
                        break;
                    }
                }
                Ok(())
            });
        }
        // The parent's copies of the child's ends close when the spawn
        // returns, so a failed fork reads as end-of-file, never hangs.
        let (exec_tx, execed) = std::sync::mpsc::channel();
        let spawner = std::thread::spawn(move || {
            let r = cmd.spawn();
            drop(pid_w);
            drop(go_r);
            let child = r?;
            let _ = exec_tx.send(());
            guard::wait_cancellable(child.id() as i32)
        });
        let mut buf = [0u8; 4];
        let mut f = File::from(pid_r);
        let got = f.read_exact(&mut buf);
        let release = File::from(go_w);
        if got.is_err() {
            drop(release);
            let why = match spawner.join() {
                Ok(Err(e)) => e.to_string(),
                _ => "the child did not start".into(),
            };
            return Err(Error::usage(format!("cannot run {}: {why}", argv[0])));
        }
        Ok(Stopped {
            pid: i32::from_ne_bytes(buf),
            release: Some(release),
            spawner: Some(spawner),
            execed: Some(execed),
            program: argv[0].clone(),
        })
    }

    pub(crate) fn pid(&self) -> i32 {
        self.pid
    }

    /// Let the child exec and wait for it to end (killed on a cancelling
    /// signal: `Err(Interrupted)`). `exec_done` is set once the exec
    /// happened, so samplers can leave out the handshake before it.
    pub(crate) fn release_and_wait(
        mut self,
        exec_done: &std::sync::atomic::AtomicBool,
    ) -> Result<Ended> {
        let program = self.program.clone();
        if let Some(mut r) = self.release.take() {
            let _ = r.write_all(b"g");
        }
        // An error (a failed exec) drops the sender: no wait then.
        if let Some(rx) = self.execed.take() {
            if rx.recv().is_ok() {
                exec_done.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let Some(spawner) = self.spawner.take() else {
            return Err(Error::measurement("the command was already waited for"));
        };
        let waited = match spawner.join() {
            Ok(Ok(w)) => w,
            Ok(Err(e)) if Errno::from_io_error(&e) == Some(Errno::CHILD) => {
                return Err(Error::measurement(format!("lost track of {program}")))
            }
            Ok(Err(e)) => {
                // exec failed: the child is gone already (std reaped it).
                let why = if e.kind() == std::io::ErrorKind::NotFound {
                    "no such program (give a path or a command on $PATH)".to_string()
                } else {
                    e.to_string()
                };
                return Err(Error::usage(format!("cannot run {program}: {why}")));
            }
            Err(_) => return Err(Error::measurement("the thread starting the command failed")),
        };
        if waited.cancelled {
            crate::safety::signals::check()?;
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        let ru = &waited.rusage;
        // wait4's rusage: the workload's own account (times, faults,
        // switches), its reaped children included.
        let usage = super::workload::Usage {
            user_s: tv(ru.ru_utime),
            system_s: tv(ru.ru_stime),
            minor_faults: ru.ru_minflt as u64,
            major_faults: ru.ru_majflt as u64,
            voluntary: ru.ru_nvcsw as u64,
            involuntary: ru.ru_nivcsw as u64,
        };
        Ok(Ended {
            code: waited.code(),
            signal: waited.signal(),
            usage: Some(usage),
        })
    }
}
