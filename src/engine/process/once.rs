//! One timed start (and stop) of a program — what a trial of `app.time`
//! and of `tunelab time` is: spawned through the exec helper, optionally
//! timed to a ready line and asked to quit, reaped with its own rusage.

use std::time::Duration;

use regex::Regex;
use serde::Serialize;

use super::{Killed, Quit, ReadyOutcome};
use crate::engine::{metric_in, Metric, MetricSpec, TrialValues};
use crate::safety::signals;
use crate::{Error, Result};

/// What `tunelab time` asks of each trial besides the command.
#[derive(Debug, Clone)]
pub(crate) struct TimeSpec {
    pub(crate) ready: Option<Regex>,
    pub(crate) quit: Quit,
    pub(crate) ready_timeout: Duration,
    /// Kill a run (and its process group) still going after this long.
    pub(crate) max_run: Option<Duration>,
}

impl Default for TimeSpec {
    fn default() -> Self {
        TimeSpec {
            ready: None,
            quit: Quit::Signal(rustix::process::Signal::TERM.as_raw()),
            ready_timeout: Duration::from_secs(30),
            max_run: None,
        }
    }
}

/// One measured start (and stop) of the program.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AppTrial {
    pub(crate) command: String,
    pub(crate) wall_s: f64,
    pub(crate) user_s: f64,
    pub(crate) sys_s: f64,
    pub(crate) peak_rss_bytes: u64,
    pub(crate) exit_code: Option<i32>,
    pub(crate) signal: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ready_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) exit_s: Option<f64>,
    /// CLOCK_REALTIME just before the spawn (to line up with timestamps the
    /// program prints itself).
    pub(crate) spawn_unix_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ready_line: Option<String>,
    pub(crate) warmup: bool,
    /// Order of execution across all commands (shows the A B A B interleaving).
    pub(crate) seq: usize,
}

// The handles of METRICS (checked while compiling, see `metric_in`).
const WALL: Metric = metric_in(&METRICS, "wall_time");
const USER: Metric = metric_in(&METRICS, "user_time");
const SYS: Metric = metric_in(&METRICS, "sys_time");
const PEAK_RSS: Metric = metric_in(&METRICS, "peak_rss");
const READY: Metric = metric_in(&METRICS, "ready_time");
const EXIT: Metric = metric_in(&METRICS, "exit_time");

impl AppTrial {
    pub(crate) fn values(&self) -> TrialValues {
        let mut v = TrialValues::new()
            .with(WALL, self.wall_s)
            .with(USER, self.user_s)
            .with(SYS, self.sys_s)
            .with(PEAK_RSS, self.peak_rss_bytes as f64);
        if let Some(r) = self.ready_s {
            v.set(READY, r);
        }
        if let Some(e) = self.exit_s {
            v.set(EXIT, e);
        }
        v
    }
}

/// Start `argv`, optionally wait for the ready line and ask it to quit, reap it.
pub(crate) fn run_once(label: &str, argv: &[String], spec: &TimeSpec) -> Result<AppTrial> {
    let quit = spec.ready.as_ref().map(|_| spec.quit);
    let mut s = super::start(argv, spec.ready.as_ref(), quit)?;
    let mut ready = None;
    let mut quit_at = None;
    if let Some(re) = &spec.ready {
        match s.wait_ready(spec.ready_timeout) {
            ReadyOutcome::Ready(at, line) => {
                ready = Some((at.duration_since(s.t0).as_secs_f64(), line));
                quit_at = Some(std::time::Instant::now());
                s.quit(spec.quit);
            }
            other => {
                s.kill();
                let _ = s.reap();
                return Err(match other {
                    ReadyOutcome::Interrupted => {
                        Error::Interrupted(signals::caught().unwrap_or("a signal").into())
                    }
                    ReadyOutcome::Timeout => Error::measurement(format!(
                        "{label}: no output line matched /{re}/ within {:.0} s (--ready-timeout)",
                        spec.ready_timeout.as_secs_f64()
                    )),
                    _ => Error::measurement(format!(
                        "{label}: the program closed its output (exited?) without printing a line matching /{re}/"
                    )),
                });
            }
        }
    }
    // Signals and the deadline kill the program and its process group.
    let (r, killed) = s.reap_watched(spec.max_run.map(|d| s.t0 + d))?;
    match killed {
        Some(Killed::Signal) => {
            return Err(Error::Interrupted(
                signals::caught().unwrap_or("a signal").into(),
            ))
        }
        Some(Killed::Deadline) => {
            return Err(Error::measurement(format!(
                "{label}: still running after {:.1} s, longer than the whole --budget; killed it \
                 and its process group",
                spec.max_run.unwrap_or_default().as_secs_f64()
            )))
        }
        None => {}
    }
    let end = r.at.unwrap_or_else(std::time::Instant::now);
    Ok(AppTrial {
        command: label.to_string(),
        wall_s: end.duration_since(s.t0).as_secs_f64(),
        user_s: r.user_s,
        sys_s: r.sys_s,
        peak_rss_bytes: r.peak_rss,
        exit_code: r.exit_code,
        signal: r.signal,
        exit_s: quit_at.map(|q| end.duration_since(q).as_secs_f64()),
        ready_s: ready.as_ref().map(|r| r.0),
        ready_line: ready.map(|r| r.1),
        spawn_unix_s: s.spawn_unix,
        warmup: false,
        seq: 0,
    })
}

pub(crate) const METRICS: [MetricSpec; 6] = [
    MetricSpec::lower(
        "wall_time",
        "s",
        "start to exit, monotonic clock (spawn → wait4)",
    ),
    MetricSpec::lower(
        "user_time",
        "s",
        "the program's user CPU time (wait4 rusage)",
    ),
    MetricSpec::lower(
        "sys_time",
        "s",
        "the program's system CPU time (wait4 rusage)",
    ),
    MetricSpec::lower(
        "peak_rss",
        "B",
        "the program's own peak resident set size (ru_maxrss, spawned from a small helper)",
    ),
    MetricSpec::lower(
        "ready_time",
        "s",
        "spawn → first output line matching --ready (tunelab time only)",
    ),
    MetricSpec::lower(
        "exit_time",
        "s",
        "quit request → exit (tunelab time --ready only)",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_a_sleep() {
        let argv = vec!["sleep".to_string(), "0.05".to_string()];
        let t = run_once("sleep 0.05", &argv, &TimeSpec::default()).unwrap();
        assert!(t.wall_s >= 0.05 && t.wall_s < 0.5, "{}", t.wall_s);
        assert_eq!(t.exit_code, Some(0));
        assert!(t.user_s + t.sys_s < 0.05);
        assert!(t.peak_rss_bytes > 100_000);
    }

    /// Regression (issue 11.1): a program spawned from a process holding a
    /// lot of memory reported that process's peak RSS as its own.
    #[test]
    fn peak_rss_is_the_programs_own() {
        let big = vec![1u8; 96 << 20];
        let touched: u64 = big.iter().step_by(4096).map(|&b| b as u64).sum();
        assert!(touched > 0);
        let argv = vec!["true".to_string()];
        let t = run_once("true", &argv, &TimeSpec::default()).unwrap();
        drop(big);
        assert!(
            t.peak_rss_bytes < 16 << 20,
            "peak_rss of `true` is {} B while tunelab holds 96 MiB",
            t.peak_rss_bytes
        );
        assert!(t.peak_rss_bytes > 200 << 10, "{}", t.peak_rss_bytes);
        assert!(t.wall_s > 0.0 && t.wall_s < 1.0, "{}", t.wall_s);
        let e = run_once("x", &["no-such-cmd-xyz".to_string()], &TimeSpec::default())
            .err()
            .unwrap();
        assert_eq!(e.exit_code(), 2, "{e}");
    }

    #[test]
    fn ready_and_exit() {
        let spec = TimeSpec {
            ready: Some(Regex::new("up").unwrap()),
            quit: Quit::StdinClose,
            ready_timeout: Duration::from_secs(5),
            max_run: None,
        };
        let argv = super::super::argv_for("sleep 0.1; echo up; read x; sleep 0.05", true).unwrap();
        let t = run_once("x", &argv, &spec).unwrap();
        let r = t.ready_s.unwrap();
        assert!((0.1..0.3).contains(&r), "ready {r}");
        let e = t.exit_s.unwrap();
        assert!((0.05..0.3).contains(&e), "exit {e}");
        assert_eq!(t.exit_code, Some(0));
        let spec = TimeSpec {
            ready: Some(Regex::new("never").unwrap()),
            ..spec
        };
        assert_eq!(run_once("x", &argv, &spec).unwrap_err().exit_code(), 1);
    }

    #[test]
    fn a_run_past_its_deadline_is_killed_with_its_group() {
        let spec = TimeSpec {
            max_run: Some(Duration::from_millis(300)),
            ..TimeSpec::default()
        };
        // A shell whose child would outlive it: both must go.
        let argv =
            super::super::argv_for("sleep 1000 & echo $! > /dev/null; sleep 1000", true).unwrap();
        let t0 = std::time::Instant::now();
        let e = run_once("x", &argv, &spec).unwrap_err();
        assert_eq!(e.exit_code(), 1, "{e}");
        assert!(e.to_string().contains("killed"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }
}
