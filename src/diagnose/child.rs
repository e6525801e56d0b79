//! The diagnosed command, forked stopped before exec: the child writes its
//! pid and waits on a pipe, so the profiler and the samplers attach to it
//! before its first instruction; then it is released and waited for.
//!
//! std's `spawn` returns only after the child exec'd, so it runs on a
//! helper thread while this one reads the pid and releases the child.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::thread::JoinHandle;

use crate::{Error, Result};

pub struct Stopped {
    pid: i32,
    release: File,
    spawner: JoinHandle<std::io::Result<std::process::Child>>,
    program: String,
}

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ended {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// The kernel's account of the command and its reaped children.
    pub usage: Option<super::workload::Usage>,
}

impl Ended {
    pub fn words(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exit {c}"),
            (_, Some(s)) => format!("signal {s}"),
            _ => "unknown".into(),
        }
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::environment(format!(
            "cannot create a pipe: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: fresh descriptors from pipe2.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

impl Stopped {
    pub fn spawn(argv: &[String]) -> Result<Stopped> {
        use std::os::fd::AsRawFd;
        let (pid_r, pid_w) = pipe()?;
        let (go_r, go_w) = pipe()?;
        let (pw, gr) = (pid_w.as_raw_fd(), go_r.as_raw_fd());
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
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
        let spawner = std::thread::spawn(move || {
            let r = cmd.spawn();
            drop(pid_w);
            drop(go_r);
            r
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
            release,
            spawner,
            program: argv[0].clone(),
        })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Let the child exec and wait for it to end; `exec_done` is set once
    /// the exec happened (std's spawn returns only then), so samplers can
    /// leave out the handshake before it.
    pub fn release_and_wait(self, exec_done: &std::sync::atomic::AtomicBool) -> Result<Ended> {
        let Stopped {
            pid,
            mut release,
            spawner,
            program,
        } = self;
        let _ = release.write_all(b"g");
        drop(release);
        let mut child = match spawner.join() {
            Ok(Ok(c)) => c,
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
        exec_done.store(true, std::sync::atomic::Ordering::SeqCst);
        debug_assert_eq!(child.id() as i32, pid);
        // wait4 rather than Child::wait: the rusage is the workload's own
        // account (times, faults, switches), children included.
        loop {
            let mut status = 0;
            // SAFETY: rusage is plain data the kernel fills.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: waiting for our own child with valid out-pointers.
            let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
            if rc == pid {
                let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
                let usage = super::workload::Usage {
                    user_s: tv(ru.ru_utime),
                    system_s: tv(ru.ru_stime),
                    minor_faults: ru.ru_minflt as u64,
                    major_faults: ru.ru_majflt as u64,
                    voluntary: ru.ru_nvcsw as u64,
                    involuntary: ru.ru_nivcsw as u64,
                };
                // Dropping a Child neither waits nor kills.
                drop(child);
                return Ok(Ended {
                    code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
                    signal: libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status)),
                    usage: Some(usage),
                });
            }
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            // Not ours to reap after all (ECHILD): fall back to std.
            return match child.wait() {
                Ok(st) => {
                    use std::os::unix::process::ExitStatusExt;
                    Ok(Ended {
                        code: st.code(),
                        signal: st.signal(),
                        usage: None,
                    })
                }
                Err(e) => Err(Error::measurement(format!(
                    "cannot wait for {program}: {e}"
                ))),
            };
        }
    }
}
