//! hogs: the processes (or threads) that used the most CPU in an interval,
//! like QNX `hogs -n -% 5`.
//!
//! Reading is kept cheap because it runs once per interval over every
//! process: only `/proc/<pid>/stat` (one small read each, into one reused
//! buffer), never `status` or `cmdline`. `delta()` is pure: it pairs two
//! readings by (pid, start time) so a recycled pid is not mistaken for the old
//! process, ignores processes that exited between the readings, and counts a
//! process born during the interval from zero.

use std::collections::HashMap;
use std::io::Read;

use serde::{Deserialize, Serialize};

/// CPU time of one task at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TaskTimes {
    pub(crate) pid: i32,
    /// Thread id when threads are listed (None for a whole process).
    pub(crate) tid: Option<i32>,
    pub(crate) name: String,
    /// utime + stime, in clock ticks (USER_HZ).
    pub(crate) ticks: u64,
    /// Start time after boot in ticks: with `pid` it identifies the task.
    pub(crate) start: u64,
}

/// One hogs line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct HogRow {
    pub(crate) pid: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tid: Option<i32>,
    pub(crate) name: String,
    /// CPU seconds used during the interval.
    pub(crate) cpu_s: f64,
    /// % of one CPU (can exceed 100 for a multi-threaded process).
    pub(crate) pct_cpu: f64,
    /// % of the whole machine (all CPUs).
    pub(crate) pct_machine: f64,
}

/// Parse the fields we need from a `/proc/<pid>/stat` line: (comm, utime +
/// stime, starttime). The comm may contain spaces and parentheses, so the
/// fields are found after the *last* ')'.
pub(crate) fn parse_stat(line: &str) -> Option<(String, u64, u64)> {
    let s = crate::system::proc::Stat::parse(line)?;
    Some((s.comm.to_string(), s.utime()? + s.stime()?, s.starttime()?))
}

/// Reads `/proc` repeatedly with one reused buffer. The `stat` file of each
/// process stays open between intervals and is re-read with pread at
/// offset 0 (procfs regenerates it), which halves the cost of a scan: with
/// 1000 processes at 1 Hz that is the difference between ~1.7% and well
/// under 1% of a CPU. At most `max_open` files are kept (the rest are
/// opened and closed each time).
pub(crate) struct HogsReader {
    buf: String,
    bytes: Vec<u8>,
    path: String,
    open: HashMap<i32, std::fs::File>,
    max_open: usize,
}

impl Default for HogsReader {
    fn default() -> Self {
        Self::new()
    }
}

/// Raise the soft open-file limit to the hard one; returns the soft limit.
fn raise_nofile() -> usize {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    // None is unlimited.
    let r = getrlimit(Resource::Nofile);
    let (cur, max) = (r.current.unwrap_or(u64::MAX), r.maximum.unwrap_or(u64::MAX));
    if cur < max {
        let want = Rlimit {
            current: Some(max.min(1 << 20)),
            maximum: r.maximum,
        };
        if setrlimit(Resource::Nofile, want).is_ok() {
            return max.min(1 << 20) as usize;
        }
    }
    cur as usize
}

impl HogsReader {
    pub(crate) fn new() -> Self {
        HogsReader {
            buf: String::with_capacity(512),
            bytes: vec![0; 1024],
            path: String::with_capacity(64),
            open: HashMap::new(),
            max_open: raise_nofile().saturating_sub(128),
        }
    }

    /// pread a kept-open stat file; None when the process is gone.
    fn read_kept(&mut self, pid: i32) -> Option<TaskTimes> {
        use std::os::unix::fs::FileExt;
        let f = self.open.get(&pid)?;
        let n = f.read_at(&mut self.bytes, 0).ok().filter(|&n| n > 0)?;
        let text = std::str::from_utf8(&self.bytes[..n]).ok()?;
        let (name, ticks, start) = parse_stat(text)?;
        Some(TaskTimes {
            pid,
            tid: None,
            name,
            ticks,
            start,
        })
    }

    fn read_stat(&mut self, pid: i32, tid: Option<i32>) -> Option<TaskTimes> {
        crate::system::proc::stat_path_into(&mut self.path, pid, tid);
        self.buf.clear();
        // The task may exit at any moment: any error just drops it.
        std::fs::File::open(&self.path)
            .ok()?
            .read_to_string(&mut self.buf)
            .ok()?;
        let (name, ticks, start) = parse_stat(&self.buf)?;
        Some(TaskTimes {
            pid,
            tid,
            name,
            ticks,
            start,
        })
    }

    /// Every process (or, with `threads`, every thread) now.
    pub(crate) fn read(&mut self, threads: bool) -> Vec<TaskTimes> {
        let mut out = Vec::with_capacity(256);
        for pid in crate::system::proc::pids() {
            if threads {
                let Ok(tids) = crate::system::proc::tids(pid) else {
                    continue;
                };
                for tid in tids {
                    if let Some(t) = self.read_stat(pid, Some(tid)) {
                        out.push(t);
                    }
                }
            } else {
                if let Some(t) = self.read_kept(pid) {
                    out.push(t);
                    continue;
                }
                // Not kept, or stale (the process exited; the pid may be reused).
                self.open.remove(&pid);
                if self.open.len() < self.max_open {
                    if let Ok(f) = std::fs::File::open(crate::system::proc::pid_path(pid, "stat")) {
                        self.open.insert(pid, f);
                        if let Some(t) = self.read_kept(pid) {
                            out.push(t);
                        }
                        continue;
                    }
                } else if let Some(t) = self.read_stat(pid, None) {
                    out.push(t);
                }
            }
        }
        if !threads && self.open.len() > out.len() {
            let live: std::collections::HashSet<i32> = out.iter().map(|t| t.pid).collect();
            self.open.retain(|p, _| live.contains(p));
        }
        out
    }
}

/// Options of the hogs view.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HogsFilter {
    /// Only tasks using at least this % of one CPU.
    pub(crate) min_pct: f64,
    /// At most this many rows.
    pub(crate) limit: usize,
}

/// The CPU hogs between two readings `seconds` apart on a machine with
/// `ncpu` CPUs and `hz` ticks per second, busiest first.
pub(crate) fn delta(
    prev: &[TaskTimes],
    cur: &[TaskTimes],
    seconds: f64,
    ncpu: usize,
    hz: u64,
    filter: HogsFilter,
) -> Vec<HogRow> {
    if seconds <= 0.0 || hz == 0 {
        return Vec::new();
    }
    let before: HashMap<(i32, Option<i32>, u64), u64> = prev
        .iter()
        .map(|t| ((t.pid, t.tid, t.start), t.ticks))
        .collect();
    let mut rows: Vec<HogRow> = cur
        .iter()
        .filter_map(|t| {
            // Not seen before: born during the interval, all its time is new.
            let base = before.get(&(t.pid, t.tid, t.start)).copied().unwrap_or(0);
            let ticks = t.ticks.saturating_sub(base);
            if ticks == 0 {
                return None;
            }
            let cpu_s = ticks as f64 / hz as f64;
            let pct_cpu = cpu_s / seconds * 100.0;
            (pct_cpu >= filter.min_pct).then(|| HogRow {
                pid: t.pid,
                tid: t.tid,
                name: t.name.clone(),
                cpu_s,
                pct_cpu,
                pct_machine: pct_cpu / ncpu.max(1) as f64,
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        b.cpu_s
            .total_cmp(&a.cpu_s)
            .then(a.pid.cmp(&b.pid))
            .then(a.tid.cmp(&b.tid))
    });
    rows.truncate(filter.limit);
    rows
}

/// Clock ticks per second (USER_HZ) of /proc/<pid>/stat times.
pub(crate) fn ticks_per_second() -> u64 {
    crate::system::proc::ticks_per_second()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(pid: i32, name: &str, ticks: u64, start: u64) -> TaskTimes {
        TaskTimes {
            pid,
            tid: None,
            name: name.into(),
            ticks,
            start,
        }
    }

    const ALL: HogsFilter = HogsFilter {
        min_pct: 0.0,
        limit: 100,
    };

    #[test]
    fn parses_odd_names() {
        let line = "1234 (we ird) (x)) S 1 1234 1234 0 -1 4194560 100 0 0 0 \
                    70 30 0 0 20 0 1 0 5555 1000000 100 18446744073709551615";
        assert_eq!(parse_stat(line), Some(("we ird) (x)".into(), 100, 5555)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S 1 2"), None);
    }

    #[test]
    fn vanished_new_and_recycled() {
        let prev = vec![
            t(10, "busy", 1000, 1),
            t(11, "gone", 500, 2),
            t(12, "old", 300, 3),
            t(14, "idle", 50, 5),
        ];
        let cur = vec![
            t(10, "busy", 1100, 1), // +100 ticks = 1 s of CPU
            // 11 exited between the readings: ignored.
            t(12, "recycled", 20, 900), // same pid, new process: 20 ticks
            t(13, "born", 40, 950),     // new: all of its 40 ticks
            t(14, "idle", 50, 5),       // no CPU: not listed
        ];
        let rows = delta(&prev, &cur, 2.0, 2, 100, ALL);
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["busy", "born", "recycled"]);
        assert_eq!(rows[0].cpu_s, 1.0);
        assert_eq!(rows[0].pct_cpu, 50.0);
        assert_eq!(rows[0].pct_machine, 25.0);
        assert!((rows[1].pct_cpu - 20.0).abs() < 1e-9);
    }

    #[test]
    fn filter_and_limit() {
        let prev = vec![t(1, "a", 0, 1), t(2, "b", 0, 1), t(3, "c", 0, 1)];
        let cur = vec![t(1, "a", 90, 1), t(2, "b", 4, 1), t(3, "c", 60, 1)];
        let f = HogsFilter {
            min_pct: 5.0,
            limit: 1,
        };
        let rows = delta(&prev, &cur, 1.0, 1, 100, f);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].name, "a");
        let f = HogsFilter {
            min_pct: 5.0,
            limit: 10,
        };
        assert_eq!(delta(&prev, &cur, 1.0, 1, 100, f).len(), 2);
        assert!(delta(&prev, &cur, 0.0, 1, 100, f).is_empty());
    }

    #[test]
    fn real_read_sees_ourselves() {
        let mut r = HogsReader::new();
        let me = std::process::id() as i32;
        assert!(r.read(false).iter().any(|t| t.pid == me));
        assert!(r.read(true).iter().any(|t| t.tid == Some(me)));
    }
}
