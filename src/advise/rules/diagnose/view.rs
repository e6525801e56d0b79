//! The figures every diagnosis rule starts from: the diagnosis itself, the
//! workload's own time (`WorkView`) and the words and profile shares the
//! findings share.

use super::super::Evidence;
use super::SIGNIFICANT_PROCESS_PCT;
use crate::model::diagnosis::{Diagnosis, OffCpuCause};
use crate::units::seconds;

pub(super) fn diag(ev: &Evidence) -> Option<(&str, &Diagnosis)> {
    ev.diagnosis.as_ref().map(|(id, d)| (id.as_str(), d))
}

/// The diagnosis and its workload's own figures; None for a whole-machine
/// diagnosis or none at all (every rule about the workload starts here).
pub(super) fn own(ev: &Evidence) -> Option<(&str, &Diagnosis, WorkView<'_>)> {
    let (id, d) = diag(ev)?;
    Some((id, d, WorkView::of(d)?))
}

/// Machine-wide CPU (busy %, system %, context switches/s) from the USE table.
pub(super) fn cpu_figures(d: &Diagnosis) -> Option<(f64, f64, f64)> {
    let cpu = d.resources.data()?.row("cpu")?;
    Some((
        cpu.figure("busy")?,
        cpu.figure("system")?,
        cpu.figure("context switches").unwrap_or(0.0),
    ))
}

/// The workload's figures in one place.
pub(super) struct WorkView<'a> {
    pub(super) d: &'a Diagnosis,
    pub(super) cpu_s: f64,
    pub(super) user_s: f64,
    pub(super) sys_s: f64,
    pub(super) runq_s: f64,
    /// Blocked time (off-CPU causes), s; 0 without the section.
    pub(super) blocked_s: f64,
    /// Blocked waiting for its own threads or children (not a bottleneck).
    pub(super) join_s: f64,
    pub(super) threads: u32,
    pub(super) minflt: u64,
    pub(super) majflt: u64,
    pub(super) calls: u64,
    pub(super) bytes: u64,
    pub(super) write_bytes: u64,
    pub(super) off_source: String,
}

impl<'a> WorkView<'a> {
    pub(super) fn of(d: &'a Diagnosis) -> Option<WorkView<'a>> {
        let w = d.workload.data()?;
        let t = &w.total;
        let off = d.offcpu.data();
        let class_s = |c: &str| {
            off.map_or(0.0, |o| {
                o.causes
                    .iter()
                    .filter(|x| x.class == c)
                    .map(|x| x.total_s)
                    .sum()
            })
        };
        Some(WorkView {
            d,
            cpu_s: t.cpu_s(),
            user_s: t.user_s,
            sys_s: t.system_s,
            // With switch events a wait runs from switch out to switch in,
            // so it includes the wake-up delay; run-queue time is then only
            // the preemptions, and nothing is counted twice.
            runq_s: off
                .filter(|o| o.source == "sched switch events")
                .map_or(t.runqueue_s, |o| o.runqueue_s),
            blocked_s: off.map_or(0.0, |o| o.blocked_s),
            join_s: class_s("join"),
            threads: t.threads,
            minflt: t.minor_faults,
            majflt: t.major_faults,
            calls: t.syscr + t.syscw,
            bytes: t.rchar + t.wchar,
            write_bytes: t.write_bytes,
            off_source: off.map(|o| o.source.clone()).unwrap_or_default(),
        })
    }

    /// Thread time that could have done work: on CPU, waiting for one, or
    /// blocked on anything but its own threads and children.
    pub(super) fn active_s(&self) -> f64 {
        (self.cpu_s + self.runq_s + self.blocked_s - self.join_s).max(1e-9)
    }

    pub(super) fn pct_of_active(&self, s: f64) -> f64 {
        s / self.active_s() * 100.0
    }

    pub(super) fn per_s(&self, n: u64) -> f64 {
        n as f64 / self.d.interval_s.max(1e-9)
    }

    pub(super) fn words(&self) -> String {
        format!(
            "the workload's own figures over {}: {} CPU ({} user, {} system), {} waiting for a CPU, \
             {} blocked ({} of it waiting for its own threads/children), {} threads",
            seconds(self.d.interval_s),
            seconds(self.cpu_s),
            seconds(self.user_s),
            seconds(self.sys_s),
            seconds(self.runq_s),
            seconds(self.blocked_s),
            seconds(self.join_s),
            self.threads
        )
    }

    /// The process (by name) where these classes of waits take the largest
    /// share of its active time: (share %, process name, seconds). Shares
    /// are per process so a pipeline's reader and writer are judged each on
    /// its own time.
    pub(super) fn class_share(&self, classes: &[&str]) -> (f64, String, f64) {
        let Some(o) = self.d.offcpu.data() else {
            return (0.0, String::new(), 0.0);
        };
        let sum = |comm: Option<&str>, cl: &[&str]| -> f64 {
            o.causes
                .iter()
                .filter(|c| comm.is_none_or(|n| c.comm == n) && cl.contains(&c.class.as_str()))
                .map(|c| c.total_s)
                .sum()
        };
        if o.by_process.is_empty() {
            let w = sum(None, classes);
            return (self.pct_of_active(w), String::new(), w);
        }
        let rows = self
            .d
            .workload
            .data()
            .map(|w| w.rows.as_slice())
            .unwrap_or(&[]);
        // Per process name (same-named workers summed): blocked and
        // run-queue time of every process of that name.
        let mut names: Vec<(&str, f64, f64, usize)> = Vec::new();
        for p in &o.by_process {
            match names.iter_mut().find(|n| n.0 == p.comm) {
                Some(n) => {
                    n.1 += p.blocked_s;
                    n.2 += p.runqueue_s;
                    n.3 += 1;
                }
                None => names.push((&p.comm, p.blocked_s, p.runqueue_s, 1)),
            }
        }
        let mut best = (0.0, String::new(), 0.0);
        for (comm, blocked, runq, _) in &names {
            let wait = sum(Some(comm), classes);
            if wait <= 0.0 {
                continue;
            }
            let own = rows.iter().filter(|r| r.comm == *comm);
            let cpu: f64 = own.clone().map(|r| r.cpu_s()).sum();
            let rq = if o.source == "sched switch events" {
                *runq
            } else {
                runq.max(own.map(|r| r.runqueue_s).sum())
            };
            let active = (cpu + rq + blocked - sum(Some(comm), &["join"])).max(1e-9);
            let pct = wait / active * 100.0;
            if pct > best.0 {
                best = (pct, comm.to_string(), wait);
            }
        }
        // Same-named processes (a reader and the writer it forked) are
        // also judged each on its own time, when it is a stated share of
        // the workload's.
        let class_s = |p: &crate::model::diagnosis::ProcessWaits, cl: &[&str]| -> f64 {
            p.classes
                .iter()
                .filter(|c| cl.contains(&c.0.as_str()))
                .map(|c| c.1)
                .sum()
        };
        for p in o.by_process.iter().filter(|p| p.pid != 0) {
            if names.iter().any(|n| n.0 == p.comm && n.3 < 2) {
                continue;
            }
            let wait = class_s(p, classes);
            let active =
                (p.thread_time_s.max(p.blocked_s + p.runqueue_s) - class_s(p, &["join"])).max(1e-9);
            if wait <= 0.0 || active < self.active_s() * SIGNIFICANT_PROCESS_PCT / 100.0 {
                continue;
            }
            let pct = wait / active * 100.0;
            if pct > best.0 {
                best = (pct, p.comm.clone(), wait);
            }
        }
        best
    }

    /// `class_share` and the causes behind it, in one reading.
    pub(super) fn waits(&self, classes: &[&str]) -> Waits<'a> {
        let (pct, comm, wait) = self.class_share(classes);
        let rows = self.causes_of(classes, &comm);
        Waits {
            pct,
            comm,
            wait,
            rows,
        }
    }

    pub(super) fn causes_of(&self, classes: &[&str], comm: &str) -> Vec<&'a OffCpuCause> {
        self.d
            .offcpu
            .data()
            .map(|o| {
                o.causes
                    .iter()
                    .filter(|c| {
                        classes.contains(&c.class.as_str()) && (comm.is_empty() || c.comm == comm)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(super) fn causes(&self, class: &str) -> Vec<&'a OffCpuCause> {
        self.d
            .offcpu
            .data()
            .map(|o| o.causes.iter().filter(|c| c.class == class).collect())
            .unwrap_or_default()
    }
}

pub(super) fn cmd(d: &Diagnosis) -> String {
    if d.target.command.is_empty() {
        match d.target.pid {
            Some(p) if d.target.kind == "pid" => format!("--pid {p}"),
            _ => "-- CMD".into(),
        }
    } else {
        // Quoted so the line pastes back (`-- sh -c 'a | b'`).
        format!("-- {}", crate::system::env::join_argv(&d.target.command))
    }
}

/// Share of profile samples (inclusive) with a frame matching `pred`.
pub(super) fn profile_share(d: &Diagnosis, pred: impl Fn(&str) -> bool) -> f64 {
    let Some(p) = d.profile.data() else {
        return 0.0;
    };
    let total: u64 = p.folded.iter().map(|f| f.samples).sum();
    if total == 0 {
        return 0.0;
    }
    let hit: u64 = p
        .folded
        .iter()
        .filter(|f| f.stack.split(';').skip(1).any(&pred))
        .map(|f| f.samples)
        .sum();
    hit as f64 / total as f64 * 100.0
}

/// One class of waits of the process where it weighs most (`WorkView::waits`).
pub(super) struct Waits<'a> {
    /// Share of the process's active thread time, %.
    pub(super) pct: f64,
    /// The process's name ("" when the tracer did not split by process).
    pub(super) comm: String,
    /// Seconds waited.
    pub(super) wait: f64,
    pub(super) rows: Vec<&'a OffCpuCause>,
}

/// The lines a wait finding's evidence opens with: the workload's figures,
/// its top waits, and the threshold that fired.
pub(super) fn wait_evidence(
    id: &str,
    w: &WorkView,
    rows: &[&OffCpuCause],
    threshold: String,
) -> Vec<String> {
    vec![
        format!("diagnosis {id}: {}", w.words()),
        format!("off-CPU ({}): {}", w.off_source, wait_rows(rows)),
        threshold,
    ]
}

/// " from CALLER", or nothing when the caller is unknown.
pub(super) fn from_caller(caller: &str) -> String {
    if caller.is_empty() {
        String::new()
    } else {
        format!(" from {caller}")
    }
}

/// " (COMM)", or nothing when the waits are not split by process.
pub(super) fn of_comm(comm: &str) -> String {
    if comm.is_empty() {
        String::new()
    } else {
        format!(" ({comm})")
    }
}

pub(super) fn wait_rows(v: &[&OffCpuCause]) -> String {
    v.iter()
        .take(3)
        .map(|c| {
            format!(
                "{}{} in {}: {} over {} waits (mean {}, longest {})",
                c.cause,
                from_caller(&c.caller),
                c.comm,
                seconds(c.total_s),
                c.waits,
                seconds(c.total_s / c.waits.max(1) as f64),
                seconds(c.max_s)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub(super) fn target_words(d: &Diagnosis) -> String {
    match d.target.kind.as_str() {
        "command" => format!("`{}`", d.target.command.join(" ")),
        "pid" => format!("pid {} ({})", d.target.pid.unwrap_or(0), d.target.name),
        _ => "the machine".into(),
    }
}
