//! Starting a program without a shell, watching its output for a "ready"
//! line, stopping it, and reaping it with wait4 to get its own rusage.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use regex::Regex;

use crate::safety::signals;
use crate::{Error, Result};

/// Split a command line into words like a shell would for simple cases:
/// whitespace separates, '…' and "…" quote, backslash escapes. No
/// expansion of any kind.
pub fn split_words(s: &str) -> Result<Vec<String>> {
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
pub fn argv_for(text: &str, shell: bool) -> Result<Vec<String>> {
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
pub enum Quit {
    Signal(i32),
    StdinClose,
}

/// A started program.
pub struct Started {
    pub child: Child,
    pub pid: i32,
    /// Monotonic and wall clock read together just before the spawn.
    pub t0: Instant,
    pub spawn_unix: f64,
    pub stdin: Option<ChildStdin>,
    /// First line matching the ready pattern: (when read, the line).
    ready_rx: Option<Receiver<(Instant, String)>>,
}

/// Exit status and resources of a reaped child.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reaped {
    pub at: Option<Instant>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub user_s: f64,
    pub sys_s: f64,
    /// ru_maxrss, bytes.
    pub peak_rss: u64,
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

/// Start `argv` (no shell). With `ready`, stdout and stderr are read line by
/// line; otherwise they go to /dev/null, like hyperfine. stdin is a pipe
/// only for `Quit::StdinClose`.
pub fn start(argv: &[String], ready: Option<&Regex>, quit: Option<Quit>) -> Result<Started> {
    let (prog, args) = argv
        .split_first()
        .ok_or_else(|| Error::usage("empty command"))?;
    let mut c = Command::new(prog);
    c.args(args);
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
    let spawn_unix = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let t0 = Instant::now();
    let mut child = c.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::usage(format!("command not found: {prog}")),
        std::io::ErrorKind::PermissionDenied => {
            Error::usage(format!("command is not executable: {prog}"))
        }
        _ => Error::measurement(format!("cannot start {prog}: {e}")),
    })?;
    let pid = child.id() as i32;
    let ready_rx = ready.map(|re| {
        let (tx, rx) = mpsc::channel();
        if let Some(o) = child.stdout.take() {
            watch_lines(o, re.clone(), tx.clone());
        }
        if let Some(e) = child.stderr.take() {
            watch_lines(e, re.clone(), tx);
        }
        rx
    });
    let stdin = child.stdin.take();
    Ok(Started {
        child,
        pid,
        t0,
        spawn_unix,
        stdin,
        ready_rx,
    })
}

/// Make a child killable as a whole and mortal with us: its own process
/// group (so killing the group takes its children too, and a terminal's
/// Ctrl-C reaches tunelab, which then kills it), and PR_SET_PDEATHSIG so the
/// kernel kills it when tunelab dies, even by SIGKILL. (The death signal
/// follows the *thread* that forked: start programs from a thread that
/// outlives them, as the CLI's main thread does.)
pub fn contain(c: &mut Command) {
    c.process_group(0);
    // SAFETY: getpid before the fork.
    let parent = unsafe { libc::getpid() };
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
            Ok(())
        });
    }
}

/// Why a watched child was killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Killed {
    Signal,
    Deadline,
}

/// What waiting for the ready line gave.
pub enum ReadyOutcome {
    Ready(Instant, String),
    /// The program closed its output (usually: exited) without the line.
    Closed,
    Timeout,
    Interrupted,
}

impl Started {
    /// Wait for the ready line, polling for Ctrl-C.
    pub fn wait_ready(&mut self, timeout: Duration) -> ReadyOutcome {
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
    pub fn wait_ready_for(&mut self, d: Duration) -> ReadyOutcome {
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
    pub fn quit(&mut self, how: Quit) {
        match how {
            Quit::Signal(sig) => unsafe {
                libc::kill(self.pid, sig);
            },
            Quit::StdinClose => {
                self.stdin.take();
            }
        }
    }

    /// SIGKILL the program and its process group.
    pub fn kill(&mut self) {
        kill_group(self.pid);
    }

    /// Reap the child (blocking) with its resource usage.
    pub fn reap(&mut self) -> Result<Reaped> {
        wait4(self.pid, 0)?.ok_or_else(|| Error::measurement("internal: wait4 returned no child"))
    }

    /// Reap the child, killing it and its process group when a cancelling
    /// signal arrives or at `deadline`. The wait itself blocks (no polling
    /// delay enters the measured time); a watchdog thread does the killing.
    /// Returns the reaped child and why it was killed, if it was.
    pub fn reap_watched(&mut self, deadline: Option<Instant>) -> Result<(Reaped, Option<Killed>)> {
        let pid = self.pid;
        // `exited` is set under the lock once the child is a zombie, so the
        // watchdog never signals a recycled pid.
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
        let at = wait_exited(pid);
        if let Ok(mut g) = exited.lock() {
            *g = true;
        }
        stop.store(true, Ordering::SeqCst);
        if let Some(d) = dog {
            let _ = d.join();
        }
        let mut r = self.reap()?;
        if let Some(at) = at {
            r.at = Some(at);
        }
        let why = killed.lock().ok().and_then(|k| *k);
        Ok((r, why))
    }

    /// Reap if it has exited, without blocking.
    pub fn try_reap(&mut self) -> Result<Option<Reaped>> {
        wait4(self.pid, libc::WNOHANG)
    }
}

/// SIGKILL `pid`'s process group (it leads one, see `contain`) and `pid`.
pub fn kill_group(pid: i32) {
    // SAFETY: plain kill(2) calls.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Block until `pid` has exited, leaving it a zombie (waitid WNOWAIT), and
/// return when that was seen. None when waitid is not usable.
fn wait_exited(pid: i32) -> Option<Instant> {
    loop {
        // SAFETY: waitid with a valid out-pointer.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            return Some(Instant::now());
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return None;
        }
    }
}

fn tv(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 / 1e6
}

/// wait4(2): the child's own user/sys time and peak RSS.
pub fn wait4(pid: i32, options: i32) -> Result<Option<Reaped>> {
    let mut status = 0;
    // SAFETY: plain syscall with valid out-pointers.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let r = unsafe { libc::wait4(pid, &mut status, options, &mut ru) };
        if r == 0 {
            return Ok(None);
        }
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(Error::measurement(format!("wait4({pid}): {e}")));
        }
        let at = Some(Instant::now());
        let (exit_code, signal) = if libc::WIFEXITED(status) {
            (Some(libc::WEXITSTATUS(status)), None)
        } else if libc::WIFSIGNALED(status) {
            (None, Some(libc::WTERMSIG(status)))
        } else {
            (None, None)
        };
        return Ok(Some(Reaped {
            at,
            exit_code,
            signal,
            user_s: tv(ru.ru_utime),
            sys_s: tv(ru.ru_stime),
            peak_rss: ru.ru_maxrss.max(0) as u64 * 1024,
        }));
    }
}

/// Run a helper command (`--prepare`, `--task`) through `sh -c`, output to
/// stderr, and fail if it fails.
pub fn run_shell(what: &str, text: &str) -> Result<()> {
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

/// Signal number from a name: TERM, SIGINT, 9, ...
pub fn parse_signal(s: &str) -> std::result::Result<i32, String> {
    if let Ok(n) = s.parse::<i32>() {
        if (1..=64).contains(&n) {
            return Ok(n);
        }
    }
    let up = s.to_ascii_uppercase();
    let name = up.strip_prefix("SIG").unwrap_or(&up);
    Ok(match name {
        "TERM" => libc::SIGTERM,
        "INT" => libc::SIGINT,
        "KILL" => libc::SIGKILL,
        "HUP" => libc::SIGHUP,
        "QUIT" => libc::SIGQUIT,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        _ => {
            return Err(format!(
                "'{s}' is not a signal (TERM, INT, KILL, HUP, QUIT, USR1, USR2 or a number)"
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words() {
        assert_eq!(
            split_words(r#"grep -e 'a b' "c\"d" e\ f"#).unwrap(),
            ["grep", "-e", "a b", "c\"d", "e f"]
        );
        assert_eq!(split_words("x ''").unwrap(), ["x", ""]);
        assert!(split_words("  ").is_err());
        assert!(split_words("'open").is_err());
        assert_eq!(argv_for("a | b", true).unwrap()[2], "a | b");
    }

    #[test]
    fn signals_by_name() {
        assert_eq!(parse_signal("term"), Ok(libc::SIGTERM));
        assert_eq!(parse_signal("SIGINT"), Ok(libc::SIGINT));
        assert_eq!(parse_signal("9"), Ok(9));
        assert!(parse_signal("bogus").is_err());
    }

    #[test]
    fn start_ready_quit_reap() {
        let re = Regex::new("^READY").unwrap();
        let argv: Vec<String> = ["sh", "-c", "echo noise; echo READY >&2; exec sleep 5"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut s = start(&argv, Some(&re), None).unwrap();
        match s.wait_ready(Duration::from_secs(5)) {
            ReadyOutcome::Ready(_, line) => assert_eq!(line, "READY"),
            _ => panic!("no ready line"),
        }
        s.quit(Quit::Signal(libc::SIGTERM));
        let r = s.reap().unwrap();
        assert_eq!(r.signal, Some(libc::SIGTERM));
        assert!(r.peak_rss > 0);
        let e = start(&["no-such-cmd-xyz".to_string()], None, None)
            .err()
            .unwrap();
        assert_eq!(e.exit_code(), 2);
    }
}
