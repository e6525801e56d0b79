//! Section 7, wake-ups (PowerTOP's "which programs wake the CPU"): per
//! process wake-ups per second from schedstats' `nr_wakeups`
//! (/proc/PID/task/TID/sched, CONFIG_SCHEDSTATS with kernel.sched_schedstats
//! on) or, without it, voluntary context switches as the stated proxy (a
//! task that gave up the CPU voluntarily was woken to run again); and
//! C-state residency from /sys/devices/system/cpu/cpu*/cpuidle/state*.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::procs::{self, Scope};
use super::{overhead, thread_cpu_s, Sampled, Ticker};
use crate::model::diagnosis::{CState, Section, Waker, WakeupReport};

/// Processes kept, most wake-ups first.
pub(crate) const TOP: usize = 15;

/// (voluntary, involuntary) context switches from a status file.
pub(crate) fn parse_status(text: &str) -> Option<(u64, u64)> {
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some((
        field("voluntary_ctxt_switches:")?,
        field("nonvoluntary_ctxt_switches:")?,
    ))
}

/// `se.statistics.nr_wakeups` / `nr_wakeups` from a sched file (schedstats).
pub(crate) fn parse_sched_wakeups(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        let k = k.trim();
        (k == "nr_wakeups" || k.ends_with(".nr_wakeups")).then(|| v.trim().parse().ok())?
    })
}

/// Per CPU and idle state: (state name, µs resident, entries).
pub(crate) fn read_cstates(root: &Path) -> BTreeMap<(u32, String), (String, u64, u64)> {
    let mut out = BTreeMap::new();
    let base = root.join("sys/devices/system/cpu");
    let Ok(rd) = std::fs::read_dir(&base) else {
        return out;
    };
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().to_string();
        let Some(cpu) = n.strip_prefix("cpu").and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(states) = std::fs::read_dir(e.path().join("cpuidle")) else {
            continue;
        };
        for s in states.flatten() {
            let sn = s.file_name().to_string_lossy().to_string();
            if !sn.starts_with("state") {
                continue;
            }
            let f = |name: &str| std::fs::read_to_string(s.path().join(name)).ok();
            let (Some(name), Some(time)) = (f("name"), f("time")) else {
                continue;
            };
            let usage = f("usage").and_then(|u| u.trim().parse().ok()).unwrap_or(0);
            if let Ok(t) = time.trim().parse() {
                out.insert((cpu, sn), (name.trim().to_string(), t, usage));
            }
        }
    }
    out
}

/// Residency of each state over the interval, as a share of all CPUs' time.
pub(crate) fn cstate_delta(
    before: &BTreeMap<(u32, String), (String, u64, u64)>,
    after: &BTreeMap<(u32, String), (String, u64, u64)>,
    seconds: f64,
) -> Vec<CState> {
    let cpus: std::collections::BTreeSet<u32> = after.keys().map(|k| k.0).collect();
    let mut by: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for (k, (name, t, u)) in after {
        let (bt, bu) = before.get(k).map(|b| (b.1, b.2)).unwrap_or((*t, *u));
        let e = by.entry((k.1.clone(), name.clone())).or_default();
        e.0 += t.saturating_sub(bt);
        e.1 += u.saturating_sub(bu);
    }
    let all_us = seconds * 1e6 * cpus.len().max(1) as f64;
    by.into_iter()
        .map(|((_, name), (t, u))| CState {
            name,
            residency_pct: if all_us > 0.0 {
                t as f64 / all_us * 100.0
            } else {
                0.0
            },
            entries_per_s: if seconds > 0.0 {
                u as f64 / seconds
            } else {
                0.0
            },
        })
        .collect()
}

#[derive(Default, Clone, Copy)]
struct Counts {
    wakeups: u64,
    involuntary: u64,
}

pub(crate) struct Sampler {
    root: PathBuf,
    scope: Scope,
    /// Tasks alive at the first sample: their first reading is the baseline;
    /// later tasks start from zero.
    initial: Option<std::collections::HashSet<i32>>,
    first: HashMap<i32, Counts>,
    last: HashMap<i32, (i32, Counts)>,
    comms: HashMap<i32, String>,
    schedstats: Option<bool>,
}

impl Sampler {
    pub(crate) fn new(root: &Path, scope: Scope) -> Sampler {
        Sampler {
            root: root.to_path_buf(),
            scope,
            initial: None,
            first: HashMap::new(),
            last: HashMap::new(),
            comms: HashMap::new(),
            schedstats: None,
        }
    }

    fn counts(&mut self, pid: i32, tid: i32) -> Option<Counts> {
        let proc = crate::system::proc::Root::under(&self.root);
        let (vol, invol) =
            parse_status(&std::fs::read_to_string(proc.task_file(pid, tid, "status")).ok()?)?;
        // nr_wakeups stays 0 while kernel.sched_schedstats is off: only
        // trusted once some task shows a non-zero count.
        let wk = if self.schedstats != Some(false) {
            std::fs::read_to_string(proc.task_file(pid, tid, "sched"))
                .ok()
                .and_then(|t| parse_sched_wakeups(&t))
        } else {
            None
        };
        match wk {
            Some(n) if n > 0 => self.schedstats = Some(true),
            None if self.schedstats.is_none() => self.schedstats = Some(false),
            _ => {}
        }
        Some(Counts {
            wakeups: if self.schedstats == Some(true) {
                wk.unwrap_or(0)
            } else {
                vol
            },
            involuntary: invol,
        })
    }

    pub(crate) fn report(&self, seconds: f64) -> (String, Vec<Waker>) {
        // Same-named processes (a workload's workers) are summed.
        type Acc = (u64, u64, std::collections::BTreeSet<i32>);
        let mut per: BTreeMap<String, Acc> = BTreeMap::new();
        for (tid, (pid, c)) in &self.last {
            let f = self.first.get(tid).copied().unwrap_or_default();
            let comm = self.comms.get(pid).cloned().unwrap_or_default();
            let e = per.entry(comm).or_default();
            e.0 += c.wakeups.saturating_sub(f.wakeups);
            e.1 += c.involuntary.saturating_sub(f.involuntary);
            e.2.insert(*pid);
        }
        let mut v: Vec<Waker> = per
            .into_iter()
            .filter(|(_, (w, i, _))| w + i > 0)
            .map(|(comm, (w, i, pids))| Waker {
                pid: pids.iter().next().copied().unwrap_or(0),
                processes: pids.len() as u32,
                comm,
                wakeups_per_s: w as f64 / seconds.max(1e-9),
                preempted_per_s: i as f64 / seconds.max(1e-9),
            })
            .collect();
        v.sort_by(|a, b| b.wakeups_per_s.total_cmp(&a.wakeups_per_s));
        v.truncate(TOP);
        let source = if self.schedstats == Some(true) {
            "nr_wakeups"
        } else {
            "voluntary context switches"
        };
        (source.into(), v)
    }
}

impl Sampled for Sampler {
    fn sample(&mut self) {
        let procs = procs::processes(&self.root, &self.scope);
        let first_round = self.initial.is_none();
        let mut seen = std::collections::HashSet::new();
        for (pid, comm) in procs {
            self.comms.insert(pid, comm);
            for tid in procs::tasks(&self.root, pid) {
                let Some(c) = self.counts(pid, tid) else {
                    continue;
                };
                seen.insert(tid);
                let born_later =
                    !first_round && !self.initial.as_ref().is_some_and(|s| s.contains(&tid));
                self.first
                    .entry(tid)
                    .or_insert(if born_later { Counts::default() } else { c });
                self.last.insert(tid, (pid, c));
            }
        }
        if first_round {
            self.initial = Some(seen);
        }
    }
}

pub(crate) struct Collector {
    root: PathBuf,
    cstates: BTreeMap<(u32, String), (String, u64, u64)>,
    ticker: Ticker<Sampler>,
    cpu_s: f64,
}

const PERIOD_MS: u64 = 500;

impl Collector {
    pub(crate) fn start(
        root: &Path,
        scope: Scope,
        pace: Option<std::sync::Arc<super::budget::Pace>>,
    ) -> Collector {
        let cpu0 = thread_cpu_s();
        let cstates = read_cstates(root);
        Collector {
            root: root.to_path_buf(),
            cstates,
            cpu_s: thread_cpu_s() - cpu0,
            ticker: Ticker::adaptive(
                "wakeups",
                Sampler::new(root, scope),
                Duration::from_millis(PERIOD_MS),
                Duration::from_secs(10),
                super::budget::READER_SHARE,
                pace,
            ),
        }
    }

    pub(crate) fn finish(self, interval: f64) -> Section<WakeupReport> {
        let (s, cpu, n) = self.ticker.stop();
        let cpu0 = thread_cpu_s();
        let after = read_cstates(&self.root);
        let cstates = cstate_delta(&self.cstates, &after, interval);
        let (source, processes) = s.report(interval);
        let cpu = cpu + self.cpu_s + thread_cpu_s() - cpu0;
        Section::Present {
            data: WakeupReport {
                cstates_missing: if cstates.is_empty() {
                    "no cpuidle states in /sys/devices/system/cpu/cpu*/cpuidle (no cpuidle \
                     driver, or idle=poll)"
                        .into()
                } else {
                    String::new()
                },
                method: format!(
                    "every task in scope read {}; wake-ups = {} (tasks born \
                     during the interval count from zero; a task that lived less than one \
                     period is missed); C-state residency = growth of cpuidle state*/time over \
                     all CPUs' time",
                    super::every(interval, n, super::budget::READER_SHARE),
                    if source == "nr_wakeups" {
                        "growth of schedstats nr_wakeups"
                    } else {
                        "growth of voluntary_ctxt_switches (proxy: schedstats' nr_wakeups is \
                         not available or kernel.sched_schedstats is off)"
                    }
                ),
                source,
                processes,
                cstates,
            },
            overhead: overhead(cpu, interval, n, "the sampling thread"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::test_support::{fixture, FIXTURES};

    #[test]
    fn status_and_sched() {
        let st = "Name:\tsleep\nvoluntary_ctxt_switches:\t41\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(parse_status(st), Some((41, 3)));
        let sched = fixture("proc/4242/task/4243/sched");
        assert_eq!(parse_sched_wakeups(&sched), Some(1877));
    }

    #[test]
    fn cstate_residency_over_all_cpus() {
        let root = Path::new(FIXTURES);
        let before = read_cstates(&root.join("before"));
        let after = read_cstates(&root.join("after"));
        assert_eq!(before.len(), 4);
        let c = cstate_delta(&before, &after, 2.0);
        let c1 = c.iter().find(|s| s.name == "C1").unwrap();
        // cpu0 +1.5 s, cpu1 +0.5 s of 4 CPU-seconds.
        assert!((c1.residency_pct - 50.0).abs() < 1e-9, "{c:?}");
        assert!((c1.entries_per_s - 150.0).abs() < 1e-9);
    }
}
