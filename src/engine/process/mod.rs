//! Starting a program without a shell, watching its output for a "ready"
//! line, stopping it, and getting its own rusage (wait4 in the exec helper,
//! see [`exec_helper`]). The verbs that measure programs (`time`, `boot`,
//! `memory`, and the `app.time` experiment) share these pieces; `console`
//! follows a booting board's console, `once` is one timed start.
//!
//! libc: WIFEXITED, WEXITSTATUS, WIFSIGNALED, WTERMSIG (decode the exec helper's raw wait status: rustix's WaitStatus cannot be built from one)

pub(crate) mod console;
pub(crate) mod exec_helper;
pub(crate) mod once;

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use regex::Regex;

use self::exec_helper::{RECORD, TAG_DONE, TAG_EXEC, TAG_FAIL, TAG_PID};
use crate::safety::signals;
use crate::{Error, Result};

/// Split a command line into words like a shell would for simple cases:
/// whitespace separates, '…' and "…" quote, backslash escapes. No
/// expansion of any kind.
pub(crate) fn split_words(s: &str) -> Result<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut have = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                have = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err(Error::usage(format!("unterminated ' in: {s}"))),
                    }
                }
            }
            '"' => {
                have = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => cur.extend(chars.next()),
                        Some(x) => cur.push(x),
                        None => return Err(Error::usage(format!("unterminated \" in: {s}"))),
                    }
                }
            }
            '\\' => {
                have = true;
                cur.extend(chars.next());
            }
            c if c.is_whitespace() => {
                if have {
                    words.push(std::mem::take(&mut cur));
                    have = false;
                }
            }
            c => {
                have = true;
                cur.push(c);
            }
        }
    }
    if have {
        words.push(cur);
    }
    if words.is_empty() {
        return Err(Error::usage("empty command"));
    }
    Ok(words)
}

/// The argv to execute: the words themselves, or `sh -c TEXT` with a shell.
pub(crate) fn argv_for(text: &str, shell: bool) -> Result<Vec<String>> {
    if shell {
        if text.trim().is_empty() {
            return Err(Error::usage("empty command"));
        }
        Ok(vec!["sh".into(), "-c".into(), text.into()])
    } else {
        split_words(text)
    }
}

/// How a program started with `--ready` is asked to leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quit {
    Signal(i32),
    StdinClose,
}

/// A started program.
pub(crate) struct Started {
    /// The exec helper (reaped after it reported the program's exit).
    pub(crate) child: Child,
    /// The program itself.
    pub(crate) pid: i32,
    /// Monotonic and wall clock of the helper's fork (just before the program's exec).
    pub(crate) t0: Instant,
    pub(crate) spawn_unix: f64,
    pub(crate) stdin: Option<ChildStdin>,
    /// First line matching the ready pattern: (when read, the line).
    ready_rx: Option<Receiver<(Instant, String)>>,
    /// The helper's report pipe.
    report: File,
    /// Set once the helper reported the program's exit.
    done: Option<Reaped>,
}

/// Exit status and resources of a reaped child.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Reaped {
    pub(crate) at: Option<Instant>,
    pub(crate) exit_code: Option<i32>,
    pub(crate) signal: Option<i32>,
    pub(crate) user_s: f64,
    pub(crate) sys_s: f64,
    /// ru_maxrss, bytes.
    pub(crate) peak_rss: u64,
}

fn watch_lines<R: Read + Send + 'static>(r: R, re: Regex, tx: mpsc::Sender<(Instant, String)>) {
    let _ = std::thread::Builder::new()
        .name("tunelab-ready".into())
        .spawn(move || {
            let mut rd = BufReader::new(r);
            let mut line = Vec::with_capacity(256);
            let mut matched = false;
            loop {
                line.clear();
                match rd.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        // Timestamp first: the match itself must not delay it.
                        let at = Instant::now();
                        if !matched {
                            let text = String::from_utf8_lossy(&line);
                            let text = text.trim_end_matches(['\n', '\r']);
                            if re.is_match(text) {
                                matched = true;
                                let _ = tx.send((at, text.to_string()));
                            }
                        }
                        // Keep draining so the program never blocks on a full pipe.
                    }
                }
            }
        });
}

/// Start `argv` (no shell) through the exec helper ([`exec_helper`]),
/// so that its rusage — above all its peak RSS — is its own and not
/// tunelab's. With `ready`, stdout and stderr are read line by line;
/// otherwise they go to /dev/null, like hyperfine. stdin is a pipe only for
/// `Quit::StdinClose`. Returns once the program has been exec'd.
pub(crate) fn start(argv: &[String], ready: Option<&Regex>, quit: Option<Quit>) -> Result<Started> {
    let prog = argv.first().ok_or_else(|| Error::usage("empty command"))?;
    exec_helper::ensure_linked();
    // Search PATH here, not in the helper: execvp's search runs in the
    // child before the exec and its page faults (~150 KiB of libc code
    // mapped) would count in the program's peak RSS.
    let resolved = resolve(prog)?;
    let (rep_r, rep_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| Error::environment(format!("pipe: {e} (too many open files?)")))?;
    // The helper inherits the write end: clear its close-on-exec flag.
    rustix::io::fcntl_setfd(&rep_w, rustix::io::FdFlags::empty())
        .map_err(|e| Error::environment(format!("fcntl: {e}")))?;
    let mut c = Command::new(crate::system::proc::SELF_EXE);
    c.arg0(exec_helper::ARG0)
        .arg(&resolved)
        .args(argv)
        .env(exec_helper::ENV, rep_w.as_raw_fd().to_string());
    let out = || {
        if ready.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        }
    };
    c.stdout(out()).stderr(out());
    c.stdin(if quit == Some(Quit::StdinClose) {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    contain(&mut c);
    let child = c.spawn().map_err(|e| {
        Error::environment(format!(
            "cannot start tunelab's exec helper (/proc/self/exe): {e}; is /proc mounted?"
        ))
    })?;
    drop(rep_w);
    let report = File::from(rep_r);
    let mut s = Started {
        child,
        pid: 0,
        t0: Instant::now(),
        spawn_unix: 0.0,
        stdin: None,
        ready_rx: None,
        report,
        done: None,
    };
    let fail = |s: &mut Started, e: Error| {
        let _ = s.child.kill();
        let _ = s.child.wait();
        Err(e)
    };
    match s.record() {
        Ok([TAG_PID, pid, t0, ..]) => {
            s.pid = pid as i32;
            s.t0 = instant_of(t0);
            s.spawn_unix = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
                - s.t0.elapsed().as_secs_f64();
        }
        Ok([TAG_FAIL, errno, ..]) => {
            return fail(
                &mut s,
                Error::measurement(format!(
                    "exec helper: {}",
                    std::io::Error::from_raw_os_error(errno as i32)
                )),
            )
        }
        Ok(_) => return fail(&mut s, Error::measurement("exec helper: unexpected report")),
        Err(e) => return fail(&mut s, e),
    }
    match s.record() {
        Ok([TAG_EXEC, ..]) => {}
        Ok([TAG_FAIL, errno, ..]) => {
            let _ = s.child.wait();
            let e = std::io::Error::from_raw_os_error(errno as i32);
            return Err(match e.kind() {
                std::io::ErrorKind::NotFound => Error::usage(format!("command not found: {prog}")),
                std::io::ErrorKind::PermissionDenied => {
                    Error::usage(format!("command is not executable: {prog}"))
                }
                _ => Error::measurement(format!("cannot start {prog}: {e}")),
            });
        }
        Ok(_) => return fail(&mut s, Error::measurement("exec helper: unexpected report")),
        Err(e) => return fail(&mut s, e),
    }
    s.ready_rx = ready.map(|re| {
        let (tx, rx) = mpsc::channel();
        if let Some(o) = s.child.stdout.take() {
            watch_lines(o, re.clone(), tx.clone());
        }
        if let Some(e) = s.child.stderr.take() {
            watch_lines(e, re.clone(), tx);
        }
        rx
    });
    s.stdin = s.child.stdin.take();
    Ok(s)
}

/// `prog` as execvp would find it: itself when it contains a '/', else the
/// first executable regular file of that name in $PATH.
fn resolve(prog: &str) -> Result<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if prog.contains('/') {
        return Ok(prog.into());
    }
    if prog.is_empty() {
        return Err(Error::usage("empty command"));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut found_not_exec = false;
    for dir in std::env::split_paths(&path) {
        let cand = if dir.as_os_str().is_empty() {
            std::path::PathBuf::from(prog)
        } else {
            dir.join(prog)
        };
        if let Ok(m) = std::fs::metadata(&cand) {
            if m.is_file() {
                if m.permissions().mode() & 0o111 != 0 {
                    return Ok(cand);
                }
                found_not_exec = true;
            }
        }
    }
    Err(Error::usage(if found_not_exec {
        format!("command is not executable: {prog}")
    } else {
        format!("command not found: {prog}")
    }))
}

/// The `Instant` of a CLOCK_MONOTONIC reading in ns (taken by the helper).
fn instant_of(ns: i64) -> Instant {
    let (now_ns, now) = (exec_helper::mono_ns(), Instant::now());
    if ns <= now_ns {
        now.checked_sub(Duration::from_nanos((now_ns - ns) as u64))
            .unwrap_or(now)
    } else {
        now + Duration::from_nanos((ns - now_ns) as u64)
    }
}

/// Make the helper killable and mortal with us: its own process group (so
/// a terminal's Ctrl-C reaches tunelab, which then kills the program) and
/// PR_SET_PDEATHSIG so the kernel kills it when tunelab dies, even by
/// SIGKILL. The helper gives the program its own group and death signal in
/// turn (see [`exec_helper`]). The death signal follows the *thread*
/// that forked: start programs from a thread that outlives them, as the
/// CLI's main thread does.
pub(crate) use crate::safety::child::contain;

/// Why a watched child was killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Killed {
    Signal,
    Deadline,
}

/// SIGKILL `pid`'s process group (the program leads one) and `pid`.
pub(crate) use crate::safety::child::kill_group;

/// What waiting for the ready line gave.
pub(crate) enum ReadyOutcome {
    Ready(Instant, String),
    /// The program closed its output (usually: exited) without the line.
    Closed,
    Timeout,
    Interrupted,
}

impl Started {
    /// Wait for the ready line, polling for Ctrl-C.
    pub(crate) fn wait_ready(&mut self, timeout: Duration) -> ReadyOutcome {
        let Some(rx) = &self.ready_rx else {
            return ReadyOutcome::Closed;
        };
        let end = self.t0 + timeout;
        loop {
            if signals::caught().is_some() {
                return ReadyOutcome::Interrupted;
            }
            let now = Instant::now();
            if now >= end {
                return ReadyOutcome::Timeout;
            }
            match rx.recv_timeout((end - now).min(Duration::from_millis(50))) {
                Ok((at, line)) => return ReadyOutcome::Ready(at, line),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return ReadyOutcome::Closed,
            }
        }
    }

    /// Wait at most `d` (not counted from the spawn) for the ready line.
    pub(crate) fn wait_ready_for(&mut self, d: Duration) -> ReadyOutcome {
        let Some(rx) = &self.ready_rx else {
            return ReadyOutcome::Closed;
        };
        match rx.recv_timeout(d) {
            Ok((at, line)) => ReadyOutcome::Ready(at, line),
            Err(RecvTimeoutError::Timeout) => ReadyOutcome::Timeout,
            Err(RecvTimeoutError::Disconnected) => {
                std::thread::sleep(d);
                ReadyOutcome::Closed
            }
        }
    }

    /// Ask the program to leave.
    pub(crate) fn quit(&mut self, how: Quit) {
        match how {
            Quit::Signal(sig) => crate::safety::child::send_signal(self.pid, sig, false),
            Quit::StdinClose => {
                self.stdin.take();
            }
        }
    }

    /// SIGKILL the program and its process group (not yet reaped by the helper).
    pub(crate) fn kill(&mut self) {
        if self.done.is_none() {
            kill_group(self.pid);
        }
    }

    /// Reap the program, killing it and its process group when a cancelling
    /// signal arrives or at `deadline`. The wait itself blocks on the
    /// helper's report (no polling delay enters the measured time); a
    /// watchdog thread does the killing. Returns the reaped program and why
    /// it was killed, if it was.
    pub(crate) fn reap_watched(
        &mut self,
        deadline: Option<Instant>,
    ) -> Result<(Reaped, Option<Killed>)> {
        let pid = self.pid;
        // Set under the lock once the helper reported the exit, so the
        // watchdog stops signalling before the pid can be recycled (the
        // helper reaps it just before it reports).
        let exited = Arc::new(Mutex::new(false));
        let killed: Arc<Mutex<Option<Killed>>> = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let (e2, k2, s2) = (exited.clone(), killed.clone(), stop.clone());
        let dog = std::thread::Builder::new()
            .name("tunelab-watchdog".into())
            .spawn(move || {
                while !s2.load(Ordering::SeqCst) {
                    let why = if signals::caught().is_some() {
                        Some(Killed::Signal)
                    } else if deadline.is_some_and(|d| Instant::now() >= d) {
                        Some(Killed::Deadline)
                    } else {
                        None
                    };
                    if let Some(w) = why {
                        let gone = e2.lock().map(|g| *g).unwrap_or(true);
                        if !gone {
                            kill_group(pid);
                            if let Ok(mut k) = k2.lock() {
                                *k = Some(w);
                            }
                        }
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
            .ok();
        let r = self.reap();
        if let Ok(mut g) = exited.lock() {
            *g = true;
        }
        stop.store(true, Ordering::SeqCst);
        if let Some(d) = dog {
            let _ = d.join();
        }
        let why = killed.lock().ok().and_then(|k| *k);
        Ok((r?, why))
    }

    /// One record from the helper (blocking).
    fn record(&mut self) -> Result<[i64; 7]> {
        let mut b = [0u8; RECORD];
        self.report.read_exact(&mut b).map_err(|e| {
            Error::measurement(format!(
                "tunelab's exec helper stopped without reporting ({e})"
            ))
        })?;
        let mut r = [0i64; 7];
        for (i, v) in r.iter_mut().enumerate() {
            *v = i64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or_default());
        }
        Ok(r)
    }

    fn finish(&mut self) -> Result<Reaped> {
        let r = loop {
            match self.record() {
                Ok([TAG_DONE, status, user_us, sys_us, maxrss_kib, t1, _]) => {
                    break reaped(status as i32, user_us, sys_us, maxrss_kib, t1)
                }
                Ok([TAG_FAIL, errno, ..]) => {
                    let _ = self.child.wait();
                    return Err(Error::measurement(format!(
                        "wait4({}): {}",
                        self.pid,
                        std::io::Error::from_raw_os_error(errno as i32)
                    )));
                }
                Ok(_) => continue,
                Err(e) => {
                    let _ = self.child.wait();
                    return Err(e);
                }
            }
        };
        let _ = self.child.wait();
        self.done = Some(r);
        Ok(r)
    }

    /// Reap the child (blocking) with its resource usage.
    pub(crate) fn reap(&mut self) -> Result<Reaped> {
        match self.done {
            Some(r) => Ok(r),
            None => self.finish(),
        }
    }

    /// Reap if it has exited, without blocking.
    pub(crate) fn try_reap(&mut self) -> Result<Option<Reaped>> {
        if let Some(r) = self.done {
            return Ok(Some(r));
        }
        let mut fds = [rustix::event::PollFd::new(
            &self.report,
            rustix::event::PollFlags::IN,
        )];
        let zero = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        match rustix::event::poll(&mut fds, Some(&zero)) {
            Ok(n) if n > 0 => self.finish().map(Some),
            _ => Ok(None),
        }
    }
}

fn reaped(status: i32, user_us: i64, sys_us: i64, maxrss_kib: i64, t1: i64) -> Reaped {
    let (exit_code, signal) = if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (None, None)
    };
    Reaped {
        at: Some(instant_of(t1)),
        exit_code,
        signal,
        user_s: user_us as f64 / 1e6,
        sys_s: sys_us as f64 / 1e6,
        peak_rss: maxrss_kib.max(0) as u64 * 1024,
    }
}

/// Run a helper command (`--prepare`, `--task`) through `sh -c`, output to
/// stderr, and fail if it fails.
pub(crate) fn run_shell(what: &str, text: &str) -> Result<()> {
    let st = Command::new("sh")
        .arg("-c")
        .arg(text)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_err(|e| Error::environment(format!("cannot run {what} command: {e}")))?;
    if st.success() {
        Ok(())
    } else {
        Err(Error::measurement(format!(
            "{what} command failed ({st}): {text}"
        )))
    }
}

/// The `--ready` regular expression of time, boot and memory, or a usage error.
pub(crate) fn ready_regex(text: Option<&str>) -> Result<Option<Regex>> {
    text.map(Regex::new)
        .transpose()
        .map_err(|e| Error::usage(format!("--ready is not a valid regular expression: {e}")))
}

/// Signal number from a name: TERM, SIGINT, 9, ...
pub(crate) fn parse_signal(s: &str) -> std::result::Result<i32, String> {
    if let Ok(n) = s.parse::<i32>() {
        if (1..=64).contains(&n) {
            return Ok(n);
        }
    }
    let up = s.to_ascii_uppercase();
    let name = up.strip_prefix("SIG").unwrap_or(&up);
    use rustix::process::Signal;
    Ok(match name {
        "TERM" => Signal::TERM,
        "INT" => Signal::INT,
        "KILL" => Signal::KILL,
        "HUP" => Signal::HUP,
        "QUIT" => Signal::QUIT,
        "USR1" => Signal::USR1,
        "USR2" => Signal::USR2,
        _ => {
            return Err(format!(
                "'{s}' is not a signal (TERM, INT, KILL, HUP, QUIT, USR1, USR2 or a number)"
            ))
        }
    }
    .as_raw())
}

#[cfg(test)]
mod tests;
