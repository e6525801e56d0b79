//! The diagnosed workload's own figures: for every process of its tree,
//! user and system time, faults, context switches and I/O calls
//! (/proc/PID/{stat,status,io}, which include the process's exited
//! threads), and every thread's run-queue wait (/proc/PID/task/TID/schedstat),
//! read at the start, every 100 ms and at the end. A command's totals are
//! the kernel's own account at its exit (wait4's rusage) where it has the
//! figure. Findings about the workload use these, not machine-wide figures.
//!
//! tunelab itself is never part of them: a command's tree is the child's,
//! the whole-machine view leaves tunelab's pid out, and tunelab's own CPU
//! time over the interval is measured (/proc/self/stat) and stated once.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::procs::{self, Scope};
use super::{overhead, thread_cpu_s, Sampled, Ticker};
use crate::model::diagnosis::{Section, TaskFigures, WorkloadReport};

/// The kernel's rusage of a reaped command (wait4).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Usage {
    pub(crate) user_s: f64,
    pub(crate) system_s: f64,
    pub(crate) minor_faults: u64,
    pub(crate) major_faults: u64,
    pub(crate) voluntary: u64,
    pub(crate) involuntary: u64,
}

fn ticks() -> f64 {
    let t = rustix::param::clock_ticks_per_second();
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// /proc/PID/stat → (minflt, majflt, utime ticks, stime ticks).
pub(crate) fn parse_stat_figures(text: &str) -> Option<(u64, u64, u64, u64)> {
    let s = crate::system::proc::Stat::parse(text)?;
    Some((s.minflt()?, s.majflt()?, s.utime()?, s.stime()?))
}

/// "key: value" lines of /proc/PID/status or /proc/PID/io.
fn keyed(text: &str, key: &str) -> u64 {
    crate::system::proc::keyed::number(text, key).unwrap_or(0)
}

/// One process's cumulative figures now.
fn reading(root: &Path, pid: i32, tick: f64) -> Option<TaskFigures> {
    let proc = crate::system::proc::Root::under(root);
    let stat = proc.read_pid(pid, "stat").ok()?;
    let (minflt, majflt, ut, st) = parse_stat_figures(&stat)?;
    let status = proc.read_pid(pid, "status").unwrap_or_default();
    let io = proc.read_pid(pid, "io").unwrap_or_default();
    Some(TaskFigures {
        pid,
        user_s: ut as f64 / tick,
        system_s: st as f64 / tick,
        minor_faults: minflt,
        major_faults: majflt,
        voluntary_switches: keyed(&status, "voluntary_ctxt_switches"),
        involuntary_switches: keyed(&status, "nonvoluntary_ctxt_switches"),
        rchar: keyed(&io, "rchar"),
        wchar: keyed(&io, "wchar"),
        syscr: keyed(&io, "syscr"),
        syscw: keyed(&io, "syscw"),
        read_bytes: keyed(&io, "read_bytes"),
        write_bytes: keyed(&io, "write_bytes"),
        ..Default::default()
    })
}

fn minus(a: &TaskFigures, b: &TaskFigures) -> TaskFigures {
    let d = |x: u64, y: u64| x.saturating_sub(y);
    TaskFigures {
        comm: a.comm.clone(),
        pid: a.pid,
        processes: 1,
        threads: 0,
        user_s: (a.user_s - b.user_s).max(0.0),
        system_s: (a.system_s - b.system_s).max(0.0),
        runqueue_s: 0.0,
        voluntary_switches: d(a.voluntary_switches, b.voluntary_switches),
        involuntary_switches: d(a.involuntary_switches, b.involuntary_switches),
        minor_faults: d(a.minor_faults, b.minor_faults),
        major_faults: d(a.major_faults, b.major_faults),
        rchar: d(a.rchar, b.rchar),
        wchar: d(a.wchar, b.wchar),
        syscr: d(a.syscr, b.syscr),
        syscw: d(a.syscw, b.syscw),
        read_bytes: d(a.read_bytes, b.read_bytes),
        write_bytes: d(a.write_bytes, b.write_bytes),
    }
}

/// tunelab's own CPU time so far (all threads, to the ns: clock ticks
/// of /proc/self/stat are too coarse for a budget of 1%), s.
pub(crate) fn own_cpu_s() -> f64 {
    // rustix's clock_gettime cannot fail for a standard clock.
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

pub(crate) struct Tracker {
    root: PathBuf,
    scope: Scope,
    tick: f64,
    /// Processes present at the first reading: their baseline is that
    /// reading; later ones start from zero.
    initial: Option<HashSet<i32>>,
    first: HashMap<i32, TaskFigures>,
    last: HashMap<i32, TaskFigures>,
    comms: HashMap<i32, String>,
    /// Per thread: (pid, schedstat wait ns first, last).
    threads: HashMap<i32, (i32, u64, u64)>,
    initial_threads: Option<HashSet<i32>>,
    /// Whether the command has exec'd (before it, the child is tunelab's
    /// fork waiting for its release: not the workload).
    gate: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl Tracker {
    pub(crate) fn new(
        root: &Path,
        scope: Scope,
        gate: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    ) -> Tracker {
        Tracker {
            root: root.to_path_buf(),
            scope,
            tick: ticks(),
            initial: None,
            first: HashMap::new(),
            last: HashMap::new(),
            comms: HashMap::new(),
            threads: HashMap::new(),
            initial_threads: None,
            gate,
        }
    }
}

impl Sampled for Tracker {
    fn sample(&mut self) {
        let procs = procs::processes(&self.root, &self.scope);
        let first_time = self.initial.is_none();
        if first_time {
            self.initial = Some(procs.keys().copied().collect());
        }
        let released = self
            .gate
            .as_ref()
            .is_none_or(|g| g.load(std::sync::atomic::Ordering::SeqCst));
        let mut seen_threads = Vec::new();
        for (pid, comm) in &procs {
            let Some(now) = reading(&self.root, *pid, self.tick) else {
                continue;
            };
            // The command's name is known once it exec'd.
            if released {
                self.comms.insert(*pid, comm.clone());
            } else {
                self.comms.entry(*pid).or_insert_with(|| comm.clone());
            }
            let initial = self.initial.as_ref().is_some_and(|s| s.contains(pid));
            self.first.entry(*pid).or_insert_with(|| {
                if initial {
                    now.clone()
                } else {
                    TaskFigures::default()
                }
            });
            self.last.insert(*pid, now);
            for tid in procs::tasks(&self.root, *pid) {
                seen_threads.push(tid);
                let Some((_, wait, _)) = std::fs::read_to_string(
                    crate::system::proc::Root::under(&self.root).task_file(pid, tid, "schedstat"),
                )
                .ok()
                .and_then(|t| {
                    let mut w = t.split_whitespace();
                    Some((
                        w.next()?.parse::<u64>().ok()?,
                        w.next()?.parse::<u64>().ok()?,
                        (),
                    ))
                }) else {
                    continue;
                };
                let born_here = !first_time
                    && !self
                        .initial_threads
                        .as_ref()
                        .is_some_and(|s| s.contains(&tid));
                let e = self.threads.entry(tid).or_insert((
                    *pid,
                    if born_here { 0 } else { wait },
                    wait,
                ));
                e.2 = wait;
            }
        }
        if first_time {
            self.initial_threads = Some(seen_threads.into_iter().collect());
        }
    }
}

pub(crate) struct Collector {
    ticker: Ticker<Tracker>,
}

impl Collector {
    pub(crate) fn start(
        root: &Path,
        scope: Scope,
        gate: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
        pace: Option<std::sync::Arc<super::budget::Pace>>,
    ) -> Collector {
        Collector {
            ticker: Ticker::adaptive(
                "workload",
                Tracker::new(root, scope, gate),
                Duration::from_millis(100),
                Duration::from_secs(2),
                super::budget::READER_SHARE,
                pace,
            ),
        }
    }

    /// The report; `usage` is a reaped command's rusage, `own` tunelab's
    /// CPU time (`own_cpu_s`) from the start of the interval to its end
    /// (starting the sections before it and reading them after it do not
    /// compete with the workload and are not in the figure), `by_thread`
    /// the same time per thread in words (`selfcost`).
    pub(crate) fn finish(
        self,
        interval: f64,
        usage: Option<Usage>,
        own: f64,
        by_thread: &str,
    ) -> Section<WorkloadReport> {
        let (t, cpu, n) = self.ticker.stop();
        let cpu0 = thread_cpu_s();
        let mut by: HashMap<String, (TaskFigures, HashSet<i32>)> = HashMap::new();
        for (pid, last) in &t.last {
            let first = t.first.get(pid).cloned().unwrap_or_default();
            let comm = t.comms.get(pid).cloned().unwrap_or_default();
            let mut d = minus(last, &first);
            d.comm = comm.clone();
            d.threads = t.threads.values().filter(|x| x.0 == *pid).count() as u32;
            d.runqueue_s = t
                .threads
                .values()
                .filter(|x| x.0 == *pid)
                .map(|x| x.2.saturating_sub(x.1) as f64 * 1e-9)
                .sum();
            let (acc, pids) = by.entry(comm.clone()).or_insert_with(|| {
                (
                    TaskFigures {
                        comm,
                        pid: *pid,
                        ..Default::default()
                    },
                    HashSet::new(),
                )
            });
            acc.pid = acc.pid.min(*pid);
            pids.insert(*pid);
            acc.add(&d);
        }
        let mut rows: Vec<TaskFigures> = by
            .into_values()
            .map(|(mut f, pids)| {
                f.processes = pids.len() as u32;
                f
            })
            .collect();
        rows.sort_by(|a, b| b.cpu_s().total_cmp(&a.cpu_s()));
        let mut total = TaskFigures {
            comm: "(workload)".into(),
            pid: rows.iter().map(|r| r.pid).min().unwrap_or(0),
            processes: rows.iter().map(|r| r.processes).sum(),
            ..Default::default()
        };
        for r in &rows {
            total.add(r);
        }
        let mut method = format!(
            "each process of the workload read {} ({n} readings): user/system time and \
             faults from /proc/PID/stat, context switches from /proc/PID/status, I/O calls and \
             bytes from /proc/PID/io (these include the process's exited threads), run-queue \
             wait summed over threads from /proc/PID/task/TID/schedstat (threads that lived \
             less than one period are missed); tunelab's own threads are not part of it",
            super::every(interval, n, super::budget::READER_SHARE)
        );
        if !by_thread.is_empty() {
            method.push_str(&format!(
                "; tunelab's own CPU over the interval by thread (/proc/self/task/TID/schedstat): \
                 {by_thread}"
            ));
        }
        if let Some(u) = usage {
            // The kernel's account at exit covers what sampling missed
            // (the last 100 ms, reaped children).
            total.user_s = total.user_s.max(u.user_s);
            total.system_s = total.system_s.max(u.system_s);
            total.minor_faults = total.minor_faults.max(u.minor_faults);
            total.major_faults = total.major_faults.max(u.major_faults);
            total.voluntary_switches = total.voluntary_switches.max(u.voluntary);
            total.involuntary_switches = total.involuntary_switches.max(u.involuntary);
            method.push_str(
                "; the total's times, faults and switches are the command's rusage from wait4 \
                 (the kernel's account at exit, children included)",
            );
        }
        Section::Present {
            data: WorkloadReport {
                rows,
                total,
                tunelab_cpu_s: own,
                tunelab_budget_pct: super::budget::BUDGET_PERCENT,
                method,
            },
            overhead: overhead(
                cpu + thread_cpu_s() - cpu0,
                interval,
                n,
                "reading the workload's /proc files",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_a_name_with_spaces() {
        let s = "42 (a b) S 1 42 42 0 -1 4194560 1500 7 3 1 250 40 0 0 20 0 1 0";
        assert_eq!(parse_stat_figures(s), Some((1500, 3, 250, 40)));
    }

    #[test]
    fn a_tree_from_fixture_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("proc/70");
        std::fs::create_dir_all(p.join("task/70")).unwrap();
        let write = |minflt: u64, ut: u64, vol: u64, wait: u64, syscw: u64| {
            std::fs::write(
                p.join("stat"),
                format!("70 (w) R 1 70 70 0 -1 0 {minflt} 0 0 0 {ut} 5 0 0 20 0 1 0"),
            )
            .unwrap();
            std::fs::write(
                p.join("status"),
                format!(
                    "Name:\tw\nvoluntary_ctxt_switches:\t{vol}\nnonvoluntary_ctxt_switches:\t2\n"
                ),
            )
            .unwrap();
            std::fs::write(
                p.join("io"),
                format!("rchar: 0\nwchar: 100\nsyscr: 0\nsyscw: {syscw}\n"),
            )
            .unwrap();
            std::fs::write(p.join("task/70/schedstat"), format!("1000 {wait} 3\n")).unwrap();
        };
        write(100, 10, 5, 1_000_000, 1);
        let mut t = Tracker::new(d.path(), Scope::Tree(70), None);
        t.sample();
        write(600, 110, 25, 501_000_000, 11);
        t.sample();
        let c = Collector {
            ticker: Ticker::adaptive(
                "t",
                t,
                Duration::from_secs(3600),
                Duration::from_secs(3600),
                0.0,
                None,
            ),
        };
        let r = c.finish(1.0, None, 0.0, "diag-slab 3 ms");
        let w = r.data().unwrap();
        assert_eq!(w.rows.len(), 1);
        let f = &w.total;
        assert_eq!(f.minor_faults, 500);
        assert_eq!(f.voluntary_switches, 20);
        assert_eq!(f.syscw, 10);
        assert!((f.user_s - 100.0 / ticks()).abs() < 1e-9);
        assert!((f.runqueue_s - 0.5).abs() < 1e-9, "{f:?}");
        // tunelab's own CPU by thread is stated in the method.
        assert!(w.method.contains("by thread"), "{}", w.method);
        assert!(w.method.contains("diag-slab 3 ms"), "{}", w.method);
    }
}
